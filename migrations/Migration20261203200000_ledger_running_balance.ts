import { Migration } from '@mikro-orm/migrations';
import { LEDGER_FUNCTIONS_V5 } from './sql/ledger-functions-v5.js';

/**
 * Hand-written: `ledger_tick` with each transfer of a batch recording the spending account's balance after
 * its own settlement, as a lone settlement records it. Version 5 (migrations/sql/ledger-functions-v5.ts,
 * still the one text of the rules) recorded the balance after the whole batch on every transfer of it, so
 * the running balance `EndUser.ledgerEntries.balanceAfter` of a user whose requests settled together was
 * wrong for all but the last (the sums, and so the ledger proof, were right). The function is version 5's
 * with that one expression changed: the balance after the batch, plus what the account's later settlements
 * of the batch (in the batch's order, which is the transfers' order) took, summed by one window over the
 * batch's settlements (a sort of the batch, not a scan of it per transfer).
 */
const TICK_V5 = LEDGER_FUNCTIONS_V5[LEDGER_FUNCTIONS_V5.length - 1];

const REPLACED: [string, string][] = [
  [
    "-- Each transfer records the spending account's balance after the batch.",
    "-- Each transfer records the spending account's balance after its settlement (the batch's order:\n" +
      "      -- after the batch, plus what the account's later settlements of the batch took).",
  ],
  [
    'r_bal[array_position(r_id, s.account_id)], it.paywall_id,',
    'r_bal[array_position(r_id, s.account_id)] + s.later, it.paywall_id,',
  ],
  [
    'from unnest(ss) as s\n             cross join lateral jsonb_to_record(settlements->s.i) as it(charge_id uuid, paywall_id uuid,\n' +
      '                                                                       ledger_id uuid, metadata jsonb)',
    'from (select u.*, coalesce(sum(u.captured) over (partition by u.account_id order by u.i desc\n' +
      '                                                 rows between unbounded preceding and 1 preceding), 0)::bigint as later\n' +
      '                from unnest(ss) as u) as s\n' +
      '             cross join lateral jsonb_to_record(settlements->s.i) as it(charge_id uuid, paywall_id uuid,\n' +
      '                                                                       ledger_id uuid, metadata jsonb)',
  ],
];

/** Version 5's `ledger_tick` with the batch's transfers' balances per settlement. */
export const TICK_RUNNING_BALANCE = REPLACED.reduce((sql, [from, to]) => {
  if (sql.split(from).length !== 2) throw new Error(`ledger_tick: expected one occurrence of ${from}`);
  return sql.replace(from, to);
}, TICK_V5);

export class Migration20261203200000_ledger_running_balance extends Migration {
  override name = 'Migration20261203200000_ledger_running_balance';

  override up(): void {
    this.addSql(TICK_RUNNING_BALANCE);
  }

  override down(): void {
    this.addSql(TICK_V5);
  }
}
