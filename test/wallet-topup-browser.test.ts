import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { launchBrowser, screenshot } from './helpers/browser.js';

/**
 * The wallet's top-up forms in Chromium when both card top-ups (the platform's Stripe) and test funds are
 * on: the "Pay N USD" buttons and the "Amount" field of "Add test funds" are two forms, and they look it.
 */
let t: TestApp;
let fake: FakeStripe;
let smtp: SmtpCatcher;
let browser: Browser;

beforeAll(async () => {
  fake = await new FakeStripe().start();
  smtp = await startSmtpCatcher();
  t = await startTestApp({
    STRIPE_API_BASE: fake.url,
    STRIPE_SECRET_KEY: 'sk_test_platform_wallet_topup_layout',
    STRIPE_WEBHOOK_SECRET: 'whsec_wallet_topup_layout_0000',
    SMTP_URL: smtp.url,
    WALLET_TEST_FUNDS: 'true',
  });
  browser = await launchBrowser();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await smtp?.close();
  await fake?.stop();
});

async function signIn(page: Page, email: string): Promise<void> {
  await page.goto(`${t.url}/wallet/sign-in`);
  await page.getByLabel('Email', { exact: true }).fill(email);
  await page.getByRole('button', { name: 'Send code', exact: true }).click();
  await page.getByLabel('Code', { exact: true }).fill(await smtp.waitForCode(email));
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('heading', { name: 'Your wallet' }).waitFor();
}

/** Pixels between the bottom of "Pay 20 USD" and the top of the "Amount" label below it. */
async function gapAbove(page: Page): Promise<number> {
  const pay = (await page.getByRole('button', { name: 'Pay 20 USD' }).boundingBox())!;
  const label = (await page.locator('label', { hasText: /^Amount$/ }).boundingBox())!;
  return label.y - (pay.y + pay.height);
}

describe('wallet top-up with cards and test funds in Chromium', () => {
  it.each([
    [1024, 'desktop'],
    [390, 'phone'],
  ])('at %i px the "Amount" of test funds does not touch the "Pay N USD" buttons', async (width, name) => {
    const context = await browser.newContext({ viewport: { width, height: 800 } });
    const page = await context.newPage();
    await signIn(page, `layout-${name}@example.com`);
    for (const path of ['/wallet', '/wallet/topup']) {
      await page.goto(`${t.url}${path}`);
      await page.getByRole('button', { name: 'Add test funds' }).waitFor();
      // Before: 0 px, the label sat on the buttons as if "Amount" belonged to them.
      expect(await gapAbove(page)).toBeGreaterThanOrEqual(12);
      // The "Pay by card …" sentence does not touch the buttons under it (0 px on the wallet page before).
      const sentence = (await page.getByText('Pay by card with Stripe').boundingBox())!;
      const pay = (await page.getByRole('button', { name: 'Pay 5 USD' }).boundingBox())!;
      expect(pay.y - (sentence.y + sentence.height)).toBeGreaterThanOrEqual(8);
      await screenshot(page, `wallet-topup-${name}${path.replaceAll('/', '-')}`);
    }
    await context.close();
  });

  it('at 390 px a refused test-funds amount is told at its field, not a screen above it', async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    await signIn(page, 'refused-amount@example.com');
    await page.goto(`${t.url}/wallet/topup`);
    await page.getByRole('textbox', { name: 'Amount' }).fill('abc');
    await page.getByRole('button', { name: 'Add test funds' }).click();
    const message =
      'Enter an amount in USDC greater than 0 and at most 1000, with at most 6 decimals (e.g. 10 or 2.5).';
    const field = page.getByRole('textbox', { name: 'Amount' });
    expect(await field.inputValue()).toBe('abc');
    expect(await field.getAttribute('aria-invalid')).toBe('true');
    // A screen reader reads the message with the field.
    const described = await field.evaluate((el) =>
      (el.getAttribute('aria-describedby') ?? '')
        .split(' ')
        .map((id) => document.getElementById(id)?.textContent?.trim())
        .join(' | '),
    );
    expect(described).toContain(message);
    // The message sits in the test-funds form, just above its field (it was at the top of the page,
    // 1,000 px above the field on a phone, past the card payment options).
    const alert = (await page.getByRole('alert').boundingBox())!;
    const box = (await field.boundingBox())!;
    expect(box.y - (alert.y + alert.height)).toBeLessThan(80);
    expect(box.y - (alert.y + alert.height)).toBeGreaterThan(0);
    await screenshot(page, 'wallet-topup-refused-phone');
    await context.close();
  });
});
