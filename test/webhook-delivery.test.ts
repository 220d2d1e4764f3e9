import { createHmac, timingSafeEqual } from 'node:crypto';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, MODEL } from './helpers/proxy-setup.js';
import { createSubscription, WebhookReceiver, type Received } from './helpers/webhook-receiver.js';
import {
  backoffDelay,
  decideOutcome,
  DeliveryWorker,
  MAX_RETRY_AFTER_MS,
  retryAfterDelay,
} from '../src/modules/webhooks/delivery-worker.js';
import { isFreshTimestamp, sign, verifySignature } from '../src/modules/webhooks/signing.js';
import { WebhookSender, type SendResult } from '../src/modules/webhooks/webhook-sender.js';
import { loadSecretBox } from '../src/shared/crypto.js';
import { createLogger } from '../src/shared/logger.js';

/**
 * The README's verification recipe, verbatim: HMAC-SHA256 over the raw body with the subscription secret,
 * hex, compared in constant time. Deliberately not the service's own helper: this is the integrator's code.
 */
function verifyWebhook(secret: string, rawBody: Buffer, signatureHeader: string | undefined): boolean {
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  const given = Buffer.from(signatureHeader ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const BASE_MS = 100;
const MAX_ATTEMPTS = 4;
const TIMEOUT_MS = 1000;

interface DeliveryRow {
  id: string;
  status: string;
  attempts: number;
  response_status: number | null;
  response_latency_ms: number | null;
  response_body: string | null;
  last_error: string | null;
  lease_until: Date | null;
  next_attempt_at: Date | null;
}

let t: TestApp;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  t = await startTestApp({
    WEBHOOK_BACKOFF_BASE_MS: String(BASE_MS),
    WEBHOOK_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    WEBHOOK_POLL_MS: '50',
  });
});
afterAll(async () => {
  await t.close();
  for (const r of receivers) await r.close();
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await WebhookReceiver.start();
  receivers.push(r);
  return r;
}

/** A paywall with one subscription to paywall.* at a fresh receiver. */
async function setup(customHeaders?: Record<string, string>) {
  const pw = await t.createPaywall();
  const rcv = await receiver();
  const sub = await createSubscription(t, pw.apiKey, {
    url: rcv.url(),
    events: ['paywall.*'],
    ...(customHeaders ? { customHeaders } : {}),
  });
  return { pw, rcv, sub };
}

let n = 0;
/** Records one paywall.updated event through the API; returns its id. */
async function recordEvent(apiKey: string): Promise<string> {
  const r = await t.gql(apiKey, `mutation($name: String!) { updatePaywall(input: {name: $name}) { id } }`, {
    name: `Name ${++n}`,
  });
  expect(r.errors).toBeUndefined();
  const [e] = await t.db.query<{ id: string }>(
    `select id from event where paywall_id = $1 order by seq desc limit 1`,
    [r.data.updatePaywall.id],
  );
  return e.id;
}

/** The delivery of an event to a subscription, once it is no longer pending. */
async function settled(subscriptionId: string, eventId: string, timeoutMs = 15000): Promise<DeliveryRow> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await t.db.query<DeliveryRow>(
      `select id, status, attempts, response_status, response_latency_ms, response_body, last_error,
              lease_until, next_attempt_at
         from webhook_delivery where subscription_id = $1 and event_id = $2`,
      [subscriptionId, eventId],
    );
    if (row && row.status !== 'pending') return row;
    if (Date.now() > deadline) throw new Error(`delivery still ${row?.status ?? 'missing'}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function subscriptionRow(id: string) {
  const [s] = await t.db.query<{ consecutive_failures: number; last_delivered_at: Date | null }>(
    'select consecutive_failures, last_delivered_at from webhook_subscription where id = $1',
    [id],
  );
  return s;
}

const gaps = (reqs: Received[]) => reqs.slice(1).map((r, i) => r.at - reqs[i].at);

describe('webhook delivery', () => {
  it('sends the events of one call in the order they were recorded (they share one createdAt)', async () => {
    const fake = await FakeUpstream.start();
    try {
      // Other tenants' subscriptions: with a few dozen, PostgreSQL hashes the claimed rows to join them
      // with their subscriptions, and a hash bucket hands back one subscription's rows newest first.
      const others = await t.createPaywall();
      for (let i = 0; i < 60; i++) {
        await createSubscription(t, others.apiKey, { url: `http://127.0.0.1:9/hook/${i}`, events: ['*'] });
      }
      await t.db.query('analyze webhook_subscription');
      const pw = await createProxyPaywall(t, fake);
      const rcv = await receiver();
      await createSubscription(t, pw.apiKey, { url: rcv.url(), events: ['*'] });
      const [{ seq }] = await t.db.query<{ seq: string }>(
        `select coalesce(max(seq), 0)::text as seq from event where paywall_id = $1`,
        [pw.id],
      );
      for (const [i, user] of ['ana', 'ben', 'cy'].entries()) {
        // A chat the user cannot pay for records these five events in one transaction: a receiver can
        // tell their order only by their arrival.
        const r = await t.rest('POST', '/v1/chat/completions', {
          token: pw.apiKey,
          body: { model: MODEL, user, messages: [{ role: 'user', content: 'hi' }] },
        });
        expect(r.body.paywall.reason).toBe('insufficient_balance');
        await rcv.waitForCount(5 * (i + 1));
      }
      const recorded = await t.db.query<{ id: string }>(
        `select id from event where paywall_id = $1 and seq > $2 order by seq`,
        [pw.id, seq],
      );
      expect(rcv.requests.map((r) => r.body.event.type)).toEqual(
        Array(3)
          .fill([
            'paywall.proxy.request.started',
            'paywall.request.blocked',
            'paywall.proxy.request.blocked',
            'paywall.balance.depleted',
            'paywall.balance.topup.link.created',
          ])
          .flat(),
      );
      expect(rcv.requests.map((r) => r.headers['webhook-id'])).toEqual(recorded.map((e) => e.id));
    } finally {
      await fake.close();
    }
  });

  it('POSTs the signed payload with the documented headers; the receiver verifies it with the README recipe', async () => {
    const { pw, rcv, sub } = await setup({ 'X-Tenant': 'acme', Authorization: 'Bearer receiver-token' });
    rcv.respond(() => ({ status: 200, body: 'thanks' }));
    const eventId = await recordEvent(pw.apiKey);
    const row = await settled(sub.id, eventId);
    expect(rcv.requests).toHaveLength(1);
    const req = rcv.requests[0];

    // What the README tells integrators to do: verify the raw body, then parse it.
    expect(verifyWebhook(sub.secret, req.rawBody, req.headers['x-service-signature'] as string)).toBe(true);
    expect(verifySignature(sub.secret, req.rawBody, req.headers['x-service-signature'] as string)).toBe(true);
    expect(req.headers['x-service-signature']).toBe(sign(sub.secret, req.rawBody));
    // A changed byte, or another secret, fails.
    const tampered = Buffer.from(
      req.rawBody.toString('utf8').replace('"paywall.updated"', '"paywall.archived"'),
    );
    expect(verifyWebhook(sub.secret, tampered, req.headers['x-service-signature'] as string)).toBe(false);
    expect(verifyWebhook(`${sub.secret}x`, req.rawBody, req.headers['x-service-signature'] as string)).toBe(
      false,
    );
    expect(verifyWebhook(sub.secret, req.rawBody, undefined)).toBe(false);

    expect(req.method).toBe('POST');
    expect(req.path).toBe('/hook');
    expect(req.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'PaywallProxy-Webhooks/1.0',
      'x-service-event': 'paywall.updated@1.0',
      'x-service-event-id': eventId,
      'x-service-delivery-id': row.id,
      'x-tenant': 'acme',
      authorization: 'Bearer receiver-token',
    });
    const ts = req.headers['x-service-timestamp'] as string;
    expect(new Date(ts).toISOString()).toBe(ts);
    expect(isFreshTimestamp(ts)).toBe(true);

    const [ev] = await t.db.query('select owner_user_id, created_at from event where id = $1', [eventId]);
    expect(req.body).toEqual({
      delivery: {
        id: row.id,
        subscriptionId: sub.id,
        attempts: 1,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
      event: {
        id: eventId,
        paywallId: pw.id,
        ownerUserId: ev.owner_user_id,
        type: 'paywall.updated',
        version: '1.0',
        status: 'pending',
        createdAt: new Date(ev.created_at).toISOString(),
        trigger: { source: 'api', actorType: 'api_key', actorId: pw.id },
        subject: { type: 'paywall', id: pw.id, externalId: null },
        data: {
          paywallId: pw.id,
          ownerUserId: ev.owner_user_id,
          changedFields: ['name'],
          summarySections: ['general'],
        },
        metadata: {},
      },
    });

    expect(row).toMatchObject({
      status: 'success',
      attempts: 1,
      response_status: 200,
      response_body: 'thanks',
      last_error: null,
      lease_until: null,
      next_attempt_at: null,
    });
    expect(row.response_latency_ms).toBeGreaterThanOrEqual(0);
    const s = await subscriptionRow(sub.id);
    expect(s.consecutive_failures).toBe(0);
    expect(String(s.last_delivered_at)).toMatch(/^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d/); // a time, not null
  });

  it('retries a 5xx with the same event id; success then resets consecutiveFailures and sets lastDeliveredAt', async () => {
    const { pw, rcv, sub } = await setup();
    rcv.statuses(500, 503);
    const eventId = await recordEvent(pw.apiKey);
    const row = await settled(sub.id, eventId);
    expect(row).toMatchObject({ status: 'success', attempts: 3, response_status: 200, last_error: null });
    const reqs = rcv.forDelivery(row.id);
    expect(reqs).toHaveLength(3);
    // Stable ids for receiver-side dedupe; the attempt number counts up; every attempt is signed anew.
    expect(reqs.map((r) => r.headers['x-service-event-id'])).toEqual([eventId, eventId, eventId]);
    expect(reqs.map((r) => r.body.event.id)).toEqual([eventId, eventId, eventId]);
    expect(reqs.map((r) => r.body.delivery.attempts)).toEqual([1, 2, 3]);
    for (const r of reqs) {
      expect(verifyWebhook(sub.secret, r.rawBody, r.headers['x-service-signature'] as string)).toBe(true);
    }
    const s = await subscriptionRow(sub.id);
    expect(s.consecutive_failures).toBe(0);
    expect(String(s.last_delivered_at)).toMatch(/^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d/); // a time, not null
  });

  it.each([400, 401, 403, 404, 410, 422])(
    'ends the delivery at once on %i: one attempt, status error',
    async (code) => {
      const { pw, rcv, sub } = await setup();
      rcv.respond(() => ({ status: code, body: `{"error":"no ${code}"}` }));
      const eventId = await recordEvent(pw.apiKey);
      const row = await settled(sub.id, eventId);
      expect(row).toMatchObject({
        status: 'error',
        attempts: 1,
        response_status: code,
        response_body: `{"error":"no ${code}"}`,
        next_attempt_at: null,
        lease_until: null,
      });
      expect(row.last_error).toContain(String(code));
      expect(rcv.forDelivery(row.id)).toHaveLength(1);
      const s = await subscriptionRow(sub.id);
      expect(s.consecutive_failures).toBe(1);
      expect(s.last_delivered_at).toBeNull();
    },
  );

  it('gives up a 500 after exactly WEBHOOK_MAX_ATTEMPTS attempts, waiting longer before each retry', async () => {
    const { pw, rcv, sub } = await setup();
    rcv.respond(() => ({ status: 500, body: 'down' }));
    const eventId = await recordEvent(pw.apiKey);
    const row = await settled(sub.id, eventId);
    expect(row).toMatchObject({ status: 'error', attempts: MAX_ATTEMPTS, response_status: 500 });
    expect(row.last_error).toMatch(/HTTP 500.*gave up after 4 attempts/);
    const reqs = rcv.forDelivery(row.id);
    expect(reqs.map((r) => r.body.delivery.attempts)).toEqual([1, 2, 3, 4]);
    // Retry k comes no earlier than base x 2^(k-1) minus the 20 % jitter: 80, 160, 320 ms. The last
    // bound exceeds any constant backoff of this base (at most 120 ms), so the waits really double.
    gaps(reqs).forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(BASE_MS * 2 ** i * 0.8 - 5));
    const s = await subscriptionRow(sub.id);
    expect(s.consecutive_failures).toBe(MAX_ATTEMPTS);
  });

  it('honours Retry-After on 429', async () => {
    const { pw, rcv, sub } = await setup();
    rcv.respond((_r, i) => (i === 0 ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 }));
    const eventId = await recordEvent(pw.apiKey);
    const row = await settled(sub.id, eventId);
    expect(row).toMatchObject({ status: 'success', attempts: 2 });
    const [gap] = gaps(rcv.forDelivery(row.id));
    expect(gap).toBeGreaterThanOrEqual(1000 - 5); // not the 100 ms backoff
  });

  it('does not follow redirects: a 3xx is a failed attempt, retried at the subscription URL', async () => {
    const { pw, rcv, sub } = await setup();
    rcv.respond((_r, i) =>
      i === 0 ? { status: 302, headers: { Location: rcv.url('/elsewhere') } } : { status: 204 },
    );
    const eventId = await recordEvent(pw.apiKey);
    const row = await settled(sub.id, eventId);
    expect(row).toMatchObject({ status: 'success', attempts: 2, response_status: 204 });
    expect(rcv.requests.map((r) => r.path)).toEqual(['/hook', '/hook']);
  });

  it('times out a receiver slower than WEBHOOK_TIMEOUT_MS and retries', async () => {
    const { pw, rcv, sub } = await setup();
    rcv.respond((_r, i) => (i === 0 ? { status: 200, delayMs: TIMEOUT_MS + 1000 } : { status: 200 }));
    const eventId = await recordEvent(pw.apiKey);
    const row = await settled(sub.id, eventId);
    expect(row).toMatchObject({ status: 'success', attempts: 2 });
    expect(rcv.forDelivery(row.id)).toHaveLength(2);
  });

  it('keeps only the first 4 KiB of a response body', async () => {
    const { pw, rcv, sub } = await setup();
    rcv.respond(() => ({ status: 200, body: 'x'.repeat(100_000) }));
    const row = await settled(sub.id, await recordEvent(pw.apiKey));
    expect(row.response_body).toBe('x'.repeat(4096));
  });
});

describe('webhook delivery: guard and inactive subscriptions', () => {
  let g: TestApp;
  beforeAll(async () => {
    // No in-process worker: the tests run their own, with the settings under test.
    g = await startTestApp({ WEBHOOK_WORKER: 'false', WEBHOOK_BACKOFF_BASE_MS: '100' });
  });
  afterAll(async () => {
    await g.close();
  });

  const worker = (sender?: WebhookSender) =>
    new DeliveryWorker({
      db: g.db,
      log: createLogger('silent'),
      maxAttempts: 4,
      backoffBaseMs: 100,
      timeoutMs: 1000,
      pollMs: 50,
      allowPrivate: false,
      secretBox: loadSecretBox(g.config).box,
      sender,
    });

  async function finalRow(eventId: string) {
    for (let i = 0; i < 400; i++) {
      const [row] = await g.db.query<DeliveryRow>(
        'select status, attempts, last_error from webhook_delivery where event_id = $1',
        [eventId],
      );
      if (row && row.status !== 'pending') return row;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('delivery still pending');
  }

  async function event(apiKey: string): Promise<string> {
    const r = await g.gql(apiKey, `mutation { updatePaywall(input: {name: "${Math.random()}"}) { id } }`);
    const [e] = await g.db.query<{ id: string }>(
      'select id from event where paywall_id = $1 order by seq desc limit 1',
      [r.data.updatePaywall.id],
    );
    return e.id;
  }

  it('refuses, at connect time, a host that now resolves to a private address (DNS rebinding): error, not retried', async () => {
    const rcv = await receiver();
    const pw = await g.createPaywall();
    // The name resolved to a public address when the subscription was saved; now it answers 127.0.0.1.
    await createSubscription(g, pw.apiKey, {
      url: `http://hooks.example.com:${rcv.port}/hook`,
      events: ['*'],
    });
    const eventId = await event(pw.apiKey);
    const sender = new WebhookSender({
      allowPrivate: false,
      timeoutMs: 1000,
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    const w = worker(sender);
    await w.start();
    try {
      const row = await finalRow(eventId);
      expect(row).toMatchObject({ status: 'error', attempts: 1 });
      expect(row.last_error).toMatch(/127\.0\.0\.1.*not a public address.*not retried/);
      expect(rcv.requests).toHaveLength(0);
    } finally {
      await w.stop();
      await sender.close();
    }
  });

  it('sends nothing for a subscription deactivated before its delivery went out', async () => {
    const rcv = await receiver();
    const pw = await g.createPaywall();
    const sub = await createSubscription(g, pw.apiKey, { url: rcv.url(), events: ['*'] });
    const eventId = await event(pw.apiKey);
    await g.db.query('update webhook_subscription set is_active = false where id = $1', [sub.id]);
    const w = worker(new WebhookSender({ allowPrivate: true, timeoutMs: 1000 }));
    await w.start();
    try {
      const row = await finalRow(eventId);
      expect(row).toMatchObject({ status: 'error', attempts: 0 });
      expect(row.last_error).toMatch(/inactive/);
      expect(rcv.requests).toHaveLength(0);
    } finally {
      await w.stop();
    }
  });
});

describe('retry rules', () => {
  const response = (status: number, retryAfter: string | null = null): SendResult => ({
    kind: 'response',
    status,
    latencyMs: 5,
    body: '',
    retryAfter,
    location: null,
  });
  const opts = { maxAttempts: 8, backoffBaseMs: 30_000, random: () => 0.5 };

  it('backs off base x 2^(k-1) with at most 20 % jitter either way', () => {
    expect([1, 2, 3, 7].map((k) => backoffDelay(k, 30_000, () => 0.5))).toEqual([
      30_000, 60_000, 120_000, 1_920_000,
    ]);
    expect(backoffDelay(3, 1000, () => 0)).toBe(3200);
    expect(backoffDelay(3, 1000, () => 0.999999)).toBe(4800);
  });

  it('reads Retry-After as seconds or an HTTP date, bounded to [base, 1 hour]', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterDelay('120', 30_000, now)).toBe(120_000);
    expect(retryAfterDelay('1', 30_000, now)).toBe(30_000);
    expect(retryAfterDelay('999999', 30_000, now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterDelay('Thu, 01 Jan 2026 00:05:00 GMT', 30_000, now)).toBe(300_000);
    expect(retryAfterDelay('soon', 30_000, now)).toBeNull();
    expect(retryAfterDelay(null, 30_000, now)).toBeNull();
  });

  it('classifies every kind of answer', () => {
    expect(decideOutcome(response(200), 1, opts)).toMatchObject({ status: 'success', retryInMs: null });
    expect(decideOutcome(response(299), 1, opts).status).toBe('success');
    for (const code of [400, 401, 403, 404, 410, 422]) {
      expect(decideOutcome(response(code), 1, opts)).toMatchObject({ status: 'error', retryInMs: null });
    }
    for (const code of [301, 302, 307, 308, 405, 408, 409, 500, 502, 503]) {
      expect(decideOutcome(response(code), 2, opts)).toMatchObject({ status: 'pending', retryInMs: 60_000 });
      expect(decideOutcome(response(code), 8, opts)).toMatchObject({ status: 'error', retryInMs: null });
    }
    expect(decideOutcome(response(429, '600'), 1, opts)).toMatchObject({
      status: 'pending',
      retryInMs: 600_000,
    });
    expect(decideOutcome(response(429), 1, opts)).toMatchObject({ status: 'pending', retryInMs: 30_000 });
    const failure = (reason: 'refused' | 'invalid' | 'timeout' | 'network'): SendResult => ({
      kind: 'failure',
      reason,
      latencyMs: 1,
      error: reason,
    });
    expect(decideOutcome(failure('refused'), 1, opts).status).toBe('error');
    expect(decideOutcome(failure('invalid'), 1, opts).status).toBe('error');
    expect(decideOutcome(failure('timeout'), 1, opts).status).toBe('pending');
    expect(decideOutcome(failure('network'), 7, opts).status).toBe('pending');
    expect(decideOutcome(failure('network'), 8, opts).status).toBe('error');
  });
});

describe("one developer's hanging receivers", () => {
  // Receivers that accept the connection and never answer hold a delivery slot until WEBHOOK_TIMEOUT_MS.
  // One developer with many of them, on any number of paywalls, must not take every slot: another
  // developer's deliveries go out meanwhile.
  it('take at most their share of the worker: another developer is delivered within one timeout', async () => {
    const sockets = new Set<import('node:net').Socket>();
    let hanging = 0;
    const hang = (await import('node:http')).createServer(() => void hanging++);
    hang.on('connection', (s) => sockets.add(s));
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    const hangUrl = `http://127.0.0.1:${(hang.address() as import('node:net').AddressInfo).port}/hook`;
    try {
      const { createdToken } = await t.app.services.owners.create('Hostile developer');
      const hostileKeys: string[] = [];
      for (const name of ['Hostile one', 'Hostile two', 'Hostile three', 'Hostile four', 'Hostile five']) {
        const r = await t.gql(
          createdToken,
          `mutation($i: CreatePaywallInput!) { createPaywall(input: $i) { apiKey } }`,
          { i: { name, mode: 'DEFAULT' } },
        );
        expect(r.errors).toBeUndefined();
        hostileKeys.push(r.data.createPaywall.apiKey);
      }
      for (const key of hostileKeys) {
        for (let i = 0; i < 4; i++)
          await createSubscription(t, key, { url: `${hangUrl}?i=${i}`, events: ['paywall.*'] });
        for (let i = 0; i < 3; i++) await recordEvent(key); // 5 x 4 x 3 = 60 deliveries, each hanging 1 s
      }
      // Alone, the developer gets all slots but one share (16 - 4): the worker is not left idle.
      const deadline = Date.now() + 5000;
      while (hanging < 12 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(hanging).toBe(12);
      const { pw, rcv, sub } = await setup();
      const started = Date.now();
      const eventId = await recordEvent(pw.apiKey);
      const row = await settled(sub.id, eventId);
      expect(row.status).toBe('success');
      expect(rcv.requests).toHaveLength(1);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => hang.close(() => resolve()));
    }
  });
});
