import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../../paywalls/paywall.entity.js';
import { EndUser } from '../../users/end-user.entity.js';
import { WalletUser } from '../../wallet/wallet.entity.js';

/**
 * A paywall's Stripe account (docs/stripe.md): the secret key and the webhook endpoint's signing secret
 * are AES-256-GCM ciphertext (shared/crypto.ts, bound to the paywall id), never returned.
 * `topup_amounts_cents` are the amounts the hosted top-up page offers, in US cents.
 * `previous_*`: the endpoint a rotation replaced, kept (and its secret still verifying) until
 * `previous_secret_expires_at`, so Stripe's retries of events sent to it still land (docs/stripe.md).
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
    previousWebhookEndpointId: p.text().nullable(),
    previousWebhookSecretCiphertext: p.text().nullable(),
    previousSecretExpiresAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class StripeIntegration extends StripeIntegrationSchema.class {}
StripeIntegrationSchema.setClass(StripeIntegration);

/**
 * One Stripe Checkout Session: of an end user of a DEFAULT paywall (`paywall` + `external_id`; `end_user`
 * once the user exists — the hosted page creates nobody, the first paid session does), or of a hosted
 * wallet (`wallet_user`, paid with the platform's key). The session id is unique: fulfilment updates this
 * row in the statement that writes the deposit transfer, so a session is credited exactly once however
 * often (or concurrently) its events arrive. Status: `open` → `paid`, `failed` or `expired` (expired by
 * `disconnectStripe`).
 */
export const StripeCheckoutSchema = defineEntity({
  name: 'StripeCheckout',
  tableName: 'stripe_checkout',
  checks: [
    { name: 'stripe_checkout_status', expression: `status in ('open', 'paid', 'failed', 'expired')` },
    { name: 'stripe_checkout_amount_positive', expression: 'amount_cents > 0' },
    {
      name: 'stripe_checkout_target',
      expression:
        '(wallet_user_id is null and paywall_id is not null and (end_user_id is not null or external_id is not null)) or (wallet_user_id is not null and paywall_id is null and end_user_id is null and external_id is null)',
    },
  ],
  properties: {
    sessionId: p.text().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk().nullable().index(),
    endUser: () => p.manyToOne(EndUser).mapToPk().nullable(),
    externalId: p.string().length(256).nullable(),
    walletUser: () => p.manyToOne(WalletUser).mapToPk().nullable().index(),
    status: p.string().length(16),
    amountCents: p.bigint('bigint'),
    transferId: p.uuid().nullable(),
    /**
     * Auto top-up asked for with this Checkout ("Top up automatically" ticked, docs/reference.md §16):
     * the Stripe customer the card is saved to, and the settings turned on when the session is paid.
     */
    stripeCustomerId: p.text().nullable(),
    autoTopup: p
      .json<{ thresholdRaw: string; amountCents: number; monthlyCapCents: number }>()
      .columnType('jsonb')
      .nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class StripeCheckout extends StripeCheckoutSchema.class {}
StripeCheckoutSchema.setClass(StripeCheckout);

/**
 * Stripe events already processed, per receiving endpoint (`endpoint`: the paywall id, or `wallet` for
 * the platform's own endpoint): a repeated delivery to that endpoint is answered 200 and skipped. Stripe
 * sends the same event id to every endpoint of an account, so the key is (endpoint, event id), and only
 * events about a session the endpoint owns are recorded. `paywall` is null for the platform's endpoint.
 */
export const StripeEventSchema = defineEntity({
  name: 'StripeEvent',
  tableName: 'stripe_event',
  properties: {
    endpoint: p.text().primary(),
    eventId: p.text().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk().nullable(),
    type: p.text(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class StripeEvent extends StripeEventSchema.class {}
StripeEventSchema.setClass(StripeEvent);
