import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { launchBrowser, screenshot } from './helpers/browser.js';

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

describe('the hosted Stripe top-up page in Chromium', () => {
  it('"Pay 10 USD" lands on the Checkout Session of 10 USD for that user', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Inkwell Writer');
    const r = await t.gql(
      t.ownerToken,
      `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { id } }`,
      { i: { paywallId: pw.id, secretKey: 'sk_test_browser_key_0123456789' } },
    );
    expect(r.errors).toBeUndefined();
    const link = await t.rest('GET', '/v1/user/balance/topup?user=zoe', { token: pw.apiKey });
    const url = JSON.stringify(link.body).match(/https?:\/\/[^"]*\/topup\/[^"]*/)![0];
    const context = await browser.newContext({ viewport: { width: 1024, height: 700 } });
    const page = await context.newPage();
    await page.goto(url);
    await screenshot(page, 'stripe-topup-page');
    await page.getByRole('button', { name: 'Pay 10 USD' }).click();
    await page.waitForURL(`${fake.url}/checkout/**`);
    const session = [...fake.sessions.values()].at(-1)!;
    expect(page.url()).toBe(session.url);
    expect(session).toMatchObject({ amount_total: 1000, currency: 'usd' });
    expect(session.metadata.user).toBe('zoe');
    expect(await page.textContent('#amount')).toBe('Pay 10.00 USD');
    await screenshot(page, 'stripe-checkout-landing');
    await context.close();
  });
});
