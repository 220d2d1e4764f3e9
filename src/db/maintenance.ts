import type { Logger } from '../shared/logger.js';
import type { Database } from './database.js';

/**
 * VACUUM (and ANALYZE where needed) of our tables when nothing else does it: embedded PGlite runs no autovacuum, and a
 * PostgreSQL server may have it switched off (`autovacuum = off`; this machine's has).
 *
 * Why: every settlement leaves a dead `charge` row version (half the table's rows after a bench run),
 * every balance change a dead `ledger_account` / `usage_counter` version, and `charge_open_holds_index`
 * keeps an entry for every hold ever placed; only VACUUM removes them, so tables and indexes only grow.
 * ANALYZE gives the planner statistics, and its invalidation makes the prepared statements plan again for
 * the tables as they are now. (Before the settlement found its charge by primary key, a one-operation
 * ledger statement went from 0.49 to 0.67 ms of backend CPU within 20,000 requests without it.)
 *
 * Each round VACUUMs every table (cheap when little changed: the visibility map lets it skip the pages
 * nothing touched; 0.07 s for the whole bench database after 66,000 requests) and ANALYZEs only the
 * tables whose row count moved by more than 10 % (+50 rows) since this process last analysed them, as
 * autovacuum would (ANALYZE samples up to 30,000 rows a table: 0.56 s for that database every time).
 * One table per statement, `SKIP_LOCKED` (another instance vacuuming the same table is skipped, not
 * waited for); a failure is logged and the next round tries again. Where the server autovacuums, this
 * does nothing.
 */
export class DatabaseMaintenance {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private stopped = false;
  /** Row counts (pg_class.reltuples) of the tables as this process last analysed them. */
  private readonly analysedAt = new Map<string, number>();
  private readonly log: Logger;

  constructor(
    private readonly db: Database,
    log: Logger,
    /** Milliseconds between rounds; 0 = never. */
    private readonly intervalMs: number,
  ) {
    // A background part: its lines name it (they are written outside any request).
    this.log = log.child({ component: 'db-maintenance' });
  }

  /** True when no autovacuum looks after this database: PGlite, or PostgreSQL with `autovacuum = off`. */
  async needed(): Promise<boolean> {
    if (this.db.kind === 'pglite') return true;
    const [row] = await this.db.query<{ autovacuum: string }>(`show autovacuum`);
    return row?.autovacuum !== 'on';
  }

  async start(): Promise<void> {
    if (this.intervalMs <= 0 || !(await this.needed())) return;
    this.log.info(
      { everyMs: this.intervalMs },
      'no autovacuum on this database: vacuuming our tables ourselves',
    );
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.runOnce().finally(() => (this.running = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer; a round under way ends after the table it is on. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One round: VACUUM each of our tables, ANALYZE those whose row count moved; returns what it did. */
  async runOnce(): Promise<{ vacuumed: string[]; analysed: string[] }> {
    const tables = await this.db.query<{ t: string }>(
      `select tablename as t from pg_tables where schemaname = current_schema() order by 1`,
    );
    const out = { vacuumed: [] as string[], analysed: [] as string[] };
    for (const { t } of tables) {
      if (this.stopped) break;
      const name = `"${t.replaceAll('"', '""')}"`;
      try {
        await this.db.query(`vacuum (skip_locked) ${name}`);
        out.vacuumed.push(t);
        // VACUUM has just set reltuples to the live row count.
        const [{ rows }] = await this.db.query<{ rows: number }>(
          `select greatest(reltuples, 0)::float8 as rows from pg_class where oid = $1::regclass`,
          [name],
        );
        const last = this.analysedAt.get(t);
        if (last === undefined || Math.abs(rows - last) > 50 + 0.1 * last) {
          await this.db.query(`analyze (skip_locked) ${name}`);
          this.analysedAt.set(t, rows);
          out.analysed.push(t);
        }
      } catch (err) {
        this.log.warn({ err, table: t }, 'vacuum failed');
      }
    }
    return out;
  }
}
