import type { Sql } from '../../db/database.js';

/** Whose debts `writeOffOwed` forgives: one charge, or every usage charge of one end user. */
export type OwedCharges = { chargeId: string } | { endUserId: string };

/**
 * Writes off what usage charges still owe on `accountId` (their `uncollected_raw` beyond `recovered_raw`):
 * each charge keeps the amount as `metadata.writtenOff`, its `uncollected_raw` drops to what was repaid
 * (so no deposit repays it later), and the account's `debt_raw` shrinks by the total. Two rules forgive a
 * debt: a wallet disconnecting an app, and a refund that gives back the whole rest of a charge. The
 * caller holds the account's lock (accounts before charges, the order of every ledger statement).
 * Returns the amount written off.
 */
export async function writeOffOwed(tx: Sql, accountId: string, charges: OwedCharges): Promise<bigint> {
  const [column, id] = 'chargeId' in charges ? ['id', charges.chargeId] : ['user_id', charges.endUserId];
  // A charge's uncollected amount is set once, at settlement: once written off it owes nothing more.
  const [row] = await tx.query(
    `with c as (
       update charge ch set uncollected_raw = ch.recovered_raw,
              metadata = ch.metadata || jsonb_build_object('writtenOff', (ch.uncollected_raw - ch.recovered_raw)::text)
        where ch.${column} = $1 and ch.account_id = $2 and ch.kind = 'usage' and ch.uncollected_raw > ch.recovered_raw
       returning (ch.metadata->>'writtenOff')::bigint as off
     ), a as (
       update ledger_account a set debt_raw = greatest(0, a.debt_raw - (select sum(off) from c))
        where a.id = $2 and exists (select 1 from c)
     )
     select coalesce(sum(off), 0)::text as off from c`,
    [id, accountId],
  );
  return BigInt(row?.off ?? 0);
}
