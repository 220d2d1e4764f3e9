import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { launchBrowser, screenshot } from './helpers/browser.js';

let t: TestApp;
let fake: FakeStripe;
let browser: Browser;

beforeAll(async () => {
  fake = await new FakeStripe().start();
  // One Checkout Session per second per Stripe key, on a frozen clock: the second click is refused.
  t = await startTestApp({ STRIPE_API_BASE: fake.url, STRIPE_CHECKOUTS_PER_SECOND: '1' });
  t.app.services.clock.now = () => new Date('2026-11-25T12:00:00.000Z');
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
    // Whose balance, on which app, in which units: what a payer reads before paying.
    expect(await page.textContent('p.lead')).toBe('For the account zoe on Inkwell Writer.');
    const offers = (await page.locator('ul.topup-options li').allTextContents()).map((t) =>
      t.replace(/\s+/g, ' '),
    );
    expect(offers).toEqual([
      "Pay 5 USDadds 5.00 USDC to zoe's balance on Inkwell Writer",
      "Pay 10 USDadds 10.00 USDC to zoe's balance on Inkwell Writer",
      "Pay 20 USDadds 20.00 USDC to zoe's balance on Inkwell Writer",
    ]);
    // On a phone each offer is its button with the sentence under it at the card's width (the sentence was
    // squeezed into a 130 px column beside the button, five lines for one offer).
    await page.setViewportSize({ width: 390, height: 844 });
    for (const offer of await page.locator('ul.topup-options li').all()) {
      const button = (await offer.getByRole('button').boundingBox())!;
      const sentence = (await offer.locator('span').boundingBox())!;
      expect(sentence.y).toBeGreaterThanOrEqual(button.y + button.height);
      expect(sentence.height).toBeLessThan(60); // at most two lines
    }
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(page, 'stripe-topup-page-phone');
    await page.setViewportSize({ width: 1024, height: 700 });
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
  it('over a limit, "Pay" shows a clear 429 page: what happened, that nothing was charged, when to retry', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Busy Shop');
    const r = await t.gql(
      t.ownerToken,
      `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { id } }`,
      { i: { paywallId: pw.id, secretKey: 'sk_test_browser_key_busy_0001' } },
    );
    expect(r.errors).toBeUndefined();
    const context = await browser.newContext({ viewport: { width: 1024, height: 700 } });
    const page = await context.newPage();
    await page.goto(`${t.url}/topup/${pw.id}?user=yan`);
    await page.getByRole('button', { name: 'Pay 5 USD' }).click();
    await page.waitForURL(`${fake.url}/checkout/**`);
    await page.goto(`${t.url}/topup/${pw.id}?user=yan`);
    const [answer] = await Promise.all([
      page.waitForResponse((res) => res.url().endsWith('/checkout')),
      page.getByRole('button', { name: 'Pay 10 USD' }).click(),
    ]);
    expect(answer.status()).toBe(429);
    expect(await page.textContent('h1')).toBe('Too many attempts');
    expect(await page.textContent('main')).toContain(
      'Card payments are busy right now, so no payment was started and nothing was charged. Wait 1 second, then try again.',
    );
    // The app's page, not the wallet's: no wallet header; a way back to the amounts.
    expect(await page.textContent('header')).not.toContain('Wallet');
    expect(await page.getByRole('link', { name: 'Back to the top-up page' }).getAttribute('href')).toBe(
      `/topup/${pw.id}?user=yan`,
    );
    await screenshot(page, 'stripe-topup-rate-limited');
    await context.close();
  });
});
