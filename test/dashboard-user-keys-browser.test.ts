import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import OpenAI from 'openai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, deposit, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { DASHBOARD_DIR } from '../src/pages/dashboard.router.js';

/**
 * The dashboard's end-user keys (docs/reference.md §19, docs/dashboard.md "Users"), in Chromium: create a
 * key for the selected user (shown once, with a Copy button), the key works alone with the OpenAI SDK, the
 * list shows its last use, Revoke stops it.
 */
const WAIT = { timeout: 30_000 };

let t: TestApp;
let fake: FakeUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let pw: ProxyPaywall;

beforeAll(async () => {
  if (!existsSync(`${DASHBOARD_DIR}/index.html`)) execSync('npm run build:dashboard', { stdio: 'inherit' });
  fake = await FakeUpstream.start();
  t = await startTestApp();
  pw = await createProxyPaywall(t, fake);
  await deposit(t, pw, 'alice', '2');
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  page = await context.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
}, 120_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await fake?.close();
});

it('creates a key shown once with Copy, lists its last use, and revokes it', async () => {
  await page.goto(`${t.url}/dashboard`);
  await page.getByLabel('Token').fill(pw.apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Paywall' }).getByRole('link', { name: 'Users' }).click();
  await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor(WAIT);

  const form = page.getByRole('form', { name: 'New end-user key' });
  await form.getByLabel('Key for user').fill('alice');
  await form.getByLabel('Key name').fill('laptop');
  await form.getByLabel('Key limit (USDC)').fill('0.5');
  await form.getByLabel('Key limit period').selectOption('DAY');
  await form.getByRole('button', { name: 'Create key' }).click();
  const secret = page.locator('[data-secret]');
  await secret.waitFor(WAIT);
  const key = (await secret.innerText()).trim();
  expect(key).toMatch(/^uk_[0-9A-Za-z]{32,}$/);
  await page.getByRole('button', { name: 'Copy' }).click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
  await screenshot(page, 'dashboard-user-key-created');
  await page.getByRole('button', { name: 'Done' }).click();
  expect(await page.locator('[data-secret]').count()).toBe(0);
  expect(await page.content()).not.toContain(key);

  // The key alone, with the OpenAI SDK: charged to alice.
  const out = await new OpenAI({
    apiKey: key,
    baseURL: `${t.url}/v1`,
    maxRetries: 0,
  }).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Hello' }],
  });
  expect(out.choices[0].message.content).toBeTruthy();

  await page.reload();
  await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor(WAIT);
  const table = page.getByRole('table', { name: 'End-user keys' });
  const row = table.getByRole('row').filter({ hasText: 'laptop' });
  await row.waitFor(WAIT);
  const text = await row.innerText();
  expect(text).toContain(`…${key.slice(-4)}`);
  expect(text).toContain('0.001086 of 0.500000 / day');
  expect(text).not.toMatch(/—\s*Revoke/);
  await row.getByRole('button', { name: /Revoke key laptop/ }).click();
  await row.getByText('revoked').waitFor(WAIT);
  await screenshot(page, 'dashboard-user-key-revoked');
  const refused = await new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 0 }).chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] })
    .catch((e) => e);
  expect(refused.status).toBe(401);
});
