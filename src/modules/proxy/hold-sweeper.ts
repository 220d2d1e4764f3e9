import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import { sweepAbandonedHolds } from '../ledger/abandoned-holds.js';

const SWEEP_INTERVAL_MS = 60_000;
const SWEEP_MARGIN_MS = 5 * 60_000;

export interface HoldSweeperDeps {
  db: Database;
  log: Logger;
  /** UPSTREAM_MAX_DURATION_MS: no live request holds longer (the sweeper waits 5 minutes more). */
  maxDurationMs: number;
  /** The holds of requests in flight on this instance (never swept). */
  inFlight: () => string[];
}

/**
 * Settles holds a crashed instance left behind: for the progress a stream recorded, else voided with
 * nothing charged. Runs at start and every minute; also drops relayed-response records past 30 days.
 */
export class HoldSweeper {
  private timer?: NodeJS.Timeout;
  private stopping = false;

  constructor(private readonly d: HoldSweeperDeps) {}

  async start(): Promise<void> {
    await this.sweep();
    this.timer = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * Settles abandoned holds (older than UPSTREAM_MAX_DURATION_MS + 5 min, not in flight here): for the
   * progress a stream recorded, else released with nothing charged; returns how many.
   */
  async sweep(): Promise<number> {
    try {
      const n = await sweepAbandonedHolds(
        await this.d.db.background(), // background work: the small pool of its own
        this.d.maxDurationMs + SWEEP_MARGIN_MS,
        this.d.inFlight(),
      );
      if (n > 0) this.d.log.warn({ settled: n }, 'settled abandoned chat holds');
      // Relayed responses are kept as long as OpenAI keeps a stored response (30 days).
      await this.d.db.query(
        `delete from relayed_response where ctid = any(array(
           select ctid from relayed_response where created_at < now() - interval '30 days' limit 1000))`,
      );
      return n;
    } catch (err) {
      if (!this.stopping) this.d.log.error({ err }, 'hold sweep failed');
      return 0;
    }
  }
}
