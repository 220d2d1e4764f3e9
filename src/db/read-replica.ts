import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database, Sql } from './database.js';
import { isDatabaseUnavailable } from './db-errors.js';
import type { Logger } from '../shared/logger.js';
import type { Metrics } from '../shared/metrics.js';

/** After the replica failed, reads go straight to the primary this long before one read tries it again. */
export const REPLICA_RETRY_MS = 5000;

/**
 * The read side of the database (DATABASE_READ_URL, docs/operations.md "Read replica"). Services give it
 * the reads that tolerate seconds of lag (lists, usage, logs); it sends them to the streaming replica only
 * inside a unit that allowed lag — a GraphQL query operation (src/app.ts). Everywhere else (a mutation and
 * whatever its answer reads, REST, pages, background work) the same call reads the primary, so a read right
 * after a write sees it. Without a replica every read is the primary's.
 *
 * A replica that fails (down, frozen, restarting, a query cancelled by recovery) costs no answer: the
 * read is run on the primary instead, one warning is logged for the whole burst of failures, and for
 * REPLICA_RETRY_MS reads skip the replica; then a single read tries it again while the others keep
 * using the primary, and the first answer from it logs that it is back.
 */
export class ReadReplica implements Sql {
  private readonly scope = new AsyncLocalStorage<{ lagTolerant: boolean }>();
  /** Set while the replica is failing: when the failure burst started. */
  private failingSince?: number;
  /** While failing: when the next read may try the replica. */
  private retryAt = 0;
  /** A read is trying the replica after a failure: the others do not pile on. */
  private probing = false;

  constructor(
    private readonly primary: Database,
    private readonly log: Logger,
    private readonly metrics?: Pick<Metrics, 'replicaReads'>,
  ) {}

  /** Whether a replica is configured at all. */
  get configured(): boolean {
    return this.primary.hasReplica;
  }

  /** Runs `fn` as one unit of reads: they read the primary until {@link tolerateLag} is called in it. */
  unit<T>(fn: () => T): T {
    return this.scope.run({ lagTolerant: false }, fn);
  }

  /** Lets the current unit's lag-tolerant reads go to the replica (a GraphQL query, once its type is known). */
  tolerateLag(): void {
    const unit = this.scope.getStore();
    if (unit) unit.lagTolerant = true;
  }

  async query<R = Record<string, any>>(text: string, params: unknown[] = [], name?: string): Promise<R[]> {
    if (!this.primary.hasReplica || !this.scope.getStore()?.lagTolerant)
      return this.primary.query<R>(text, params, name);
    if (this.failingSince !== undefined && (this.probing || Date.now() < this.retryAt))
      return this.fallback<R>(text, params, name);
    const probe = this.failingSince !== undefined;
    if (probe) this.probing = true;
    try {
      const rows = await this.primary.queryReplica<R>(text, params, name);
      this.metrics?.replicaReads.inc({ served_by: 'replica' });
      if (this.failingSince !== undefined) {
        this.log.info(
          { downMs: Date.now() - this.failingSince },
          'read replica answers again: lag-tolerant reads go back to it',
        );
        this.failingSince = undefined;
      }
      return rows;
    } catch (err) {
      if (!replicaFailure(err)) throw err;
      if (this.failingSince === undefined) {
        this.failingSince = Date.now();
        this.log.warn({ err }, 'read replica unavailable: lag-tolerant reads go to the primary meanwhile');
      }
      this.retryAt = Date.now() + REPLICA_RETRY_MS;
      return this.fallback<R>(text, params, name);
    } finally {
      if (probe) this.probing = false;
    }
  }

  private fallback<R>(text: string, params: unknown[], name?: string): Promise<R[]> {
    this.metrics?.replicaReads.inc({ served_by: 'primary_fallback' });
    return this.primary.query<R>(text, params, name);
  }
}

/**
 * What sends a read back to the primary: the replica is not there (src/db/db-errors.ts), or it cancelled
 * the query because replaying the primary's changes needed the rows it was reading ("conflict with
 * recovery", SQLSTATE 40001 or 40P01 on a standby). Anything else (a wrong statement) would fail on the
 * primary too, and is thrown.
 */
function replicaFailure(err: unknown): boolean {
  if (isDatabaseUnavailable(err)) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  return (
    (e?.code === '40001' || e?.code === '40P01') &&
    typeof e.message === 'string' &&
    /conflict with recovery/i.test(e.message)
  );
}
