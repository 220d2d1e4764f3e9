import { request, type Dispatcher } from 'undici';
import { createGuardedDispatcher, UrlGuardError, type HostLookup } from '../../shared/url-guard.js';

/** Stored and shown in delivery logs: enough to debug a receiver, bounded so a huge answer costs nothing. */
export const RESPONSE_BODY_LIMIT = 4096;

export const USER_AGENT = 'PaywallProxy-Webhooks/1.0';

export interface WebhookRequest {
  url: string;
  /** The exact serialised payload that was signed; sent byte for byte. */
  body: string;
  headers: Record<string, string>;
}

/** What one POST produced: a response (any status), or no response at all and why. */
export type SendResult =
  | {
      kind: 'response';
      status: number;
      latencyMs: number;
      /** First 4 KiB of the response body, as text. */
      body: string;
      retryAfter: string | null;
      location: string | null;
    }
  | {
      kind: 'failure';
      /**
       * refused: the URL guard would not connect (private address, local name) — retrying cannot help;
       * invalid: the request itself is malformed (e.g. a custom header value undici rejects) — neither;
       * timeout / network: the receiver did not answer in time or could not be reached — worth a retry;
       * aborted: this process is shutting down; the attempt is left to its lease.
       */
      reason: 'refused' | 'invalid' | 'timeout' | 'network' | 'aborted';
      latencyMs: number;
      error: string;
    };

export interface WebhookSenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  /** Resolver override (tests of the connect-time guard). */
  lookup?: HostLookup;
}

function guardErrorIn(err: unknown): UrlGuardError | null {
  for (let e: any = err, depth = 0; e && depth < 5; e = e.cause, depth++) {
    if (e instanceof UrlGuardError || e?.name === 'UrlGuardError') return e as UrlGuardError;
  }
  return null;
}

function describe(err: unknown): string {
  const e = err as any;
  const cause = e?.cause && e.cause !== e ? `: ${e.cause.message ?? e.cause}` : '';
  const code = e?.code && !String(e?.message).includes(e.code) ? ` (${e.code})` : '';
  return `${e?.message ?? String(err)}${code}${cause}`.slice(0, 1000);
}

/** Errors about the request itself (bad URL, bad custom header): sending it again cannot succeed. */
const INVALID_REQUEST_CODES = new Set([
  'UND_ERR_INVALID_ARG',
  'ERR_INVALID_URL',
  'ERR_INVALID_HTTP_TOKEN',
  'ERR_INVALID_CHAR',
]);

/** Postgres text cannot hold NUL; a receiver may well send binary. */
const storable = (s: string) => s.replaceAll('\u0000', '\uFFFD');

/**
 * POSTs webhook payloads through the guarded dispatcher: the resolved address is checked at connect time,
 * redirects are never followed (a 3xx is returned as a response, and the worker treats it as a failure),
 * and every attempt is bounded by `timeoutMs` from the first byte sent to the last byte read.
 */
export class WebhookSender {
  private readonly dispatcher: Dispatcher;

  constructor(private readonly opts: WebhookSenderOptions) {
    this.dispatcher = createGuardedDispatcher({
      allowPrivate: opts.allowPrivate,
      timeoutMs: opts.timeoutMs,
      lookup: opts.lookup,
    });
  }

  async send(req: WebhookRequest, stop?: AbortSignal): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const timeout = AbortSignal.timeout(this.opts.timeoutMs);
    const signal = stop ? AbortSignal.any([timeout, stop]) : timeout;
    try {
      const res = await request(req.url, {
        method: 'POST',
        body: req.body,
        headers: req.headers,
        dispatcher: this.dispatcher,
        signal,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      try {
        for await (const chunk of res.body) {
          const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
          chunks.push(buf);
          size += buf.length;
          if (size >= RESPONSE_BODY_LIMIT) break; // leaving the loop destroys the rest of the body
        }
      } catch (err) {
        // The status is what counts; a body cut short (timeout, reset) is kept as far as it came.
        if (stop?.aborted) throw err;
      }
      const header = (name: string) => {
        const v = res.headers[name];
        return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
      };
      return {
        kind: 'response',
        status: res.statusCode,
        latencyMs: elapsed(),
        body: storable(Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8')),
        retryAfter: header('retry-after'),
        location: header('location'),
      };
    } catch (err) {
      const latencyMs = elapsed();
      const guard = guardErrorIn(err);
      if (guard) return { kind: 'failure', reason: 'refused', latencyMs, error: guard.message };
      if (stop?.aborted) {
        return { kind: 'failure', reason: 'aborted', latencyMs, error: 'worker stopped during the attempt' };
      }
      const code = (err as any)?.code as string | undefined;
      if (
        timeout.aborted ||
        code === 'UND_ERR_CONNECT_TIMEOUT' ||
        code === 'UND_ERR_HEADERS_TIMEOUT' ||
        code === 'UND_ERR_BODY_TIMEOUT'
      ) {
        return {
          kind: 'failure',
          reason: 'timeout',
          latencyMs,
          error: `no response within ${this.opts.timeoutMs} ms`,
        };
      }
      if (code && INVALID_REQUEST_CODES.has(code)) {
        return { kind: 'failure', reason: 'invalid', latencyMs, error: `invalid request: ${describe(err)}` };
      }
      return { kind: 'failure', reason: 'network', latencyMs, error: describe(err) };
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close().catch(() => undefined);
  }
}
