import type { ServerResponse } from 'node:http';
import { Router } from 'express';
import type { StreamSink } from '../src/modules/proxy/proxy.service.js';
import type { Services } from '../src/services.js';
import { loopReason, VIA_HEADER, viaOf } from '../src/modules/proxy/upstream-client.js';
import { invalid } from '../src/shared/errors.js';
import { jsonObject, route, userOf } from './http.js';

/** The HTTP response as the proxy's stream sink: SSE headers flushed at once, each write sent at once. */
export function sseSink(res: ServerResponse): StreamSink {
  return {
    open() {
      res.writeHead(200, {
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
 * POST /v1/chat/completions and POST /v1/responses (and their /v1/u/{user}/… forms).
 *
 * These routes call ProxyService.chat / .responses directly (chat is the very call the GraphQL
 * `createChatCompletion` resolver makes with the same context): a stream cannot pass through GraphQL
 * execution, and for whole answers skipping a per-request GraphQL execution keeps the hot path lean.
 * All rules (validation, holds, blocked replies, settlement) live in the service.
 */
export function chatRoutes(services: Services): Router {
  const r = Router();
  const serve = (kind: 'chat' | 'responses') =>
    route(async (req, res) => {
      // A request this service (or a chain of proxies) already forwarded: refuse it before anything is
      // held, or a provider base URL pointing at the service itself would recurse (and hold) at each hop.
      const via = viaOf(req.headers[VIA_HEADER]);
      const loop = loopReason(via);
      if (loop) throw invalid(loop, null, 'proxy_loop');
      const body = jsonObject(req);
      const user = userOf(req, body.user);
      // A client that leaves before the answer ended: abort the upstream, settle what was produced.
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const call = { paywall: req.paywall!, externalUserId: user, body, signal: gone.signal, via };
      const out =
        kind === 'chat'
          ? await services.proxy.chat(call, sseSink(res))
          : await services.proxy.responses(call, sseSink(res));
      // Written directly: express's res.json would also hash the body for an ETag nobody uses here.
      if (out) {
        const json = JSON.stringify(out.body);
        res.writeHead(out.status, {
          ...out.headers,
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(json),
        });
        res.end(json);
      }
    });
  r.post('/chat/completions', serve('chat'));
  r.post('/responses', serve('responses'));
  return r;
}
