import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { Services } from '../src/services.js';
import type { Logger } from '../src/shared/logger.js';
import { requestContext } from '../src/shared/logger.js';
import type { Metrics } from '../src/shared/metrics.js';
import { DomainError, databaseUnavailable } from '../src/shared/errors.js';
import { isDatabaseUnavailable } from '../src/db/db-errors.js';
import { observe } from '../src/shared/observe.js';
import { closeAfterBody } from '../src/shared/connection-limits.js';
import { withoutPathUser } from '../src/shared/route-label.js';
import { shapedErrorBody } from './errors.js';
import type { PaywallInfo } from '../src/modules/paywalls/paywall-info.js';
import { apiKeyOf, authenticateRestKey, keyRefused, queryUserOf } from './http.js';
import type { UserKeyAuth } from '../src/modules/keys/user-key.service.js';
import { isMessagesKind, refusedBeforeHold, sendJson, serveMetered, type MeteredKind } from './metered.js';

/**
 * The metered routes (POST /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/messages and their
 * /v1/u/{user}/… forms; Messages' count_tokens, placing no hold, is left to Express) on plain
 * node:http, ahead of Express: no router walk, no body-parser stream machinery, no per-request
 * middleware closures. It calls the same metered handler as the Express routes (metered.ts), observes
 * the request as every other one is (src/shared/observe.ts: request id, metrics, access log), answers
 * the same error shapes and rate-limit headers, and takes only the ordinary request: a JSON body in UTF-8,
 * not compressed, with a Content-Length within the 1 MiB limit, on a lower-case path. Anything else
 * (chunked or compressed bodies, other charsets, empty or oversized bodies, odd paths) goes to Express,
 * which applies its full rules (413, 415-as-400, inflation, URI errors) as before.
 */

const PATH = /^\/v1(?:\/u\/([^/]*))?\/(chat\/completions|responses|embeddings|messages)\/?$/;
const JSON_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*(?:utf-8|"utf-8")\s*)?$/i;
/** express.json's limit ('1mb'). */
const MAX_BODY = 1024 * 1024;

interface Matched {
  kind: MeteredKind;
  pathUser: string | undefined;
  path: string;
  query: string | null;
}

/** The route when the request is one the fast path takes, else null (Express serves it). */
function match(req: IncomingMessage): Matched | null {
  if (req.method !== 'POST') return null;
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const m = PATH.exec(path);
  if (!m) return null;
  const h = req.headers;
  const length = h['content-length'];
  if (length === undefined || h['transfer-encoding'] !== undefined) return null;
  const n = Number(length);
  if (!(n > 0 && n <= MAX_BODY)) return null;
  const encoding = h['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return null;
  if (!JSON_TYPE.test(h['content-type'] ?? '')) return null;
  let pathUser: string | undefined;
  if (m[1] !== undefined) {
    try {
      pathUser = decodeURIComponent(m[1]);
    } catch {
      return null;
    }
  }
  return {
    kind: m[2] === 'chat/completions' ? 'chat' : (m[2] as 'responses' | 'embeddings' | 'messages'),
    pathUser,
    path,
    query: q < 0 ? null : url.slice(q + 1),
  };
}

/** The error answer, in Anthropic's shape on the Messages route (docs/reference.md §15). */
function sendError(res: ServerResponse, e: DomainError, kind: MeteredKind): void {
  const { status, body, headers } = shapedErrorBody(e, isMessagesKind(kind) ? 'anthropic' : 'openai');
  sendJson(res, status, body, headers);
}

/**
 * Returns the server's request handler for the metered routes: true when it took the request, false
 * when Express should serve it.
 */
export function meteredFastPath(
  services: Services,
  log: Logger,
  metrics: Metrics,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const m = match(req);
    if (!m) return false;
    // The route template once the route is reached; before (a body or key refused) it is unmatched, as
    // in Express, where the router has not matched a route yet.
    let route = 'unmatched';
    const { id: reqId, log: logger } = observe(req, res, {
      log,
      metrics,
      route: () => route,
      url: () => withoutPathUser(m.path),
      onFinish: () => metrics.meteredFastPath.inc(),
    });
    const internal = (err: unknown, msg: string) => {
      const cause = (err as any)?.code === 'internal' && (err as any)?.cause ? (err as any).cause : err;
      logger().error({ err: cause, method: 'POST', route, url: withoutPathUser(m.path) }, msg);
    };
    const fail = (e: unknown) => {
      // A database error that escaped the data layer's wrapping is still an outage, as in Express's handler.
      if (!(e instanceof DomainError) && isDatabaseUnavailable(e)) e = databaseUnavailable(e);
      if (e instanceof DomainError && e.code !== 'internal') {
        if (!res.headersSent) return sendError(res, e, m.kind);
        return void res.end();
      }
      internal(e, 'request failed');
      if (res.headersSent) return void res.end();
      sendError(res, new DomainError('internal', 'Internal server error'), m.kind);
    };

    // The paywall's API key, checked before the body is read: an unauthenticated client
    // gets its 401 at once (and the connection closes), without the service buffering its body.
    const key = apiKeyOf(req.headers);
    const refuse = (e: unknown) => {
      // The body is not kept: the connection cannot be reused for another request. What the client still
      // sends is read and dropped before the connection closes.
      res.setHeader('Connection', 'close');
      closeAfterBody(req);
      fail(e);
    };
    requestContext.run({ reqId }, () => {
      (key !== null ? authenticateRestKey(services, key) : Promise.resolve(null)).then((found) => {
        if (!found) return keyRefused(services, key).then(refuse, refuse);
        const { paywall, userKey } = found;
        const parts: Buffer[] = [];
        req.on('data', (c: Buffer) => parts.push(c));
        req.on('error', () => res.destroy());
        req.on('end', () => {
          requestContext.run({ reqId }, () => {
            serve(Buffer.concat(parts), paywall, userKey).catch(fail);
          });
        });
      }, refuse);
    });

    const serve = async (raw: Buffer, paywall: PaywallInfo, userKey: UserKeyAuth | undefined) => {
      // As express.json: a BOM is dropped; what is not an object is refused below, by objectBody.
      let text = raw.toString('utf8');
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        const bad = new DomainError(
          'invalid_request',
          'request body is not valid JSON',
          null,
          'invalid_json',
        );
        // Counted against the key's rate limit as every refused request is (metered.ts).
        return sendError(
          res,
          await refusedBeforeHold(services.proxy, { kind: m.kind, paywall }, bad),
          m.kind,
        );
      }
      // Valid JSON that is not an object ("x", null, 1) is refused by objectBody, saying so.
      route = `${m.pathUser === undefined ? '/v1' : '/v1/u/{user}'}/${m.kind === 'chat' ? 'chat/completions' : m.kind}`;
      let queryUser: string | undefined;
      if (m.query !== null) {
        queryUser = queryUserOf(parseQuery(m.query).user);
      }
      await serveMetered(
        services.proxy,
        { kind: m.kind, paywall, headers: req.headers, queryUser, pathUser: m.pathUser, body, userKey },
        res,
      );
    };
    return true;
  };
}
