import { BlockList, isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { ipv6Groups } from './url-guard.js';

/**
 * The client's IP address, the one value every per-IP limit uses (wallet sign-in codes, connections per
 * IP, graphql-ws sockets still authenticating). It is the TCP peer's address, unless that peer is one of
 * TRUSTED_PROXIES: then X-Forwarded-For is read from the right, hop by hop, while the hop is a trusted
 * proxy, and the first address that is not is the client. Only valid IP addresses count: a value that is
 * not one (`unknown`, `1.2.3.4:80`, `<script>`) ends the walk, and the last address known to be real
 * (the trusted proxy that added it) is used. IPv4-mapped IPv6 (`::ffff:1.2.3.4`) is stored as IPv4, so
 * the same client is always the same string.
 */
export type ClientIp = (req: IncomingMessage) => string;

/** `TRUSTED_PROXIES` entries: IP addresses or CIDR ranges (`10.0.0.0/8`, `fd00::/8`). */
export function parseTrustedProxies(text: string): { list: string[]; error?: string } {
  const list = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const entry of list) {
    const [addr, prefix, extra] = entry.split('/');
    const family = isIP(addr);
    const max = family === 6 ? 128 : 32;
    if (
      !family ||
      extra !== undefined ||
      (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= max))
    )
      return {
        list,
        error: `"${entry}" is not an IP address or CIDR range (e.g. 10.0.0.1, 10.0.0.0/8, fd00::/8)`,
      };
  }
  return { list };
}

/** `::ffff:1.2.3.4` → `1.2.3.4`; any other valid address unchanged; null when it is not an IP address. */
export function normalizeIp(value: string | undefined): string | null {
  if (!value) return null;
  const v = value.trim();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(v);
  if (mapped && isIP(mapped[1]) === 4) return mapped[1];
  return isIP(v) ? v.toLowerCase() : null;
}

/**
 * The network a client address stands for in per-client limits: an IPv4 address is itself, an IPv6
 * address its /64 (`2001:db8:1:2::/64`), the smallest block one subscriber is given, so the 2^64
 * addresses of one line count as one client. Anything that is not an IP address is returned as is.
 */
export function clientNetwork(ip: string): string {
  const v = normalizeIp(ip);
  if (v === null || isIP(v) !== 6) return v ?? ip;
  const groups = ipv6Groups(v.split('%')[0]);
  if (!groups) return v;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** Whether a (normalized) address is one of TRUSTED_PROXIES. */
export function createTrustedProxyCheck(trustedProxies: readonly string[]): (ip: string) => boolean {
  if (trustedProxies.length === 0) return () => false;
  const trusted = new BlockList();
  for (const entry of trustedProxies) {
    const [addr, prefix] = entry.split('/');
    const type = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) trusted.addAddress(addr, type);
    else trusted.addSubnet(addr, Number(prefix), type);
  }
  return (ip) => isIP(ip) !== 0 && trusted.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4');
}

export function createClientIp(trustedProxies: readonly string[]): ClientIp {
  const isTrusted = createTrustedProxyCheck(trustedProxies);
  return (req) => {
    let client = normalizeIp(req.socket.remoteAddress) ?? 'unknown';
    if (trustedProxies.length === 0 || !isTrusted(client)) return client;
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').reverse();
    for (const hop of hops) {
      const ip = normalizeIp(hop);
      if (ip === null) break;
      client = ip;
      if (!isTrusted(ip)) break;
    }
    return client;
  };
}
