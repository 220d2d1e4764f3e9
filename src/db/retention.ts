import type { Logger } from '../shared/logger.js';
import type { Database } from './database.js';

/** Events removed per statement (their deliveries go in the same statement). */
export const RETENTION_BATCH = 2000;
/** Milliseconds between rounds. */
export const RETENTION_INTERVAL_MS = 5 * 60_000;

interface BatchRow {
  locked: boolean;
  events: number;
  deliveries: number;
  /** The last seq removed. */
  last: string | null;
}

export interface RetentionRound {
  events: number;
  deliveries: number;
  batches: number;
  /** The longest single batch (one statement, its own transaction), in milliseconds. */
  longestBatchMs: number;
  /** False when another instance held the retention lock (this round did nothing). */
  ran: boolean;
}

/**
 * Retention (docs/reference.md §18 "Retention"): events older than `EVENT_RETENTION_DAYS`, with their webhook
 * deliveries (pending ones too: a delivery is sent from its event's row), are removed in batches of
 * RETENTION_BATCH events, each batch one statement in its own short transaction, so no lock is held longer
 * than one batch. Charges, transfers, refunds, withdrawals and the ledger are never touched.
 *
 * The batches walk the event primary key (`seq`) from the start, each over the next RETENTION_BATCH events,
 * removing those older than the cutoff; the round ends at the first batch that holds an event young enough
 * to keep. Events are written in `seq` order with the time of their transaction, so the old ones are the
 * first ones: no index on `created_at` is needed, and no statement reads past the boundary. (An event
 * written with an earlier time than one before it — transactions overlapping — goes in a later round,
 * once the events before it are old too.) Deliveries are found by `event_id`, which leads their unique
 * index `(event_id, subscription_id)` (migration 20261130200000). Each batch takes a transaction-level advisory lock without waiting:
 * when another instance is removing, this one stops its round.
 */
export class EventRetention {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private stopped = false;
  private readonly log: Logger;

  constructor(
    private readonly db: Database,
    log: Logger,
    /** EVENT_RETENTION_DAYS; 0 = keep events forever. */
    private readonly days: number,
    private readonly intervalMs = RETENTION_INTERVAL_MS,
  ) {
    this.log = log.child({ component: 'retention' });
  }

  async start(): Promise<void> {
    if (this.days <= 0 || this.intervalMs <= 0) return;
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.runOnce().finally(() => (this.running = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer; a round under way ends after its current batch. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One round: removes every event (and its deliveries) created before now − `days`. */
  async runOnce(opts: { now?: Date; batch?: number } = {}): Promise<RetentionRound> {
    const out: RetentionRound = { events: 0, deliveries: 0, batches: 0, longestBatchMs: 0, ran: true };
    if (this.days <= 0) return out;
    const cutoff = new Date((opts.now ?? new Date()).getTime() - this.days * 86_400_000);
    const batch = opts.batch ?? RETENTION_BATCH;
    try {
      // Where the previous batch ended (seq starts at 1): the next one starts after it, not over the index entries of the
      // rows just removed.
      let after: string | null = null;
      while (!this.stopped) {
        const started = performance.now();
        // One statement, so its own transaction (the advisory lock is released at its end).
        const bg: Database = await this.db.background();
        const [row]: BatchRow[] = await bg.query<BatchRow>(
          `with lock as (select pg_try_advisory_xact_lock(hashtextextended('event_retention', 0)) as locked),
                gone as (
                  delete from event where (select locked from lock) and created_at < $2 and seq in (
                    select seq from event where seq > coalesce($1::bigint, 0) order by seq limit $3)
                  returning id, seq),
                gone_deliveries as (
                  delete from webhook_delivery where event_id in (select id from gone) returning 1)
           select (select locked from lock) as locked, (select count(*) from gone)::int as events,
                  (select count(*) from gone_deliveries)::int as deliveries, (select max(seq) from gone)::text as last`,
          [after, cutoff, batch],
        );
        const ms = performance.now() - started;
        if (!row.locked) {
          out.ran = false;
          break;
        }
        out.batches++;
        out.longestBatchMs = Math.max(out.longestBatchMs, ms);
        out.events += row.events;
        out.deliveries += row.deliveries;
        // Fewer than a batch: the first events in seq order include one young enough to keep (or the end).
        if (row.events < batch) break;
        after = row.last;
      }
      if (out.events > 0)
        this.log.info(
          { events: out.events, deliveries: out.deliveries, batches: out.batches, cutoff },
          'removed events past EVENT_RETENTION_DAYS',
        );
    } catch (err) {
      if (!this.stopped) this.log.warn({ err }, 'event retention failed');
    }
    return out;
  }
}
