import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { client, createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { parseDecimal } from '../src/shared/money.js';
import { usdcText } from '../src/pages/components.js';

/**
 * Per-app spending limits in Chromium (docs/reference.md §16 "Allowance (SHARED)"): set on the consent page,
 * shown and changed ("Save limit") on the wallet page; chats through the `openai` SDK until the limit, then
 * the `allowance_exceeded` reply with the wallet link; two apps on one wallet, each within its own limit;
 * 100 concurrent chats never exceed a small limit.
 */
let t: TestApp;
let smtp: SmtpCatcher;
let fake: FakeUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let ink: ProxyPaywall;
let sketch: ProxyPaywall;

const EMAIL = 'lena@example.com';

beforeAll(async () => {
  smtp = await startSmtpCatcher();
  fake = await FakeUpstream.start();
  t = await startTestApp({ SMTP_URL: smtp.url, WALLET_TEST_FUNDS: 'true' });
  ink = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  sketch = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  for (const [pw, name, description] of [
    [ink, 'Inkwell Writer', 'Drafts, edits and summarises your documents.'],
    [sketch, 'Sketchpad', 'Turns your notes into diagrams.'],
  ] as const)
    await t.gql(t.ownerToken, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
      i: { paywallId: pw.id, name, description },
    });
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1024, height: 900 } });
  page = await context.newPage();
}, 120_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await fake?.close();
  await smtp?.close();
});

const chat = (pw: ProxyPaywall, user: string) =>
  client(t, pw, user).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello' }],
  });

/** Chats one after another until the limit refuses one; returns how many were served and the refusal. */
async function chatUntilRefused(pw: ProxyPaywall, user: string) {
  let served = 0;
  let spent = 0n;
  for (let i = 0; i < 50; i++) {
    const r: any = await chat(pw, user);
    if (r.paywall) return { served, spent, refusal: r };
    served++;
    spent += parseDecimal(r.usage.cost, 6)!;
  }
  throw new Error('never refused');
}

/** What the app's end user was charged (completed charges). */
async function chargedRaw(pw: ProxyPaywall, user: string): Promise<bigint> {
  const [r] = await t.db.query(
    `select coalesce(sum(c.amount_raw), 0)::text as s from charge c join end_user e on e.id = c.user_id
      where e.paywall_id = $1 and e.external_id = $2 and c.status = 'completed'`,
    [pw.id, user],
  );
  return BigInt(r.s);
}

async function approveWithLimit(pw: ProxyPaywall, user: string, limit: string, period: string) {
  const link = await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey });
  expect(link.body.connected).toBe(false);
  await page.goto(link.body.url);
  return { link: link.body.url as string, fill: () => fillConsent(limit, period) };
}

async function fillConsent(limit: string, period: string) {
  await page.getByRole('button', { name: 'Approve' }).waitFor();
  await page.getByLabel('Spending limit', { exact: true }).fill(limit);
  await page.getByLabel('Period').selectOption(period);
}

/** The wallet page's entry of an app. */
const appItem = (name: string) => page.locator('ul.apps > li').filter({ hasText: name });

describe('spending limits in Chromium', () => {
  it('consent with a limit of 0.01 per day → chats until the limit → allowance_exceeded with the wallet link', async () => {
    const { fill } = await approveWithLimit(ink, 'ana', '0.01', 'day');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByRole('button', { name: 'Send code' }).click();
    await page.getByLabel('Code').fill(await smtp.waitForCode(EMAIL));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await fill();
    // The form's fields as the contract names them.
    expect(await page.locator('input[name="allowance"]').inputValue()).toBe('0.01');
    expect(await page.locator('select[name="allowancePeriod"]').inputValue()).toBe('day');
    expect(
      await page
        .locator('select[name="allowancePeriod"] option')
        .evaluateAll((o) => o.map((x: any) => x.value)),
    ).toEqual(['day', 'week', 'month', 'total']);
    await screenshot(page, 'consent-allowance');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('Inkwell Writer is connected').waitFor();
    expect(await page.locator('main').innerText()).toContain('It may spend at most 0.01 USDC per day.');

    await page.goto(`${t.url}/wallet`);
    await page.getByLabel('Amount').fill('25');
    await page.getByRole('button', { name: 'Add test funds' }).click();
    await page.getByText('Test funds were added').waitFor();

    const { served, spent, refusal } = await chatUntilRefused(ink, 'ana');
    expect(served).toBeGreaterThan(1);
    expect(spent).toBeLessThanOrEqual(10_000n);
    expect(refusal.paywall).toMatchObject({ reason: 'allowance_exceeded', url: `${t.url}/wallet` });
    expect(refusal.choices[0].message.content).toContain(`${t.url}/wallet`);
    expect(await chargedRaw(ink, 'ana')).toBe(spent);
  });

  it('a second app on the same wallet, with its own limit: each stays within its own', async () => {
    const { fill } = await approveWithLimit(sketch, 'ana-s', '0.005', 'week');
    await fill();
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('Sketchpad is connected').waitFor();
    const s = await chatUntilRefused(sketch, 'ana-s');
    expect(s.served).toBeGreaterThan(0);
    expect(s.spent).toBeLessThanOrEqual(5_000n);
    expect(s.refusal.paywall.reason).toBe('allowance_exceeded');
    // Inkwell is still at its limit; Sketchpad's spending did not count on it.
    const inkSpent = await chargedRaw(ink, 'ana');
    expect(((await chat(ink, 'ana')) as any).paywall.reason).toBe('allowance_exceeded');
    expect(await chargedRaw(ink, 'ana')).toBe(inkSpent);

    await page.goto(`${t.url}/wallet`);
    await page.getByRole('heading', { name: 'Your wallet' }).waitFor();
    const inkText = await appItem('Inkwell Writer').innerText();
    expect(inkText).toContain(`Limit 0.01 USDC per day · ${usdcText(inkSpent)} spent · resets`);
    const sketchText = await appItem('Sketchpad').innerText();
    expect(sketchText).toContain(`Limit 0.005 USDC per week · ${usdcText(s.spent)} spent · resets`);
    // Each app's form holds its own limit.
    const inkForm = page.getByRole('form', { name: 'Spending limit for Inkwell Writer' });
    expect(await inkForm.getByLabel('Spending limit', { exact: true }).inputValue()).toBe('0.01');
    expect(await inkForm.getByLabel('Period').inputValue()).toBe('day');
    await screenshot(page, 'wallet-allowance');
  });

  it('"Save limit" raised → served again; 100 concurrent chats never exceed the new limit', async () => {
    const inkForm = page.getByRole('form', { name: 'Spending limit for Inkwell Writer' });
    await inkForm.getByLabel('Spending limit', { exact: true }).fill('0.05');
    await inkForm.getByRole('button', { name: 'Save limit' }).click();
    await page.getByText('The spending limit was saved.').waitFor();
    expect(await appItem('Inkwell Writer').innerText()).toContain('Limit 0.05 USDC per day');
    const again: any = await chat(ink, 'ana');
    expect(again.paywall).toBeUndefined();
    expect(again.choices[0].message.content).toBe('Hello from the fake upstream!');

    fake.behavior = { delayMs: 15 };
    try {
      const replies: any[] = await Promise.all(Array.from({ length: 100 }, () => chat(ink, 'ana')));
      const refused = replies.filter((r) => r.paywall);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused.every((r) => r.paywall.reason === 'allowance_exceeded')).toBe(true);
    } finally {
      fake.behavior = {};
    }
    const total = await chargedRaw(ink, 'ana');
    expect(total).toBeLessThanOrEqual(50_000n);
    const [w] = await t.db.query(
      `select c.allowance_spent_raw::text as spent from wallet_connection c join end_user e on e.id = c.end_user_id
        where e.paywall_id = $1 and e.external_id = 'ana'`,
      [ink.id],
    );
    expect(BigInt(w.spent)).toBe(total);
    await page.reload();
    expect(await appItem('Inkwell Writer').innerText()).toContain(`${usdcText(total)} spent`);
    // A bad limit is refused on the page, nothing changes.
    await inkForm.getByLabel('Spending limit', { exact: true }).fill('lots');
    await inkForm.getByRole('button', { name: 'Save limit' }).click();
    await page.getByText('Enter the spending limit in USDC').waitFor();
    expect(await appItem('Inkwell Writer').innerText()).toContain('Limit 0.05 USDC per day');
  });
});
