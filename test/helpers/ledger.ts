import { randomUUID } from 'node:crypto';
import type { Database } from '../../src/db/database.js';
import { proveLedger } from '../../src/modules/accounts/accounts.js';
import type { ReserveInput, SettleInput } from '../../src/modules/ledger/holds.js';

/** A hold for tests that drive the ledger statement directly: 1000 raw per request, no per-token price, no limits. */
export function testHold(
  paywallId: string,
  externalUserId: string,
  over: Partial<ReserveInput> = {},
): ReserveInput {
  return {
    chargeId: randomUUID(),
    paywallId,
    externalUserId,
    requireConnected: false,
    fixedScaled: 1000n * 10n ** 12n,
    perTokenScaled: 0n,
    maxCap: 10,
    minCap: 1,
    model: 'm',
    stream: false,
    metadata: {},
    events: [],
    day: '2026-11-23',
    requestLimit: null,
    spendLimitRaw: null,
    modelRequestLimit: null,
    rateLimit: null,
    rateWindow: new Date(),
    ...over,
  };
}

/** The settlement of `hold` capturing `capturedRaw`, all of it earnings. */
export function testSettlement(
  hold: ReserveInput,
  capturedRaw: bigint,
  over: Partial<SettleInput> = {},
): SettleInput {
  return {
    chargeId: hold.chargeId,
    paywallId: hold.paywallId,
    status: 'completed',
    capturedRaw,
    earningsRaw: capturedRaw,
    feeRaw: 0n,
    providerRaw: 0n,
    uncollectedRaw: 0n,
    promptTokens: 1,
    completionTokens: 1,
    errorCode: null,
    ledgerEntryId: randomUUID(),
    metadata: {},
    events: [],
    ...over,
  };
}

/** An end user with the account it spends (balance/held 0 when it has none). */
export async function userAccount(
  db: Database,
  paywallId: string,
  externalId: string,
): Promise<{ id: string; accountId: string | null; balance: string; held: string } | null> {
  const rows = await db.query<any>(
    `select e.id, e.account_id, coalesce(a.balance_raw, 0)::text as balance, coalesce(a.held_raw, 0)::text as held
       from end_user e left join ledger_account a on a.id = e.account_id
      where e.paywall_id = $1 and e.external_id = $2`,
    [paywallId, externalId],
  );
  return rows.length
    ? { id: rows[0].id, accountId: rows[0].account_id, balance: rows[0].balance, held: rows[0].held }
    : null;
}

/** Sets the held amount of an account directly (tests that simulate a request in flight). */
export async function setHeld(db: Database, userId: string, heldRaw: number | bigint): Promise<void> {
  await db.query(
    `update ledger_account set held_raw = $2 where id = (select account_id from end_user where id = $1)`,
    [userId, heldRaw.toString()],
  );
}

/**
 * The transfers an end user caused, oldest first, as a statement: money in positive, money spent
 * negative (one row per transfer; a SHARED charge's fee and provider legs are rows of their own).
 */
export async function userTransfers(
  db: Database,
  userId: string,
): Promise<
  { id: string; kind: string; amount: string; after: string; chargeId: string | null; metadata: any }[]
> {
  const rows = await db.query<any>(
    `select id, kind, case when kind in ('deposit', 'trial') then amount_raw else -amount_raw end::text as amount,
            balance_after_raw::text as after, charge_id, metadata
       from transfer where end_user_id = $1 order by seq`,
    [userId],
  );
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    amount: r.amount,
    after: r.after,
    chargeId: r.charge_id,
    metadata: typeof r.metadata === 'string' ? JSON.parse(r.metadata) : r.metadata,
  }));
}

/**
 * The ledger proof (balances sum to 0; each account = its transfers; held = its open holds; debt = what
 * its charges owe; no SHARED debt but the built-in provider's; every built-in answer paid its cost) must hold.
 */
export async function expectLedgerProven(db: Database): Promise<void> {
  const proof = await proveLedger(db);
  expect({
    total: proof.totalRaw.toString(),
    unbalanced: proof.unbalancedAccounts,
    misheld: proof.misheldAccounts,
    misdebted: proof.misdebtedAccounts,
    sharedDebt: proof.sharedDebtCharges,
    builtinUnpaid: proof.builtinUnpaidCharges,
  }).toEqual({ total: '0', unbalanced: [], misheld: [], misdebted: [], sharedDebt: [], builtinUnpaid: [] });
}
