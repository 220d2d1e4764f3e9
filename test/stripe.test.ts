import { startTestApp, type TestApp } from './helpers/app.js';
import { checkoutEvent, FakeStripe, signStripe } from './helpers/fake-stripe.js';
import { PageClient } from './helpers/page-client.js';
import { expectLedgerProven, userAccount } from './helpers/ledger.js';

const SECRET_KEY = 'sk_test_paywall_stripe_key_9f8e7d6c5b4a';
const CONNECT = `mutation($input: ConnectStripeInput!) {
  connectStripe(input: $input) { id stripe { connected webhookId topupAmounts } }
}`;

let t: TestApp;
let fake: FakeStripe;
const logLines: string[] = [];

beforeAll(async () => {
  fake = await new FakeStripe().start();
  t = await startTestApp(
    {
      STRIPE_API_BASE: fake.url,
      LOG_LEVEL: 'trace',
      // This file checks fulfilment; the page's limits have their own test file.
      TOPUP_IP_VIEWS_PER_MINUTE: '100000',
      TOPUP_IP_CHECKOUTS_PER_HOUR: '100000',
      TOPUP_USER_CHECKOUTS_PER_HOUR: '100000',
      STRIPE_CHECKOUTS_PER_SECOND: '100000',
      STRIPE_CHECKOUTS_PER_SECOND_ALL: '100000',
    },
    { logStream: { write: (line: string) => logLines.push(line) } },
  );
});
afterAll(async () => {
  await t.close();
  await fake.stop();
});

const eventsOf = (paywallId: string, type: string) =>
  t.db.query<any>('select * from event where paywall_id = $1 and type = $2 order by seq', [paywallId, type]);

async function connected(amounts?: string[]) {
  const pw = await t.createPaywall('DEFAULT', 'Shop');
  const r = await t.gql(t.ownerToken, CONNECT, {
    input: { paywallId: pw.id, secretKey: SECRET_KEY, ...(amounts ? { topupAmounts: amounts } : {}) },
  });
  expect(r.errors).toBeUndefined();
  const webhookId = r.data.connectStripe.stripe.webhookId;
  return { ...pw, webhookId, endpoint: fake.endpoints.get(webhookId)! };
}

/** Opens the hosted page for `user` and clicks "Pay <amount> USD": the 303 and the session made. */
async function checkout(paywallId: string, user: string, amount: string) {
  const c = new PageClient(t.url);
  const page = await c.get(`/topup/${paywallId}?user=${encodeURIComponent(user)}`);
  expect(page.status).toBe(200);
  const res = await c.post(`/topup/${paywallId}/checkout`, { user, amount });
  const session = [...fake.sessions.values()].at(-1)!;
  return { page, res, session };
}

/** The user's balance in raw units; "0" while the user does not exist (the page creates nobody). */
const balanceOf = async (paywallId: string, user: string) =>
  (await userAccount(t.db, paywallId, user))?.balance ?? '0';

const post = (paywallId: string, payload: string, signature?: string) =>
  fetch(`${t.url}/v1/stripe/webhooks/${paywallId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(signature ? { 'stripe-signature': signature } : {}) },
    body: payload,
  });

describe('Stripe top-ups (docs/reference.md §9)', () => {
  it("connectStripe creates exactly one endpoint for the three Checkout events (and auto top-up's two PaymentIntent events); the key never comes back", async () => {
    const before = fake.requests.length;
    const pw = await connected();
    const made = fake.requests.slice(before);
    expect(made.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/webhook_endpoints']);
    expect(made[0].apiKey).toBe(SECRET_KEY);
    expect(pw.endpoint.url).toBe(`${t.url}/v1/stripe/webhooks/${pw.id}`);
    expect([...pw.endpoint.enabled_events].sort()).toEqual([
      'checkout.session.async_payment_failed',
      'checkout.session.async_payment_succeeded',
      'checkout.session.completed',
      'payment_intent.payment_failed',
      'payment_intent.succeeded',
    ]);
    const q = await t.gql(
      t.ownerToken,
      `query($id: ID!) { paywall(id: $id) { stripe { connected webhookId topupAmounts } } }`,
      {
        id: pw.id,
      },
    );
    expect(q.data.paywall.stripe).toEqual({
      connected: true,
      webhookId: pw.webhookId,
      topupAmounts: ['5', '10', '20'],
    });
    expect(JSON.stringify(q)).not.toContain(SECRET_KEY);
    const stored = await t.db.query<any>('select * from stripe_integration where paywall_id = $1', [pw.id]);
    expect(JSON.stringify(stored)).not.toContain(SECRET_KEY);
    expect(JSON.stringify(stored)).not.toContain(pw.endpoint.secret);
    const [conn] = await eventsOf(pw.id, 'paywall.integration.connected');
    expect(conn.data.integrationKey).toBe('stripe');
    const [rot] = await eventsOf(pw.id, 'paywall.integration.stripe.webhook.rotated');
    expect(rot.data).toMatchObject({
      webhookId: pw.webhookId,
      url: pw.endpoint.url,
      secretSuffix: pw.endpoint.secret.slice(-4),
    });
    // An API key works too; bad amounts and SHARED paywalls are refused.
    const byKey = await t.gql(pw.apiKey, CONNECT, {
      input: { secretKey: SECRET_KEY, topupAmounts: ['7.50'] },
    });
    expect(byKey.data.connectStripe.stripe.topupAmounts).toEqual(['7.5']);
    expect(fake.endpoints.get(pw.webhookId)!.deleted).toBe(true); // the replaced endpoint is deleted
    for (const bad of [['0'], ['-1'], ['abc'], ['1.001'], [], ['5', '5']]) {
      const r = await t.gql(t.ownerToken, CONNECT, {
        input: { paywallId: pw.id, secretKey: SECRET_KEY, topupAmounts: bad },
      });
      expect(r.errors?.[0].extensions).toMatchObject({ errorCode: 'invalid_amount', param: 'topupAmounts' });
    }
    const shared = await t.createPaywall('SHARED');
    const s = await t.gql(t.ownerToken, CONNECT, { input: { paywallId: shared.id, secretKey: SECRET_KEY } });
    expect(s.errors?.[0].extensions.errorCode).toBe('unsupported_in_mode');
  });

  it('the top-up link leads to the hosted page; "Pay 10 USD" creates a Checkout Session and answers 303 to it', async () => {
    const pw = await connected();
    const link = await t.rest('GET', '/v1/user/balance/topup?user=alice', { token: pw.apiKey });
    expect(link.status).toBe(200);
    expect(JSON.stringify(link.body)).toContain(`${t.url}/topup/${pw.id}?user=alice`);
    const { page, res, session } = await checkout(pw.id, 'alice', '10');
    for (const a of ['5', '10', '20'])
      expect(page.html).toContain(`<button type="submit" name="amount" value="${a}">Pay ${a} USD</button>`);
    expect(page.html).toContain('name="amount"');
    expect(res.status).toBe(303);
    expect(res.location).toBe(session.url);
    expect(session).toMatchObject({ amount_total: 1000, currency: 'usd', mode: 'payment' });
    // alice exists (the top-up link API saw her): the session names her end-user id too.
    const user = await userAccount(t.db, pw.id, 'alice');
    expect(session.client_reference_id).toBe(`${pw.id}:alice`);
    expect(session.metadata).toEqual({ paywallId: pw.id, endUserId: user!.id, user: 'alice' });
    // The page says what is paid (USD) and what it adds to whose balance where (USDC, 6 decimals).
    expect(page.html).toContain("adds <strong>10.00 USDC</strong> to alice's balance on Shop");
    expect(page.html).toContain(
      'Balances on <strong>Shop</strong> are kept in USDC: every 1 USD you pay adds 1.00 USDC.',
    );
    expect(session.success_url).toContain(`/topup/${pw.id}?user=alice`);
    // An amount not offered is refused.
    const c = new PageClient(t.url);
    await c.get(`/topup/${pw.id}?user=alice`);
    expect((await c.post(`/topup/${pw.id}/checkout`, { user: 'alice', amount: '11' })).status).toBe(400);
  });

  it("with Stripe connected the hosted checkout wins over the paywall's own topupUrl, links and refusals alike", async () => {
    const pw = await t.createPaywall('DEFAULT', 'Own page');
    const own = await t.gql(
      pw.apiKey,
      `mutation { updatePaywall(input: {topupUrl: "https://shop.example/credits"}) { id } }`,
    );
    expect(own.errors).toBeUndefined();
    const before = await t.rest('GET', '/v1/user/balance/topup?user=bo', { token: pw.apiKey });
    expect(before.body).toEqual({ url: 'https://shop.example/credits?user=bo' });
    const r = await t.gql(pw.apiKey, CONNECT, { input: { secretKey: SECRET_KEY } });
    expect(r.errors).toBeUndefined();
    const hosted = `${t.url}/topup/${pw.id}?user=bo`;
    expect((await t.rest('GET', '/v1/user/balance/topup?user=bo', { token: pw.apiKey })).body).toEqual({
      url: hosted,
    });
    const refused = await t.rest('POST', '/v1/user/charge', {
      token: pw.apiKey,
      body: { user: 'bo', amount: '1' },
      headers: { 'Idempotency-Key': 'own-page-1' },
    });
    expect(refused.body).toMatchObject({ success: false, url: hosted });
  });

  it('a paid session credits exactly once: 3 times in a row, 5 at once, and completed + async_succeeded', async () => {
    const pw = await connected();
    const { session } = await checkout(pw.id, 'bob', '10');
    const payload = checkoutEvent('checkout.session.completed', session, 'paid');
    for (let i = 0; i < 3; i++) {
      const r = await post(pw.id, payload, signStripe(payload, pw.endpoint.secret));
      expect(r.status).toBe(200);
    }
    const statuses = await Promise.all(
      Array.from({ length: 5 }, () => {
        const p = checkoutEvent('checkout.session.completed', session, 'paid');
        return post(pw.id, p, signStripe(p, pw.endpoint.secret)).then((r) => r.status);
      }),
    );
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    const late = checkoutEvent('checkout.session.async_payment_succeeded', session, 'paid');
    expect((await post(pw.id, late, signStripe(late, pw.endpoint.secret))).status).toBe(200);

    expect((await userAccount(t.db, pw.id, 'bob'))!.balance).toBe('10000000');
    const transfers = await t.db.query<any>(
      `select * from transfer where paywall_id = $1 and kind = 'deposit'`,
      [pw.id],
    );
    expect(transfers).toHaveLength(1);
    expect(transfers[0].metadata.source).toBe('stripe');
    const completed = await eventsOf(pw.id, 'paywall.stripe.checkout.session.completed');
    expect(completed).toHaveLength(1);
    expect(completed[0].data).toMatchObject({ checkoutSessionId: session.id, amount: '10', currency: 'usd' });
    const deposits = await eventsOf(pw.id, 'paywall.balance.deposit.created');
    expect(deposits).toHaveLength(1);
    expect(deposits[0].data).toMatchObject({ source: 'stripe', amount: '10' });
    expect(BigInt(deposits[0].seq)).toBeGreaterThan(BigInt(completed[0].seq));
    const bal = await t.rest('GET', '/v1/user/balance?user=bob', { token: pw.apiKey });
    expect(bal.body.balance ?? bal.body.data?.balance).toBe('10000000');
    await expectLedgerProven(t.db);
  });

  it('a bad or missing signature is a 400 and credits nothing', async () => {
    const pw = await connected();
    const { session } = await checkout(pw.id, 'carol', '5');
    const payload = checkoutEvent('checkout.session.completed', session, 'paid');
    const none = await post(pw.id, payload);
    expect(none.status).toBe(400);
    expect((await none.json()).error).toMatchObject({ type: 'invalid_request_error' });
    expect((await post(pw.id, payload, signStripe(payload, 'whsec_wrong'))).status).toBe(400);
    const tampered = payload.replace('"amount_total":500', '"amount_total":50000');
    expect((await post(pw.id, tampered, signStripe(payload, pw.endpoint.secret))).status).toBe(400);
    expect(await balanceOf(pw.id, 'carol')).toBe('0');
    expect(await eventsOf(pw.id, 'paywall.balance.deposit.created')).toHaveLength(0);
    await expectLedgerProven(t.db);
  });

  it('a signed event that names nothing creditable answers 200 (Stripe stops retrying) and credits nothing', async () => {
    const pw = await connected();
    const send = async (session: any) => {
      const p = checkoutEvent('checkout.session.completed', session, 'paid');
      return (await post(pw.id, p, signStripe(p, pw.endpoint.secret))).status;
    };
    const metadata = (user: string) => ({ paywallId: pw.id, user });
    // No session id: "once per Checkout Session" has nothing to hold on to.
    expect(
      await send({ id: undefined, amount_total: 100, currency: 'usd', metadata: metadata('nina') }),
    ).toBe(200);
    expect(await send({ id: '', amount_total: 100, currency: 'usd', metadata: metadata('nina') })).toBe(200);
    // A user id the API would refuse (a control character).
    expect(
      await send({ id: 'cs_test_nul', amount_total: 100, currency: 'usd', metadata: metadata('ni\u0000na') }),
    ).toBe(200);
    // Not USD: the hosted page sells USD only, and no rate is known for anything else.
    const { session } = await checkout(pw.id, 'nina', '5');
    expect(await send({ ...session, currency: 'eur' })).toBe(200);
    expect(
      await send({ id: 'cs_test_jpy', amount_total: 500, currency: 'jpy', metadata: metadata('nina') }),
    ).toBe(200);

    expect(await t.db.query(`select 1 from transfer where paywall_id = $1`, [pw.id])).toEqual([]);
    expect(await eventsOf(pw.id, 'paywall.balance.deposit.created')).toHaveLength(0);
    // The same session in USD is still credited once.
    expect(await send(session)).toBe(200);
    expect((await userAccount(t.db, pw.id, 'nina'))!.balance).toBe('5000000');
    await expectLedgerProven(t.db);
  });

  it('an unpaid session credits only on async_payment_succeeded; async_payment_failed marks it failed', async () => {
    const pw = await connected();
    const { session } = await checkout(pw.id, 'dave', '20');
    const send = async (type: string, status: 'paid' | 'unpaid') => {
      const p = checkoutEvent(type, session, status);
      expect((await post(pw.id, p, signStripe(p, pw.endpoint.secret))).status).toBe(200);
    };
    await send('checkout.session.completed', 'unpaid');
    expect(await balanceOf(pw.id, 'dave')).toBe('0');
    await send('checkout.session.async_payment_succeeded', 'paid');
    expect(await balanceOf(pw.id, 'dave')).toBe('20000000');

    const other = await checkout(pw.id, 'erin', '5');
    const p1 = checkoutEvent('checkout.session.completed', other.session, 'unpaid');
    await post(pw.id, p1, signStripe(p1, pw.endpoint.secret));
    const p2 = checkoutEvent('checkout.session.async_payment_failed', other.session, 'unpaid');
    expect((await post(pw.id, p2, signStripe(p2, pw.endpoint.secret))).status).toBe(200);
    const [row] = await t.db.query<any>('select status from stripe_checkout where session_id = $1', [
      other.session.id,
    ]);
    expect(row.status).toBe('failed');
    expect(await balanceOf(pw.id, 'erin')).toBe('0');
    await expectLedgerProven(t.db);
  });

  it('rotate: the replaced secret still verifies for 24 h (its endpoint lives on), then is refused and its endpoint deleted', async () => {
    const pw = await connected();
    const clock = t.app.services.clock;
    const systemNow = clock.now;
    let now = Date.now();
    clock.now = () => new Date(now);
    try {
      const r = await t.gql(
        t.ownerToken,
        `mutation($id: ID) { rotateStripeWebhook(paywallId: $id) { stripe { webhookId } } }`,
        { id: pw.id },
      );
      const newId = r.data.rotateStripeWebhook.stripe.webhookId;
      expect(newId).not.toBe(pw.webhookId);
      // Stripe keeps retrying events it sent to the replaced endpoint: it stays, for now.
      expect(fake.endpoints.get(pw.webhookId)!.deleted).toBe(false);
      expect(await eventsOf(pw.id, 'paywall.integration.stripe.webhook.rotated')).toHaveLength(2);
      const fresh = fake.endpoints.get(newId)!;

      // Both endpoints get the same event, each signed with its own secret: credited once.
      const first = await checkout(pw.id, 'frank', '5');
      const p1 = checkoutEvent('checkout.session.completed', first.session, 'paid');
      expect(await fake.deliver(SECRET_KEY, p1, [pw.webhookId, newId])).toEqual([
        [pw.webhookId, 200],
        [newId, 200],
      ]);
      expect(await balanceOf(pw.id, 'frank')).toBe('5000000');

      // 23 h 59 min 59 s later the old secret still verifies.
      now += 24 * 3600_000 - 1000;
      const second = await checkout(pw.id, 'frank', '10');
      const p2 = checkoutEvent('checkout.session.completed', second.session, 'paid');
      expect((await post(pw.id, p2, signStripe(p2, pw.endpoint.secret))).status).toBe(200);
      expect(await balanceOf(pw.id, 'frank')).toBe('15000000');

      // Past 24 h: refused (400, nothing credited), and the replaced endpoint is deleted at Stripe.
      now += 2000;
      const third = await checkout(pw.id, 'frank', '20');
      const p3 = checkoutEvent('checkout.session.completed', third.session, 'paid');
      const late = await post(pw.id, p3, signStripe(p3, pw.endpoint.secret));
      expect(late.status).toBe(400);
      expect((await late.json()).error).toMatchObject({ code: 'invalid_signature' });
      expect(await balanceOf(pw.id, 'frank')).toBe('15000000');
      expect(fake.endpoints.get(pw.webhookId)!.deleted).toBe(true);
      expect(fake.endpoints.get(newId)!.deleted).toBe(false);
      expect((await post(pw.id, p3, signStripe(p3, fresh.secret))).status).toBe(200);
      expect(await balanceOf(pw.id, 'frank')).toBe('35000000');
    } finally {
      clock.now = systemNow;
    }
    await expectLedgerProven(t.db);
  });

  it('disconnect deletes the endpoint and expires the open Checkout Sessions it created (paid ones untouched)', async () => {
    const pw = await connected();
    const paid = await checkout(pw.id, 'gina', '5');
    const p = checkoutEvent('checkout.session.completed', paid.session, 'paid');
    expect((await post(pw.id, p, signStripe(p, pw.endpoint.secret))).status).toBe(200);
    const open1 = await checkout(pw.id, 'gina', '10');
    const open2 = await checkout(pw.id, 'hugo', '20');
    const before = fake.requests.length;

    const d = await t.gql(
      pw.apiKey,
      `mutation { disconnectStripe { stripe { connected webhookId topupAmounts } } }`,
    );
    expect(d.data.disconnectStripe.stripe).toEqual({ connected: false, webhookId: null, topupAmounts: [] });
    expect(fake.endpoints.get(pw.webhookId)!.deleted).toBe(true);
    const expires = fake.requests
      .slice(before)
      .filter((r) => r.path.endsWith('/expire'))
      .map((r) => `${r.method} ${r.path} ${r.apiKey}`)
      .sort();
    expect(expires).toEqual(
      [open1.session.id, open2.session.id]
        .map((id) => `POST /v1/checkout/sessions/${id}/expire ${SECRET_KEY}`)
        .sort(),
    );
    expect(fake.sessions.get(open1.session.id)!.status).toBe('expired');
    expect(fake.sessions.get(open2.session.id)!.status).toBe('expired');
    const rows = await t.db.query<any>(
      `select session_id, status from stripe_checkout where paywall_id = $1 order by created_at`,
      [pw.id],
    );
    expect(Object.fromEntries(rows.map((r: any) => [r.session_id, r.status]))).toEqual({
      [paid.session.id]: 'paid',
      [open1.session.id]: 'expired',
      [open2.session.id]: 'expired',
    });
    const [off] = await eventsOf(pw.id, 'paywall.integration.disconnected');
    expect(off.data.integrationKey).toBe('stripe');
    const page = await new PageClient(t.url).get(`/topup/${pw.id}?user=gina`);
    expect(page.html).not.toContain('Pay 5 USD');
    expect(await balanceOf(pw.id, 'gina')).toBe('5000000');
    await expectLedgerProven(t.db);
  });

  it('two DEFAULT paywalls on one Stripe account: the same event reaches both endpoints, in either order; each credits its own session once', async () => {
    const key = 'sk_test_one_account_two_paywalls_77';
    const connect = async (name: string) => {
      const pw = await t.createPaywall('DEFAULT', name);
      const r = await t.gql(t.ownerToken, CONNECT, { input: { paywallId: pw.id, secretKey: key } });
      expect(r.errors).toBeUndefined();
      return { ...pw, webhookId: r.data.connectStripe.stripe.webhookId as string };
    };
    const staging = await connect('Staging');
    const production = await connect('Production');
    const a = await checkout(staging.id, 'sam', '10');
    const b = await checkout(production.id, 'sam', '10');
    const logFrom = logLines.length;

    // Staging's session: delivered to production first. Production's: to staging first.
    const ea = checkoutEvent('checkout.session.completed', a.session, 'paid');
    expect(await fake.deliver(key, ea, [production.webhookId, staging.webhookId])).toEqual([
      [production.webhookId, 200],
      [staging.webhookId, 200],
    ]);
    const eb = checkoutEvent('checkout.session.completed', b.session, 'paid');
    expect(await fake.deliver(key, eb, [staging.webhookId, production.webhookId])).toEqual([
      [staging.webhookId, 200],
      [production.webhookId, 200],
    ]);
    // Stripe retries both to both, in the other order: nothing more.
    await fake.deliver(key, ea, [staging.webhookId, production.webhookId]);
    await fake.deliver(key, eb, [production.webhookId, staging.webhookId]);

    expect(await balanceOf(staging.id, 'sam')).toBe('10000000');
    expect(await balanceOf(production.id, 'sam')).toBe('10000000');
    for (const pw of [staging, production]) {
      expect(await eventsOf(pw.id, 'paywall.balance.deposit.created')).toHaveLength(1);
      expect(
        await t.db.query(`select 1 from transfer where paywall_id = $1 and kind = 'deposit'`, [pw.id]),
      ).toHaveLength(1);
    }
    // Each event is recorded as processed only on the endpoint that owns its session.
    const seen = await t.db.query<any>(
      `select endpoint, event_id from stripe_event where event_id in ($1, $2) order by event_id`,
      [JSON.parse(ea).id, JSON.parse(eb).id],
    );
    expect(seen.map((r: any) => [r.endpoint, r.event_id]).sort()).toEqual(
      [
        [staging.id, JSON.parse(ea).id],
        [production.id, JSON.parse(eb).id],
      ].sort(),
    );
    // What the other endpoint ignored is logged, with why.
    const ignored = logLines
      .slice(logFrom)
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg?.startsWith('Stripe event ignored'));
    expect(ignored).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          endpoint: production.id,
          eventId: JSON.parse(ea).id,
          sessionId: a.session.id,
          reason: 'the session was started by another paywall (its own endpoint credits it)',
        }),
        expect.objectContaining({
          endpoint: staging.id,
          eventId: JSON.parse(eb).id,
          sessionId: b.session.id,
        }),
      ]),
    );
    await expectLedgerProven(t.db);
  });

  it('never logs the secret key or the endpoint secret', () => {
    const all = logLines.join('\n');
    expect(all).not.toContain(SECRET_KEY);
    for (const ep of fake.endpoints.values()) expect(all).not.toContain(ep.secret);
  });
});
