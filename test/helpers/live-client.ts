import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

export const PAYWALL_EVENTS = `subscription($types: [String!], $paywallId: ID) {
  paywallEvents(types: $types, paywallId: $paywallId) {
    id type version createdAt data paywallId ownerUserId trigger subject metadata
  }
}`;

/** A graphql-ws client exactly as an integrator would build one in Node (the `ws` package as transport). */
export function liveClient(
  baseUrl: string,
  token: string,
  extraParams: Record<string, unknown> = {},
  /** lazy: false keeps the connection open without subscriptions. */
  opts: { lazy?: boolean } = {},
): Client {
  return createClient({
    url: `${baseUrl.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}`, ...extraParams },
    retryAttempts: 0,
    lazy: opts.lazy ?? true,
  });
}

/** Everything one subscription produced: events, errors (GraphQL errors or a close event), completion. */
export class LiveSubscription {
  readonly events: any[] = [];
  readonly errors: any[] = [];
  completed = false;
  private readonly dispose: () => void;
  private waiters: Array<() => void> = [];

  constructor(client: Client, variables: Record<string, unknown> = {}, query = PAYWALL_EVENTS) {
    const wake = () => {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    };
    this.dispose = client.subscribe(
      { query, variables },
      {
        next: (result: any) => {
          if (result.errors) this.errors.push(...result.errors);
          else this.events.push(result.data.paywallEvents);
          wake();
        },
        error: (err) => {
          // An array of GraphQL errors (the operation failed), or a close event (the socket did).
          if (Array.isArray(err)) this.errors.push(...err);
          // A close event's fields are not enumerable: keep what says why (JSON.stringify gave "{}").
          else if (err && typeof err === 'object' && 'code' in err)
            this.errors.push({ code: (err as any).code, reason: (err as any).reason });
          else this.errors.push(err);
          wake();
        },
        complete: () => {
          this.completed = true;
          wake();
        },
      },
    );
  }

  /** Resolves when `predicate` holds, or rejects after `timeoutMs`. */
  async until(
    predicate: (s: LiveSubscription) => boolean,
    timeoutMs = 10000,
    what = 'events',
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this)) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out waiting for ${what}: ${this.events.length} events, errors ${JSON.stringify(this.errors)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async untilEvents(n: number, timeoutMs = 10000): Promise<void> {
    await this.until((s) => s.events.length >= n || s.errors.length > 0, timeoutMs, `${n} events`);
    if (this.events.length < n) throw new Error(`subscription failed: ${JSON.stringify(this.errors)}`);
  }

  async untilError(timeoutMs = 10000): Promise<any> {
    await this.until((s) => s.errors.length > 0, timeoutMs, 'an error');
    return this.errors[0];
  }

  unsubscribe(): void {
    this.dispose();
  }
}

/** Resolves once `read()` reaches `n` (e.g. the server's live-subscriber count), polling. */
export async function eventually(read: () => number, n: number, timeoutMs = 10000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (read() < n) {
    if (Date.now() > deadline) throw new Error(`timed out: ${read()} < ${n}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
