import { randomUUID } from 'node:crypto';
import { request as undiciRequest } from 'undici';
import { DomainError } from '../../shared/errors.js';
import { UrlGuardError } from '../../shared/url-guard.js';
import type {
  ProviderClient,
  UpstreamOptions,
  UpstreamResponse,
  UpstreamTarget,
} from '../providers/provider-client.js';

export type { UpstreamResponse, UpstreamTarget } from '../providers/provider-client.js';

/**
 * Loop detection (a provider whose base URL is this service, or a chain of proxies): every upstream
 * request carries the ids of the Paywall Proxy instances it went through, this one last. An incoming
 * chat/Responses request that already went through this instance, or through `MAX_PROXY_HOPS`
 * instances, is refused (400 `proxy_loop`).
 */
export const VIA_HEADER = 'x-paywall-proxy-via';
/** One Paywall Proxy in front of another (a reseller) is allowed; a second hop is a loop or a misconfiguration. */
export const MAX_PROXY_HOPS = 1;
/** This process's id in VIA_HEADER (random: it says nothing about the deployment). */
export const INSTANCE_ID = randomUUID();

/** The instance ids an incoming request carries (empty when it came from an ordinary client). */
export function viaOf(header: string | string[] | undefined): string[] {
  const raw = Array.isArray(header) ? header.join(',') : (header ?? '');
  // Every entry counts as a hop; one that is not an id is passed on as `unknown` (no client text upstream).
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .slice(0, 16)
    .map((s) => (/^[A-Za-z0-9._:-]{1,100}$/.test(s) ? s : 'unknown'));
}

/** Why an incoming request must not be forwarded again, or null. */
export function loopReason(via: string[]): string | null {
  if (via.includes(INSTANCE_ID))
    return 'This request came back to the Paywall Proxy that forwarded it: the provider base URL points at the proxy itself.';
  if (via.length > MAX_PROXY_HOPS)
    return `This request already went through ${via.length} Paywall Proxy instances: a provider base URL points at a proxy (a loop).`;
  return null;
}

const pathCache = new Map<string, { origin: string; path: string }>();

function target(baseUrl: string, endpoint: string): { origin: string; path: string } {
  const key = `${baseUrl}\n${endpoint}`;
  let t = pathCache.get(key);
  if (!t) {
    const u = new URL(baseUrl);
    t = { origin: u.origin, path: `${u.pathname.replace(/\/+$/, '')}${endpoint}` };
    if (pathCache.size > 1000) pathCache.clear();
    pathCache.set(key, t);
  }
  return t;
}

/**
 * POSTs a body to the provider's `endpoint` (`/chat/completions`, `/responses`, `/embeddings`,
 * `/messages`) with the provider kind's own `auth` headers (its key, and for Anthropic its version
 * headers). Only those, a JSON content type and the via header go upstream: no client header (in
 * particular not the paywall key) is ever forwarded.
 */
export async function postJson(
  up: UpstreamTarget,
  endpoint: string,
  payload: string,
  opts: UpstreamOptions,
  auth: Record<string, string>,
): Promise<UpstreamResponse> {
  const { origin, path } = target(up.baseUrl, endpoint);
  const options = {
    method: 'POST' as const,
    path,
    headers: {
      ...auth,
      // A multipart body's type (with its boundary) is set from the form.
      ...(opts.form ? {} : { 'content-type': 'application/json' }),
      accept: opts.accept ?? (opts.stream ? 'text/event-stream' : 'application/json'),
      [VIA_HEADER]: [...(opts.via ?? []), INSTANCE_ID].join(', '),
    },
    body: opts.form ?? payload,
    signal: opts.signal,
    // Idle limits: time to the response headers, and between two body chunks.
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  };
  const res = up.dispatcher
    ? await up.dispatcher.request({ origin, ...options })
    : await undiciRequest(origin + path, options);
  const ct = res.headers['content-type'];
  const cl = Number(res.headers['content-length']);
  const retryAfter = res.headers['retry-after'];
  return {
    status: res.statusCode,
    contentType: (Array.isArray(ct) ? ct[0] : ct) ?? '',
    contentLength: Number.isSafeInteger(cl) && cl >= 0 ? cl : null,
    retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
    body: res.body,
  };
}

/** POSTs to an OpenAI-compatible provider: its key as `Authorization: Bearer`. */
export const postUpstream = (
  up: UpstreamTarget,
  endpoint: string,
  payload: string,
  opts: UpstreamOptions,
): Promise<UpstreamResponse> =>
  postJson(up, endpoint, payload, opts, { authorization: `Bearer ${up.apiKey}` });

/** The OpenAI-compatible provider kind: every wire format's body goes to it as it is. */
export const openAiCompatibleClient: ProviderClient = { kind: 'OPENAI', post: postUpstream };

/** The provider's answer is larger than UPSTREAM_MAX_BYTES (it was not read further). */
export class TooLargeError extends Error {
  readonly code = 'UPSTREAM_TOO_LARGE';
  constructor(readonly limit: number) {
    super(`the answer is larger than the ${limit}-byte limit (UPSTREAM_MAX_BYTES)`);
  }
}

/**
 * Reads a whole body as text, at most `limit` bytes: an announced or actual larger body is destroyed
 * (the connection closed) as soon as it is known to be too large, never buffered beyond the limit.
 */
export async function readLimited(res: UpstreamResponse, limit: number): Promise<string> {
  if (res.contentLength !== null && res.contentLength > limit) {
    res.body.destroy();
    throw new TooLargeError(limit);
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > limit) {
      res.body.destroy();
      throw new TooLargeError(limit);
    }
    parts.push(b);
  }
  return Buffer.concat(parts, size).toString('utf8');
}

/** 502 `upstream_error` (docs/reference.md §4): the provider failed, timed out or could not be reached. */
export const upstreamError = (detail: string): DomainError =>
  new DomainError('upstream_error', `The model provider failed: ${detail}`, null, 'upstream_error');

/** A short, safe description of a network-level failure (never the provider's URL or key). */
export function describeFailure(e: unknown): string {
  // The provider's host resolved to a local or private address (connect-time check, docs/reference.md §1):
  // said without the address, which is the app's configuration, not the caller's business.
  if (e instanceof UrlGuardError) return 'its address is not a public one';
  const code = (e as { code?: string })?.code;
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'timed out';
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return 'connection lost';
    case 'UPSTREAM_TOO_LARGE':
      return (e as Error).message;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    default:
      return 'no usable answer';
  }
}
