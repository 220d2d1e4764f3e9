import { createStripeGateway } from '../src/modules/payments/stripe/stripe-gateway.js';
import {
  NO_SESSION,
  stripeEventAction,
  type SessionOwnership,
} from '../src/modules/payments/stripe/stripe-event-action.js';
import { checkoutEvent, signStripe } from './helpers/fake-stripe.js';

/**
 * Stripe webhook ingest's decision, without a database: a Stripe event payload (as Stripe sends it,
 * signed with the endpoint secret) goes through the gateway's verification, then the pure function
 * turns the verified event + what the endpoint owns into credit | fail | pending | ignore.
 */
const SECRET = 'whsec_unit_test_secret_1234567890';
const gateway = createStripeGateway(undefined);
const OWNED: SessionOwnership = { owned: true };
const session = {
  id: 'cs_test_a1',
  amount_total: 1050,
  currency: 'usd',
  client_reference_id: 'pw:alice',
  metadata: { paywallId: 'pw', user: 'alice' },
};

const verified = (payload: string) =>
  gateway.verifyEvent(Buffer.from(payload), signStripe(payload, SECRET), SECRET);

describe('stripeEventAction (Stripe events → ledger action)', () => {
  it('credits a paid completed session: 10.50 USD is 10,500,000 raw units', () => {
    const event = verified(checkoutEvent('checkout.session.completed', session, 'paid', 'evt_paid'));
    expect(event.id).toBe('evt_paid');
    expect(stripeEventAction(event, OWNED)).toEqual({
      kind: 'credit',
      sessionId: 'cs_test_a1',
      amountCents: 1050,
      amountRaw: 10_500_000n,
    });
  });

  it('credits a succeeded asynchronous payment', () => {
    const event = verified(checkoutEvent('checkout.session.async_payment_succeeded', session, 'paid'));
    expect(stripeEventAction(event, OWNED)).toMatchObject({ kind: 'credit', amountRaw: 10_500_000n });
  });

  it('a completed session not paid yet is pending; a failed asynchronous payment is fail', () => {
    const unpaid = verified(checkoutEvent('checkout.session.completed', session, 'unpaid'));
    expect(stripeEventAction(unpaid, OWNED)).toEqual({ kind: 'pending', sessionId: 'cs_test_a1' });
    const failed = verified(checkoutEvent('checkout.session.async_payment_failed', session, 'unpaid'));
    expect(stripeEventAction(failed, OWNED)).toEqual({ kind: 'fail', sessionId: 'cs_test_a1' });
  });

  it("another endpoint's session is ignored and not recorded, with the reason", () => {
    const event = verified(checkoutEvent('checkout.session.completed', session, 'paid'));
    expect(stripeEventAction(event, { owned: false, reason: 'started by another paywall' })).toEqual({
      kind: 'ignore',
      reason: 'started by another paywall',
      record: false,
    });
  });

  it('a paid session without a positive amount or not in USD is recorded but not credited', () => {
    const zero = verified(
      checkoutEvent('checkout.session.completed', { ...session, amount_total: 0 }, 'paid'),
    );
    expect(stripeEventAction(zero, OWNED)).toEqual({
      kind: 'ignore',
      reason: 'Stripe session has no positive amount; not credited',
      record: true,
    });
    const eur = verified(
      checkoutEvent('checkout.session.completed', { ...session, currency: 'eur' }, 'paid'),
    );
    expect(stripeEventAction(eur, OWNED)).toEqual({
      kind: 'ignore',
      reason: 'Stripe session is not in USD; not credited',
      record: true,
    });
  });

  it('an event that is not about a Checkout Session is ignored and not recorded', () => {
    const payload = JSON.stringify({
      id: 'evt_pi',
      object: 'event',
      type: 'payment_intent.succeeded',
      data: { object: { id: 'pi_1', object: 'payment_intent', amount: 1050 } },
    });
    const event = verified(payload);
    expect(event.session).toBeNull();
    expect(stripeEventAction(event, null)).toEqual({ kind: 'ignore', reason: NO_SESSION, record: false });
  });

  it('a payload changed after signing never becomes an action: verification throws', () => {
    const payload = checkoutEvent('checkout.session.completed', session, 'paid');
    const signature = signStripe(payload, SECRET);
    const forged = payload.replace('"amount_total":1050', '"amount_total":999999');
    expect(forged).not.toBe(payload);
    expect(() => gateway.verifyEvent(Buffer.from(forged), signature, SECRET)).toThrow();
  });
});
