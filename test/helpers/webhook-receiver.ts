import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request the receiver got, with the body exactly as the bytes arrived. */
export interface Received {
  /** Date.now() when the request was complete. */
  at: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  /** The parsed body (null when it is not JSON). */
  body: any;
}

/** What to answer one request with; defaults: 200, empty body, no delay. */
export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering (to provoke timeouts). */
  delayMs?: number;
}

export type Responder = (req: Received, index: number) => Reply | undefined;

/**
 * A real HTTP receiver on loopback: what an integrator's endpoint is. Records every request (raw body and
 * headers), answers as programmed, and can go down and come back on the same port.
 */
export class WebhookReceiver {
  readonly requests: Received[] = [];
  private responder: Responder = () => undefined;
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private waiters: Array<() => void> = [];

  private constructor(public port: number) {}

  /** Starts listening (on `port`, or a free one). */
  static async start(port = 0): Promise<WebhookReceiver> {
    const r = new WebhookReceiver(port);
    await r.up();
    return r;
  }

  /** A port that is free now, for a receiver that starts "down". */
  static async freePort(): Promise<number> {
    const s = createServer();
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const port = (s.address() as AddressInfo).port;
    await new Promise<void>((resolve) => s.close(() => resolve()));
    return port;
  }

  /** A receiver object that is not listening yet (deliveries to it are refused until `up()`). */
  static notStarted(port: number): WebhookReceiver {
    return new WebhookReceiver(port);
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Program the answers; `index` counts requests from 0 across the receiver's life. */
  respond(fn: Responder): void {
    this.responder = fn;
  }

  /** Answer the next requests with these statuses in order, then 200. */
  statuses(...codes: number[]): void {
    const start = this.requests.length;
    this.respond((_req, i) => ({ status: codes[i - start] ?? 200 }));
  }

  /** Requests carrying this delivery id (`X-Service-Delivery-Id`). */
  forDelivery(id: string): Received[] {
    return this.requests.filter((r) => r.headers['x-service-delivery-id'] === id);
  }

  /** Requests carrying this event id (`X-Service-Event-Id`). */
  forEvent(id: string): Received[] {
    return this.requests.filter((r) => r.headers['x-service-event-id'] === id);
  }

  /** Resolves when `predicate` holds (checked on every request), or rejects after `timeoutMs`. */
  async waitFor(
    predicate: (all: Received[]) => boolean,
    timeoutMs = 20000,
    what = 'requests',
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.requests)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what} (got ${this.requests.length})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async waitForCount(n: number, timeoutMs = 20000): Promise<void> {
    await this.waitFor((all) => all.length >= n, timeoutMs, `${n} requests`);
  }

  async up(): Promise<void> {
    if (this.server) return;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const rawBody = Buffer.concat(chunks);
        let body: any = null;
        try {
          body = JSON.parse(rawBody.toString('utf8'));
        } catch {
          /* not JSON */
        }
        const received: Received = {
          at: Date.now(),
          method: req.method ?? '',
          path: req.url ?? '',
          headers: req.headers,
          rawBody,
          body,
        };
        const index = this.requests.length;
        this.requests.push(received);
        const reply = this.responder(received, index) ?? {};
        const answer = () => {
          if (res.destroyed) return;
          res.writeHead(reply.status ?? 200, reply.headers ?? {});
          res.end(reply.body ?? '');
        };
        if (reply.delayMs) setTimeout(answer, reply.delayMs);
        else answer();
        const waiters = this.waiters;
        this.waiters = [];
        for (const w of waiters) w();
      });
    });
    // Longer than any test: an idle keep-alive socket closed by the server just as the sender reuses it
    // would turn into a spurious failed attempt.
    server.keepAliveTimeout = 60_000;
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and cuts open connections: deliveries now fail with connection refused. */
  async down(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  async close(): Promise<void> {
    await this.down();
  }
}

export interface SubscriptionInput {
  url: string;
  events: string[];
  customHeaders?: Record<string, string>;
  secret?: string;
}

/** Minimal surface of the test app the helper needs. */
interface RestClient {
  rest(
    method: string,
    path: string,
    opts?: { token?: string | null; body?: unknown },
  ): Promise<{ status: number; body: any }>;
}

/** Creates a webhook subscription the way an integrator does: POST /v1/webhooks/subscriptions with the API key. */
export async function createSubscription(
  t: RestClient,
  apiKey: string,
  input: SubscriptionInput,
): Promise<{ id: string; secret: string }> {
  const r = await t.rest('POST', '/v1/webhooks/subscriptions', { token: apiKey, body: input });
  if (r.status !== 201) throw new Error(`subscription not created: ${r.status} ${JSON.stringify(r.body)}`);
  return { id: r.body.subscription.id, secret: r.body.subscription.secret };
}
