import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

/** A client's own request id is kept when it is a short token; anything else gets a fresh UUID. */
const REQUEST_ID = /^[\w.-]{1,128}$/;

/** Fields a handler adds to its request's access-log line (e.g. the provider that answered). */
const extraFields = new WeakMap<ServerResponse, Record<string, string>>();

/** Adds `key: value` to the access-log line of the request answered by `res`. */
export function addLogField(res: ServerResponse, key: string, value: string): void {
  const fields = extraFields.get(res);
  if (fields) fields[key] = value;
  else extraFields.set(res, { [key]: value });
}

export interface Observed {
  /** The request id (X-Request-Id on the answer, `reqId` on every log line). */
  id: string;
  /** The request's child logger (made on first use). */
  log(): Logger;
}

export interface ObserveOptions {
  log: Logger;
  metrics: Metrics;
  /** The route template for metrics and the log, read when the answer has finished. */
  route(): string;
  /** The path for the access log (no query, no end-user id), read when the answer has finished. */
  url(): string;
  /** Also counted when the answer has finished (e.g. the metered fast path's counter). */
  onFinish?(): void;
}

/**
 * Every HTTP request's observation, wherever it is served (Express or the metered fast path): its id
 * (the client's X-Request-Id when it is a short token, else a fresh UUID, echoed on the answer), the
 * request counter and duration histogram by route template, method and status, and one access-log line.
 */
export function observe(req: IncomingMessage, res: ServerResponse, o: ObserveOptions): Observed {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  res.setHeader('X-Request-Id', id);
  let child: Logger | undefined;
  const log = () => (child ??= o.log.child({ reqId: id }));
  const start = process.hrtime.bigint();
  const method = req.method ?? 'GET';
  res.on('finish', () => {
    const route = o.route();
    const status = String(res.statusCode);
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    o.metrics.httpRequests.inc({ route, method, status });
    o.metrics.httpDuration.observe({ route, method, status }, seconds);
    o.onFinish?.();
    if (o.log.isLevelEnabled('info'))
      log().info(
        {
          method,
          url: o.url(),
          route,
          status: res.statusCode,
          ms: Math.round(seconds * 1000),
          ...extraFields.get(res),
        },
        'request',
      );
  });
  return { id, log };
}
