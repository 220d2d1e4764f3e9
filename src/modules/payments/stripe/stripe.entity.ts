import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../../paywalls/paywall.entity.js';
import { EndUser } from '../../users/end-user.entity.js';
import { WalletUser } from '../../wallet/wallet.entity.js';

/**
 * A paywall's Stripe account (CONTRACT §9): the secret key and the webhook endpoint's signing secret
 * are AES-256-GCM ciphertext (shared/crypto.ts, bound to the paywall id), never returned.
 * `topup_amounts_cents` are the amounts the hosted top-up page offers, in US cents.
 */
export const StripeIntegrationSchema = defineEntity({
  name: 'StripeIntegration',
  tableName: 'stripe_integration',
  properties: {
    paywall: () => p.oneToOne(Paywall).mapToPk().primary().owner(),
    secretKeyCiphertext: p.text(),
    webhookEndpointId: p.text(),
    webhookSecretCiphertext: p.text(),
    topupAmountsCents: p.json<number[]>().columnType('jsonb'),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class StripeIntegration extends StripeIntegrationSchema.class {}
StripeIntegrationSchema.setClass(StripeIntegration);

/**
 * One Stripe Checkout Session: of an end user of a DEFAULT paywall (`paywall` + `end_user`), or of a
 * hosted wallet (`wallet_user`, paid with the platform's key). The session id is unique: fulfilment
 * updates this row in the statement that writes the deposit transfer, so a session is credited exactly
 * once however often (or concurrently) its events arrive. Status: `open` → `paid` or `failed`.
 */
export const StripeCheckoutSchema = defineEntity({
  name: 'StripeCheckout',
  tableName: 'stripe_checkout',
  checks: [
    { name: 'stripe_checkout_status', expression: `status in ('open', 'paid', 'failed')` },
    { name: 'stripe_checkout_amount_positive', expression: 'amount_cents > 0' },
    {
      name: 'stripe_checkout_target',
      expression:
        '(wallet_user_id is null and paywall_id is not null and end_user_id is not null) or (wallet_user_id is not null and paywall_id is null and end_user_id is null)',
    },
  ],
  properties: {
    sessionId: p.text().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk().nullable().index(),
    endUser: () => p.manyToOne(EndUser).mapToPk().nullable(),
    walletUser: () => p.manyToOne(WalletUser).mapToPk().nullable().index(),
    status: p.string().length(16),
    amountCents: p.bigint('bigint'),
    transferId: p.uuid().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class StripeCheckout extends StripeCheckoutSchema.class {}
StripeCheckoutSchema.setClass(StripeCheckout);

/**
 * Stripe event ids already processed (unique): a repeated delivery is answered 200 and skipped.
 * `paywall` is null for events of the platform's own endpoint (wallet top-ups).
 */
export const StripeEventSchema = defineEntity({
  name: 'StripeEvent',
  tableName: 'stripe_event',
  properties: {
    eventId: p.text().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk().nullable(),
    type: p.text(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class StripeEvent extends StripeEventSchema.class {}
StripeEventSchema.setClass(StripeEvent);
