import { startTestApp, type TestApp } from './helpers/app.js';
import { checkoutEvent, FakeStripe, signStripe, type FakeSession } from './helpers/fake-stripe.js';
import { expectLedgerProven, userAccount } from './helpers/ledger.js';
import { PageClient } from './helpers/page-client.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { connectEndUser } from './helpers/wallet-fixtures.js';

/** Card top-ups of the hosted wallet with the PLATFORM's Stripe (docs/reference.md §8 "Top-up", §9 rules). */
const PLATFORM_KEY = 'sk_test_platform_wallet_key_1a2b3c4d';
const WEBHOOK_SECRET = 'whsec_platform_wallet_endpoint_secret_5e6f';

let t: TestApp;
let fake: FakeStripe;
let smtp: SmtpCatcher;
let ipSeq = 0;

beforeAll(async () => {
  fake = await new FakeStripe().start();
  smtp = await startSmtpCatcher();
  t = await startTestApp({
    STRIPE_API_BASE: fake.url,
    STRIPE_SECRET_KEY: PLATFORM_KEY,
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    SMTP_URL: smtp.url,
    WALLET_TEST_FUNDS: 'true',
    STRIPE_CHECKOUTS_PER_SECOND: '100000',
    STRIPE_CHECKOUTS_PER_SECOND_ALL: '100000',
  });
});
afterAll(async () => {
  await t?.close();
  await smtp?.close();
  await fake?.stop();
});

/** Signs in over HTTP (e-mailed code): the browser and the wallet it created. */
async function signedIn(email: string) {
  const c = new PageClient(t.url, `203.0.113.${++ipSeq}`);
  await c.get('/wallet/sign-in');
  expect((await c.post('/wallet/sign-in', { email })).status).toBe(200);
  const code = await smtp.waitForCode(email);
  expect((await c.post('/wallet/sign-in/code', { email, code })).status).toBe(303);
  const [w] = await t.db.query<any>(`select id, account_id from wallet_user where email = $1`, [email]);
  return { c, wallet: { walletUserId: w.id as string, accountId: w.account_id as string } };
}

/** Opens the wallet top-up page and clicks "Pay <amount> USD". */
async function pay(c: PageClient, amount: string) {
  const page = await c.get('/wallet/topup');
  expect(page.status).toBe(200);
  const res = await c.post('/wallet/topup/checkout', { amount });
  return { page, res, session: [...fake.sessions.values()].at(-1)! };
}

const postWebhook = (payload: string, signature?: string) =>
  fetch(`${t.url}/v1/stripe/webhooks/wallet`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(signature ? { 'stripe-signature': signature } : {}) },
    body: payload,
  });

const walletBalance = async (accountId: string) =>
  BigInt(
    (await t.db.query<any>(`select balance_raw::text as b from ledger_account where id = $1`, [accountId]))[0]
      .b,
  );

const stripeTransfers = (accountId: string) =>
  t.db.query<any>(
    `select * from transfer where credit_account_id = $1 and metadata->>'source' = 'stripe' order by seq`,
    [accountId],
  );

/** A SHARED paywall whose end user `user` is connected to the wallet. */
async function connectedApp(user: string, wallet: { walletUserId: string; accountId: string }) {
  const pw = await t.createPaywall('SHARED', `App ${user}`);
  expect((await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey })).status).toBe(200);
  await connectEndUser(t.db, pw.id, user, wallet);
  return pw;
}

const eventsOf = (paywallId: string, type: string) =>
  t.db.query<any>('select * from event where paywall_id = $1 and type = $2 order by seq', [paywallId, type]);

describe('wallet card top-ups (platform Stripe)', () => {
  it('the top-up page offers Pay 5/10/20 USD (and test funds); "Pay 10 USD" makes a platform Checkout Session → 303', async () => {
    const { c, wallet } = await signedIn('payer@example.test');
    const before = fake.requests.length;
    const { page, res, session } = await pay(c, '10');
    for (const a of ['5', '10', '20'])
      expect(page.html).toContain(`<button type="submit" name="amount" value="${a}">Pay ${a} USD</button>`);
    expect(page.html).toContain('name="amount"');
    expect(page.html).toContain('Add test funds');
    expect(res.status).toBe(303);
    expect(res.location).toBe(session.url);
    const made = fake.requests.slice(before);
    expect(made.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/checkout/sessions']);
    expect(made[0].apiKey).toBe(PLATFORM_KEY);
    expect(session).toMatchObject({ amount_total: 1000, currency: 'usd', mode: 'payment' });
    expect(session.client_reference_id).toBe(`wallet:${wallet.walletUserId}`);
    expect(session.metadata).toEqual({ kind: 'wallet', walletUserId: wallet.walletUserId });
    expect(session.success_url).toBe(`${t.url}/wallet?done=card`);
    expect(session.cancel_url).toBe(`${t.url}/wallet?done=card_canceled`);
    const [row] = await t.db.query<any>(`select * from stripe_checkout where session_id = $1`, [session.id]);
    expect(row).toMatchObject({ wallet_user_id: wallet.walletUserId, paywall_id: null, status: 'open' });
    // An amount not offered is refused; signed out goes to sign-in; the SHARED top-up link leads here.
    expect((await c.post('/wallet/topup/checkout', { amount: '11' })).status).toBe(400);
    const anon = new PageClient(t.url);
    await anon.get('/wallet/sign-in');
    expect((await anon.post('/wallet/topup/checkout', { amount: '10' })).location).toContain(
      '/wallet/sign-in',
    );
    const pw = await t.createPaywall('SHARED');
    const link = await t.rest('GET', '/v1/user/balance/topup?user=zed', { token: pw.apiKey });
    expect(link.status).toBe(200);
    expect(JSON.stringify(link.body)).toContain(`${t.url}/wallet/topup`);
  });

  it('a signed completed event credits the wallet exactly once (3 in a row, 5 at once); events per connected app', async () => {
    const { c, wallet } = await signedIn('once@example.test');
    const a = await connectedApp('ann', wallet);
    const b = await connectedApp('ben', wallet);
    const { session } = await pay(c, '10');
    const start = await walletBalance(wallet.accountId);
    const payload = checkoutEvent('checkout.session.completed', session, 'paid');
    for (let i = 0; i < 3; i++)
      expect((await postWebhook(payload, signStripe(payload, WEBHOOK_SECRET))).status).toBe(200);
    // Five different events of the same session, concurrently (plus async_succeeded): still once.
    const others = [
      ...Array.from({ length: 4 }, () => checkoutEvent('checkout.session.completed', session, 'paid')),
      checkoutEvent('checkout.session.async_payment_succeeded', session, 'paid'),
    ];
    const rs = await Promise.all(others.map((p) => postWebhook(p, signStripe(p, WEBHOOK_SECRET))));
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const same = await Promise.all(
      Array.from({ length: 5 }, () => postWebhook(payload, signStripe(payload, WEBHOOK_SECRET))),
    );
    expect(same.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);

    expect((await walletBalance(wallet.accountId)) - start).toBe(1000n * 10_000n);
    const transfers = await stripeTransfers(wallet.accountId);
    expect(transfers).toHaveLength(1);
    expect(transfers[0]).toMatchObject({ kind: 'deposit', paywall_id: null });
    expect(String(transfers[0].amount_raw)).toBe('10000000');
    expect(transfers[0].metadata).toMatchObject({ source: 'stripe', checkoutSessionId: session.id });
    const bal = await t.rest('GET', '/v1/user/balance?user=ann', { token: a.apiKey });
    expect(bal.body.balance).toBe('10000000'); // raw units (docs/reference.md §4)
    for (const [pw, user] of [
      [a, 'ann'],
      [b, 'ben'],
    ] as const) {
      const completed = await eventsOf(pw.id, 'paywall.stripe.checkout.session.completed');
      expect(completed).toHaveLength(1);
      expect(completed[0].data).toMatchObject({
        checkoutSessionId: session.id,
        amount: '10',
        currency: 'usd',
        walletUserId: wallet.walletUserId,
      });
      const deposits = await eventsOf(pw.id, 'paywall.balance.deposit.created');
      expect(deposits).toHaveLength(1);
      expect(deposits[0].data).toMatchObject({
        source: 'stripe',
        walletUserId: wallet.walletUserId,
        externalUserId: user,
        amount: '10',
        activityId: transfers[0].id,
      });
      expect(Number(deposits[0].seq)).toBeGreaterThan(Number(completed[0].seq));
    }
    const [row] = await t.db.query<any>(`select * from stripe_checkout where session_id = $1`, [session.id]);
    expect(row).toMatchObject({ status: 'paid', transfer_id: transfers[0].id });
    // The wallet page shows the card top-up.
    const page = await c.get('/wallet');
    expect(page.html).toContain('Card top-up');
    await expectLedgerProven(t.db);
  });

  it('a bad or missing signature is a 400 in the OpenAI error shape and credits nothing', async () => {
    const { c, wallet } = await signedIn('bad@example.test');
    const { session } = await pay(c, '5');
    const payload = checkoutEvent('checkout.session.completed', session, 'paid');
    const wrong = await postWebhook(payload, signStripe(payload, 'whsec_not_the_platform_secret'));
    expect(wrong.status).toBe(400);
    expect((await wrong.json()).error).toMatchObject({
      type: expect.any(String),
      message: expect.any(String),
    });
    expect((await postWebhook(payload)).status).toBe(400);
    const tampered = payload.replace('"amount_total":500', '"amount_total":50000');
    expect((await postWebhook(tampered, signStripe(payload, WEBHOOK_SECRET))).status).toBe(400);
    expect(await walletBalance(wallet.accountId)).toBe(0n);
    expect(await stripeTransfers(wallet.accountId)).toHaveLength(0);
    expect(
      await t.db.query(`select 1 from stripe_checkout where session_id = $1 and status <> 'open'`, [
        session.id,
      ]),
    ).toHaveLength(0);
    await expectLedgerProven(t.db);
  });

  it('an unpaid session credits nothing until async_payment_succeeded; a failed one never', async () => {
    const { c, wallet } = await signedIn('async@example.test');
    const app = await connectedApp('ada', wallet);
    const { session } = await pay(c, '20');
    const unpaid = checkoutEvent('checkout.session.completed', session, 'unpaid');
    expect((await postWebhook(unpaid, signStripe(unpaid, WEBHOOK_SECRET))).status).toBe(200);
    expect(await walletBalance(wallet.accountId)).toBe(0n);
    expect(await eventsOf(app.id, 'paywall.balance.deposit.created')).toHaveLength(0);
    const ok = checkoutEvent('checkout.session.async_payment_succeeded', session, 'paid');
    expect((await postWebhook(ok, signStripe(ok, WEBHOOK_SECRET))).status).toBe(200);
    expect(await walletBalance(wallet.accountId)).toBe(2000n * 10_000n);
    expect(await eventsOf(app.id, 'paywall.balance.deposit.created')).toHaveLength(1);

    const other = await pay(c, '5');
    const failed = checkoutEvent('checkout.session.async_payment_failed', other.session, 'unpaid');
    expect((await postWebhook(failed, signStripe(failed, WEBHOOK_SECRET))).status).toBe(200);
    const [row] = await t.db.query<any>(`select status from stripe_checkout where session_id = $1`, [
      other.session.id,
    ]);
    expect(row.status).toBe('failed');
    expect(await walletBalance(wallet.accountId)).toBe(2000n * 10_000n);
    await expectLedgerProven(t.db);
  });

  it('a session made elsewhere but naming a wallet in its metadata is credited once; unknown ones are ignored', async () => {
    const { wallet } = await signedIn('meta@example.test');
    const session: Partial<FakeSession> & { id: string } = {
      id: 'cs_test_dashboard_made_1',
      amount_total: 700,
      currency: 'usd',
      metadata: { kind: 'wallet', walletUserId: wallet.walletUserId },
    };
    const p = checkoutEvent('checkout.session.completed', session, 'paid');
    expect((await postWebhook(p, signStripe(p, WEBHOOK_SECRET))).status).toBe(200);
    expect((await postWebhook(p, signStripe(p, WEBHOOK_SECRET))).status).toBe(200);
    expect(await walletBalance(wallet.accountId)).toBe(700n * 10_000n);
    const unknown = checkoutEvent(
      'checkout.session.completed',
      {
        id: 'cs_test_unknown_2',
        amount_total: 700,
        currency: 'usd',
        metadata: { kind: 'wallet', walletUserId: 'nope' },
      },
      'paid',
    );
    expect((await postWebhook(unknown, signStripe(unknown, WEBHOOK_SECRET))).status).toBe(200);
    expect(
      await t.db.query(`select 1 from stripe_checkout where session_id = 'cs_test_unknown_2'`),
    ).toHaveLength(0);
    await expectLedgerProven(t.db);
  });
  it('the platform key also connected to a DEFAULT paywall: the same events reach both endpoints in either order; each credits its own session once', async () => {
    const { c, wallet } = await signedIn('both@example.test');
    const pw = await t.createPaywall('DEFAULT', 'Same Stripe account');
    const r = await t.gql(
      t.ownerToken,
      `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { stripe { webhookId } } }`,
      { i: { paywallId: pw.id, secretKey: PLATFORM_KEY } },
    );
    expect(r.errors).toBeUndefined();
    const paywallEndpoint: string = r.data.connectStripe.stripe.webhookId;
    // The operator made the platform endpoint in the Stripe dashboard, on the same account.
    fake.endpoints.set('we_platform', {
      id: 'we_platform',
      url: `${t.url}/v1/stripe/webhooks/wallet`,
      enabled_events: ['checkout.session.completed'],
      secret: WEBHOOK_SECRET,
      deleted: false,
      apiKey: PLATFORM_KEY,
    });
    try {
      const start = await walletBalance(wallet.accountId);
      const walletSession = (await pay(c, '10')).session;
      const page = new PageClient(t.url, '198.51.100.7');
      expect((await page.get(`/topup/${pw.id}?user=pat`)).status).toBe(200);
      expect((await page.post(`/topup/${pw.id}/checkout`, { user: 'pat', amount: '5' })).status).toBe(303);
      const paywallSession = [...fake.sessions.values()].at(-1)!;
      expect(paywallSession.metadata.paywallId).toBe(pw.id);

      const ew = checkoutEvent('checkout.session.completed', walletSession, 'paid');
      const ep = checkoutEvent('checkout.session.completed', paywallSession, 'paid');
      // Each session's event first reaches the endpoint that does not own it.
      expect(await fake.deliver(PLATFORM_KEY, ew, [paywallEndpoint, 'we_platform'])).toEqual([
        [paywallEndpoint, 200],
        ['we_platform', 200],
      ]);
      expect(await fake.deliver(PLATFORM_KEY, ep, ['we_platform', paywallEndpoint])).toEqual([
        ['we_platform', 200],
        [paywallEndpoint, 200],
      ]);
      // Retries, the other way round: nothing more.
      await fake.deliver(PLATFORM_KEY, ew, ['we_platform', paywallEndpoint]);
      await fake.deliver(PLATFORM_KEY, ep, [paywallEndpoint, 'we_platform']);

      expect((await walletBalance(wallet.accountId)) - start).toBe(10_000_000n);
      expect(await stripeTransfers(wallet.accountId)).toHaveLength(1);
      expect((await userAccount(t.db, pw.id, 'pat'))!.balance).toBe('5000000');
      expect(
        await t.db.query(`select 1 from transfer where paywall_id = $1 and kind = 'deposit'`, [pw.id]),
      ).toHaveLength(1);
      const seen = await t.db.query<any>(
        `select endpoint from stripe_event where event_id = $1 union all
         select endpoint from stripe_event where event_id = $2`,
        [JSON.parse(ew).id, JSON.parse(ep).id],
      );
      expect(seen.map((x: any) => x.endpoint)).toEqual(['wallet', pw.id]);
    } finally {
      fake.endpoints.delete('we_platform');
    }
    await expectLedgerProven(t.db);
  });
});
