import type { Database } from '../../db/database.js';
import { usdcDecimal } from '../../shared/money.js';
import { recordEvents, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID } from '../accounts/accounts.js';
import { bigintOr0 } from './abandoned-holds.js';
import { lockSettlementAccounts } from './settle-beyond-hold.js';

// Debt collection (one job): what settlements could not collect is repaid from the free balance before
// the next hold (collectDebt).

/**
 * Repays an account's debt (uncollected usage of its settled charges, oldest first) from its free
 * balance, as far as it goes: per charge, the amount moves to the paywall's earnings (and, in SHARED
 * mode, the provider's unpaid cost and the platform fee first, as a charge is split), `recovered_raw`
 * grows, the account's `debt_raw` shrinks, and `paywall.usage.charge.recovered` is recorded. Returns the
 * amount repaid. Accounts are locked in id order before the charges are read again.
 *
 * A wallet (SHARED) repays an app only while the app is connected to it, and only within that app's
 * allowance (docs/reference.md §5.7): the connection is locked (a disconnect waits, or is seen), the
 * repayment counts as the app's spending in the allowance's current period, and what the allowance has
 * no room for stays owed. A disconnected app is never repaid from the wallet.
 */
export async function collectDebt(db: Database, accountId: string, feeBps: number): Promise<bigint> {
  const OWED = `select c.id, c.paywall_id, c.user_id, c.model, (c.uncollected_raw - c.recovered_raw)::text as owed,
         coalesce(c.metadata->>'providerCost', '0') as provider_cost, pw.mode, pw.owner_id, e.external_id,
         (select coalesce(sum(t.amount_raw), 0) from transfer t where t.charge_id = c.id and t.kind = 'provider_cost')::text as provider_paid,
         (select w.id from wallet_user w where w.account_id = c.account_id) as wallet_user_id,
         (select w.id from wallet_connection w join wallet_user wu on wu.id = w.wallet_user_id
           where w.end_user_id = c.user_id and w.revoked_at is null and wu.account_id = c.account_id
           limit 1) as connection_id
    from charge c join paywall pw on pw.id = c.paywall_id join end_user e on e.id = c.user_id
   where c.account_id = $1 and c.kind = 'usage' and c.uncollected_raw > c.recovered_raw
   order by c.created_at, c.id limit 100`;
  return db.transaction(async (tx) => {
    const first = await tx.query(OWED, [accountId]);
    if (first.length === 0) return 0n;
    const accounts = await lockSettlementAccounts(tx, accountId, [
      ...new Set(first.map((r: any) => r.paywall_id as string)),
    ]);
    const acct = accounts.get(accountId);
    if (!acct) return 0n;
    let balance = acct.balance;
    let free = acct.balance - acct.held;
    if (free <= 0n) return 0n;
    // Read again under the account lock: a concurrent collector may have repaid some already.
    const owed = await tx.query(`${OWED} for update of c`, [accountId]);
    let repaid = 0n;
    const events: NewEvent[] = [];
    for (const r of owed) {
      if (free <= 0n) break;
      const due = BigInt(r.owed);
      let amount = due < free ? due : free;
      if (r.mode === 'SHARED') {
        // Only a connected app, within its allowance (locked: a disconnect or a hold of the app waits).
        if (!r.connection_id) continue;
        const [w] = await tx.query(
          `select w.revoked_at is null as active,
                  case when w.allowance_raw is null then null
                       else (w.allowance_raw - case when w.allowance_period_start = v.start
                                                    then w.allowance_spent_raw else 0 end)::text end as rest,
                  v.start::text as start
             from wallet_connection w,
                  lateral (select greatest(w.allowance_period_start,
                                           ledger_period_start(w.allowance_period, now())) as start) v
            where w.id = $1 for no key update of w`,
          [r.connection_id],
        );
        if (!w?.active) continue;
        if (w.rest !== null) {
          const rest = BigInt(w.rest);
          if (rest <= 0n) continue;
          if (rest < amount) amount = rest;
          await tx.query(
            `update wallet_connection
                set allowance_spent_raw = case when allowance_period_start = $2::date
                                               then allowance_spent_raw else 0 end + $3::bigint,
                    allowance_period_start = $2::date
              where id = $1`,
            [r.connection_id, w.start, amount.toString()],
          );
        }
      }
      const providerDue = bigintOr0(r.provider_cost) - bigintOr0(r.provider_paid);
      const split =
        r.mode === 'DEFAULT'
          ? { earnings: amount, fee: 0n, provider: 0n }
          : (() => {
              const provider = providerDue <= 0n ? 0n : providerDue < amount ? providerDue : amount;
              const fee = ((amount - provider) * BigInt(feeBps)) / 10_000n;
              return { earnings: amount - provider - fee, fee, provider };
            })();
      balance -= amount;
      free -= amount;
      repaid += amount;
      const legs: [string, string, bigint][] = [
        [
          'usage',
          `(select id from ledger_account where kind = 'earnings' and paywall_id = $7)`,
          split.earnings,
        ],
        ['fee', `'${FEES_ACCOUNT_ID}'::uuid`, split.fee],
        ['provider_cost', `'${PROVIDER_ACCOUNT_ID}'::uuid`, split.provider],
      ];
      for (const [kind, credit, part] of legs) {
        if (part <= 0n) continue;
        await tx.query(
          `with t as (
             insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                                   paywall_id, end_user_id, charge_id, metadata, created_at)
             values (gen_random_uuid(), $1, $2, ${credit}, $3::bigint, $4::bigint, $7, $5, $6,
                     '{"recovered": true}'::jsonb, now())
             returning credit_account_id, amount_raw)
           update ledger_account a set balance_raw = a.balance_raw + t.amount_raw from t where a.id = t.credit_account_id`,
          [kind, accountId, part.toString(), balance.toString(), r.user_id, r.id, r.paywall_id],
        );
      }
      await tx.query(`update charge set recovered_raw = recovered_raw + $2::bigint where id = $1`, [
        r.id,
        amount.toString(),
      ]);
      const ctx = {
        paywall: { id: r.paywall_id, ownerId: r.owner_id },
        trigger: DEBT_COLLECTOR,
        subject: { type: 'charge' as const, id: r.id, externalId: r.external_id },
      };
      events.push(
        buildEvent('paywall.usage.charge.recovered', ctx, {
          walletUserId: r.mode === 'SHARED' ? (r.wallet_user_id ?? null) : r.user_id,
          activityId: r.id,
          model: r.model,
          amount: usdcDecimal(amount),
          uncollected: usdcDecimal(due - amount),
        }),
      );
    }
    if (repaid === 0n) return 0n;
    await tx.query(
      `update ledger_account set balance_raw = balance_raw - $2::bigint,
              debt_raw = greatest(0, debt_raw - $2::bigint) where id = $1`,
      [accountId, repaid.toString()],
    );
    await recordEvents(tx, events);
    return repaid;
  });
}

const DEBT_COLLECTOR: EventTrigger = { source: 'system', actorType: 'system', actorId: 'debt-collector' };

/**
 * What an account (a SHARED wallet) still owes to paywalls other than `paywallId`: only those apps
 * collect it (connected, within their allowances), so it does not refuse this app's requests
 * (docs/reference.md §5.7). Read only when a hold was refused for debt.
 */
export async function debtOwedElsewhere(db: Database, accountId: string, paywallId: string): Promise<bigint> {
  const [r] = await db.query(
    `select coalesce(sum(uncollected_raw - recovered_raw), 0)::text as owed from charge
      where account_id = $1 and paywall_id <> $2 and kind = 'usage' and uncollected_raw > recovered_raw`,
    [accountId, paywallId],
  );
  return BigInt(r.owed);
}
