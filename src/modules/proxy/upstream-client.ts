import { request as undiciRequest, type Dispatcher } from 'undici';
import { DomainError } from '../../shared/errors.js';

/** What the proxy needs of a paywall's provider (see ProviderService.getUpstream). */
export interface UpstreamTarget {
  /** e.g. `http://127.0.0.1:PORT/v1`, no trailing slash. */
  baseUrl: string;
  /** The provider's key (decrypted); sent upstream, never shown to clients. */
  apiKey: string;
  /** A keep-alive connection pool to the provider's origin. */
  dispatcher?: Dispatcher | null;
}

export interface UpstreamResponse {
  status: number;
  contentType: string;
  body: Dispatcher.ResponseData['body'];
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
 * POSTs a body to the provider's `endpoint` (`/chat/completions`, `/responses`). Only the provider's own key and a JSON content type
 * go upstream: no client header (in particular not the paywall key) is ever forwarded.
 */
export async function postUpstream(
  up: UpstreamTarget,
  endpoint: string,
  payload: string,
  opts: { stream: boolean; signal: AbortSignal; timeoutMs: number },
): Promise<UpstreamResponse> {
  const { origin, path } = target(up.baseUrl, endpoint);
  const options = {
    method: 'POST' as const,
    path,
    headers: {
      'content-type': 'application/json',
      accept: opts.stream ? 'text/event-stream' : 'application/json',
      authorization: `Bearer ${up.apiKey}`,
    },
    body: payload,
    signal: opts.signal,
    // Idle limits: time to the response headers, and between two body chunks.
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  };
  const res = up.dispatcher
    ? await up.dispatcher.request({ origin, ...options })
    : await undiciRequest(origin + path, options);
  const ct = res.headers['content-type'];
  return {
    status: res.statusCode,
    contentType: (Array.isArray(ct) ? ct[0] : ct) ?? '',
    body: res.body,
  };
}

/** 502 `upstream_error` (CONTRACT §4): the provider failed, timed out or could not be reached. */
export const upstreamError = (detail: string): DomainError =>
  new DomainError('upstream_error', `The model provider failed: ${detail}`, null, 'upstream_error');

/** A short, safe description of a network-level failure (never the provider's URL or key). */
export function describeFailure(e: unknown): string {
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
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    default:
      return 'no usable answer';
  }
}
