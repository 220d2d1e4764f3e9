import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { fundWallet } from './helpers/wallet-fixtures.js';
import { dateText } from '../src/pages/components.js';
import { DASHBOARD_DIR } from '../src/pages/dashboard.router.js';

/**
 * docs/reference.md §16 "Refunds", in Chromium: the developer clicks Refund on a charge of a user's ledger
 * in the dashboard (the amount prefilled with what may still be refunded), and the wallet user sees the
 * refund on the hosted wallet page: its own activity row with the reason, and under the charge's receipt
 * with the net amount paid.
 */
const WAIT = { timeout: 30_000 };
const USER = 'rosa';
const EMAIL = 'rosa@example.com';

let t: TestApp;
let smtp: SmtpCatcher;
let fake: FakeUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let pw: ProxyPaywall;
let chargeId = '';

beforeAll(async () => {
  if (!existsSync(`${DASHBOARD_DIR}/index.html`)) execSync('npm run build:dashboard', { stdio: 'inherit' });
  smtp = await startSmtpCatcher();
  fake = await FakeUpstream.start();
  t = await startTestApp({ SMTP_URL: smtp.url, PLATFORM_FEE_BPS: '250' });
  pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  const named = await t.gql(pw.apiKey, `mutation { updatePaywall(input: {name: "Inkwell Writer"}) { id } }`);
  expect(named.errors).toBeUndefined();
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
}, 120_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await fake?.close();
  await smtp?.close();
});

let failures = 0;
async function shot<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    await screenshot(page, `refund-failed-${++failures}`).catch(() => undefined);
    throw e;
  }
}

describe('a refund from the dashboard, seen on the wallet page, in Chromium', () => {
  it('the wallet user connects through the hosted pages and a chat is charged to the wallet', async () => {
    const link = await t.rest('GET', `/v1/user/connect?user=${USER}`, { token: pw.apiKey });
    await page.goto(link.body.url);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByRole('button', { name: 'Send code' }).click();
    await page.getByLabel('Code').fill(await smtp.waitForCode(EMAIL));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('is connected').first().waitFor(WAIT);
    const [wu] = await t.db.query(`select account_id from wallet_user where email = $1`, [EMAIL]);
    await fundWallet(t.db, wu.account_id, 20_000n);
    const chat = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': USER },
      body: { model: MODEL, messages: [{ role: 'user', content: 'Summarise the chapter' }] },
    });
    expect(chat.headers.get('x-paywall-cost')).toBe('0.001086');
    chargeId = chat.headers.get('x-paywall-charge-id')!;
    expect(chargeId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('the dashboard’s ledger offers Refund, prefilled with the rest; a partial refund shows on the row', async () => {
    await shot(async () => {
      await page.goto(`${t.url}/dashboard`);
      await page.getByLabel('Token').fill(t.ownerToken);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('link', { name: 'Inkwell Writer' }).click();
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);
      await page.getByRole('navigation', { name: 'Paywall' }).getByRole('link', { name: 'Users' }).click();
      await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor(WAIT);
      await page.getByLabel('Find a user').fill(USER);
      await page.getByRole('button', { name: 'Search' }).click();
      await page.getByRole('button', { name: USER, exact: true }).click();
      const ledger = page.getByRole('table', { name: 'Ledger' });
      const usage = ledger.getByRole('row').filter({ hasText: 'usage' });
      await usage.waitFor(WAIT);
      await usage.getByRole('button', { name: 'Refund 0.001086 USDC of this charge' }).click();

      const form = page.getByRole('form', { name: 'Refund charge' });
      await form.waitFor(WAIT);
      await expect(form.getByLabel('Refund amount (USDC)').inputValue()).resolves.toBe('0.001086');
      await form.getByText(chargeId).waitFor(WAIT);
      await form.getByLabel('Refund amount (USDC)').fill('0.0005');
      await form.getByLabel('Reason').fill('Answer was cut short');
      await screenshot(page, 'refund-dashboard-form');
      await form.getByRole('button', { name: 'Refund 0.0005 USDC' }).click();
      await page.getByText('Refunded 0.000500 USDC.').waitFor(WAIT);

      // The ledger now has the refund as an entry of its own, and the charge's row says what was refunded.
      await ledger.getByRole('cell', { name: 'refund', exact: true }).waitFor(WAIT);
      const rows = (await ledger.getByRole('row').allInnerTexts())
        .slice(1)
        .map((r) => r.split('\t').slice(1));
      expect(rows.map((r) => r.slice(0, 3).join(' '))).toEqual([
        'refund +0.000500 0.019414',
        'usage −0.001086 0.018914',
      ]);
      expect(rows[0][3]).toBe('Answer was cut short');
      await expect(usage.getByTestId('refunded').innerText()).resolves.toBe('Refunded 0.000500');
      // What is left may still be refunded.
      await usage.getByRole('button', { name: 'Refund 0.000586 USDC of this charge' }).waitFor(WAIT);
      await expect(page.getByTestId('user-balance').innerText()).resolves.toBe('0.019414 USDC');
      await screenshot(page, 'refund-dashboard-ledger');
    });
    const refunds = await t.db.query(
      `select amount_raw::text as a, earnings_raw::text as e, fee_raw::text as f, reason from refund where charge_id = $1`,
      [chargeId],
    );
    // Fee of the charge: floor(1086 x 250 / 10000) = 27; its part of 500: floor(500 x 27 / 1086) = 12.
    expect(refunds).toEqual([{ a: '500', e: '488', f: '12', reason: 'Answer was cut short' }]);
    await expectLedgerProven(t.db);
  });

  it('the wallet page shows the refund in the activity and under the charge’s receipt, with the net paid', async () => {
    await shot(async () => {
      await page.goto(`${t.url}/wallet`);
      await page.getByRole('heading', { name: 'Your wallet' }).waitFor(WAIT);
      const entries = (await page.locator('table.activity > tbody > tr.entry').allInnerTexts()).map((r) =>
        r
          .split('\t')
          .slice(1)
          .map((c) => c.replace(/\s+/g, ' ').trim()),
      );
      // The refund names its charge as the person saw it (what and when), not by a fragment of its id
      // ("for charge 1f0c9a2e", which matched nothing they could see for a charge without a receipt).
      const [{ created_at: chargedAt }] = await t.db.query(`select created_at from charge where id = $1`, [
        chargeId,
      ]);
      expect(entries).toEqual([
        [
          'Inkwell Writer',
          `Refund · Answer was cut short for ${MODEL} of ${dateText(new Date(chargedAt))}`,
          '+0.0005 USDC',
        ],
        ['Inkwell Writer', MODEL, '−0.001086 USDC'],
        ['—', 'Test funds', '+0.02 USDC'],
      ]);
      const receipt = page.locator('details.receipt', {
        has: page.locator('.r-ref', { hasText: chargeId }),
      });
      await receipt.locator('summary').click();
      await receipt.locator('.receipt-body').waitFor({ state: 'visible' });
      const refund = receipt.getByTestId('receipt-refund');
      expect((await refund.innerText()).replace(/\s+/g, ' ').trim()).toMatch(
        /^Refunded \d{1,2} \w{3} \d{4}, \d{2}:\d{2}( UTC)? · Answer was cut short −0\.0005 USDC$/,
      );
      await expect(receipt.getByTestId('receipt-total').innerText()).resolves.toBe('0.001086 USDC');
      await expect(receipt.getByTestId('receipt-net').innerText()).resolves.toBe('0.000586 USDC');
      await screenshot(page, 'refund-wallet');
    });
  });
});
