import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import type { FakePaymentIntent, FakeSession } from './fake-stripe-objects.js';

const signer = new Stripe('sk_test_signer');

/** The envelope of an event as Stripe POSTs it, around `object`. */
const stripeEvent = (type: string, eventId: string, object: Record<string, unknown>): string =>
  JSON.stringify({
    id: eventId,
    object: 'event',
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    type,
    livemode: false,
    data: { object },
  });

/** A Stripe event about a Checkout Session, as Stripe would POST it. */
export function checkoutEvent(
  type: string,
  session: Partial<FakeSession> & { id: string },
  paymentStatus: 'paid' | 'unpaid' | 'no_payment_required',
  eventId = `evt_${randomBytes(12).toString('hex')}`,
): string {
  // The fake's own bookkeeping is not part of Stripe's session object.
  const { apiKey: _key, status: _status, payment_intent_data: _data, ...fields } = session;
  return stripeEvent(type, eventId, {
    object: 'checkout.session',
    status: paymentStatus === 'paid' ? 'complete' : 'open',
    payment_status: paymentStatus,
    ...fields,
  });
}

/** A Stripe event about a PaymentIntent (`payment_intent.succeeded`, `…payment_failed`), as Stripe would POST it. */
export function paymentIntentEvent(
  type: string,
  pi: Omit<FakePaymentIntent, 'apiKey' | 'off_session'> & { apiKey?: string; off_session?: boolean },
  eventId = `evt_${randomBytes(12).toString('hex')}`,
): string {
  const { apiKey: _key, off_session: _off, ...fields } = pi;
  return stripeEvent(type, eventId, {
    ...fields,
    client_secret: `${pi.id}_secret_${pi.id.slice(3, 11)}`,
    capture_method: 'automatic_async',
    confirmation_method: 'automatic',
    payment_method_types: ['card'],
  });
}

/** The `Stripe-Signature` header for `payload`, signed like Stripe does (the library's own helper). */
export const signStripe = (payload: string, secret: string): string =>
  signer.webhooks.generateTestHeaderString({ payload, secret });
