import type { Sql } from '../../db/database.js';

/**
 * The platform's own accounts (fixed ids, created by the accounts migration). `world` is where money
 * enters and leaves (deposits, Stripe, test funds, payouts): its balance is minus everything inside.
 */
export const WORLD_ACCOUNT_ID = '00000000-0000-4000-8000-000000000000';
/** Platform fees taken from SHARED charges (PLATFORM_FEE_BPS). */
export const FEES_ACCOUNT_ID = '00000000-0000-4000-8000-000000000001';
/** What the built-in provider costs the platform, paid out of SHARED charges it served. */
export const PROVIDER_ACCOUNT_ID = '00000000-0000-4000-8000-000000000002';
/** The name the built-in provider's answers are recorded under (charge metadata `provider`). */
const BUILTIN_PROVIDER_NAME = 'builtin';
/** Withdrawals requested but not yet paid (or failed). */
export const PAYOUTS_ACCOUNT_ID = '00000000-0000-4000-8000-000000000003';

/** SQL for the id of a paywall's earnings account, given the paywall id as `expr`. */
export const earningsAccountOf = (expr: string) =>
  `(select id from ledger_account where kind = 'earnings' and paywall_id = ${expr})`;

/** How a charge's captured amount is shared out (all raw units; the parts add up to the amount). */
export interface ChargeSplit {
  earningsRaw: bigint;
  feeRaw: bigint;
  providerRaw: bigint;
}

/**
 * docs/reference.md §8 "Fee base": DEFAULT charges are the paywall's revenue whole (no platform fee: the
 * developer collects the money). SHARED: the built-in provider's cost first (never more than what was
 * captured), then fee = floor(rest x bps / 10000), and the developer's earnings are the rest.
 */
export function splitCharge(
  mode: 'DEFAULT' | 'SHARED',
  capturedRaw: bigint,
  providerCostRaw: bigint,
  feeBps: number,
): ChargeSplit {
  if (mode === 'DEFAULT' || capturedRaw <= 0n)
    return { earningsRaw: capturedRaw, feeRaw: 0n, providerRaw: 0n };
  const providerRaw = providerCostRaw < capturedRaw ? providerCostRaw : capturedRaw;
  const rest = capturedRaw - providerRaw;
  const feeRaw = (rest * BigInt(feeBps)) / 10_000n;
  return { earningsRaw: rest - feeRaw, feeRaw, providerRaw };
}

export interface LedgerProof {
  /** Sum of every account's balance: 0 in a sound ledger. */
  totalRaw: bigint;
  /** Accounts whose balance differs from the sum of their transfers (credits − debits). */
  unbalancedAccounts: string[];
  /** Accounts whose held amount differs from the sum of their open holds. */
  misheldAccounts: string[];
  /** Accounts whose debt differs from what their charges still owe (uncollected − recovered). */
  misdebtedAccounts: string[];
  /**
   * Charges of SHARED paywalls that left a debt on a wallet though the built-in provider did not answer
   * them: an app's own provider never puts a wallet in debt (docs/reference.md §5.7).
   */
  sharedDebtCharges: string[];
  /**
   * Charges the built-in provider answered that did not pay its cost: sold below it (captured +
   * uncollected + written off under the recorded cost), or the provider-cost leg differs from what was
   * paid of it (the cost comes first out of what a charge captured and recovered).
   */
  builtinUnpaidCharges: string[];
  ok: boolean;
}

/**
 * The one query that proves the ledger: all balances add up to zero, each account's balance is the
 * sum of its transfers, each account's held amount is the sum of its open holds, and each account's
 * debt is what its charges still owe; no wallet owes for an app's own provider, and every answer of the
 * built-in provider paid its cost.
 */
export async function proveLedger(sql: Sql): Promise<LedgerProof> {
  const rows = await sql.query(
    `with flows as (
       select credit_account_id as id, amount_raw as amt from transfer
       union all select debit_account_id, -amount_raw from transfer
     ), sums as (select id, sum(amt) as total from flows group by id),
     holds as (select account_id as id, sum(hold_raw) as total from charge where status = 'held' group by 1),
     owed as (select account_id as id, sum(uncollected_raw - recovered_raw) as total from charge
               where uncollected_raw > 0 group by 1)
     select (select coalesce(sum(balance_raw), 0) from ledger_account)::text as total,
            coalesce((select array_agg(a.id::text) from ledger_account a left join sums s on s.id = a.id
                       where a.balance_raw <> coalesce(s.total, 0)), '{}') as unbalanced,
            coalesce((select array_agg(a.id::text) from ledger_account a left join holds h on h.id = a.id
                       where a.held_raw <> coalesce(h.total, 0)), '{}') as misheld,
            coalesce((select array_agg(a.id::text) from ledger_account a left join owed o on o.id = a.id
                       where a.debt_raw <> coalesce(o.total, 0)), '{}') as misdebted,
            coalesce((select array_agg(c.id::text) from charge c join paywall p on p.id = c.paywall_id
                       where p.mode = 'SHARED' and c.uncollected_raw > 0
                         and c.metadata->>'provider' is distinct from '${BUILTIN_PROVIDER_NAME}'), '{}') as shared_debt,
            coalesce((select array_agg(c.id::text) from charge c
                        left join lateral (select coalesce(sum(t.amount_raw), 0) as paid from transfer t
                                            where t.charge_id = c.id and t.kind = 'provider_cost') pc on true
                       where c.metadata->>'provider' = '${BUILTIN_PROVIDER_NAME}'
                         and (c.metadata->>'providerCost' is null
                              or c.amount_raw + c.uncollected_raw + coalesce((c.metadata->>'writtenOff')::bigint, 0)
                                 < (c.metadata->>'providerCost')::bigint
                              or pc.paid <> least((c.metadata->>'providerCost')::bigint,
                                                  c.amount_raw + c.recovered_raw))), '{}') as builtin_unpaid`,
  );
  const totalRaw = BigInt(rows[0].total);
  const unbalancedAccounts: string[] = rows[0].unbalanced;
  const misheldAccounts: string[] = rows[0].misheld;
  const misdebtedAccounts: string[] = rows[0].misdebted;
  const sharedDebtCharges: string[] = rows[0].shared_debt;
  const builtinUnpaidCharges: string[] = rows[0].builtin_unpaid;
  return {
    totalRaw,
    unbalancedAccounts,
    misheldAccounts,
    misdebtedAccounts,
    sharedDebtCharges,
    builtinUnpaidCharges,
    ok:
      totalRaw === 0n &&
      unbalancedAccounts.length === 0 &&
      misheldAccounts.length === 0 &&
      misdebtedAccounts.length === 0 &&
      sharedDebtCharges.length === 0 &&
      builtinUnpaidCharges.length === 0,
  };
}

/** A paywall's usage that its holds and its users' free balances could not pay (raw units, strings). */
export interface PaywallUncollected {
  paywallId: string;
  /** Recorded as uncollected at settlement, in all. */
  uncollected: string;
  /** Repaid since, from the users' later deposits (debt recovery). */
  recovered: string;
  /** Still owed: uncollected − recovered. */
  outstanding: string;
}

/** Uncollected usage per paywall (only paywalls that have some), for `ledger verify`. */
export async function uncollectedByPaywall(sql: Sql): Promise<PaywallUncollected[]> {
  const rows = await sql.query(
    `select paywall_id, sum(uncollected_raw)::text as uncollected, sum(recovered_raw)::text as recovered,
            sum(uncollected_raw - recovered_raw)::text as outstanding
       from charge where uncollected_raw > 0 group by paywall_id order by paywall_id`,
  );
  return rows.map((r: any) => ({
    paywallId: r.paywall_id,
    uncollected: r.uncollected,
    recovered: r.recovered,
    outstanding: r.outstanding,
  }));
}
