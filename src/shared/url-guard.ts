/**
 * Outbound-URL guard for webhook deliveries (SSRF protection).
 *
 * A webhook URL is chosen by a paywall owner, and the service POSTs to it from inside our network. Without a
 * guard, a URL such as `https://169.254.169.254/` or `https://db.internal/` turns the delivery worker into a
 * proxy into our own infrastructure. Two layers close that:
 *
 * 1. {@link validateWebhookUrl} when a subscription is created or updated: fast, friendly feedback.
 * 2. {@link createGuardedDispatcher} when a delivery connects: the check that actually protects. A name that
 *    resolved to a public address at validation time can resolve to 127.0.0.1 a minute later (DNS
 *    rebinding), so the address is checked again in the connection's own lookup, and the socket connects to
 *    exactly the address that was checked: there is no second resolution to race.
 *
 * Both layers are switched off by `WEBHOOK_ALLOW_PRIVATE_NETWORKS=true` (development and tests only), which
 * is the `allowPrivate` option here.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupAddress, LookupOptions } from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';

/** Why a URL or a connection was refused; stable, for logs and API error mapping. */
export type UrlGuardReason =
  | 'invalid_url'
  | 'unsupported_scheme'
  | 'credentials_in_url'
  | 'empty_host'
  | 'forbidden_host'
  | 'forbidden_address'
  | 'unresolvable_host';

/** A webhook URL or an outbound connection was refused by the guard. */
export class UrlGuardError extends Error {
  constructor(
    readonly reason: UrlGuardReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'UrlGuardError';
  }
}

/** Resolves a host name to all of its addresses. Injectable so tests need no real DNS. */
export type HostLookup = (hostname: string) => Promise<LookupAddress[]>;

/** The system resolver (`/etc/hosts`, then DNS), every address in the order the resolver gave them. */
export const systemLookup: HostLookup = (hostname) => dnsLookup(hostname, { all: true, order: 'verbatim' });

// ---------------------------------------------------------------------------------------------------------
// Address classification
// ---------------------------------------------------------------------------------------------------------

function blockList(
  family: 'ipv4' | 'ipv6',
  subnets: ReadonlyArray<readonly [string, number]>,
): net.BlockList {
  const list = new net.BlockList();
  for (const [network, prefix] of subnets) list.addSubnet(network, prefix, family);
  return list;
}

/** IPv4 ranges that are not public unicast (IANA special-purpose registry, RFC 6890 and successors). */
const FORBIDDEN_V4 = blockList('ipv4', [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 reaches the local host on Linux
  ['10.0.0.0', 8], // private (RFC 1918)
  ['100.64.0.0', 10], // carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, including the cloud metadata service 169.254.169.254
  ['172.16.0.0', 12], // private (RFC 1918)
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast
  ['192.168.0.0', 16], // private (RFC 1918)
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved
  ['255.255.255.255', 32], // limited broadcast (inside 240/4; listed for the reader)
]);

/**
 * IPv6 ranges that are not public unicast. Only 2000::/3 is global unicast today, and everything outside it
 * is refused as well (see {@link isForbiddenV6}); the ranges outside it are still listed so the table reads as
 * the full picture. Forms that embed an IPv4 address are decided by that address instead.
 */
const FORBIDDEN_V6 = blockList('ipv6', [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['::', 96], // deprecated IPv4-compatible addresses (::a.b.c.d)
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): translates into a private network
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // SRv6 SIDs
  ['fc00::', 7], // unique local addresses (the IPv6 "private" range)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
]);

const GLOBAL_UNICAST_V6 = blockList('ipv6', [['2000::', 3]]);

/**
 * The eight 16-bit groups of an IPv6 address that `net.isIP` already accepted (no zone id), or null.
 * Needed because the embedded IPv4 of `::ffff:7f00:1` is only visible once the hex groups are expanded.
 */
export function ipv6Groups(ip: string): number[] | null {
  let text = ip;
  // A trailing dotted quad (`::ffff:127.0.0.1`) is the last two groups spelled in IPv4 notation.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const head = groupsOf(halves[0]);
  if (halves.length === 1) return head.length === 8 ? head : null;
  const tail = groupsOf(halves[1]);
  const zeros = 8 - head.length - tail.length;
  if (zeros < 1) return null;
  return [...head, ...new Array<number>(zeros).fill(0), ...tail];
}

function dottedQuad(high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/**
 * The IPv4 address that an IPv6 address stands for, when traffic to it ends up at that IPv4 address:
 * IPv4-mapped `::ffff:a.b.c.d` (a dual-stack socket connects straight to a.b.c.d, so `::ffff:127.0.0.1` is
 * loopback), NAT64 `64:ff9b::a.b.c.d` (the NAT64 gateway connects to a.b.c.d from inside its network) and
 * 6to4 `2002:aabb:ccdd::/48`. Such an address is exactly as forbidden as the IPv4 address it embeds.
 */
function embeddedIPv4(g: number[]): string | null {
  const zeroUpTo = (n: number) => g.slice(0, n).every((group) => group === 0);
  if (zeroUpTo(5) && g[5] === 0xffff) return dottedQuad(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((group) => group === 0)) {
    return dottedQuad(g[6], g[7]);
  }
  if (g[0] === 0x2002) return dottedQuad(g[1], g[2]);
  return null;
}

function isForbiddenV6(ip: string): boolean {
  // A zone id (`fe80::1%eth0`) only means something for link-scoped addresses: never a public target.
  if (ip.includes('%')) return true;
  const groups = ipv6Groups(ip);
  if (!groups) return true;
  const v4 = embeddedIPv4(groups);
  if (v4 !== null) return FORBIDDEN_V4.check(v4, 'ipv4');
  const canonical = groups.map((group) => group.toString(16)).join(':');
  return FORBIDDEN_V6.check(canonical, 'ipv6') || !GLOBAL_UNICAST_V6.check(canonical, 'ipv6');
}

/**
 * True for any address that is not a public unicast address: loopback, private, CGNAT, link-local (cloud
 * metadata), documentation, benchmarking, multicast, reserved, unique-local, and IPv6 forms that embed one
 * of those IPv4 addresses. Fails closed: anything that is not a valid IP address is forbidden too.
 */
export function isForbiddenAddress(ip: string): boolean {
  switch (net.isIP(ip)) {
    case 4:
      return FORBIDDEN_V4.check(ip, 'ipv4');
    case 6:
      return isForbiddenV6(ip);
    default:
      return true;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Host names
// ---------------------------------------------------------------------------------------------------------

/** `[::1]` → `::1`: URL.hostname keeps the brackets of an IPv6 literal. */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/**
 * Names that mean "this machine" or "our private network" whatever they resolve to: `localhost` (RFC 6761
 * lets a resolver answer it without DNS) and the `.internal` TLD reserved for private use (cloud metadata
 * lives at `metadata.google.internal`). Refused by name so no resolver configuration can make them pass.
 */
function isForbiddenHostname(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.+$/, ''); // `localhost.` is `localhost`
  return (
    name === 'localhost' || name.endsWith('.localhost') || name === 'internal' || name.endsWith('.internal')
  );
}

/**
 * Resolves `hostname` and, unless `allowPrivate`, refuses it when ANY of its addresses is forbidden: a
 * client may pick any of them (Happy Eyeballs tries several), so one private address is enough to reach
 * inside. Lookup errors are passed through unchanged.
 */
async function resolveAllowed(hostname: string, lookup: HostLookup, allowPrivate: boolean) {
  const addresses = await lookup(hostname);
  if (addresses.length === 0) {
    throw new UrlGuardError(
      'unresolvable_host',
      `Host ${hostname} could not be resolved (it has no addresses)`,
    );
  }
  if (!allowPrivate) {
    const forbidden = addresses.find((entry) => isForbiddenAddress(entry.address));
    if (forbidden) {
      throw new UrlGuardError(
        'forbidden_address',
        `Host ${hostname} resolves to ${forbidden.address}, which is not a public address`,
      );
    }
  }
  return addresses;
}

// ---------------------------------------------------------------------------------------------------------
// Validation when a subscription is saved
// ---------------------------------------------------------------------------------------------------------

export interface ValidateWebhookUrlOptions {
  /** `WEBHOOK_ALLOW_PRIVATE_NETWORKS`: also accept `http:` and loopback/private targets. */
  allowPrivate: boolean;
  /** Resolver override (tests); defaults to {@link systemLookup}. */
  lookup?: HostLookup;
}

/**
 * Parses and checks a webhook target URL; resolves to the parsed URL or throws {@link UrlGuardError}.
 *
 * Checks run on the WHATWG-parsed URL, never on the raw string: the parser normalises the odd IPv4
 * spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`), percent-encoded and full-width host characters, so what
 * is checked is what a client would connect to. Passing here is not enough to deliver safely: the address
 * is checked again at connect time by {@link createGuardedDispatcher}.
 */
export async function validateWebhookUrl(url: string, opts: ValidateWebhookUrlOptions): Promise<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UrlGuardError('invalid_url', 'Webhook URL is not a valid absolute URL');
  }

  const schemes = opts.allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(parsed.protocol)) {
    throw new UrlGuardError(
      'unsupported_scheme',
      `Webhook URL must use ${schemes.join(' or ').replace(/:/g, '')}, not ${parsed.protocol.replace(/:$/, '')}`,
    );
  }
  if (parsed.username !== '' || parsed.password !== '') {
    // Credentials in a URL end up in logs and delivery records; receivers authenticate us by signature.
    throw new UrlGuardError('credentials_in_url', 'Webhook URL must not contain a user name or password');
  }

  if (bareHost(parsed.hostname).replace(/\.+$/, '') === '') {
    throw new UrlGuardError('empty_host', 'Webhook URL has no host');
  }
  if (opts.allowPrivate) return parsed;
  await assertPublicHost(parsed, 'Webhook URL', opts.lookup);
  return parsed;
}

/**
 * Throws {@link UrlGuardError} unless the URL's host is a public address, or a name that resolves only
 * to public addresses (webhook and provider targets alike; `label` names the URL in the message).
 */
export async function assertPublicHost(parsed: URL, label: string, lookup: HostLookup = systemLookup) {
  const host = bareHost(parsed.hostname);
  if (net.isIP(host) !== 0) {
    if (isForbiddenAddress(host))
      throw new UrlGuardError(
        'forbidden_address',
        `${label} points to ${host}, which is not a public address`,
      );
    return;
  }
  if (isForbiddenHostname(host))
    throw new UrlGuardError('forbidden_host', `${label} host ${host} is a local or internal name`);
  try {
    await resolveAllowed(host, lookup, false);
  } catch (err) {
    if (err instanceof UrlGuardError) throw err;
    throw new UrlGuardError('unresolvable_host', `${label} host ${host} could not be resolved`, {
      cause: err,
    });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Enforcement when a delivery connects
// ---------------------------------------------------------------------------------------------------------

export interface GuardedDispatcherOptions {
  /** `WEBHOOK_ALLOW_PRIVATE_NETWORKS`: also connect to loopback/private addresses. */
  allowPrivate: boolean;
  /** `WEBHOOK_TIMEOUT_MS`: connect, response-headers and body-idle timeout. */
  timeoutMs: number;
  /** Resolver override (tests); defaults to {@link systemLookup}. */
  lookup?: HostLookup;
}

function familyOf(family: LookupOptions['family']): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

/**
 * An undici dispatcher for webhook deliveries that refuses to connect to forbidden addresses.
 *
 * Why at connect time: validation resolved the name once, but the delivery resolves it again, possibly
 * minutes later and against an attacker's DNS server with a zero TTL. So the check lives in the socket's
 * own `lookup`: the address that is checked is the address the socket connects to. IP-literal hosts never
 * reach `lookup` (node connects to them directly), so the connector checks those, and the local names,
 * before connecting.
 *
 * Redirects are not followed: undici dispatchers only follow them through the redirect interceptor, which
 * this deliberately does not compose (a 3xx to `http://169.254.169.254/` must stay a failed delivery).
 */
export function createGuardedDispatcher(opts: GuardedDispatcherOptions): Dispatcher {
  return new Agent({
    connect: createGuardedConnector(opts),
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  });
}

/**
 * The connector behind {@link createGuardedDispatcher}, for any undici dispatcher (the proxy's provider
 * pools use it too): checks the address the socket really connects to.
 */
export function createGuardedConnector(opts: GuardedDispatcherOptions): buildConnector.connector {
  const resolve = opts.lookup ?? systemLookup;

  const lookup: net.LookupFunction = (hostname, options, callback) => {
    resolveAllowed(hostname, resolve, opts.allowPrivate).then(
      (addresses) => {
        const family = familyOf(options.family);
        const usable = family === 0 ? addresses : addresses.filter((entry) => entry.family === family);
        if (usable.length === 0) {
          callback(
            new UrlGuardError('unresolvable_host', `Host ${hostname} has no IPv${family} address`),
            '',
          );
        } else if (options.all) {
          callback(null, usable);
        } else {
          callback(null, usable[0].address, usable[0].family);
        }
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };

  const connectTo = buildConnector({ timeout: opts.timeoutMs, lookup });

  const connect: buildConnector.connector = (options, callback) => {
    const host = bareHost(options.hostname);
    let refusal: UrlGuardError | null = null;
    if (!opts.allowPrivate) {
      if (net.isIP(host) !== 0) {
        if (isForbiddenAddress(host)) {
          refusal = new UrlGuardError(
            'forbidden_address',
            `Refusing to connect to ${host}: not a public address`,
          );
        }
      } else if (isForbiddenHostname(host)) {
        refusal = new UrlGuardError(
          'forbidden_host',
          `Refusing to connect to ${host}: a local or internal name`,
        );
      }
    }
    if (refusal) {
      // Asynchronously, like a failed socket: undici's client expects the callback after connect() returns.
      const error = refusal;
      queueMicrotask(() => callback(error, null));
      return;
    }
    connectTo(options, callback);
  };
  return connect;
}
