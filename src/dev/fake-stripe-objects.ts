// The Stripe objects the fake keeps (fake-stripe.ts), each with the key of the account that made it.

/** One request the fake received: method, path, the parsed form body (and query) and the bearer key. */
export interface FakeStripeRequest {
  method: string;
  path: string;
  body: Record<string, any>;
  apiKey: string | null;
  /** The `Idempotency-Key` header, when sent. */
  idempotencyKey: string | null;
}

export interface FakeEndpoint {
  id: string;
  url: string;
  enabled_events: string[];
  secret: string;
  deleted: boolean;
  /** The key that created it: Stripe sends an account's events to every endpoint of that account. */
  apiKey: string;
}

export interface FakeSession {
  id: string;
  url: string;
  amount_total: number;
  currency: string;
  mode: string;
  client_reference_id: string | null;
  metadata: Record<string, string>;
  success_url: string;
  cancel_url: string;
  /** Stripe's session status: `open` until paid (`complete`) or expired. */
  status: 'open' | 'complete' | 'expired';
  /** The customer the session pays as (`customer`), null without one. */
  customer: string | null;
  /** `payment_intent_data` as sent (`setup_future_usage`, `metadata`). */
  payment_intent_data: { setup_future_usage?: string; metadata?: Record<string, string> } | null;
  /** The session's PaymentIntent, once paid. */
  payment_intent: string | null;
  apiKey: string;
}

/** A Stripe customer (`POST /v1/customers`). */
export interface FakeCustomer {
  id: string;
  object: 'customer';
  email: string | null;
  name: string | null;
  description: string | null;
  metadata: Record<string, string>;
  created: number;
  livemode: false;
  apiKey: string;
}

/** A saved card (`pm_…`), attached to a customer when a Checkout with `setup_future_usage` is paid. */
export interface FakePaymentMethod {
  id: string;
  object: 'payment_method';
  type: 'card';
  card: {
    brand: string;
    last4: string;
    exp_month: number;
    exp_year: number;
    funding: string;
    country: string;
  };
  billing_details: { email: string | null; name: string | null };
  customer: string | null;
  created: number;
  livemode: false;
  metadata: Record<string, string>;
  apiKey: string;
}

/** A PaymentIntent (Checkout's, or one `POST /v1/payment_intents` created). */
export interface FakePaymentIntent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  customer: string | null;
  payment_method: string | null;
  status: 'succeeded' | 'requires_payment_method' | 'processing';
  metadata: Record<string, string>;
  setup_future_usage: string | null;
  off_session: boolean;
  last_payment_error: Record<string, unknown> | null;
  latest_charge: string | null;
  created: number;
  livemode: false;
  apiKey: string;
}

/** One event the fake sent (or holds, see {@link FakeStripe.holdEvents}). */
export interface FakeSentEvent {
  apiKey: string;
  type: string;
  payload: string;
}

/** The fake's bookkeeping (which key owns an object) is not part of Stripe's objects. */
export function withoutKey<T extends { apiKey: string }>(o: T): Omit<T, 'apiKey'> {
  const { apiKey: _key, ...rest } = o;
  return rest;
}
