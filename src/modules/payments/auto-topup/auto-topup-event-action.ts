import type { VerifiedStripeEvent } from '../stripe/stripe-gateway.js';
import { RAW_PER_CENT } from '../stripe/stripe-amounts.js';

/**
 * Whether the endpoint that received a `payment_intent.*` event owns its PaymentIntent: an auto top-up
 * attempt of this endpoint (a paywall's end user on the paywall's endpoint, a wallet on the platform's),
 * found in the database by Stripe webhook ingest; if not, why.
 */
export type PaymentIntentOwnership = { owned: true; attemptId: string } | { owned: false; reason: string };

/**
 * What one verified `payment_intent.*` event means for the endpoint that received it, normalized like
 * the Checkout events (stripe-event-action.ts):
 * - `credit`: the auto top-up's PaymentIntent succeeded: credit `amountRaw` (cents x 10,000) once;
 * - `fail`: its payment failed: the attempt fails (a failure in a row);
 * - `pending`: neither (still processing): nothing to do;
 * - `ignore`: nothing to do, because of `reason`; `record: false` when it is not this endpoint's.
 */
export type PaymentIntentAction =
  | { kind: 'credit'; paymentIntentId: string; attemptId: string; amountCents: number; amountRaw: bigint }
  | { kind: 'fail'; paymentIntentId: string; attemptId: string; code: string; message: string }
  | { kind: 'pending'; paymentIntentId: string }
  | { kind: 'ignore'; reason: string; record: boolean };

export const NO_PAYMENT_INTENT = 'it is not about a PaymentIntent with an id';
/** Checkout's own PaymentIntents (and any other of the account) carry no auto top-up attempt. */
export const NOT_AUTO_TOPUP =
  'the PaymentIntent is not an auto top-up of this server (a Checkout payment is credited by its session)';

/** The action for a verified event and what the endpoint owns (null: nothing to look up). Pure. */
export function paymentIntentAction(
  event: VerifiedStripeEvent,
  ownership: PaymentIntentOwnership | null,
): PaymentIntentAction {
  const pi = event.paymentIntent;
  if (!pi || !ownership) return { kind: 'ignore', reason: NO_PAYMENT_INTENT, record: false };
  if (!ownership.owned) return { kind: 'ignore', reason: ownership.reason, record: false };
  if (event.type === 'payment_intent.payment_failed')
    return {
      kind: 'fail',
      paymentIntentId: pi.id,
      attemptId: ownership.attemptId,
      code: pi.failureCode ?? 'payment_failed',
      message: pi.failureMessage ?? 'The payment failed.',
    };
  if (event.type !== 'payment_intent.succeeded' || pi.status !== 'succeeded')
    return { kind: 'pending', paymentIntentId: pi.id };
  const cents = pi.amountReceived && pi.amountReceived > 0 ? pi.amountReceived : pi.amount;
  if (!cents || cents <= 0)
    return {
      kind: 'ignore',
      reason: 'Stripe PaymentIntent has no positive amount; not credited',
      record: true,
    };
  if (pi.currency !== 'usd')
    return { kind: 'ignore', reason: 'Stripe PaymentIntent is not in USD; not credited', record: true };
  return {
    kind: 'credit',
    paymentIntentId: pi.id,
    attemptId: ownership.attemptId,
    amountCents: cents,
    amountRaw: BigInt(cents) * RAW_PER_CENT,
  };
}
