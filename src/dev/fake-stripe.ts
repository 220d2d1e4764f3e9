import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  withoutKey,
  type FakeCustomer,
  type FakeEndpoint,
  type FakePaymentIntent,
  type FakePaymentMethod,
  type FakeSentEvent,
  type FakeSession,
  type FakeStripeRequest,
} from './fake-stripe-objects.js';
import { checkoutEvent, paymentIntentEvent, signStripe } from './fake-stripe-events.js';

/** Stripe's form encoding (`a[b][0]=x`) back into nested objects and arrays. */
export function parseStripeForm(text: string): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const parts = key.split(/\[|\]\[|\]/).filter((p) => p !== '');
    let node: any = out;
    parts.forEach((part, i) => {
      const last = i === parts.length - 1;
      const nextIsIndex = !last && /^\d+$/.test(parts[i + 1]);
      if (last) node[part] = value;
      else node = node[part] ??= nextIsIndex ? [] : {};
    });
  }
  return out;
}

const escapeHtml = (s: string) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const stripeError = (message: string, param?: string, code?: string) => ({
  error: { type: 'invalid_request_error', message, ...(param ? { param } : {}), ...(code ? { code } : {}) },
});

/** What Stripe says for each decline code the tests use (docs.stripe.com/declines/codes). */
const DECLINE_MESSAGES: Record<string, string> = {
  card_declined: 'Your card was declined.',
  insufficient_funds: 'Your card has insufficient funds.',
  expired_card: 'Your card has expired.',
  authentication_required: 'Your card was declined. This transaction requires authentication.',
};

/**
 * Development and tests only; the service never imports this file. `npm run fake-stripe` runs it
 * (fake-stripe-cli.ts) for a local top-up without a Stripe account (README "Quick start: Stripe").
 *
 * A fake Stripe on loopback speaking what the `stripe` package calls here: POST/DELETE
 * /v1/webhook_endpoints, POST /v1/checkout/sessions and POST /v1/checkout/sessions/:id/expire,
 * form-encoded bodies, every request recorded. Checkout URLs point at the fake itself
 * (`GET /checkout/:id` answers a small "Stripe Checkout" page). {@link FakeStripe.deliver} sends one
 * event to every live endpoint of an account, each signed with its own secret, as Stripe does.
 */
export class FakeStripe {
  readonly requests: FakeStripeRequest[] = [];
  readonly endpoints = new Map<string, FakeEndpoint>();
  readonly sessions = new Map<string, FakeSession>();
  readonly customers = new Map<string, FakeCustomer>();
  readonly paymentMethods = new Map<string, FakePaymentMethod>();
  readonly paymentIntents = new Map<string, FakePaymentIntent>();
  /**
   * Customers whose saved cards decline off-session payments, with the error code Stripe gives
   * (`card_declined`, `authentication_required`, …): the create call then fails with a 402 card error
   * and `payment_intent.payment_failed` is sent.
   */
  readonly declines = new Map<string, string>();
  /** Every event the fake sent or holds (`payment_intent.*` from API calls, and Checkout payments). */
  readonly events: FakeSentEvent[] = [];
  /**
   * When true, events of PaymentIntents created through the API are kept in {@link held} instead of
   * being sent (a test then delivers them itself, as often and as concurrently as it likes).
   */
  holdEvents = false;
  readonly held: FakeSentEvent[] = [];
  /** Responses already given per (key, `Idempotency-Key`): Stripe replays them for a repeated key. */
  private readonly idempotent = new Map<string, { status: number; json: unknown }>();
  /** Deliveries started in the background (after an API call answered), awaited by {@link settled}. */
  private readonly background = new Set<Promise<unknown>>();
  /** Keys that the fake refuses with 401 (a revoked or mistyped key). */
  readonly badKeys = new Set<string>();
  private server?: Server;
  url = '';
  /** Called after a fake payment's event was delivered (the command-line runner logs it). */
  onDelivered?: (session: FakeSession, sent: [string, number][]) => void;

  /** Listens on 127.0.0.1 (`port` 0: any free port). */
  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const [path, query = ''] = (req.url ?? '').split('?');
        const auth = req.headers.authorization ?? '';
        const apiKey = auth.startsWith('Bearer ') ? auth.slice(7) : null;
        const body = {
          ...parseStripeForm(query),
          ...parseStripeForm(Buffer.concat(chunks).toString('utf8')),
        };
        const idempotencyKey = req.headers['idempotency-key'];
        const replayKey =
          req.method === 'POST' && typeof idempotencyKey === 'string' ? `${apiKey}\n${idempotencyKey}` : null;
        const send = (status: number, json: unknown) => {
          if (replayKey) this.idempotent.set(replayKey, { status, json });
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
        };
        if (req.method === 'GET' && path.startsWith('/checkout/')) {
          const s = this.sessions.get(path.slice('/checkout/'.length));
          const amount = s ? `${(s.amount_total / 100).toFixed(2)} ${String(s.currency).toUpperCase()}` : '';
          res
            .writeHead(s ? 200 : 404, { 'content-type': 'text/html' })
            .end(
              `<!doctype html><html><head><title>Fake Stripe Checkout</title></head><body style="font-family:sans-serif;padding:2rem"><h1>Fake Stripe Checkout</h1>` +
                (s
                  ? `<p id="amount">Pay ${amount}</p><p id="session">${s.id}</p><p id="status">${s.status}</p>` +
                    (s.status === 'open'
                      ? `<form method="post" action="/checkout/${s.id}/pay"><button type="submit">Pay ${amount} (fake card)</button></form>` +
                        `<p><a href="${escapeHtml(s.cancel_url)}">Cancel</a></p>`
                      : '')
                  : '<p>unknown session</p>') +
                `</body></html>`,
            );
          return;
        }
        const payPath = /^\/checkout\/([\w]+)\/pay$/.exec(path);
        if (req.method === 'POST' && payPath) {
          // The fake's "card payment": the session completes and its event goes to every endpoint.
          const s = this.sessions.get(payPath[1]);
          if (!s || s.status !== 'open')
            return void res.writeHead(404, { 'content-type': 'text/plain' }).end('no open session');
          s.status = 'complete';
          // The session's PaymentIntent; with `setup_future_usage` and a customer, the card is saved to
          // the customer (Stripe attaches the payment method when the payment succeeds).
          const saves = !!s.customer && !!s.payment_intent_data?.setup_future_usage;
          const pm = this.newPaymentMethod(s.apiKey, saves ? s.customer : null);
          const pi = this.newPaymentIntent(s.apiKey, {
            amount: s.amount_total,
            currency: s.currency,
            customer: s.customer,
            payment_method: pm.id,
            metadata: s.payment_intent_data?.metadata ?? {},
            setup_future_usage: s.payment_intent_data?.setup_future_usage ?? null,
            off_session: false,
          });
          s.payment_intent = pi.id;
          const payload = checkoutEvent('checkout.session.completed', s, 'paid');
          this.record(s.apiKey, 'checkout.session.completed', payload);
          const piPayload = paymentIntentEvent('payment_intent.succeeded', pi);
          this.record(s.apiKey, 'payment_intent.succeeded', piPayload);
          this.deliver(s.apiKey, payload)
            .then(async (sent) => {
              // Stripe also tells the account's endpoints that the session's PaymentIntent succeeded.
              sent.push(...(await this.deliver(s.apiKey, piPayload)));
              this.onDelivered?.(s, sent);
              res.writeHead(303, { location: s.success_url }).end();
            })
            .catch((err) => res.writeHead(502, { 'content-type': 'text/plain' }).end(String(err)));
          return;
        }
        this.requests.push({
          method: req.method ?? '',
          path,
          body,
          apiKey,
          idempotencyKey: typeof idempotencyKey === 'string' ? idempotencyKey : null,
        });
        if (!apiKey || this.badKeys.has(apiKey)) return send(401, stripeError('Invalid API Key provided'));
        const replay = replayKey ? this.idempotent.get(replayKey) : undefined;
        if (replay)
          return void res
            .writeHead(replay.status, { 'content-type': 'application/json', 'idempotent-replayed': 'true' })
            .end(JSON.stringify(replay.json));
        if (req.method === 'POST' && path === '/v1/webhook_endpoints') {
          const ep: FakeEndpoint = {
            id: `we_${randomBytes(8).toString('hex')}`,
            url: body.url,
            enabled_events: body.enabled_events ?? [],
            secret: `whsec_${randomBytes(16).toString('hex')}`,
            deleted: false,
            apiKey,
          };
          this.endpoints.set(ep.id, ep);
          const { apiKey: _key, ...shown } = ep;
          return send(200, { object: 'webhook_endpoint', status: 'enabled', ...shown });
        }
        const del = /^\/v1\/webhook_endpoints\/([\w]+)$/.exec(path);
        if (req.method === 'DELETE' && del) {
          const ep = this.endpoints.get(del[1]);
          if (!ep || ep.deleted) return send(404, stripeError('No such webhook endpoint'));
          ep.deleted = true;
          return send(200, { id: ep.id, object: 'webhook_endpoint', deleted: true });
        }
        if (req.method === 'POST' && path === '/v1/checkout/sessions') {
          const item = body.line_items?.[0];
          const id = `cs_test_${randomBytes(12).toString('hex')}`;
          const s: FakeSession = {
            id,
            url: `${this.url}/checkout/${id}`,
            amount_total: Number(item?.price_data?.unit_amount) * Number(item?.quantity ?? 1),
            currency: item?.price_data?.currency,
            mode: body.mode,
            client_reference_id: body.client_reference_id ?? null,
            metadata: body.metadata ?? {},
            success_url: body.success_url,
            cancel_url: body.cancel_url,
            status: 'open',
            customer: typeof body.customer === 'string' ? body.customer : null,
            payment_intent_data: body.payment_intent_data ?? null,
            payment_intent: null,
            apiKey,
          };
          if (s.customer && this.customers.get(s.customer)?.apiKey !== apiKey)
            return send(
              400,
              stripeError(`No such customer: '${s.customer}'`, 'customer', 'resource_missing'),
            );
          this.sessions.set(id, s);
          return send(200, this.shown(s));
        }
        const expire = /^\/v1\/checkout\/sessions\/([\w]+)\/expire$/.exec(path);
        if (req.method === 'POST' && expire) {
          const s = this.sessions.get(expire[1]);
          if (!s || s.apiKey !== apiKey)
            return send(404, stripeError(`No such checkout.session: '${expire[1]}'`));
          if (s.status !== 'open')
            return send(400, stripeError('Only Checkout Sessions with a status in ["open"] can be expired.'));
          s.status = 'expired';
          return send(200, this.shown(s));
        }
        if (req.method === 'POST' && path === '/v1/customers') {
          const c: FakeCustomer = {
            id: `cus_${randomBytes(7).toString('hex')}`,
            object: 'customer',
            email: body.email ?? null,
            name: body.name ?? null,
            description: body.description ?? null,
            metadata: body.metadata ?? {},
            created: Math.floor(Date.now() / 1000),
            livemode: false,
            apiKey,
          };
          this.customers.set(c.id, c);
          return send(200, withoutKey(c));
        }
        const cus = /^\/v1\/customers\/([\w]+)$/.exec(path);
        if (req.method === 'GET' && cus) {
          const c = this.customers.get(cus[1]);
          if (!c || c.apiKey !== apiKey)
            return send(404, stripeError(`No such customer: '${cus[1]}'`, 'id', 'resource_missing'));
          return send(200, withoutKey(c));
        }
        if (req.method === 'GET' && path === '/v1/payment_methods') {
          const data = [...this.paymentMethods.values()]
            .filter(
              (m) =>
                m.apiKey === apiKey && m.customer === body.customer && (!body.type || m.type === body.type),
            )
            .reverse()
            .map(withoutKey);
          return send(200, { object: 'list', data, has_more: false, url: '/v1/payment_methods' });
        }
        if (req.method === 'POST' && path === '/v1/payment_intents')
          return this.createPaymentIntent(apiKey, body, send);
        send(404, stripeError(`Unrecognized request URL (${req.method}: ${path})`));
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', resolve);
    });
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    if (this.server) await new Promise((r) => this.server!.close(r));
  }

  /** The endpoints not deleted. */
  liveEndpoints(): FakeEndpoint[] {
    return [...this.endpoints.values()].filter((e) => !e.deleted);
  }

  /** Registers an endpoint made outside the API (the platform's, created in Stripe's dashboard). */
  addEndpoint(ep: Omit<FakeEndpoint, 'deleted' | 'id'> & { id?: string }): FakeEndpoint {
    const made: FakeEndpoint = { id: ep.id ?? `we_${randomBytes(8).toString('hex')}`, deleted: false, ...ep };
    this.endpoints.set(made.id, made);
    return made;
  }

  /** Resolves once every event delivery the fake started in the background has finished. */
  async settled(): Promise<void> {
    while (this.background.size) await Promise.allSettled([...this.background]);
  }

  /** The PaymentIntents created through `POST /v1/payment_intents` (not Checkout's), oldest first. */
  apiPaymentIntents(): FakePaymentIntent[] {
    return [...this.paymentIntents.values()].filter((p) => p.off_session);
  }

  private record(apiKey: string, type: string, payload: string): FakeSentEvent {
    const e = { apiKey, type, payload };
    this.events.push(e);
    return e;
  }

  private newPaymentMethod(apiKey: string, customer: string | null): FakePaymentMethod {
    const pm: FakePaymentMethod = {
      id: `pm_${randomBytes(12).toString('hex')}`,
      object: 'payment_method',
      type: 'card',
      card: { brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2034, funding: 'credit', country: 'US' },
      billing_details: { email: null, name: null },
      customer,
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      metadata: {},
      apiKey,
    };
    this.paymentMethods.set(pm.id, pm);
    return pm;
  }

  private newPaymentIntent(
    apiKey: string,
    p: Pick<
      FakePaymentIntent,
      | 'amount'
      | 'currency'
      | 'customer'
      | 'payment_method'
      | 'metadata'
      | 'setup_future_usage'
      | 'off_session'
    >,
  ): FakePaymentIntent {
    const pi: FakePaymentIntent = {
      id: `pi_${randomBytes(12).toString('hex')}`,
      object: 'payment_intent',
      ...p,
      amount_received: p.amount,
      status: 'succeeded',
      last_payment_error: null,
      latest_charge: `ch_${randomBytes(12).toString('hex')}`,
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      apiKey,
    };
    this.paymentIntents.set(pi.id, pi);
    return pi;
  }

  /**
   * `POST /v1/payment_intents` with `confirm=true`: an off-session payment with a saved card. It
   * succeeds (200, `status: "succeeded"`, then `payment_intent.succeeded`), or, for a customer in
   * {@link declines}, fails as Stripe fails an off-session confirmation: 402 with a `card_error` whose
   * `payment_intent` is the PaymentIntent (`status: "requires_payment_method"`, `last_payment_error`),
   * which the library raises as a StripeCardError, then `payment_intent.payment_failed`. The events go
   * out after the answer (Stripe sends them asynchronously), or into {@link held}.
   */
  private createPaymentIntent(
    apiKey: string,
    body: Record<string, any>,
    send: (s: number, j: unknown) => void,
  ) {
    const amount = Number(body.amount);
    if (!Number.isSafeInteger(amount) || amount < 50)
      return send(400, stripeError('Amount must be at least $0.50 usd', 'amount', 'amount_too_small'));
    if (typeof body.currency !== 'string')
      return send(400, stripeError('Missing required param: currency.', 'currency', 'parameter_missing'));
    const customer = typeof body.customer === 'string' ? body.customer : null;
    if (customer && this.customers.get(customer)?.apiKey !== apiKey)
      return send(400, stripeError(`No such customer: '${customer}'`, 'customer', 'resource_missing'));
    const pm =
      typeof body.payment_method === 'string' ? this.paymentMethods.get(body.payment_method) : undefined;
    if (body.payment_method && (!pm || pm.apiKey !== apiKey))
      return send(
        400,
        stripeError(`No such PaymentMethod: '${body.payment_method}'`, 'payment_method', 'resource_missing'),
      );
    if (pm && pm.customer !== customer)
      return send(
        400,
        stripeError(
          `The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again.`,
          'payment_method',
        ),
      );
    const pi = this.newPaymentIntent(apiKey, {
      amount,
      currency: body.currency,
      customer,
      payment_method: pm?.id ?? null,
      metadata: body.metadata ?? {},
      setup_future_usage: null,
      off_session:
        body.off_session === 'true' || body.off_session === 'one_off' || body.off_session === 'recurring',
    });
    const decline = customer ? this.declines.get(customer) : undefined;
    if (decline || !pm) {
      const code = pm ? decline! : 'payment_method_required';
      pi.status = 'requires_payment_method';
      pi.amount_received = 0;
      const error = {
        type: pm ? 'card_error' : 'invalid_request_error',
        code,
        ...(pm && code !== 'authentication_required' ? { decline_code: 'generic_decline' } : {}),
        ...(code === 'authentication_required' ? { decline_code: 'authentication_required' } : {}),
        message: DECLINE_MESSAGES[code] ?? 'Your card was declined.',
        ...(pm ? { charge: pi.latest_charge, payment_method: withoutKey(pm) } : {}),
        doc_url: `https://stripe.com/docs/error-codes/${code.replace(/_/g, '-')}`,
      };
      pi.last_payment_error = error;
      send(pm ? 402 : 400, { error: { ...error, payment_intent: this.shownIntent(pi) } });
      this.emit(
        apiKey,
        'payment_intent.payment_failed',
        paymentIntentEvent('payment_intent.payment_failed', pi),
      );
      return;
    }
    send(200, this.shownIntent(pi));
    this.emit(apiKey, 'payment_intent.succeeded', paymentIntentEvent('payment_intent.succeeded', pi));
  }

  /** Records an event and sends it after the current answer (or holds it, see {@link holdEvents}). */
  private emit(apiKey: string, type: string, payload: string): void {
    const e = this.record(apiKey, type, payload);
    if (this.holdEvents) {
      this.held.push(e);
      return;
    }
    const p: Promise<unknown> = new Promise((r) => setTimeout(r, 5))
      .then(() => this.deliver(apiKey, payload))
      .catch(() => undefined)
      .finally(() => this.background.delete(p));
    this.background.add(p);
  }

  private shownIntent(pi: FakePaymentIntent) {
    const { apiKey: _key, off_session: _off, ...rest } = pi;
    return {
      ...rest,
      client_secret: `${pi.id}_secret_${pi.id.slice(3, 11)}`,
      capture_method: 'automatic_async',
      confirmation_method: 'automatic',
      payment_method_types: ['card'],
    };
  }

  private shown(s: FakeSession) {
    const { apiKey: _key, payment_intent_data: _data, ...rest } = s;
    return {
      object: 'checkout.session',
      payment_status: s.status === 'complete' ? 'paid' : 'unpaid',
      ...rest,
    };
  }

  /**
   * Sends `payload` (one event) to every live endpoint of the account of `apiKey`, each signed with its
   * own secret, in the order given by `order` (endpoint ids; default creation order). Returns
   * `[endpointId, status]` per delivery.
   */
  async deliver(apiKey: string, payload: string, order?: string[]): Promise<[string, number][]> {
    // Stripe sends an event only to the endpoints that enabled its type (or `*`).
    const type = (JSON.parse(payload) as { type?: string }).type ?? '';
    let targets = this.liveEndpoints().filter(
      (e) => e.apiKey === apiKey && (e.enabled_events.includes('*') || e.enabled_events.includes(type)),
    );
    if (order) targets = order.map((id) => targets.find((e) => e.id === id)!).filter(Boolean);
    const out: [string, number][] = [];
    for (const ep of targets) {
      const r = await fetch(ep.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': signStripe(payload, ep.secret) },
        body: payload,
      });
      await r.arrayBuffer();
      out.push([ep.id, r.status]);
    }
    return out;
  }
}
