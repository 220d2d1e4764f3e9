import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';

export const ACCOUNT_KINDS = ['world', 'fees', 'provider', 'payouts', 'earnings', 'user', 'wallet'] as const;
export type AccountKind = (typeof ACCOUNT_KINDS)[number];

/**
 * A place money can be (DESIGN "Accounts and transfers"): the platform's `world` (money entering or
 * leaving; its balance is minus everything deposited), `fees`, `provider` (built-in provider costs) and
 * `payouts` (withdrawals in flight), one `earnings` account per paywall, one `user` account per DEFAULT
 * end user and one `wallet` account per wallet user. Only `world` may go negative. Free balance =
 * balance − held; holds are reserved on the spending account.
 */
export const LedgerAccountSchema = defineEntity({
  name: 'LedgerAccount',
  tableName: 'ledger_account',
  checks: [
    { name: 'ledger_account_balance_nonnegative', expression: `kind = 'world' or balance_raw >= 0` },
    { name: 'ledger_account_held_within_balance', expression: `kind = 'world' or held_raw <= balance_raw` },
  ],
  properties: {
    id: p.uuid().primary(),
    kind: p.string().length(16),
    paywall: () => p.manyToOne(Paywall).mapToPk().nullable(),
    balanceRaw: p.bigint('bigint').defaultRaw('0'),
    heldRaw: p.bigint('bigint').defaultRaw('0').check('held_raw >= 0'),
    /** Outstanding uncollected usage of a spending account (repaid first from its free balance). */
    debtRaw: p.bigint('bigint').defaultRaw('0').check('debt_raw >= 0'),
    /** A wallet's own low-balance alert (docs/reference.md §16 "Low balance"); null = off. */
    lowAlertRaw: p.bigint('bigint').nullable().check('low_alert_raw > 0'),
    /** The wallet's low-balance e-mail was sent for the current dip below `lowAlertRaw`. */
    lowAlerted: p.boolean().default(false),
    /** Paywalls whose `paywall.balance.low` was recorded for the current dip below their threshold. */
    lowAlertedPaywalls: p.array().columnType('text[]').default([]),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class LedgerAccount extends LedgerAccountSchema.class {}
LedgerAccountSchema.setClass(LedgerAccount);

export const TRANSFER_KINDS = [
  'deposit',
  'trial',
  'charge',
  'usage',
  'fee',
  'provider_cost',
  'withdrawal',
  'withdrawal_return',
  'payout',
  // docs/reference.md §16 "Refunds": earnings → the payer (`refund`), fees → earnings (`fee_refund`).
  'refund',
  'fee_refund',
] as const;
export type TransferKind = (typeof TRANSFER_KINDS)[number];

/**
 * One movement of money: `amount_raw` from the debit account to the credit account, written in the
 * statement that updates both balances. Append-only (a trigger forbids UPDATE and DELETE). Each
 * account's balance is the sum of its credits minus its debits; the sum of all balances is 0.
 * `balance_after_raw` is the end user's side (the spending account) after the movement, for statements.
 */
export const TransferSchema = defineEntity({
  name: 'Transfer',
  tableName: 'transfer',
  indexes: [
    { properties: ['debitAccount', 'seq'] },
    { properties: ['creditAccount', 'seq'] },
    { properties: ['endUserId', 'seq'] },
    // Paywall.earnings sums a paywall's fee legs.
    { properties: ['paywallId', 'kind'] },
  ],
  checks: [{ name: 'transfer_distinct_accounts', expression: 'debit_account_id <> credit_account_id' }],
  properties: {
    seq: p.bigint('string').primary().autoincrement(),
    id: p.uuid().unique(),
    kind: p.string().length(24),
    debitAccount: () => p.manyToOne(LedgerAccount).mapToPk(),
    creditAccount: () => p.manyToOne(LedgerAccount).mapToPk(),
    amountRaw: p.bigint('bigint').check('amount_raw > 0'),
    balanceAfterRaw: p.bigint('bigint').nullable(),
    paywallId: p.uuid().nullable(),
    endUserId: p.uuid().nullable(),
    chargeId: p.uuid().nullable(),
    withdrawalId: p.uuid().nullable(),
    metadata: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class Transfer extends TransferSchema.class {}
TransferSchema.setClass(Transfer);

export const WITHDRAWAL_STATUSES = ['PENDING', 'PAID', 'FAILED', 'CANCELED'] as const;
export type WithdrawalStatus = (typeof WITHDRAWAL_STATUSES)[number];

/** A developer's request to be paid out a SHARED paywall's earnings (docs/reference.md §8). */
export const WithdrawalSchema = defineEntity({
  name: 'Withdrawal',
  tableName: 'withdrawal',
  indexes: [{ properties: ['paywall', 'createdAt'] }, { properties: ['status', 'createdAt'] }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    amountRaw: p.bigint('bigint').check('amount_raw > 0'),
    destination: p.string().length(500),
    status: p.string().length(16),
    failureReason: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class Withdrawal extends WithdrawalSchema.class {}
WithdrawalSchema.setClass(Withdrawal);
