import type { Database, Sql } from '../../db/database.js';
import { FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID } from '../accounts/accounts.js';
import type { AccountAlerts } from './low-balance.js';
import { ledgerTick, type SettleInput } from './holds.js';

/**
 * Settlement beyond the hold (one job): how much more than its hold a finished request may take from the
 * free balance, bounded by a SHARED connection's allowance and an end-user key's limit, under the locks a
 * settlement takes; the settlement itself is the ordinary ledger tick with that captured amount. The
 * account locks are shared with debt collection.
 */

/** Locks, in id order, a spending account and the accounts a charge of these paywalls credits. */
export async function lockSettlementAccounts(
  tx: Sql,
  accountId: string,
  paywallIds: string[],
): Promise<Map<string, { balance: bigint; held: bigint; debt: bigint }>> {
  const rows = await tx.query(
    `select a.id, a.balance_raw::text as balance, a.held_raw::text as held, a.debt_raw::text as debt
       from (select distinct k.id from (
               select $1::uuid as id
               union all select e.id from ledger_account e where e.kind = 'earnings' and e.paywall_id = any($2::uuid[])
               union all select '${FEES_ACCOUNT_ID}'::uuid union all select '${PROVIDER_ACCOUNT_ID}'::uuid) k
             order by k.id) k
      cross join lateral (select a.id, a.balance_raw, a.held_raw, a.debt_raw from ledger_account a
                           where a.id = k.id for no key update) a`,
    [accountId, paywallIds],
  );
  return new Map(
    rows.map((r: any) => [r.id, { balance: BigInt(r.balance), held: BigInt(r.held), debt: BigInt(r.debt) }]),
  );
}

/**
 * Settles a hold whose real cost is above it: the hold is captured, and the rest is taken from the
 * account's free balance as far as it goes (never below zero, never into other holds); only what the
 * free balance cannot pay is recorded as uncollected (and becomes the account's debt); a SHARED
 * allowance and an end-user key's limit bound the extra as the free balance does. One transaction:
 * the charge is locked, then the accounts in id order (the order of the tick statement), and the
 * settlement is the ordinary tick with the larger captured amount. `build` makes the settlement for a
 * captured amount (its split and events depend on it). Returns the captured amount, whether it settled
 * (false when already settled) and the free balance after.
 */
export async function settleBeyondHold(
  db: Database,
  chargeId: string,
  paywallId: string,
  costRaw: bigint,
  build: (capturedRaw: bigint, limitBound: boolean) => SettleInput,
): Promise<{
  settled: boolean;
  capturedRaw: bigint;
  freeAfter: bigint | null;
  alerts: AccountAlerts | null;
}> {
  return db.transaction(async (tx) => {
    const rows = await tx.query(
      `select hold_raw::text as hold, account_id, metadata->'allowance'->>'id' as allow_id,
              metadata->'allowance'->>'start' as allow_start, user_key_id as key_id,
              metadata->>'keyLimitStart' as key_start
         from charge where id = $1 and status = 'held' for update`,
      [chargeId],
    );
    if (rows.length === 0) return { settled: false, capturedRaw: 0n, freeAfter: null, alerts: null };
    const hold = BigInt(rows[0].hold);
    const accounts = await lockSettlementAccounts(tx, rows[0].account_id, [paywallId]);
    const acct = accounts.get(rows[0].account_id);
    // held_raw includes this hold: balance − held is what is free besides it.
    let free = acct ? acct.balance - acct.held : 0n;
    // The app's allowance (docs/reference.md §16) bounds the extra as the free balance does: its count
    // already holds this hold, so what it has left is what may be taken beyond it (locked after the accounts).
    if (rows[0].allow_id) {
      const [w] = await tx.query(
        `select (allowance_raw - allowance_spent_raw)::text as rest from wallet_connection
          where id = $1 and allowance_raw is not null and allowance_period_start = $2::date for no key update`,
        [rows[0].allow_id, rows[0].allow_start],
      );
      if (w && BigInt(w.rest) < free) free = BigInt(w.rest);
    }
    // So does the end-user key's spending limit (docs/reference.md §19), locked after the allowance: what
    // the key's owner agreed to spend through it is a bound no provider's report moves. What a limit (not
    // the balance) leaves uncovered is the app's, never the wallet's debt (`limitBound`).
    let limitBound = false;
    if (rows[0].key_id && rows[0].key_start) {
      const [k] = await tx.query(
        `select (limit_raw - limit_spent_raw)::text as rest from user_key
          where id = $1 and limit_raw is not null and limit_period_start = $2::date for no key update`,
        [rows[0].key_id, rows[0].key_start],
      );
      if (k && BigInt(k.rest) < free) [free, limitBound] = [BigInt(k.rest), true];
    }
    const beyond = costRaw > hold ? costRaw - hold : 0n;
    const extra = free <= 0n ? 0n : beyond < free ? beyond : free;
    const capturedRaw = (costRaw < hold ? costRaw : hold) + extra;
    const r = await ledgerTick(tx, [], [build(capturedRaw, limitBound && extra < beyond)]);
    return { settled: r.settlements[0], capturedRaw, freeAfter: r.freeAfter[0], alerts: r.alerts[0] };
  });
}
