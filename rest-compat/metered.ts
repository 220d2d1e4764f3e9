import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { ChatCall, ChatJson, StreamSink } from '../src/modules/proxy/proxy.service.js';
import type { MediaSink } from '../src/modules/proxy/flight.js';
import { isMultipart, type MediaKind } from '../src/modules/proxy/media-format.js';
import { loopReason, VIA_HEADER, viaOf } from '../src/modules/proxy/upstream-client.js';
import type { PaywallInfo } from '../src/modules/paywalls/paywall-info.js';
import { DomainError, invalid } from '../src/shared/errors.js';
import { RateLimitError, type RateState } from '../src/modules/limits/rate-limit.js';
import { ANTHROPIC_CLIENT_HEADERS } from '../src/modules/proxy/anthropic-client.js';
import { keyUserFrom, objectBody, userFrom } from './http.js';
import type { UserKeyAuth } from '../src/modules/keys/user-key.service.js';
import { addLogField } from '../src/shared/observe.js';

/** The HTTP response as the proxy's stream sink: SSE headers flushed at once, each write sent at once. */
export function sseSink(res: ServerResponse): StreamSink {
  return {
    open(headers) {
      res.writeHead(200, {
        ...headers,
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();
    },
    write: (chunk) => res.write(chunk),
    drain: () =>
      new Promise<void>((resolve) => {
        if (res.destroyed || !res.writableNeedDrain) return resolve();
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      }),
    end: () => res.end(),
  };
}

/**
 * The client APIs served by the metered proxy (ProxyService.chat / .responses / .embeddings /
 * .messages), and Messages' `count_tokens` (ProxyService.countTokens: forwarded, not charged).
 */
export type MeteredKind = 'chat' | 'responses' | 'embeddings' | 'messages' | 'count_tokens' | MediaKind;

/** The image and audio routes (docs/reference.md §22). */
const MEDIA_KINDS: ReadonlySet<string> = new Set<MediaKind>([
  'image_generations',
  'image_edits',
  'transcriptions',
  'translations',
  'speech',
]);
const isMediaKind = (kind: MeteredKind): kind is MediaKind => MEDIA_KINDS.has(kind);

/**
 * The HTTP response as the sink of a relayed audio answer: the provider's content type and the charge
 * id (and the whole answer's cost and balance) flushed at once, the audio chunked as it arrives, and the
 * settled cost and balance again as trailers at its end.
 */
export function mediaSink(res: ServerResponse): MediaSink {
  return {
    open(headers) {
      res.writeHead(200, { ...headers, trailer: 'x-paywall-cost, x-paywall-balance' });
      res.flushHeaders();
    },
    write: (chunk) => res.write(chunk),
    drain: () =>
      new Promise<void>((resolve) => {
        if (res.destroyed || !res.writableNeedDrain) return resolve();
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      }),
    end(trailers) {
      res.addTrailers(trailers);
      res.end();
    },
  };
}

/** What the metered handler needs of the proxy. */
export interface MeteredProxy {
  chat(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null>;
  responses(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null>;
  embeddings(call: ChatCall): Promise<ChatJson>;
  messages(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null>;
  countTokens(call: ChatCall): Promise<ChatJson>;
  media(kind: MediaKind, call: ChatCall): Promise<ChatJson | null>;
  /** Counts a request refused before its hold against RATE_LIMIT_PER_MINUTE (null: no limit). */
  countUnheld?(paywallId: string): Promise<RateState | null>;
}

/** The Messages kinds (Anthropic's API: its errors, its headers, `metadata.user_id`). */
export const isMessagesKind = (kind: MeteredKind): boolean => kind === 'messages' || kind === 'count_tokens';

/** The client headers a Messages request passes on to an Anthropic provider (anthropic-client.ts). */
function anthropicClientHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ANTHROPIC_CLIENT_HEADERS) {
    const v = headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  return out;
}

/**
 * The end user a body names: chat's `user`; a Messages body's `metadata.user_id` (Anthropic's own field),
 * else its `user`. `metadata.user_id` comes last in the Messages order (header, path, query, then it):
 * with a user given elsewhere (`outranked`) it is not looked at, so a client on `/v1/u/{user}` whose
 * SDK fills `metadata.user_id` with its own id (Claude Code does) is not refused as a mismatch.
 */
function bodyUserOf(kind: MeteredKind, b: Record<string, unknown>, outranked: boolean): unknown {
  // A multipart upload names the user in its `user` field.
  if (isMultipart(b)) return b.fields.find(([name]) => name === 'user')?.[1];
  if (!isMessagesKind(kind) || outranked) return b.user;
  const meta = b.metadata;
  if (meta !== null && typeof meta === 'object' && !Array.isArray(meta)) {
    const id = (meta as Record<string, unknown>).user_id;
    if (id !== undefined && id !== null) {
      if (typeof id !== 'string')
        throw invalid('metadata.user_id: Input should be a valid string', 'metadata.user_id', 'invalid_type');
      return id;
    }
  }
  return b.user;
}

/** A metered request as both entries (the fast path and Express) see it, the API key checked. */
export interface MeteredRequestIn {
  kind: MeteredKind;
  paywall: PaywallInfo;
  headers: IncomingHttpHeaders;
  /** The `user` query parameter, when given once. */
  queryUser: string | undefined;
  /** The user named by a `/v1/u/{user}/…` path. */
  pathUser: string | undefined;
  /** The parsed JSON body. */
  body: unknown;
  /** The end-user key the request came with (docs/reference.md §19): the user is its user. */
  userKey?: UserKeyAuth;
}

/**
 * The one metered handler, for POST /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/messages
 * and /v1/messages/count_tokens (and their /v1/u/{user}/… forms), whichever entry took the request: the plain node:http fast path or the Express route. It
 * refuses a loop, takes the end user, and calls the proxy; a whole answer is written here, a stream by
 * the proxy through the sink. DomainErrors are thrown for the entry to answer.
 */
export async function serveMetered(
  proxy: MeteredProxy,
  r: MeteredRequestIn,
  res: ServerResponse,
): Promise<void> {
  const rate = { counted: false };
  try {
    await serveCall(proxy, r, res, rate);
  } catch (e) {
    throw await refusedBeforeHold(proxy, r, e, rate.counted);
  }
}

/**
 * docs/reference.md §10: every request of a paywall key counts against `RATE_LIMIT_PER_MINUTE`. A metered
 * request is counted by its hold's statement; one refused before it (an unknown model, no user, a bad
 * body) is counted here, and over the limit it is the 429, as any other request of the key would be.
 * Messages' count_tokens places no hold: the router's limiter counted it already.
 */
export async function refusedBeforeHold<E>(
  proxy: MeteredProxy,
  r: Pick<MeteredRequestIn, 'kind' | 'paywall'>,
  e: E,
  counted = false,
): Promise<E | RateLimitError> {
  if (counted || r.kind === 'count_tokens' || !(e instanceof DomainError) || !proxy.countUnheld) return e;
  if (e.code === 'internal' || e instanceof RateLimitError) return e;
  try {
    const state = await proxy.countUnheld(r.paywall.id);
    return state?.over ? new RateLimitError(state) : e;
  } catch {
    return e; // the count could not be made (the database is away): the request's own answer stands
  }
}

async function serveCall(
  proxy: MeteredProxy,
  r: MeteredRequestIn,
  res: ServerResponse,
  rate: { counted: boolean },
): Promise<void> {
  // A request this service (or a chain of proxies) already forwarded: refuse it before anything is
  // held, or a provider base URL pointing at the service itself would recurse (and hold) at each hop.
  const via = viaOf(r.headers[VIA_HEADER]);
  const loop = loopReason(via);
  if (loop) throw invalid(loop, null, 'proxy_loop');
  const ct = r.headers['content-type'];
  const b = objectBody(r.body, typeof ct === 'string' ? ct : undefined);
  const header = r.headers['x-paywall-user'];
  // count_tokens charges nobody: it needs no end user.
  // With an end-user key the user is the key's: a body's `user` / `metadata.user_id` is not looked at
  // (Claude Code fills metadata.user_id with its own JSON) and never forwarded (each format drops it).
  const user = r.userKey
    ? keyUserFrom(r.userKey, typeof header === 'string' ? header : undefined, r.queryUser, r.pathUser)
    : r.kind === 'count_tokens'
      ? ''
      : userFrom(
          typeof header === 'string' ? header : undefined,
          r.queryUser,
          r.pathUser,
          bodyUserOf(
            r.kind,
            b,
            typeof header === 'string' || r.pathUser !== undefined || r.queryUser !== undefined,
          ),
          r.kind === 'messages' ? '`metadata.user_id` (or the `user` body field)' : undefined,
        );
  // A client that leaves before the answer ended: abort the upstream, settle what was produced.
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const call: ChatCall = {
    paywall: r.paywall,
    externalUserId: user,
    body: b,
    signal: gone.signal,
    via,
    answeredBy: (provider: string) => addLogField(res, 'provider', provider),
    rate,
  };
  if (r.userKey) call.userKeyId = r.userKey.id;
  if (isMessagesKind(r.kind)) call.clientHeaders = anthropicClientHeaders(r.headers);
  const sink = sseSink(res);
  if (isMediaKind(r.kind)) call.mediaSink = mediaSink(res);
  const out = isMediaKind(r.kind)
    ? await proxy.media(r.kind, call)
    : r.kind === 'chat'
      ? await proxy.chat(call, sink)
      : r.kind === 'responses'
        ? await proxy.responses(call, sink)
        : r.kind === 'messages'
          ? await proxy.messages(call, sink)
          : r.kind === 'count_tokens'
            ? await proxy.countTokens(call)
            : await proxy.embeddings(call);
  // Written directly: express's res.json would also hash the body for an ETag nobody uses here.
  if (out?.raw) {
    res.writeHead(out.status, {
      ...out.headers,
      'content-type': out.raw.contentType,
      'content-length': Buffer.byteLength(out.raw.text),
    });
    res.end(out.raw.text);
  } else if (out) sendJson(res, out.status, out.body, out.headers);
}

/** A JSON answer with its length (no ETag). */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers?: Record<string, string>,
): void {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
  });
  res.end(json);
}
