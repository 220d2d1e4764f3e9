import type { Browser, BrowserContext, Page } from 'playwright-core';
import OpenAI from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, eventsOf, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';

/**
 * The wallet page's "Keys" (docs/reference.md §19 "Wallet"), in Chromium: the end-user keys that can
 * spend from the wallet, with their app, name, last four characters and last use, each with a "Revoke"
 * button (a POST form with its CSRF token) that stops the key at once.
 */
let t: TestApp;
let smtp: SmtpCatcher;
let fake: FakeUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let pw: ProxyPaywall;

const EMAIL = 'kai@example.com';

beforeAll(async () => {
  smtp = await startSmtpCatcher();
  fake = await FakeUpstream.start();
  t = await startTestApp({ SMTP_URL: smtp.url, WALLET_TEST_FUNDS: 'true' });
  pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  await t.gql(t.ownerToken, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
    i: { paywallId: pw.id, name: 'Inkwell Writer' },
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

const chat = (key: string) =>
  new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 0 }).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Hello' }],
  });

it('lists the keys that spend from the wallet and revokes one with its Revoke button', async () => {
  // Connect kai's wallet to the app and fund it.
  const link = await t.rest('GET', '/v1/user/connect?user=kai', { token: pw.apiKey });
  await page.goto(link.body.url);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByRole('button', { name: 'Send code' }).click();
  await page.getByLabel('Code').fill(await smtp.waitForCode(EMAIL));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.goto(`${t.url}/wallet`);
  await page.getByLabel('Amount').fill('5');
  await page.getByRole('button', { name: 'Add test funds' }).click();

  // Two keys for kai; one used.
  const mk = async (name: string) =>
    (await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body: { user: 'kai', name } })).body;
  const laptop = await mk('laptop');
  const ci = await mk('ci-runner');
  expect((await chat(laptop.key)).choices[0].message.content).toBeTruthy();

  await page.goto(`${t.url}/wallet`);
  const rows = page.locator('table.keys tbody tr');
  await rows.first().waitFor();
  expect(await rows.count()).toBe(2);
  const laptopRow = rows.filter({ hasText: 'laptop' });
  const text = await laptopRow.innerText();
  expect(text).toContain('Inkwell Writer');
  expect(text).toContain(`…${laptop.last_four}`);
  expect(text).not.toContain('Never');
  expect(await rows.filter({ hasText: 'ci-runner' }).innerText()).toContain('Never');
  // A plain POST form with the CSRF token, like the other wallet forms.
  const form = laptopRow.locator('form');
  expect(await form.getAttribute('method')).toBe('post');
  expect(await form.locator('input[type="hidden"]').count()).toBeGreaterThan(0);
  await screenshot(page, 'wallet-user-keys');

  // On a phone (390 px) each key is a stacked block: the Revoke button is whole inside its card (it was
  // cut off at the card's edge, the table scrolling sideways) and the last use is labelled.
  await page.setViewportSize({ width: 390, height: 844 });
  const card = page.locator('section.card', { has: page.locator('table.keys') });
  for (const row of [laptopRow, rows.filter({ hasText: 'ci-runner' })]) {
    const button = (await row.getByRole('button', { name: 'Revoke' }).boundingBox())!;
    const box = (await card.boundingBox())!;
    expect(button.x).toBeGreaterThanOrEqual(box.x);
    expect(button.x + button.width).toBeLessThanOrEqual(box.x + box.width);
  }
  expect(await rows.filter({ hasText: 'ci-runner' }).innerText()).toContain('Last used: Never');
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  // The connected app's text has the card's width; Disconnect sits under it, not squeezed beside it.
  const app = page.locator('ul.apps li.app').first();
  const name = (await app.locator('.app-name').boundingBox())!;
  const summary = (await app.locator('.app-head > div').boundingBox())!;
  const disconnect = (await app.getByRole('button', { name: 'Disconnect' }).boundingBox())!;
  expect(disconnect.y).toBeGreaterThanOrEqual(summary.y + summary.height);
  expect(disconnect.x).toBe(name.x);
  // The unit beside the limit field stays one word ("USDC", not "USD" over "C").
  const unitLines = await app.locator('.input-unit .unit').evaluate((el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return range.getClientRects().length;
  });
  expect(unitLines).toBe(1);
  await screenshot(page, 'wallet-user-keys-phone');
  await page.setViewportSize({ width: 1024, height: 900 });

  await laptopRow.getByRole('button', { name: 'Revoke' }).click();
  await page.getByText('The key was revoked.').waitFor();
  expect(await page.locator('table.keys tbody tr').count()).toBe(1);
  await screenshot(page, 'wallet-user-keys-revoked');

  // The revoked key stops at once; the other still works.
  const refused = await chat(laptop.key).catch((e) => e);
  expect(refused.status).toBe(401);
  expect((await chat(ci.key)).choices[0].message.content).toBeTruthy();
  const revoked = (await eventsOf(t, pw, 'paywall.user_key.revoked')).find((e) => e.data.id === laptop.id);
  expect(revoked.trigger).toMatchObject({ source: 'page', actorType: 'end_user' });
  expect(revoked.data).toMatchObject({ externalUserId: 'kai', name: 'laptop', lastFour: laptop.last_four });
  expect(revoked.data.walletUserId).toBeTruthy();
});
