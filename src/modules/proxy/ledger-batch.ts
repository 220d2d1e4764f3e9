import type { Database } from '../../db/database.js';
import { ledgerTick, type ReserveInput, type ReserveResult, type SettleInput } from '../ledger/holds.js';
import type { AccountAlerts } from '../ledger/low-balance.js';
import type { BlockReason } from './blocked-reply.js';
import { GroupCommit } from './group-commit.js';

/**
 * Ledger operations (holds and settlements) of one end user in one group-commit statement at most. The
 * statement decides several holds of one balance at once when it covers them all; when it does not, the
 * later ones come back to be decided first in the next statement. The bound keeps such a statement small.
 */
const LEDGER_OPS_PER_USER = 64;

/** A settlement that settled: the spending account's free balance after it and its alert state (null when unknown). */
export interface Settled {
  freeAfter: bigint | null;
  alerts: AccountAlerts | null;
}

type LedgerOp =
  { kind: 'hold'; key: string; input: ReserveInput } | { kind: 'settle'; key: string; input: SettleInput };

/**
 * What one hold statement decided: the hold is placed; it is refused (not connected, a daily or rate
 * limit, the app's allowance (SHARED), or a balance that cannot afford the minimum completion). `ledger_tick` decides
 * the holds of one statement one after the other, so none is left open.
 */
export type HoldOutcome =
  { kind: 'held'; hold: ReserveResult } | { kind: 'blocked'; reason: BlockReason; hold: ReserveResult };

/** The hold statement's row as a {@link HoldOutcome}. */
export function holdOutcome(r: ReserveResult): HoldOutcome {
  if (!r.connected) return { kind: 'blocked', reason: 'not_connected', hold: r };
  if (!r.held)
    return {
      kind: 'blocked',
      // The key's limit before the allowance: the statement flags the allowance too when the key's rest
      // is the smaller bound.
      reason: r.limit
        ? 'rate_limited'
        : r.keyLimitExceeded
          ? 'key_limit_exceeded'
          : r.allowanceExceeded
            ? 'allowance_exceeded'
            : 'insufficient_balance',
      hold: r,
    };
  return { kind: 'held', hold: r };
}

/**
 * Holds and settlements of concurrent requests share one statement and one commit (GroupCommit,
 * holds.ledgerTick), several of one end user too (a hot user: see `ledger_tick`, migrations/sql/ledger-functions-v5.ts, for how its holds are
 * decided against one balance).
 */
export class LedgerBatch {
  private readonly commit: GroupCommit<LedgerOp, ReserveResult | null | Settled | false>;

  constructor(db: Database) {
    this.commit = new GroupCommit(
      async (ops) => {
        const holds: ReserveInput[] = [];
        const settlements: SettleInput[] = [];
        for (const op of ops) {
          if (op.kind === 'hold') holds.push(op.input);
          else settlements.push(op.input);
        }
        const r = await ledgerTick(db, holds, settlements);
        let h = 0;
        let st = 0;
        // A settlement answers the free balance after it (or false when it was already settled).
        return ops.map((op) => {
          if (op.kind === 'hold') return r.holds[h++];
          const i = st++;
          return r.settlements[i] ? { freeAfter: r.freeAfter[i], alerts: r.alerts[i] } : false;
        });
      },
      (op) => op.key,
      { perKey: LEDGER_OPS_PER_USER },
    );
  }

  /** Places a hold for the end user `key`; null when the end user does not exist yet. */
  async hold(key: string, input: ReserveInput): Promise<ReserveResult | null> {
    return (await this.commit.submit({ kind: 'hold', key, input })) as ReserveResult | null;
  }

  /** Posts or voids a hold: the free balance after it and its alert state, false when it was already settled. */
  async settle(key: string, input: SettleInput): Promise<Settled | false> {
    return (await this.commit.submit({ kind: 'settle', key, input })) as Settled | false;
  }

  /** Statements run, the holds and settlements they carried, time spent. */
  get stats(): { batches: number; items: number; ms: number } {
    return { ...this.commit.stats };
  }
}
