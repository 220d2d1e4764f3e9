import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe, type FakeSentEvent } from './helpers/fake-stripe.js';
import { expectLedgerProven, userAccount } from './helpers/ledger.js';
import { PageClient } from './helpers/page-client.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { connectEndUser } from './helpers/wallet-fixtures.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { chargesOf, client, createProxyPaywall, MODEL } from './helpers/proxy-setup.js';

/** Auto top-up against the fake Stripe (docs/reference.md §16 "Auto top-up", docs/stripe.md). */
const PAYWALL_KEY = 'sk_test_auto_topup_paywall_key_0a1b2c';
const PLATFORM_KEY = 'sk_test_auto_topup_platform_key_3d4e5f';
const WEBHOOK_SECRET = 'whsec_auto_topup_platform_endpoint_6a7b';

let t: TestApp;
let fake: FakeStripe;
let smtp: SmtpCatcher;

beforeAll(async () => {
  fake = await new FakeStripe().start();
  smtp = await startSmtpCatcher();
  t = await startTestApp({
    STRIPE_API_BASE: fake.url,
    STRIPE_SECRET_KEY: PLATFORM_KEY,
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    SMTP_URL: smtp.url,
    TOPUP_IP_VIEWS_PER_MINUTE: '100000',
    TOPUP_IP_CHECKOUTS_PER_HOUR: '100000',
    TOPUP_USER_CHECKOUTS_PER_HOUR: '100000',
    STRIPE_CHECKOUTS_PER_SECOND: '100000',
    STRIPE_CHECKOUTS_PER_SECOND_ALL: '100000',
  });
  // The operator made the platform's endpoint in the Stripe dashboard, with the auto top-up events.
  fake.addEndpoint({
    id: 'we_platform',
    url: `${t.url}/v1/stripe/webhooks/wallet`,
    enabled_events: [
      'checkout.session.completed',
      'checkout.session.async_payment_succeeded',
      'checkout.session.async_payment_failed',
      'payment_intent.succeeded',
      'payment_intent.payment_failed',
    ],
    secret: WEBHOOK_SECRET,
    apiKey: PLATFORM_KEY,
  });
});
afterAll(async () => {
  await t?.close();
  await smtp?.close();
  await fake?.stop();
});

const services = () => t.app.services;
/** Everything started in the background (the trigger, Stripe's events) has finished. */
async function settle() {
  for (let i = 0; i < 3; i++) {
    await services().autoTopupAttempts.idle();
    await fake.settled();
  }
  // Auto top-up turned on or off by a webhook is announced by NOTIFY; read it now rather than wait.
  await services().autoTopupThresholds.refresh();
}

const eventsOf = (paywallId: string, type: string) =>
  t.db.query<any>('select * from event where paywall_id = $1 and type = $2 order by seq', [paywallId, type]);

const charge = (apiKey: string, user: string, amount: string) =>
  t.rest('POST', '/v1/user/charge', { token: apiKey, body: { user, amount } });

// bigint columns as text: PostgreSQL and PGlite alike.
const rowOf = async (where: string, param: string) =>
  (
    await t.db.query<any>(
      `select *, threshold_raw::text as threshold_raw, amount_cents::text as amount_cents,
              monthly_cap_cents::text as monthly_cap_cents from auto_topup where ${where}`,
      [param],
    )
  )[0];

/** Pays a fake Checkout Session ("Pay" on the fake's page): its events are signed and delivered. */
async function payOnFake(sessionUrl: string) {
  const r = await fetch(`${sessionUrl}/pay`, { method: 'POST', redirect: 'manual' });
  expect(r.status).toBe(303);
}

const AUTO = (threshold: string, amount: string, cap?: string) => ({
  autoTopup: 'on',
  autoTopupThreshold: threshold,
  autoTopupAmount: amount,
  ...(cap ? { autoTopupMonthlyCap: cap } : {}),
});

describe('auto top-up, DEFAULT paywall with its own Stripe', () => {
  let pw: { id: string; apiKey: string };
  let customer: string;

  it('"Top up automatically" at Checkout saves the card on ONE Stripe customer and turns auto top-up on when paid', async () => {
    pw = await t.createPaywall('DEFAULT', 'Auto Shop');
    const r = await t.gql(
      t.ownerToken,
      `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { stripe { webhookId } } }`,
      { i: { paywallId: pw.id, secretKey: PAYWALL_KEY } },
    );
    expect(r.errors).toBeUndefined();
    // The endpoint also listens to the PaymentIntent events of auto top-up.
    expect(fake.endpoints.get(r.data.connectStripe.stripe.webhookId)!.enabled_events).toEqual(
      expect.arrayContaining(['payment_intent.succeeded', 'payment_intent.payment_failed']),
    );
    const c = new PageClient(t.url);
    const page = await c.get(`/topup/${pw.id}?user=ann`);
    expect(page.html).toContain('Top up automatically');
    expect(page.html).toContain('name="autoTopupThreshold"');
    // A bad threshold: the page again with the message, nothing at Stripe.
    const before = fake.requests.length;
    const bad = await c.post(`/topup/${pw.id}/checkout`, { user: 'ann', amount: '10', ...AUTO('-1', '10') });
    expect(bad.status).toBe(400);
    expect(bad.html).toContain('The balance below which to top up must be a USDC amount above 0');
    const badCap = await c.post(`/topup/${pw.id}/checkout`, {
      user: 'ann',
      amount: '10',
      ...AUTO('5', '10', '5'),
    });
    expect(badCap.status).toBe(400);
    expect(fake.requests.length).toBe(before);

    const res = await c.post(`/topup/${pw.id}/checkout`, {
      user: 'ann',
      amount: '10',
      ...AUTO('5', '10', '30'),
    });
    expect(res.status).toBe(303);
    const session = [...fake.sessions.values()].at(-1)!;
    expect(res.location).toBe(session.url);
    const made = fake.requests.slice(before).map((q) => `${q.method} ${q.path}`);
    expect(made).toEqual(['POST /v1/customers', 'POST /v1/checkout/sessions']);
    customer = session.customer!;
    expect(customer).toMatch(/^cus_/);
    expect(fake.customers.get(customer)!.metadata).toEqual({ paywallId: pw.id, user: 'ann' });
    expect(session.payment_intent_data).toMatchObject({ setup_future_usage: 'off_session' });
    // A second Checkout of the same user pays as the same customer (one customer per end user).
    await c.get(`/topup/${pw.id}?user=ann`);
    await c.post(`/topup/${pw.id}/checkout`, { user: 'ann', amount: '5', ...AUTO('5', '10', '30') });
    expect([...fake.sessions.values()].at(-1)!.customer).toBe(customer);
    expect(fake.customers.size).toBe(1);
    // Not paid yet: nothing on.
    expect((await rowOf('paywall_id = $1', pw.id)).enabled).toBe(false);

    await payOnFake(session.url);
    await settle();
    expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('10000000');
    const row = await rowOf('paywall_id = $1', pw.id);
    expect(row).toMatchObject({
      enabled: true,
      stripe_customer_id: customer,
      threshold_raw: '5000000',
      amount_cents: '1000',
      monthly_cap_cents: '3000',
      failures_in_row: 0,
    });
    // The card is saved to the customer; the Checkout's own PaymentIntent event credited nothing more.
    expect([...fake.paymentMethods.values()].filter((m) => m.customer === customer)).toHaveLength(1);
    expect(fake.events.map((e) => e.type)).toEqual([
      'checkout.session.completed',
      'payment_intent.succeeded',
    ]);

    // The developer sees it, read-only.
    const q = await t.gql(
      pw.apiKey,
      `query { user(externalId: "ann") { autoTopup { enabled threshold amount monthlyCap spentThisMonth failuresInRow disabledReason pending } } }`,
    );
    expect(q.errors).toBeUndefined();
    expect(q.data.user.autoTopup).toEqual({
      enabled: true,
      threshold: '5',
      amount: '10',
      monthlyCap: '30',
      spentThisMonth: '0',
      failuresInRow: 0,
      disabledReason: null,
      pending: false,
    });
  });

  let succeeded: FakeSentEvent;

  it('30 concurrent charges crossing the threshold create exactly ONE PaymentIntent (idempotency key = the attempt)', async () => {
    fake.holdEvents = true;
    // 10 USDC, 30 x 0.25 USDC: the balance crosses 5 USDC at the 21st and ends at 2.5 USDC.
    const answers = await Promise.all(Array.from({ length: 30 }, () => charge(pw.apiKey, 'ann', '0.25')));
    expect(answers.every((a) => a.status === 200 && a.body.success === true)).toBe(true);
    await settle();
    const intents = fake.apiPaymentIntents();
    expect(intents).toHaveLength(1);
    const [attempt] = await t.db.query<any>(
      `select *, amount_cents::text as amount_cents from auto_topup_attempt order by created_at`,
    );
    const create = fake.requests.filter((q) => q.path === '/v1/payment_intents');
    expect(create).toHaveLength(1);
    expect(create[0].idempotencyKey).toBe(attempt.id);
    expect(create[0].body).toMatchObject({
      amount: '1000',
      currency: 'usd',
      customer,
      off_session: 'true',
      confirm: 'true',
      metadata: { kind: 'auto_topup', autoTopupAttemptId: attempt.id, paywallId: pw.id },
    });
    expect(create[0].body.payment_method).toMatch(/^pm_/);
    expect(attempt).toMatchObject({
      status: 'pending',
      payment_intent_id: intents[0].id,
      amount_cents: '1000',
    });
    // Not credited before Stripe's event: the balance is what the charges left.
    expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('2500000');
    expect((await rowOf('paywall_id = $1', pw.id)).pending_attempt_id).toBe(attempt.id);
    // More charges while the payment is in flight make no second one.
    await charge(pw.apiKey, 'ann', '0.5');
    await settle();
    expect(fake.apiPaymentIntents()).toHaveLength(1);
    expect(fake.held.map((e) => e.type)).toEqual(['payment_intent.succeeded']);
    succeeded = fake.held.shift()!;
  });

  it('its payment_intent.succeeded, delivered 5 times at once and then 3 times in a row, credits exactly once', async () => {
    const at = await Promise.all(
      Array.from({ length: 5 }, () => fake.deliver(succeeded.apiKey, succeeded.payload)),
    );
    expect(at.flat().map(([, status]) => status)).toEqual([200, 200, 200, 200, 200]);
    for (let i = 0; i < 3; i++)
      expect((await fake.deliver(succeeded.apiKey, succeeded.payload))[0][1]).toBe(200);
    // 10 − 30 x 0.25 − 0.5 + 10 USDC, to the raw unit.
    expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('12000000');
    const transfers = await t.db.query<any>(
      `select *, amount_raw::text as amount_raw from transfer where metadata->>'paymentIntentId' is not null`,
    );
    expect(transfers).toHaveLength(1);
    expect(transfers[0]).toMatchObject({ kind: 'deposit', amount_raw: '10000000' });
    expect(transfers[0].metadata).toMatchObject({ source: 'stripe', autoTopup: true });
    const ok = await eventsOf(pw.id, 'paywall.balance.autotopup.succeeded');
    expect(ok).toHaveLength(1);
    expect(ok[0].data).toMatchObject({ amount: '10', currency: 'usd', externalUserId: 'ann' });
    const deposits = (await eventsOf(pw.id, 'paywall.balance.deposit.created')).filter(
      (e) => e.data.activityId === transfers[0].id,
    );
    expect(deposits).toHaveLength(1);
    const row = await rowOf('paywall_id = $1', pw.id);
    expect(row.pending_attempt_id).toBeNull();
    expect((await t.db.query<any>(`select status from auto_topup_attempt`))[0].status).toBe('succeeded');
    await expectLedgerProven(t.db);
  });

  it('the monthly cap stops further PaymentIntents; a new UTC month starts again', async () => {
    fake.holdEvents = false;
    // 12 → 4: the second payment (20 of 30 USD this month), credited by its event.
    await charge(pw.apiKey, 'ann', '8');
    await settle();
    expect(fake.apiPaymentIntents()).toHaveLength(2);
    expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('14000000');
    // 14 → 4: the third (30 of 30).
    await charge(pw.apiKey, 'ann', '10');
    await settle();
    expect(fake.apiPaymentIntents()).toHaveLength(3);
    expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('14000000');
    // 14 → 4: a fourth would pass the cap: none.
    await charge(pw.apiKey, 'ann', '10');
    await settle();
    expect(fake.apiPaymentIntents()).toHaveLength(3);
    expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('4000000');
    const q = await t.gql(
      pw.apiKey,
      `query { user(externalId: "ann") { autoTopup { spentThisMonth pending } } }`,
    );
    expect(q.data.user.autoTopup).toEqual({ spentThisMonth: '30', pending: false });
    // Next month (the service clock moves): the next charge below the threshold tops up again.
    const now = new Date();
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 2));
    services().clock.now = () => next;
    try {
      await charge(pw.apiKey, 'ann', '0.1');
      await settle();
      expect(fake.apiPaymentIntents()).toHaveLength(4);
      expect((await userAccount(t.db, pw.id, 'ann'))!.balance).toBe('13900000');
    } finally {
      services().clock.now = () => new Date();
    }
    await expectLedgerProven(t.db);
  });

  it('"Turn off automatic top-up" on the hosted page stops it (event with reason user)', async () => {
    const c = new PageClient(t.url);
    await c.get(`/topup/${pw.id}?user=ann`);
    const off = await c.post(`/topup/${pw.id}/autotopup/off`, { user: 'ann' });
    expect(off.status).toBe(303);
    expect(off.location).toBe(`/topup/${pw.id}?user=ann&checkout=autotopup_off`);
    expect((await c.get(off.location!)).html).toContain('Automatic top-up is off for ann');
    expect((await rowOf('paywall_id = $1', pw.id)).enabled).toBe(false);
    const [ev] = await eventsOf(pw.id, 'paywall.balance.autotopup.disabled');
    expect(ev.data).toMatchObject({ reason: 'user', externalUserId: 'ann' });
    await charge(pw.apiKey, 'ann', '10');
    await settle();
    expect(fake.apiPaymentIntents()).toHaveLength(4);
  });
});

describe('auto top-up of a hosted wallet with the platform Stripe', () => {
  it('three failed payments in a row turn it off: events, an e-mail, and the wallet page says so', async () => {
    fake.holdEvents = false;
    const email = 'auto@example.test';
    const c = new PageClient(t.url, '203.0.113.77');
    await c.get('/wallet/sign-in');
    await c.post('/wallet/sign-in', { email });
    const code = await smtp.waitForCode(email);
    expect((await c.post('/wallet/sign-in/code', { email, code })).status).toBe(303);
    const [w] = await t.db.query<any>(`select id, account_id from wallet_user where email = $1`, [email]);
    const wallet = { walletUserId: w.id as string, accountId: w.account_id as string };
    const app = await t.createPaywall('SHARED', 'Wallet App');
    expect((await t.rest('GET', '/v1/user/connect?user=wu', { token: app.apiKey })).status).toBe(200);
    await connectEndUser(t.db, app.id, 'wu', wallet);

    const topupPage = await c.get('/wallet/topup');
    expect(topupPage.html).toContain('Top up automatically');
    const res = await c.post('/wallet/topup/checkout', { amount: '20', ...AUTO('6', '10') });
    expect(res.status).toBe(303);
    const session = [...fake.sessions.values()].at(-1)!;
    expect(session.customer).toMatch(/^cus_/);
    expect(fake.customers.get(session.customer!)).toMatchObject({
      email,
      metadata: { kind: 'wallet', walletUserId: wallet.walletUserId },
    });
    await payOnFake(session.url);
    await settle();
    const row = await rowOf('wallet_user_id = $1', wallet.walletUserId);
    // The monthly limit left empty: 5 x the amount.
    expect(row).toMatchObject({ enabled: true, amount_cents: '1000', monthly_cap_cents: '5000' });
    const walletPage = await c.get('/wallet');
    expect(walletPage.html).toContain('Automatic top-up');
    expect(walletPage.html).toMatch(/<strong>On\.<\/strong>/);

    // The card now declines off-session payments.
    fake.declines.set(session.customer!, 'card_declined');
    const before = fake.apiPaymentIntents().length;
    // 20 → 10: above 6, nothing (a SHARED manual charge is at most SHARED_MAX_MANUAL_CHARGE, 5); then
    // 3 charges below 6, one failure each.
    for (const amount of ['5', '5']) expect((await charge(app.apiKey, 'wu', amount)).body.success).toBe(true);
    await settle();
    expect(fake.apiPaymentIntents().length).toBe(before);
    for (const [i, amount] of ['5', '0.5', '0.5'].entries()) {
      expect((await charge(app.apiKey, 'wu', amount)).body.success).toBe(true);
      await settle();
      expect(fake.apiPaymentIntents().length).toBe(before + i + 1);
      // The create call's StripeCardError and the payment_intent.payment_failed event count once.
      expect((await rowOf('wallet_user_id = $1', wallet.walletUserId)).failures_in_row).toBe(i + 1);
    }
    const failedEvents = fake.events.filter((e) => e.type === 'payment_intent.payment_failed');
    expect(failedEvents.length).toBe(3);
    const off = await rowOf('wallet_user_id = $1', wallet.walletUserId);
    expect(off).toMatchObject({ enabled: false, disabled_reason: 'failures', pending_attempt_id: null });
    const failed = await eventsOf(app.id, 'paywall.balance.autotopup.failed');
    expect(failed.map((e) => e.data.failuresInRow)).toEqual([1, 2, 3]);
    expect(failed[0].data).toMatchObject({ failureCode: 'card_declined', walletUserId: wallet.walletUserId });
    const disabled = await eventsOf(app.id, 'paywall.balance.autotopup.disabled');
    expect(disabled).toHaveLength(1);
    expect(disabled[0].data).toMatchObject({
      reason: 'failures',
      failuresInRow: 3,
      lastFailureCode: 'card_declined',
      walletUserId: wallet.walletUserId,
      externalUserId: 'wu',
    });
    const mail = await smtp.waitForMessage(email);
    expect(mail.subject).toBe('Automatic top-up of your wallet was turned off');
    expect(mail.text).toContain('3 card payments in a row failed');
    expect(mail.text).toContain('/wallet/topup');
    // Off: a further charge below the threshold makes no payment.
    await charge(app.apiKey, 'wu', '0.5');
    await settle();
    expect(fake.apiPaymentIntents().length).toBe(before + 3);
    expect((await c.get('/wallet')).html).toContain(
      'It was turned off after 3 failed card payments in a row.',
    );
    // Nothing was credited for the failed payments: 20 − 5 − 5 − 5 − 0.5 − 0.5 − 0.5.
    const [acct] = await t.db.query<any>(`select balance_raw::text as b from ledger_account where id = $1`, [
      wallet.accountId,
    ]);
    expect(acct.b).toBe('3500000');
    await expectLedgerProven(t.db);
  });
});

describe('auto top-up after chat charges (the proxy settlement)', () => {
  it('concurrent paid chats crossing the threshold start exactly ONE PaymentIntent, credited by its event', async () => {
    const upstream = await FakeUpstream.start();
    try {
      const pw = await createProxyPaywall(t, upstream, { markup: '1' });
      const r = await t.gql(
        t.ownerToken,
        `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { stripe { webhookId } } }`,
        { i: { paywallId: pw.id, secretKey: 'sk_test_auto_topup_chat_paywall_9z8y' } },
      );
      expect(r.errors).toBeUndefined();
      // Checkout of 5 USD with "Top up automatically" below 4.99 USDC, adding 5 USD.
      const c = new PageClient(t.url);
      await c.get(`/topup/${pw.id}?user=chatty`);
      const res = await c.post(`/topup/${pw.id}/checkout`, {
        user: 'chatty',
        amount: '5',
        ...AUTO('4.99', '5', '50'),
      });
      expect(res.status).toBe(303);
      await payOnFake([...fake.sessions.values()].at(-1)!.url);
      await settle();
      expect((await userAccount(t.db, pw.id, 'chatty'))!.balance).toBe('5000000');
      const before = fake.apiPaymentIntents().length;

      // Each chat costs 0.001057 USDC (1,057 raw): 20 of them take 5 USDC below 4.99.
      const chats = await Promise.all(
        Array.from({ length: 20 }, () =>
          client(t, pw, 'chatty').chat.completions.create({
            model: MODEL,
            messages: [{ role: 'user', content: 'hi' }],
          }),
        ),
      );
      expect(chats.every((a) => a.choices[0].message.content)).toBe(true);
      await settle();
      expect(fake.apiPaymentIntents().length - before).toBe(1);
      const after = BigInt((await userAccount(t.db, pw.id, 'chatty'))!.balance);
      const charged = (await chargesOf(t, pw, 'chatty')).reduce((s, x) => s + BigInt(x.amount), 0n);
      // The auto top-up's 5 USD were credited once on top of what the chats left.
      expect(after).toBe(5_000_000n - charged + 5_000_000n);
      await expectLedgerProven(t.db);
    } finally {
      await upstream.close();
    }
  });
});
