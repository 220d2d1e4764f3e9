import { startTestApp, type TestApp } from './helpers/app.js';
import { checkoutEvent, FakeStripe, signStripe } from './helpers/fake-stripe.js';
import { expectLedgerProven, userAccount } from './helpers/ledger.js';
import { PageClient } from './helpers/page-client.js';

/**
 * The public DEFAULT top-up page (anyone with a link can open it): it creates no end user and grants
 * nothing until a session is paid, its views and "Pay" clicks are limited per client IP and per top-up
 * link, and Checkout Session creation is throttled per Stripe key and in total. The service clock is
 * frozen, so the windows and buckets only move when the test moves it.
 */
const KEY_A = 'sk_test_limits_account_a_0001';
const KEY_B = 'sk_test_limits_account_b_0002';
const CONNECT = `mutation($input: ConnectStripeInput!) { connectStripe(input: $input) { stripe { webhookId } } }`;

let t: TestApp;
let fake: FakeStripe;
let now = Date.parse('2026-11-25T12:00:00.000Z');
let ipSeq = 0;
const freshIp = () => `203.0.113.${++ipSeq}`;

beforeAll(async () => {
  fake = await new FakeStripe().start();
  t = await startTestApp({
    STRIPE_API_BASE: fake.url,
    TOPUP_IP_VIEWS_PER_MINUTE: '10',
    TOPUP_IP_CHECKOUTS_PER_HOUR: '3',
    TOPUP_USER_CHECKOUTS_PER_HOUR: '2',
    STRIPE_CHECKOUTS_PER_SECOND: '2',
    STRIPE_CHECKOUTS_PER_SECOND_ALL: '3',
  });
  t.app.services.clock.now = () => new Date(now);
});
afterAll(async () => {
  await t?.close();
  await fake?.stop();
});
/** Every test starts in a fresh hour: earlier windows and buckets are over. */
beforeEach(() => {
  now += 3600_000;
});

async function paywall(key: string, extra?: string) {
  const pw = await t.createPaywall('DEFAULT', 'Limits Shop');
  if (extra) expect((await t.gql(pw.apiKey, extra)).errors).toBeUndefined();
  const r = await t.gql(t.ownerToken, CONNECT, { input: { paywallId: pw.id, secretKey: key } });
  expect(r.errors).toBeUndefined();
  return { ...pw, endpoint: fake.endpoints.get(r.data.connectStripe.stripe.webhookId)! };
}

/** From its own IP: opens the page for `user` and clicks "Pay <amount> USD". */
async function pay(paywallId: string, user: string, amount = '5', ip = freshIp()) {
  const c = new PageClient(t.url, ip);
  const page = await c.get(`/topup/${paywallId}?user=${encodeURIComponent(user)}`);
  expect(page.status).toBe(200);
  return c.post(`/topup/${paywallId}/checkout`, { user, amount });
}

const checkoutCalls = () => fake.requests.filter((r) => r.path === '/v1/checkout/sessions').length;

describe('the public DEFAULT top-up page: nothing created before payment, limits, throttled Stripe calls', () => {
  it('opening the page and clicking "Pay" creates no end user, grants no trial credits; the paid session creates the user', async () => {
    const pw = await paywall(KEY_A, `mutation { updatePaywall(input: {trialCredits: "1"}) { id } }`);
    const res = await pay(pw.id, 'newcomer', '10');
    expect(res.status).toBe(303);
    const session = [...fake.sessions.values()].at(-1)!;
    expect(session.metadata).toEqual({ paywallId: pw.id, user: 'newcomer' });
    expect(session.client_reference_id).toBe(`${pw.id}:newcomer`);
    expect(await userAccount(t.db, pw.id, 'newcomer')).toBeNull();
    expect(await t.db.query(`select 1 from end_user where paywall_id = $1`, [pw.id])).toEqual([]);
    expect(await t.db.query(`select 1 from transfer where paywall_id = $1`, [pw.id])).toEqual([]);
    expect(
      await t.db.query(`select 1 from event where paywall_id = $1 and type like 'paywall.balance.%'`, [
        pw.id,
      ]),
    ).toEqual([]);

    // An unpaid completion creates nobody either.
    const unpaid = checkoutEvent('checkout.session.completed', session, 'unpaid');
    const send = (p: string) =>
      fetch(`${t.url}/v1/stripe/webhooks/${pw.id}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'stripe-signature': signStripe(p, pw.endpoint.secret),
        },
        body: p,
      });
    expect((await send(unpaid)).status).toBe(200);
    expect(await userAccount(t.db, pw.id, 'newcomer')).toBeNull();

    // Paid: the user exists now, with the 10 USD (and the trial every new user of this app gets).
    const paid = checkoutEvent('checkout.session.async_payment_succeeded', session, 'paid');
    expect((await send(paid)).status).toBe(200);
    expect((await userAccount(t.db, pw.id, 'newcomer'))!.balance).toBe('11000000');
    const [row] = await t.db.query<any>(
      `select status, end_user_id from stripe_checkout where session_id = $1`,
      [session.id],
    );
    expect(row.status).toBe('paid');
    expect(row.end_user_id).toBe((await userAccount(t.db, pw.id, 'newcomer'))!.id);
    await expectLedgerProven(t.db);
  });

  it('page views per IP: the 11th in a minute is a 429 page with Retry-After; other IPs and the next minute are fine', async () => {
    const pw = await paywall(KEY_A);
    const ip = freshIp();
    const c = new PageClient(t.url, ip);
    for (let i = 0; i < 10; i++) expect((await c.get(`/topup/${pw.id}?user=viewer`)).status).toBe(200);
    const over = await c.get(`/topup/${pw.id}?user=viewer`);
    expect(over.status).toBe(429);
    expect(over.html).toContain('Too many attempts');
    expect(over.html).toContain('Too many top-up pages were opened from your network.');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect((await new PageClient(t.url, freshIp()).get(`/topup/${pw.id}?user=viewer`)).status).toBe(200);
    now += 60_000;
    expect((await c.get(`/topup/${pw.id}?user=viewer`)).status).toBe(200);
  });

  it('"Pay" per top-up link: the 3rd in an hour is a 429 page and Stripe is not called; another user is fine', async () => {
    const pw = await paywall(KEY_A);
    expect((await pay(pw.id, 'eager')).status).toBe(303);
    now += 1000; // a new second: the Stripe bucket refills
    expect((await pay(pw.id, 'eager')).status).toBe(303);
    now += 1000;
    const calls = checkoutCalls();
    const over = await pay(pw.id, 'eager');
    expect(over.status).toBe(429);
    expect(over.html).toContain(
      'Too many payments were started for this account in the last hour (at most 2).',
    );
    expect(over.html).toContain('Nothing was charged.');
    expect(checkoutCalls()).toBe(calls);
    expect((await pay(pw.id, 'patient')).status).toBe(303);
    now += 3600_000;
    expect((await pay(pw.id, 'eager')).status).toBe(303);
  });

  it('"Pay" per IP: the 4th in an hour from one network is a 429 page, whatever the user', async () => {
    const pw = await paywall(KEY_A);
    const ip = freshIp();
    for (const user of ['u1', 'u2', 'u3']) {
      expect((await pay(pw.id, user, '5', ip)).status).toBe(303);
      now += 1000;
    }
    const calls = checkoutCalls();
    const over = await pay(pw.id, 'u4', '5', ip);
    expect(over.status).toBe(429);
    expect(over.html).toContain(
      'Too many payments were started from your network in the last hour (at most 3).',
    );
    expect(checkoutCalls()).toBe(calls);
    expect((await pay(pw.id, 'u4', '5', freshIp())).status).toBe(303);
  });

  it('Stripe calls are throttled per key (2/s) and in total (3/s): a refusal is a clear 429 page, not a 500', async () => {
    const a = await paywall(KEY_A);
    const b = await paywall(KEY_B);
    const calls = checkoutCalls();
    expect((await pay(a.id, 'r1')).status).toBe(303);
    expect((await pay(a.id, 'r2')).status).toBe(303);
    const perKey = await pay(a.id, 'r3');
    expect(perKey.status).toBe(429);
    expect(perKey.html).toContain(
      'Card payments are busy right now, so no payment was started and nothing was charged.',
    );
    expect(perKey.headers.get('retry-after')).toBe('1');
    // Another key still has its own tokens, until the total runs out.
    expect((await pay(b.id, 'r4')).status).toBe(303);
    const total = await pay(b.id, 'r5');
    expect(total.status).toBe(429);
    expect(checkoutCalls() - calls).toBe(3);
    // A refused click used up none of the user's own allowance: a second later both go through.
    now += 1000;
    expect((await pay(a.id, 'r3')).status).toBe(303);
    expect((await pay(b.id, 'r5')).status).toBe(303);
  });

  it('a flood from one IP: 600 "Pay" clicks in a burst make 2 Checkout Sessions (the key\'s bucket), no end user, no 500', async () => {
    const pw = await paywall(KEY_B);
    const form = new PageClient(t.url, freshIp());
    expect((await form.get(`/topup/${pw.id}?user=flood-0`)).status).toBe(200);
    const calls = checkoutCalls();
    const statuses: number[] = [];
    for (let batch = 0; batch < 20; batch++)
      statuses.push(
        ...(await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            form
              .post(`/topup/${pw.id}/checkout`, { user: `flood-${batch * 30 + i}`, amount: '5' })
              .then((r) => r.status),
          ),
        )),
      );
    expect(statuses.filter((s) => s === 303)).toHaveLength(2);
    expect(statuses.filter((s) => s === 429)).toHaveLength(598);
    expect(checkoutCalls() - calls).toBe(2);
    expect(await t.db.query(`select 1 from end_user where paywall_id = $1`, [pw.id])).toEqual([]);
    expect(await t.db.query(`select 1 from stripe_checkout where paywall_id = $1`, [pw.id])).toHaveLength(2);
  });
});
