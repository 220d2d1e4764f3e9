import { defineEntity, p } from '@mikro-orm/core';
import { LedgerAccount } from '../../accounts/account.entity.js';
import { Paywall } from '../../paywalls/paywall.entity.js';
import { EndUser } from '../../users/end-user.entity.js';
import { WalletUser } from '../../wallet/wallet.entity.js';

/**
 * Auto top-up of one end user of a DEFAULT paywall (`paywall` + `external_id`, `end_user` once the user
 * exists) or of one hosted wallet (`wallet_user`), docs/reference.md §16 "Auto top-up".
 * `stripe_customer_id`: the ONE Stripe customer of that user (created when they first tick "Top up
 * automatically"; the paywall's Stripe account, or the platform's for a wallet). The settings and
 * `account` (the spending account a charge lowers) are written when a Checkout that saved the card is
 * paid; `enabled` then turns on. `pending_attempt_id`: the one off-session payment in flight (claimed
 * by a conditional UPDATE: one per crossing, whatever the concurrency). `failures_in_row`: at 3,
 * `enabled` turns off with `disabled_reason`.
 */
export const AutoTopupSchema = defineEntity({
  name: 'AutoTopup',
  tableName: 'auto_topup',
  uniques: [{ properties: ['paywall', 'externalId'] }, { properties: ['walletUser'] }],
  checks: [
    {
      name: 'auto_topup_target',
      expression:
        '(wallet_user_id is null and paywall_id is not null and external_id is not null) or (wallet_user_id is not null and paywall_id is null and external_id is null and end_user_id is null)',
    },
    {
      name: 'auto_topup_settings',
      expression:
        'not enabled or (account_id is not null and threshold_raw > 0 and amount_cents > 0 and monthly_cap_cents >= amount_cents)',
    },
    { name: 'auto_topup_failures', expression: 'failures_in_row >= 0' },
  ],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk().nullable(),
    externalId: p.string().length(256).nullable(),
    endUser: () => p.manyToOne(EndUser).mapToPk().nullable(),
    walletUser: () => p.manyToOne(WalletUser).mapToPk().nullable(),
    account: () => p.manyToOne(LedgerAccount).mapToPk().nullable().index(),
    stripeCustomerId: p.text(),
    enabled: p.boolean().default(false),
    thresholdRaw: p.bigint('bigint').nullable(),
    amountCents: p.bigint('bigint').nullable(),
    monthlyCapCents: p.bigint('bigint').nullable(),
    pendingAttemptId: p.uuid().nullable(),
    failuresInRow: p.integer().default(0),
    disabledReason: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class AutoTopup extends AutoTopupSchema.class {}
AutoTopupSchema.setClass(AutoTopup);

/**
 * One off-session payment of an auto top-up. Its id is the Stripe idempotency key of the
 * PaymentIntent create call and is in the PaymentIntent's metadata (`autoTopupAttemptId`).
 * `payment_intent_id` is unique: `payment_intent.succeeded` flips `pending` → `succeeded` under the row
 * lock and writes the credit only when it did (once per PaymentIntent). `tries`: create calls that could
 * not reach Stripe (retried by the sweep with the same idempotency key).
 */
export const AutoTopupAttemptSchema = defineEntity({
  name: 'AutoTopupAttempt',
  tableName: 'auto_topup_attempt',
  indexes: [{ properties: ['autoTopup', 'createdAt'] }, { properties: ['status', 'createdAt'] }],
  checks: [
    { name: 'auto_topup_attempt_status', expression: `status in ('pending', 'succeeded', 'failed')` },
    { name: 'auto_topup_attempt_amount_positive', expression: 'amount_cents > 0' },
  ],
  properties: {
    id: p.uuid().primary(),
    autoTopup: () => p.manyToOne(AutoTopup).mapToPk(),
    amountCents: p.bigint('bigint'),
    status: p.string().length(16),
    paymentIntentId: p.text().nullable().unique(),
    transferId: p.uuid().nullable(),
    failureCode: p.text().nullable(),
    failureMessage: p.text().nullable(),
    tries: p.integer().default(0),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class AutoTopupAttempt extends AutoTopupAttemptSchema.class {}
AutoTopupAttemptSchema.setClass(AutoTopupAttempt);
