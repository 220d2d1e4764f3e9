import { randomUUID } from 'node:crypto';
import type { Database } from '../../src/db/database.js';
import { WORLD_ACCOUNT_ID } from '../../src/modules/accounts/accounts.js';

/**
 * A wallet user with a funded wallet account, written as the service writes them (a wallet account,
 * the wallet user, and a deposit transfer from world with both balances updated): the ledger stays
 * provable. For tests that need a connected SHARED user without driving the hosted pages.
 */
export async function createWallet(
  db: Database,
  opts: { email?: string; fundRaw?: bigint } = {},
): Promise<{ walletUserId: string; accountId: string }> {
  const walletUserId = randomUUID();
  const accountId = randomUUID();
  const fund = opts.fundRaw ?? 0n;
  await db.query(`insert into ledger_account (id, kind, balance_raw) values ($1, 'wallet', 0)`, [accountId]);
  await db.query(`insert into wallet_user (id, email, account_id) values ($1, $2, $3)`, [
    walletUserId,
    opts.email ?? `${walletUserId}@wallet.test`,
    accountId,
  ]);
  if (fund > 0n) await fundWallet(db, accountId, fund);
  return { walletUserId, accountId };
}

/** world → wallet account: one transfer and both balances. */
export async function fundWallet(db: Database, accountId: string, amountRaw: bigint): Promise<void> {
  await db.query(
    `with a as (update ledger_account set balance_raw = balance_raw + $2::bigint where id = $1 returning balance_raw),
          w as (update ledger_account set balance_raw = balance_raw - $2::bigint where id = $3)
     insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw, metadata)
     select gen_random_uuid(), 'deposit', $3, $1, $2::bigint, a.balance_raw, '{"source":"test_funds"}' from a`,
    [accountId, amountRaw.toString(), WORLD_ACCOUNT_ID],
  );
}

/** Connects an (existing) end user of a SHARED paywall to a wallet, as an approval does. */
export async function connectEndUser(
  db: Database,
  paywallId: string,
  externalId: string,
  wallet: { walletUserId: string; accountId: string },
): Promise<void> {
  const rows = await db.query(
    `update end_user set wallet_user_id = $3, account_id = $4, connected_at = now()
      where paywall_id = $1 and external_id = $2 returning id`,
    [paywallId, externalId, wallet.walletUserId, wallet.accountId],
  );
  if (rows.length !== 1) throw new Error(`no end user ${externalId} on ${paywallId}`);
  await db.query(
    `insert into wallet_connection (id, paywall_id, end_user_id, wallet_user_id) values (gen_random_uuid(), $1, $2, $3)`,
    [paywallId, rows[0].id, wallet.walletUserId],
  );
}
