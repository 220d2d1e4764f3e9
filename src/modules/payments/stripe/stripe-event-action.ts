import type { VerifiedStripeEvent } from './stripe-gateway.js';
import { RAW_PER_CENT } from './stripe-amounts.js';

/**
 * Whether the endpoint that received an event owns the event's Checkout Session (found out in the
 * database by Stripe events ingest), and if not, why.
 */
export type SessionOwnership = { owned: true } | { owned: false; reason: string };

/**
 * What one verified Stripe event means for the endpoint that received it:
 * - `credit`: a paid session of this endpoint: credit `amountRaw` (cents x 10,000) once;
 * - `fail`: its asynchronous payment failed: the open session becomes `failed`;
 * - `pending`: completed but not paid yet (asynchronous payment): nothing to do;
 * - `ignore`: nothing to do, because of `reason`. With `record: false` the event is not this
 *   endpoint's (not recorded as processed here, so it never hides the event from the endpoint that owns
 *   it); with `record: true` it is, but cannot be credited (no positive amount, not USD).
 */
export type StripeEventAction =
  | { kind: 'credit'; sessionId: string; amountCents: number; amountRaw: bigint }
  | { kind: 'fail'; sessionId: string }
  | { kind: 'pending'; sessionId: string }
  | { kind: 'ignore'; reason: string; record: boolean };

export const NO_SESSION = 'it is not about a Checkout Session with an id';

/**
 * The action for a verified event, from the event and what the endpoint owns (`ownership`, null when
 * there was nothing to look up: the event has no session). Pure: no database, no clock.
 */
export function stripeEventAction(
  event: VerifiedStripeEvent,
  ownership: SessionOwnership | null,
): StripeEventAction {
  const session = event.session;
  if (!session || !ownership) return { kind: 'ignore', reason: NO_SESSION, record: false };
  if (!ownership.owned) return { kind: 'ignore', reason: ownership.reason, record: false };
  if (event.type === 'checkout.session.async_payment_failed') return { kind: 'fail', sessionId: session.id };
  const paid =
    (event.type === 'checkout.session.completed' && session.paymentStatus === 'paid') ||
    event.type === 'checkout.session.async_payment_succeeded';
  if (!paid) return { kind: 'pending', sessionId: session.id };
  const cents = session.amountTotal;
  if (!cents || cents <= 0)
    return { kind: 'ignore', reason: 'Stripe session has no positive amount; not credited', record: true };
  // The hosted pages only sell USD (1 cent = 10,000 raw units); any other currency has no rate here.
  if (session.currency !== 'usd')
    return { kind: 'ignore', reason: 'Stripe session is not in USD; not credited', record: true };
  return {
    kind: 'credit',
    sessionId: session.id,
    amountCents: cents,
    amountRaw: BigInt(cents) * RAW_PER_CENT,
  };
}
