import Stripe from 'stripe';

/** The three Checkout events a Stripe events endpoint subscribes to (docs/stripe.md). */
export const STRIPE_WEBHOOK_EVENTS = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
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
}

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
        payment_intent_data: { metadata: req.metadata },
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
    verifyEvent(rawBody, signature, endpointSecret) {
      const event = verifier.webhooks.constructEvent(rawBody, signature, endpointSecret);
      const data = event.type.startsWith('checkout.session.') ? (event.data?.object as any) : null;
      // A signed event whose session has no id cannot be credited once per session: it is not a session.
      const obj = data && typeof data.id === 'string' && data.id !== '' ? data : null;
      return {
        id: event.id,
        type: event.type,
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
