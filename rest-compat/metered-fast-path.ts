import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { Services } from '../src/services.js';
import type { Logger } from '../src/shared/logger.js';
import { requestContext } from '../src/shared/logger.js';
import type { Metrics } from '../src/shared/metrics.js';
import { DomainError, databaseUnavailable, invalid } from '../src/shared/errors.js';
import { isDatabaseUnavailable } from '../src/db/db-errors.js';
import { withoutPathUser } from '../src/shared/route-label.js';
import { loopReason, VIA_HEADER, viaOf } from '../src/modules/proxy/upstream-client.js';
import { errorBody } from './errors.js';
import type { PaywallInfo } from '../src/modules/paywalls/paywall-info.js';
import { userFrom } from './http.js';
import { sseSink } from './chat.routes.js';

/**
 * The metered routes (POST /v1/chat/completions, /v1/responses and their /v1/u/{user}/… forms) on plain
 * node:http, ahead of Express: no router walk, no body-parser stream machinery, no per-request
 * middleware closures. It answers exactly what the Express routes answer (request id, metrics, access
 * log, error shapes, rate-limit headers) and takes only the ordinary request: a JSON body in UTF-8,
 * not compressed, with a Content-Length within the 1 MiB limit, on a lower-case path. Anything else
 * (chunked or compressed bodies, other charsets, empty or oversized bodies, odd paths) goes to Express,
 * which applies its full rules (413, 415-as-400, inflation, URI errors) as before.
 */

const PATH = /^\/v1(?:\/u\/([^/]*))?\/(chat\/completions|responses)\/?$/;
const JSON_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*(?:utf-8|"utf-8")\s*)?$/i;
const BEARER = /^Bearer\s+(\S+)\s*$/i;
const REQUEST_ID = /^[\w.-]{1,128}$/;
/** express.json's limit ('1mb'). */
const MAX_BODY = 1024 * 1024;

interface Matched {
  kind: 'chat' | 'responses';
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
    kind: m[2] === 'responses' ? 'responses' : 'chat',
    pathUser,
    path,
    query: q < 0 ? null : url.slice(q + 1),
  };
}

function send(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
  });
  res.end(json);
}

function sendError(res: ServerResponse, e: DomainError): void {
  const { status, body, headers } = errorBody(e);
  send(res, status, body, headers);
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
    const incoming = req.headers['x-request-id'];
    const reqId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', reqId);
    const start = process.hrtime.bigint();
    // The route template once the route is reached; before (a body or key refused) it is unmatched, as
    // in Express, where the router has not matched a route yet.
    let route = 'unmatched';
    let reqLog: Logger | undefined;
    const logger = () => (reqLog ??= log.child({ reqId }));
    res.on('finish', () => {
      const status = String(res.statusCode);
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      metrics.httpRequests.inc({ route, method: 'POST', status });
      metrics.httpDuration.observe({ route, method: 'POST', status }, seconds);
      metrics.meteredFastPath.inc();
      if (log.isLevelEnabled('info'))
        logger().info(
          {
            method: 'POST',
            url: withoutPathUser(m.path),
            route,
            status: res.statusCode,
            ms: Math.round(seconds * 1000),
          },
          'request',
        );
    });
    const internal = (err: unknown, msg: string) => {
      const cause = (err as any)?.code === 'internal' && (err as any)?.cause ? (err as any).cause : err;
      logger().error({ err: cause, method: 'POST', route, url: withoutPathUser(m.path) }, msg);
    };
    const fail = (e: unknown) => {
      // A database error that escaped the data layer's wrapping is still an outage, as in Express's handler.
      if (!(e instanceof DomainError) && isDatabaseUnavailable(e)) e = databaseUnavailable(e);
      if (e instanceof DomainError && e.code !== 'internal') {
        if (!res.headersSent) return sendError(res, e);
        return void res.end();
      }
      internal(e, 'request failed');
      if (res.headersSent) return void res.end();
      sendError(res, new DomainError('internal', 'Internal server error'));
    };

    // CONTRACT §2: the paywall's API key, checked before the body is read: an unauthenticated client
    // gets its 401 at once (and the connection closes), without the service buffering its body.
    const auth = BEARER.exec(req.headers.authorization ?? '');
    const refuse = (e: unknown) => {
      // The body is left unread: the connection cannot be reused for another request.
      res.setHeader('Connection', 'close');
      fail(e);
    };
    requestContext.run({ reqId }, () => {
      (auth ? services.paywalls.authenticateKey(auth[1]) : Promise.resolve(null)).then((paywall) => {
        if (!paywall)
          return refuse(
            new DomainError(
              'unauthenticated',
              auth ? 'Invalid API key.' : 'Missing bearer API key.',
              null,
              auth ? 'invalid_api_key' : 'missing_api_key',
            ),
          );
        const parts: Buffer[] = [];
        req.on('data', (c: Buffer) => parts.push(c));
        req.on('error', () => res.destroy());
        req.on('end', () => {
          requestContext.run({ reqId }, () => {
            serve(Buffer.concat(parts), paywall).catch(fail);
          });
        });
      }, refuse);
    });

    const serve = async (raw: Buffer, paywall: PaywallInfo) => {
      // express.json (strict): the body must be a JSON object or array; a BOM is dropped.
      let text = raw.toString('utf8');
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      let i = 0;
      while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
      const first = text[i];
      let body: unknown;
      try {
        if (first !== '{' && first !== '[') throw new SyntaxError('not an object');
        body = JSON.parse(text);
      } catch {
        return sendError(
          res,
          new DomainError('invalid_request', 'request body is not valid JSON', null, 'invalid_json'),
        );
      }
      route = `${m.pathUser === undefined ? '/v1' : '/v1/u/{user}'}/${m.kind === 'chat' ? 'chat/completions' : 'responses'}`;
      // A request this service (or a chain of proxies) already forwarded: refused before anything is held.
      const via = viaOf(req.headers[VIA_HEADER]);
      const loop = loopReason(via);
      if (loop) throw invalid(loop, null, 'proxy_loop');
      if (!body || typeof body !== 'object' || Array.isArray(body))
        throw new DomainError('invalid_request', 'request body must be a JSON object', null);
      const b = body as Record<string, unknown>;
      let query: string | undefined;
      if (m.query !== null) {
        const v = parseQuery(m.query).user;
        query = typeof v === 'string' ? v : undefined;
      }
      const header = req.headers['x-paywall-user'];
      const user = userFrom(typeof header === 'string' ? header : undefined, query, m.pathUser, b.user);
      // A client that leaves before the answer ended: abort the upstream, settle what was produced.
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const call = { paywall, externalUserId: user, body: b, signal: gone.signal, via };
      const sink = sseSink(res);
      const out =
        m.kind === 'chat'
          ? await services.proxy.chat(call, sink)
          : await services.proxy.responses(call, sink);
      if (out) send(res, out.status, out.body, out.headers);
    };
    return true;
  };
}
