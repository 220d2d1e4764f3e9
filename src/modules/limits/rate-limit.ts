import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';

/**
 * The API rate limit (docs/reference.md §10): `RATE_LIMIT_PER_MINUTE` requests per paywall key and clock minute,
 * counted in PostgreSQL so every instance shares one count. Chat requests are counted inside the hold's
 * statement (no extra round trip; the rate-limit step of `ledger_tick`, migrations/sql/ledger-functions-v5.ts); other routes with `countRequest`.
 */
export interface RateState {
  limit: number;
  /** Requests left in this minute after this one (0 when over). */
  remaining: number;
  /** When the window ends, and the whole seconds until then (at least 1). */
  resetAt: Date;
  resetSeconds: number;
  /** This request is over the limit. */
  over: boolean;
}

/** The minute a request counts in. */
export const windowOf = (now: Date): Date => new Date(Math.floor(now.getTime() / 60_000) * 60_000);

/**
 * The upsert both paths use, adding `count` for each (paywall_id, window_start, count) row of `source`
 * (one row per paywall): a new minute starts over; returns the count after adding.
 */
export const RATE_WINDOW_UPSERT = (source: string) => `
  insert into rate_window (paywall_id, window_start, count) ${source}
  on conflict (paywall_id) do update
     set count = case when rate_window.window_start = excluded.window_start then rate_window.count + excluded.count
                      else excluded.count end,
         window_start = greatest(rate_window.window_start, excluded.window_start)
  returning paywall_id, count`;

/** Counts one request of a paywall key in the current minute. */
export async function countRequest(
  sql: Sql,
  paywallId: string,
  limit: number,
  now: Date,
): Promise<RateState> {
  const rows = await sql.query(
    RATE_WINDOW_UPSERT('values ($1::uuid, $2::timestamptz, 1)'),
    [paywallId, windowOf(now)],
    'rate_window_count',
  );
  return rateState(limit, Number(rows[0].count), now);
}

/** The state of the request that made the count `position` in the minute of `now`. */
export function rateState(limit: number, position: number, now: Date): RateState {
  const resetAt = new Date(windowOf(now).getTime() + 60_000);
  return {
    limit,
    remaining: Math.max(0, limit - position),
    resetAt,
    resetSeconds: Math.max(1, Math.ceil((resetAt.getTime() - now.getTime()) / 1000)),
    over: position > limit,
  };
}

/**
 * A per-instance count per key and clock minute, in memory: for a limit that protects this process's
 * own resources (its CPU), where a shared count would cost a database round trip per request.
 */
export class MinuteCounter {
  private window = 0;
  private counts = new Map<string, number>();

  /** Counts one request of `key` in the minute of `now`. */
  take(key: string, limit: number, now: Date): RateState {
    const window = windowOf(now).getTime();
    if (window !== this.window) {
      this.window = window;
      this.counts = new Map();
    }
    const position = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, position);
    return rateState(limit, position, now);
  }
}

/** The 429 a request over the limit gets (the REST layer adds Retry-After and x-ratelimit-*). */
export class RateLimitError extends DomainError {
  /** `what`: the requests the limit counts (all of this key's by default). */
  constructor(
    readonly state: RateState,
    what = 'requests',
  ) {
    super(
      'rate_limited',
      `Rate limit reached: ${state.limit} ${what} per minute for this API key. Retry after ${state.resetAt.toISOString()}.`,
      null,
      'rate_limit_exceeded',
    );
  }
}

/** The response headers of a counted request: limit, remaining, whole seconds until the window resets. */
export function rateHeaders(state: RateState): Record<string, string> {
  return {
    'x-ratelimit-limit': String(state.limit),
    'x-ratelimit-remaining': String(state.remaining),
    'x-ratelimit-reset': String(state.resetSeconds),
    ...(state.over ? { 'retry-after': String(state.resetSeconds) } : {}),
  };
}
