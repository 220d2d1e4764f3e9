import { Router, type Response } from 'express';
import type { StreamSink } from '../src/modules/proxy/proxy.service.js';
import type { Services } from '../src/services.js';
import { jsonObject, route, userOf } from './http.js';

/** The HTTP response as the proxy's stream sink: SSE headers flushed at once, each write sent at once. */
function sseSink(res: Response): StreamSink {
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
 * POST /v1/chat/completions (and /v1/u/{user}/chat/completions).
 *
 * This route calls ProxyService.chat directly, the very call the GraphQL `createChatCompletion`
 * resolver makes with the same context: a stream cannot pass through GraphQL execution, and for whole
 * completions skipping a per-request GraphQL execution keeps the hot path lean. All rules (validation,
 * holds, blocked replies, settlement) live in the service.
 */
export function chatRoutes(services: Services): Router {
  const r = Router();
  r.post(
    '/chat/completions',
    route(async (req, res) => {
      const body = jsonObject(req);
      const user = userOf(req, body.user);
      // A client that leaves before the answer ended: abort the upstream, settle what was produced.
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const out = await services.proxy.chat(
        { paywall: req.paywall!, externalUserId: user, body, signal: gone.signal },
        sseSink(res),
      );
      // Written directly: express's res.json would also hash the body for an ETag nobody uses here.
      if (out) {
        const json = JSON.stringify(out.body);
        res.writeHead(out.status, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(json),
        });
        res.end(json);
      }
    }),
  );
  return r;
}
