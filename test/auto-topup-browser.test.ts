import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { launchBrowser, screenshot } from './helpers/browser.js';

/** Ticking "Top up automatically" on the hosted top-up page in Chromium (docs/reference.md §16). */
let t: TestApp;
let fake: FakeStripe;
let browser: Browser;

beforeAll(async () => {
  fake = await new FakeStripe().start();
  t = await startTestApp({ STRIPE_API_BASE: fake.url });
  browser = await launchBrowser();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await fake?.stop();
});

describe('auto top-up on the hosted page in Chromium', () => {
  it('tick the box, choose threshold, amount and limit, pay: the card is saved and auto top-up is on', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Inkwell Writer');
    const r = await t.gql(
      t.ownerToken,
      `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { id } }`,
      { i: { paywallId: pw.id, secretKey: 'sk_test_browser_auto_topup_01' } },
    );
    expect(r.errors).toBeUndefined();
    const context = await browser.newContext({ viewport: { width: 1024, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${t.url}/topup/${pw.id}?user=zoe`);
    await page.getByLabel('Top up automatically').check();
    await page.getByLabel('when my balance falls below').fill('2');
    await page.getByLabel('add', { exact: true }).selectOption('10');
    await page.getByLabel('at most per month').fill('40');
    await screenshot(page, 'auto-topup-hosted-page');
    await page.getByRole('button', { name: 'Pay 10 USD' }).click();
    await page.waitForURL(`${fake.url}/checkout/**`);
    const session = [...fake.sessions.values()].at(-1)!;
    expect(session.customer).toMatch(/^cus_/);
    expect(session.payment_intent_data).toMatchObject({ setup_future_usage: 'off_session' });
    await page.getByRole('button', { name: /Pay 10\.00 USD/ }).click();
    await page.waitForURL(`${t.url}/topup/**`);
    expect(await page.textContent('main')).toContain('Thank you: your payment was received.');
    const [row] = await t.db.query<any>(`select * from auto_topup where paywall_id = $1`, [pw.id]);
    expect(row).toMatchObject({
      enabled: true,
      threshold_raw: '2000000',
      amount_cents: '1000',
      monthly_cap_cents: '4000',
      stripe_customer_id: session.customer,
    });
    const q = await t.gql(
      pw.apiKey,
      `query { user(externalId: "zoe") { balance autoTopup { enabled threshold } } }`,
    );
    expect(q.data.user).toEqual({ balance: '10000000', autoTopup: { enabled: true, threshold: '2' } });
    await context.close();
  });
});
