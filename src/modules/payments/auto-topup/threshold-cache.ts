import type { Database } from '../../../db/database.js';
import type { Logger } from '../../../shared/logger.js';
import { CHANGED_CHANNEL } from './auto-topup-rows.js';

/**
 * The threshold of every account whose auto top-up is on, so a charge that cannot be due costs the
 * request path nothing (no statement). Loaded at start, kept fresh by NOTIFY `auto_topup_changed`
 * (payload: the account id, sent in the transaction that turns it on, off or changes it).
 */
export class AutoTopupThresholds {
  private readonly thresholds = new Map<string, bigint>();
  private unlisten?: () => void;
  private unReconnect?: () => void;

  constructor(private readonly d: { db: Database; log: Logger }) {}

  async start(): Promise<void> {
    this.unlisten = await this.d.db.listen(CHANGED_CHANNEL, (accountId) => {
      void this.reload(accountId).catch((err) => this.d.log.warn({ err }, 'auto top-up reload failed'));
    });
    // Changes notified while LISTEN was down were missed: read them all again.
    this.unReconnect = this.d.db.onReconnect(() => {
      void this.reload(null).catch((err) => this.d.log.warn({ err }, 'auto top-up reload failed'));
    });
    await this.reload(null);
  }

  async stop(): Promise<void> {
    this.unlisten?.();
    this.unReconnect?.();
  }

  /** The threshold of `accountId` while its auto top-up is on (undefined when off). */
  get(accountId: string): bigint | undefined {
    return this.thresholds.get(accountId);
  }

  /**
   * Reads every enabled threshold again (as after a reconnect). The NOTIFY of a change reaches this
   * instance a moment after its commit: a charge in between is not checked (the next one is).
   */
  refresh(): Promise<void> {
    return this.reload(null);
  }

  /** Reads the enabled thresholds of one account (or of all, `null`). */
  private async reload(accountId: string | null): Promise<void> {
    const rows = await this.d.db.query<{ account_id: string; threshold_raw: string }>(
      `select account_id, threshold_raw::text from auto_topup
        where enabled and account_id is not null and ($1::uuid is null or account_id = $1::uuid)`,
      [accountId],
    );
    if (accountId === null) this.thresholds.clear();
    else this.thresholds.delete(accountId);
    for (const r of rows) this.thresholds.set(r.account_id, BigInt(r.threshold_raw));
  }
}
