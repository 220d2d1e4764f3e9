import Stripe from 'stripe';

/**
 * The events a Stripe events endpoint subscribes to (docs/stripe.md): the three Checkout events, and
 * the two PaymentIntent events of auto top-up (docs/reference.md §16).
 */
export const STRIPE_WEBHOOK_EVENTS = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
  'payment_intent.succeeded',
  'payment_intent.payment_failed',
] as const;

export interface CreatedWebhookEndpoint {
  id: string;
  /** The endpoint's signing secret (`whsec_…`): Stripe returns it only on creation. */
  secret: string;
}

export interface CheckoutRequest {
  amountCents: number;
  /** Names paywall and end user (our reference, see stripe-checkout.service.ts). */
  clientReferenceId: string;
  metadata: Record<string, string>;
  successUrl: string;
  cancelUrl: string;
  productName: string;
  /**
   * Auto top-up (docs/reference.md §16): the Stripe customer to pay as, and the card is saved to it
   * for later off-session payments (`payment_intent_data.setup_future_usage: "off_session"`).
   */
  saveCardFor?: string;
}

/** An off-session payment with a saved card (auto top-up). */
export interface OffSessionPayment {
  amountCents: number;
  customer: string;
  paymentMethod: string;
  metadata: Record<string, string>;
  description: string;
}

/**
 * What Stripe answered to an off-session payment: accepted (`succeeded`, or `processing`: the
 * `payment_intent.*` event tells the outcome either way), or refused for good (a card error such as a
 * decline or a required authentication, or a request Stripe refuses). Anything else (network, Stripe's
 * 5xx or 429) throws: the same idempotency key may be tried again.
 */
export type OffSessionResult =
  | { kind: 'accepted'; paymentIntentId: string; status: string }
  | { kind: 'failed'; paymentIntentId: string | null; code: string; message: string };

/** What fulfilment reads of a verified Stripe event. */
export interface VerifiedStripeEvent {
  id: string;
  type: string;
  session: {
    id: string;
    paymentStatus: string | null;
    amountTotal: number | null;
    currency: string | null;
    clientReferenceId: string | null;
    metadata: Record<string, string>;
  } | null;
  /** The PaymentIntent of a `payment_intent.*` event (null for other events). */
  paymentIntent: {
    id: string;
    status: string | null;
    amount: number | null;
    amountReceived: number | null;
    currency: string | null;
    customer: string | null;
    metadata: Record<string, string>;
    /** `last_payment_error.code` (and its message) of a failed payment. */
    failureCode: string | null;
    failureMessage: string | null;
  } | null;
}

/**
 * The small interface the rest of the service sees of Stripe (DESIGN "Integrations behind a small
 * interface"): connect (webhook endpoints), checkout, and webhook verification, over the official
 * `stripe` package. `apiBase` (STRIPE_API_BASE) points the library at another host (a fake in tests).
 */
export interface StripeGateway {
  createWebhookEndpoint(secretKey: string, url: string): Promise<CreatedWebhookEndpoint>;
  deleteWebhookEndpoint(secretKey: string, id: string): Promise<void>;
  createCheckoutSession(secretKey: string, req: CheckoutRequest): Promise<{ id: string; url: string }>;
  /**
   * Expires an open Checkout Session (nobody can pay it afterwards). false when Stripe says it is not
   * open any more (paid, expired) or unknown; throws on other failures.
   */
  expireCheckoutSession(secretKey: string, id: string): Promise<boolean>;
  /** Creates the Stripe customer of one end user or wallet user (auto top-up); returns its id. */
  createCustomer(
    secretKey: string,
    c: { email?: string; description: string; metadata: Record<string, string> },
    idempotencyKey: string,
  ): Promise<string>;
  /** The customer's saved cards (`pm_…`), newest first. */
  listCards(secretKey: string, customer: string): Promise<string[]>;
  /** An off-session PaymentIntent, confirmed at once; `idempotencyKey` makes a retry the same payment. */
  chargeOffSession(
    secretKey: string,
    p: OffSessionPayment,
    idempotencyKey: string,
  ): Promise<OffSessionResult>;
  /** Throws when the signature does not match the raw body (the library's own check). */
  verifyEvent(rawBody: Buffer, signature: string, endpointSecret: string): VerifiedStripeEvent;
}

export function createStripeGateway(apiBase: string | undefined): StripeGateway {
  const target = apiBase ? new URL(apiBase) : null;
  const client = (key: string) =>
    new Stripe(key, {
      maxNetworkRetries: 1,
      timeout: 20_000,
      telemetry: false,
      ...(target
        ? {
            host: target.hostname,
            port: target.port || (target.protocol === 'https:' ? 443 : 80),
            protocol: target.protocol.replace(':', '') as 'http' | 'https',
          }
        : {}),
    });
  // Verification needs no key; one instance serves every paywall.
  const verifier = new Stripe('sk_verify_only');
  return {
    async createWebhookEndpoint(secretKey, url) {
      const ep = await client(secretKey).webhookEndpoints.create({
        url,
        enabled_events: [...STRIPE_WEBHOOK_EVENTS],
        description: 'Paywall Proxy top-ups',
      });
      if (!ep.secret) throw new Error('Stripe returned a webhook endpoint without a secret');
      return { id: ep.id, secret: ep.secret };
    },
    async deleteWebhookEndpoint(secretKey, id) {
      try {
        await client(secretKey).webhookEndpoints.del(id);
      } catch (e: any) {
        // Already gone (deleted in the dashboard): the goal is reached.
        if (e?.statusCode !== 404) throw e;
      }
    },
    async createCheckoutSession(secretKey, req) {
      const session = await client(secretKey).checkout.sessions.create({
        mode: 'payment',
        client_reference_id: req.clientReferenceId,
        metadata: req.metadata,
        payment_intent_data: {
          metadata: req.metadata,
          ...(req.saveCardFor ? { setup_future_usage: 'off_session' as const } : {}),
        },
        ...(req.saveCardFor ? { customer: req.saveCardFor } : {}),
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: 'usd',
              unit_amount: req.amountCents,
              product_data: { name: req.productName },
            },
          },
        ],
        success_url: req.successUrl,
        cancel_url: req.cancelUrl,
      });
      if (!session.url) throw new Error('Stripe returned a Checkout Session without a url');
      return { id: session.id, url: session.url };
    },
    async expireCheckoutSession(secretKey, id) {
      try {
        await client(secretKey).checkout.sessions.expire(id);
        return true;
      } catch (e: any) {
        if (e?.statusCode === 400 || e?.statusCode === 404) return false;
        throw e;
      }
    },
    async createCustomer(secretKey, c, idempotencyKey) {
      const made = await client(secretKey).customers.create(
        { ...(c.email ? { email: c.email } : {}), description: c.description, metadata: c.metadata },
        { idempotencyKey },
      );
      return made.id;
    },
    async listCards(secretKey, customer) {
      const list = await client(secretKey).paymentMethods.list({ customer, type: 'card', limit: 10 });
      return list.data.map((m) => m.id);
    },
    async chargeOffSession(secretKey, p, idempotencyKey) {
      try {
        const pi = await client(secretKey).paymentIntents.create(
          {
            amount: p.amountCents,
            currency: 'usd',
            customer: p.customer,
            payment_method: p.paymentMethod,
            off_session: true,
            confirm: true,
            description: p.description,
            metadata: p.metadata,
          },
          { idempotencyKey },
        );
        return { kind: 'accepted', paymentIntentId: pi.id, status: pi.status };
      } catch (e: any) {
        // An off-session confirmation that fails answers 402 (StripeCardError) with the PaymentIntent in
        // the error; a request Stripe refuses (400, e.g. a detached card) will not succeed when repeated.
        if (e?.type === 'StripeCardError' || e?.type === 'StripeInvalidRequestError') {
          const pi = e.raw?.payment_intent ?? e.payment_intent;
          return {
            kind: 'failed',
            paymentIntentId: typeof pi?.id === 'string' ? pi.id : null,
            code: String(e.code ?? e.raw?.code ?? 'card_error'),
            message: String(e.message ?? 'The card was declined.'),
          };
        }
        throw e;
      }
    },
    verifyEvent(rawBody, signature, endpointSecret) {
      const event = verifier.webhooks.constructEvent(rawBody, signature, endpointSecret);
      const data = event.type.startsWith('checkout.session.') ? (event.data?.object as any) : null;
      // A signed event whose session has no id cannot be credited once per session: it is not a session.
      const obj = data && typeof data.id === 'string' && data.id !== '' ? data : null;
      const piData = event.type.startsWith('payment_intent.') ? (event.data?.object as any) : null;
      const pi = piData && typeof piData.id === 'string' && piData.id !== '' ? piData : null;
      const str = (v: unknown) => (typeof v === 'string' ? v : null);
      const int = (v: unknown) => (Number.isSafeInteger(v) ? (v as number) : null);
      return {
        id: event.id,
        type: event.type,
        paymentIntent: pi
          ? {
              id: String(pi.id),
              status: str(pi.status),
              amount: int(pi.amount),
              amountReceived: int(pi.amount_received),
              currency: str(pi.currency),
              customer: str(pi.customer) ?? str(pi.customer?.id),
              metadata: pi.metadata && typeof pi.metadata === 'object' ? pi.metadata : {},
              failureCode: str(pi.last_payment_error?.code),
              failureMessage: str(pi.last_payment_error?.message),
            }
          : null,
        session: obj
          ? {
              id: String(obj.id),
              paymentStatus: obj.payment_status ?? null,
              amountTotal: Number.isSafeInteger(obj.amount_total) ? obj.amount_total : null,
              currency: typeof obj.currency === 'string' ? obj.currency : null,
              clientReferenceId: obj.client_reference_id ?? null,
              metadata: obj.metadata && typeof obj.metadata === 'object' ? obj.metadata : {},
            }
          : null,
      };
    },
  };
}
