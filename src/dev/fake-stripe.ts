import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

/** One request the fake received: method, path, the parsed form body and the bearer key. */
export interface FakeStripeRequest {
  method: string;
  path: string;
  body: Record<string, any>;
  apiKey: string | null;
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
  apiKey: string;
}

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

const stripeError = (message: string) => ({
  error: { type: 'invalid_request_error', message },
});

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
        const path = (req.url ?? '').split('?')[0];
        const auth = req.headers.authorization ?? '';
        const apiKey = auth.startsWith('Bearer ') ? auth.slice(7) : null;
        const body = parseStripeForm(Buffer.concat(chunks).toString('utf8'));
        const send = (status: number, json: unknown) =>
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
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
          const payload = checkoutEvent('checkout.session.completed', s, 'paid');
          this.deliver(s.apiKey, payload)
            .then((sent) => {
              this.onDelivered?.(s, sent);
              res.writeHead(303, { location: s.success_url }).end();
            })
            .catch((err) => res.writeHead(502, { 'content-type': 'text/plain' }).end(String(err)));
          return;
        }
        this.requests.push({ method: req.method ?? '', path, body, apiKey });
        if (!apiKey || this.badKeys.has(apiKey)) return send(401, stripeError('Invalid API Key provided'));
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
            apiKey,
          };
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

  private shown(s: FakeSession) {
    const { apiKey: _key, ...rest } = s;
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
    let targets = this.liveEndpoints().filter((e) => e.apiKey === apiKey);
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

const signer = new Stripe('sk_test_signer');

/** A Stripe event about a Checkout Session, as Stripe would POST it. */
export function checkoutEvent(
  type: string,
  session: Partial<FakeSession> & { id: string },
  paymentStatus: 'paid' | 'unpaid' | 'no_payment_required',
  eventId = `evt_${randomBytes(12).toString('hex')}`,
): string {
  // The fake's own bookkeeping is not part of Stripe's session object.
  const { apiKey: _key, status: _status, ...fields } = session;
  return JSON.stringify({
    id: eventId,
    object: 'event',
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    type,
    livemode: false,
    data: {
      object: {
        object: 'checkout.session',
        status: paymentStatus === 'paid' ? 'complete' : 'open',
        payment_status: paymentStatus,
        ...fields,
      },
    },
  });
}

/** The `Stripe-Signature` header for `payload`, signed like Stripe does (the library's own helper). */
export const signStripe = (payload: string, secret: string): string =>
  signer.webhooks.generateTestHeaderString({ payload, secret });
