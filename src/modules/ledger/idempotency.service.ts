import type { Sql } from '../../db/database.js';
import { DomainError, type ErrorKind } from '../../shared/errors.js';
import { sha256Hex } from '../../shared/ids.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';

export type IdempotentEndpoint = 'deposit' | 'charge' | 'refund';

/** A claim older than this with no answer is abandoned (its process died) and may be taken over. */
export const IN_FLIGHT_TTL_SECONDS = 60;
/** Keys are kept at least 24 h (docs/reference.md §4); the cleanup removes them after 48 h. */
export const RETENTION_HOURS = 48;
const CLEANUP_EVERY_MS = 60 * 60 * 1000;

/**
 * Errors that are the answer to the request itself (the same request would get the same answer), so
 * they are stored and replayed. Anything else releases the claim and the client may retry.
 */
const STORED_ERRORS = new Set<ErrorKind>(['unsupported_in_mode', 'invalid_amount', 'invalid_request']);

/** JSON with object keys sorted at every level: two bodies that are equal as JSON hash the same. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export const requestHash = (request: unknown): string => sha256Hex(canonicalJson(request));

/** Checks an `Idempotency-Key`: 1 to 255 printable ASCII characters. */
export function checkIdempotencyKey(key: unknown): string {
  if (typeof key !== 'string' || !/^[\x20-\x7e]{1,255}$/.test(key) || key.trim() === '')
    throw new DomainError(
      'invalid_request',
      'Idempotency-Key must be 1 to 255 printable ASCII characters',
      'Idempotency-Key',
      'invalid_idempotency_key',
    );
  return key;
}

/** How a result is kept in `response_body` (JSON) and brought back. */
export interface Codec<T> {
  encode(result: T): unknown;
  decode(stored: unknown): T;
}

type Stored =
  | { ok: true; result: unknown }
  | {
      ok: false;
      error: {
        code: ErrorKind;
        message: string;
        param: string | null;
        publicCode?: DomainError['publicCode'];
      };
    };

/** What the idempotency store needs. */
export interface IdempotencyServiceDeps {
  db: Database;
  log: Logger;
}

/**
 * Idempotency keys (docs/reference.md §4), scoped to (paywall, endpoint, key), Stripe's semantics:
 * - the claim is its own autocommit INSERT … ON CONFLICT DO NOTHING, so a concurrent duplicate sees it
 *   at once and gets 409 instead of waiting on the first request's locks;
 * - the effect and the stored answer commit in ONE transaction: a crash leaves either both or neither
 *   (an unanswered claim, which is taken over after IN_FLIGHT_TTL_SECONDS);
 * - the completion only lands if our claim is still the current one (its `created_at` is the claim
 *   token), so a slow request whose claim was taken over rolls back instead of applying twice.
 */
export class IdempotencyService {
  private timer?: NodeJS.Timeout;

  constructor(private readonly deps: IdempotencyServiceDeps) {}

  /** Hourly cleanup of keys older than RETENTION_HOURS (unref'd: never keeps the process alive). */
  start(): void {
    this.timer = setInterval(() => {
      this.cleanup().catch((err) => this.deps.log.warn({ err }, 'idempotency cleanup failed'));
    }, CLEANUP_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async cleanup(): Promise<number> {
    const rows = await this.deps.db.query(
      `delete from idempotency_key where created_at < now() - make_interval(hours => $1) returning 1`,
      [RETENTION_HOURS],
    );
    return rows.length;
  }

  /**
   * Runs `effect` at most once per key. Without a key it runs in autocommit on the pool (its
   * statements must each be atomic); with one, inside a transaction that also stores the answer.
   */
  async run<T>(
    scope: { paywallId: string; endpoint: IdempotentEndpoint; key?: string | null; request: unknown },
    codec: Codec<T>,
    effect: (sql: Sql) => Promise<T>,
  ): Promise<{ result: T; replayed: boolean }> {
    if (scope.key === undefined || scope.key === null)
      return { result: await effect(this.deps.db), replayed: false };
    const key = checkIdempotencyKey(scope.key);
    const hash = requestHash(scope.request);
    const id = [scope.paywallId, scope.endpoint, key];

    const claimedAt = await this.claim(id, hash, codec);
    if (typeof claimedAt !== 'string') return { result: claimedAt.result, replayed: true };

    const complete = async (sql: Sql, stored: Stored, status: number) => {
      const done = await sql.query(
        `update idempotency_key set response_status = $4, response_body = $5::jsonb, completed_at = now()
          where paywall_id = $1 and endpoint = $2 and key = $3 and created_at = $6::timestamptz and completed_at is null
          returning 1`,
        [...id, status, JSON.stringify(stored), claimedAt],
      );
      if (done.length !== 1)
        throw new DomainError(
          'idempotency_in_flight',
          'This Idempotency-Key was taken over by another request.',
          'Idempotency-Key',
        );
    };
    try {
      const result = await this.deps.db.transaction(async (tx) => {
        const r = await effect(tx);
        await complete(tx, { ok: true, result: codec.encode(r) }, 200);
        return r;
      });
      return { result, replayed: false };
    } catch (e) {
      if (e instanceof DomainError && STORED_ERRORS.has(e.code)) {
        // The effect rolled back and changed nothing; its refusal is the answer to this key.
        await complete(
          this.deps.db,
          {
            ok: false,
            error: { code: e.code, message: e.message, param: e.param, publicCode: e.publicCode },
          },
          400,
        ).catch(() => undefined);
        throw e;
      }
      if (!(e instanceof DomainError && e.code === 'idempotency_in_flight'))
        await this.deps.db
          .query(
            `delete from idempotency_key where paywall_id = $1 and endpoint = $2 and key = $3
              and created_at = $4::timestamptz and completed_at is null`,
            [...id, claimedAt],
          )
          .catch((err) => this.deps.log.warn({ err }, 'could not release an idempotency claim'));
      throw e;
    }
  }

  /** Claims the key (returns the claim token) or settles the request from the existing row. */
  private async claim<T>(id: string[], hash: string, codec: Codec<T>): Promise<string | { result: T }> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const claimed = await this.deps.db.query(
        `insert into idempotency_key (paywall_id, endpoint, key, request_hash, created_at)
         values ($1, $2, $3, $4, now()) on conflict do nothing returning created_at::text as token`,
        [...id, hash],
        'idempotency_claim',
      );
      if (claimed.length) return claimed[0].token as string;

      const rows = await this.deps.db.query(
        `select request_hash, response_body, completed_at,
                created_at < now() - make_interval(secs => $4) as abandoned
           from idempotency_key where paywall_id = $1 and endpoint = $2 and key = $3`,
        [...id, IN_FLIGHT_TTL_SECONDS],
      );
      if (!rows.length) continue; // cleaned up or released between our two statements: claim again
      const row = rows[0];
      if (row.request_hash !== hash)
        throw new DomainError(
          'idempotency_mismatch',
          'This Idempotency-Key was already used with a different request body.',
          'Idempotency-Key',
          'idempotency_key_reused',
        );
      if (row.completed_at) {
        const stored = (
          typeof row.response_body === 'string' ? JSON.parse(row.response_body) : row.response_body
        ) as Stored;
        if (stored.ok) return { result: codec.decode(stored.result) };
        const err = new DomainError(
          stored.error.code,
          stored.error.message,
          stored.error.param,
          stored.error.publicCode,
        );
        (err as DomainError & { replayed?: boolean }).replayed = true;
        throw err;
      }
      if (!row.abandoned)
        throw new DomainError(
          'idempotency_in_flight',
          'A request with this Idempotency-Key is still being processed; retry later.',
          'Idempotency-Key',
        );
      // Abandoned claim: take it over (only one taker wins; the WHERE re-checks under the row lock).
      const taken = await this.deps.db.query(
        `update idempotency_key set created_at = now() where paywall_id = $1 and endpoint = $2 and key = $3
            and completed_at is null and created_at < now() - make_interval(secs => $4)
          returning created_at::text as token`,
        [...id, IN_FLIGHT_TTL_SECONDS],
      );
      if (taken.length) return taken[0].token as string;
    }
    throw new DomainError(
      'idempotency_in_flight',
      'A request with this Idempotency-Key is still being processed; retry later.',
      'Idempotency-Key',
    );
  }
}
