import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { client, createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { parseDecimal } from '../src/shared/money.js';
import { usdcText } from '../src/pages/components.js';

let t: TestApp;
let smtp: SmtpCatcher;
let fake: FakeUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let pw: ProxyPaywall;

const USER = 'zoe';
const EMAIL = 'zoe@example.com';

beforeAll(async () => {
  smtp = await startSmtpCatcher();
  fake = await FakeUpstream.start();
  // A platform fee: every charge leaves the wallet in two transfers (earnings and fee), shown as one row.
  t = await startTestApp({ SMTP_URL: smtp.url, WALLET_TEST_FUNDS: 'true', PLATFORM_FEE_BPS: '250' });
  pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  await t.gql(t.ownerToken, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
    i: {
      paywallId: pw.id,
      name: 'Inkwell Writer',
      description: 'Drafts, edits and summarises your documents.',
    },
  });
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1024, height: 800 } });
  page = await context.newPage();
}, 120_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await fake?.close();
  await smtp?.close();
});

async function connectStatus() {
  const r = await t.rest('GET', `/v1/user/connect?user=${USER}`, { token: pw.apiKey });
  expect(r.status).toBe(200);
  return r.body;
}

async function balanceRaw(): Promise<bigint> {
  const r = await t.rest('GET', `/v1/user/balance?user=${USER}`, { token: pw.apiKey });
  expect(r.status).toBe(200);
  return BigInt(r.body.balance);
}

describe('the hosted wallet in Chromium', () => {
  it('connect link → e-mailed code → consent → Approve: the API says connected', async () => {
    const link = await connectStatus();
    expect(link.connected).toBe(false);
    await page.goto(link.url);
    await page.getByLabel('Email').waitFor();
    expect(page.url()).toContain('/wallet/sign-in?next=');
    await screenshot(page, 'sign-in');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByRole('button', { name: 'Send code' }).click();
    await page.getByLabel('Code').waitFor();
    // One answer whether or not a code went out: it says nothing about the address.
    expect(await page.getByTestId('sent').innerText()).toBe(
      `If this address can sign in, we sent a 6-digit code to ${EMAIL}. It works once, for 10 minutes, and only in this browser.`,
    );
    await screenshot(page, 'sign-in-code');
    await page.getByLabel('Code').fill(await smtp.waitForCode(EMAIL));
    await page.getByRole('button', { name: 'Sign in' }).click();

    await page.getByRole('button', { name: 'Approve' }).waitFor();
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toContain('Inkwell Writer');
    expect(await page.content()).toContain('Drafts, edits and summarises your documents.');
    await expect(page.getByRole('button', { name: 'Decline' }).isVisible()).resolves.toBe(true);
    // Exactly what the app may do, with the operator's cap on one manual charge.
    const perms = (await page.locator('ul.perms li').allInnerTexts()).map((l) => l.trim());
    expect(perms).toEqual([
      'Charge your wallet for the AI usage you make in Inkwell Writer, at its published prices.',
      'Make single charges of up to 5.00 USDC each, for other things it sells.',
      "See your wallet's balance, so it can tell you when to top up.",
      'Withdraw your funds or move them anywhere but its own charges.',
      'See your e-mail address, which other apps you use, or what you do in them.',
    ]);
    expect(await page.getByRole('heading', { name: 'It can never' }).isVisible()).toBe(true);
    await screenshot(page, 'consent');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('is connected').first().waitFor();

    const now = await connectStatus();
    const [wu] = await t.db.query(`select id from wallet_user where email = $1`, [EMAIL]);
    expect(now).toMatchObject({ connected: true, connectedUser: { userId: wu.id, externalUserId: USER } });
  });

  it('the wallet page lists the app; test funds are added; a chat is charged to the wallet', async () => {
    await page.goto(`${t.url}/wallet`);
    await page.getByRole('heading', { name: 'Your wallet' }).waitFor();
    expect(await page.locator('ul.apps').innerText()).toContain('Inkwell Writer');
    await page.getByLabel('Amount').fill('25');
    await page.getByRole('button', { name: 'Add test funds' }).click();
    await page.getByText('Test funds were added').waitFor();
    expect(await page.getByTestId('balance').innerText()).toBe('25.00 USDC');
    expect(await balanceRaw()).toBe(25_000_000n);

    const before = await balanceRaw();
    const chat = await client(t, pw, USER).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hello' }],
    });
    expect(chat.choices[0].message.content).toBe('Hello from the fake upstream!');
    const cost = parseDecimal((chat.usage as any).cost, 6)!;
    expect(cost).toBeGreaterThan(0n);
    expect(await balanceRaw()).toBe(before - cost);
    expect(fake.requests.length).toBe(1);

    const manual = await t.rest('POST', '/v1/user/charge', {
      token: pw.apiKey,
      body: { user: USER, amount: '0.3', metadata: { description: 'Chapter export' } },
    });
    expect(manual.body).toMatchObject({ success: true });

    await page.reload();
    // One row per movement, with what the user paid: not the paywall's and the platform's shares.
    const rows = (await page.locator('table.activity > tbody > tr.entry').allInnerTexts()).map((r) =>
      r.split('\t').map((c) => c.trim()),
    );
    expect(rows.map((r) => r.slice(1))).toEqual([
      ['Inkwell Writer', 'Chapter export', '−0.30 USDC'],
      ['Inkwell Writer', MODEL, usdcText(-cost)],
      ['—', 'Test funds', '+25.00 USDC'],
    ]);
    expect(await page.getByTestId('balance').innerText()).toBe(usdcText(25_000_000n - cost - 300_000n));
    // The usage charge has its receipt under its row (test/receipt-browser.test.ts reads one in full);
    // the manual charge and the test funds have none.
    expect(await page.locator('table.activity > tbody > tr.receipt-row').count()).toBe(1);
    // Written the one way every amount on the pages is (usdcText): the receipt's total reads exactly as
    // the charge's row, not "0.000900 USDC" under "−0.0009 USDC".
    expect(await page.locator('details.receipt [data-testid="receipt-total"]').textContent()).toBe(
      usdcText(cost),
    );
    expect(rows[1][3]).toBe(`−${usdcText(cost)}`);
    await screenshot(page, 'wallet');

    // On a phone the amounts stay on screen (no column scrolled out of view).
    await page.setViewportSize({ width: 390, height: 800 });
    await page.reload();
    for (const cell of await page.locator('table.activity > tbody > tr > td.num').all()) {
      const box = (await cell.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(390);
    }
    await screenshot(page, 'wallet-phone');
    // The app's top-up link (what its "balance too low" reply carries) says which app sent the person.
    const topup = await t.rest('GET', `/v1/user/balance/topup?user=${USER}`, { token: pw.apiKey });
    await page.goto(topup.body.url);
    expect(await page.getByRole('status').first().innerText()).toBe(
      `Inkwell Writer sent you here to add funds. Your balance is ${usdcText(await balanceRaw())}.`,
    );
    await screenshot(page, 'wallet-topup-from-app-phone');
    await page.setViewportSize({ width: 1024, height: 800 });
    await page.goto(`${t.url}/wallet`);
  });

  it('"Disconnect" next to the app revokes at once (docs/reference.md §8): the API hands out a connect link again', async () => {
    // Named exactly "Disconnect" (docs/reference.md §8); the app's name is its description.
    const disconnect = page.getByRole('button', { name: 'Disconnect', exact: true });
    expect(await disconnect.getAttribute('aria-describedby')).toBeTruthy();
    await disconnect.click();
    await page.getByText('The app was disconnected').waitFor();
    expect(await page.locator('main').innerText()).toContain('No apps are connected');
    const revoked = await t.db.query(`select data from event where paywall_id = $1 and type = $2`, [
      pw.id,
      'paywall.authorization.revoked',
    ]);
    expect(revoked.map((e) => e.data.externalUserId)).toEqual([USER]);
    const after = await connectStatus();
    expect(after.connected).toBe(false);
    expect(after.url).toContain(`/connect/${pw.id}?`);
    await screenshot(page, 'wallet-disconnected');
  });

  it('Decline leaves the user unconnected and records the refusal', async () => {
    const link = await connectStatus();
    await page.goto(link.url);
    await page.getByRole('button', { name: 'Decline' }).click();
    await page.getByRole('heading', { name: 'Request declined' }).waitFor();
    expect((await connectStatus()).connected).toBe(false);
    const declined = await t.db.query(`select data from event where paywall_id = $1 and type = $2`, [
      pw.id,
      'paywall.authorization.declined',
    ]);
    expect(declined.map((e) => e.data.reason)).toEqual(['user_declined']);
  });
});
