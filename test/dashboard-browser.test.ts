import { execSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { connectShared, type ProxyPaywall } from './helpers/proxy-setup.js';
import { WebhookReceiver } from './helpers/webhook-receiver.js';
import { DASHBOARD_DIR } from '../src/pages/dashboard.router.js';

// Generous waits on visible text (a loaded 2-core machine), never sleeps.
const WAIT = { timeout: 30_000 };
const MODEL = 'gpt-test';

let t: TestApp;
let fake: FakeUpstream;
let hooks: WebhookReceiver;
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** A second tab of the same browser: the Live feed stays open there while the first tab works. */
let live: Page;
let apiKey = '';
let paywallId = '';
let hookFails = true;

beforeAll(async () => {
  // npm ci builds the dashboard (prepare); a checkout that skipped it builds it here once.
  if (!existsSync(`${DASHBOARD_DIR}/index.html`)) execSync('npm run build:dashboard', { stdio: 'inherit' });
  fake = await FakeUpstream.start();
  hooks = await WebhookReceiver.start();
  // The receiver refuses (400: no retries) until the test lets it succeed, then the redelivery lands.
  hooks.respond(() =>
    hookFails ? { status: 400, body: '{"error":"not ready"}' } : { status: 200, body: 'ok' },
  );
  t = await startTestApp();
  // Another paywall of the same owner: listed for the owner, never shown to the new paywall's API key.
  await t.createPaywall('DEFAULT', 'Acme Support Bot');
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = await context.newPage();
  page.on('dialog', (d) => void d.accept());
  live = await context.newPage();
  // Script errors of the app fail loudly in the output.
  for (const p of [page, live]) {
    p.on('pageerror', (e) => console.error(`page error: ${e.message}`));
    p.on('console', (m) => m.type() === 'error' && console.error(`console error: ${m.text()}`));
  }
  // The tab in front gets animation frames (Playwright's "stable" check needs them); the other is throttled.
  await page.bringToFront();
}, 120_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await fake?.close();
  await hooks?.close();
});

// A failed wait leaves a screenshot of what the page showed (test/screenshots/dashboard-failed-*.png).
let failures = 0;
async function shot<T>(p: Page, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    await screenshot(p, `dashboard-failed-${++failures}`).catch(() => undefined);
    throw e;
  }
}

const url = (path = '') => `${t.url}/dashboard${path}`;

async function signIn(p: Page, token: string): Promise<void> {
  await p.goto(url());
  await p.getByLabel('Token').fill(token);
  await p.getByRole('button', { name: 'Sign in' }).click();
}

async function nav(p: Page, name: string): Promise<void> {
  await p.getByRole('navigation', { name: 'Paywall' }).getByRole('link', { name }).click();
  await p.getByRole('heading', { level: 1, name }).waitFor(WAIT);
}

/** Money as the dashboard shows it: grouped thousands, 6 decimals. */
const shown = (raw: bigint | string) => {
  const s = (Number(raw) / 1e6).toFixed(6);
  const [int, frac] = s.split('.');
  return `${int.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${frac}`;
};

/** Clicks Refresh and waits for the GraphQL answer it asked for. */
async function refresh(): Promise<void> {
  const answered = page.waitForResponse((r) => r.url().endsWith('/graphql'), WAIT);
  await page.getByRole('button', { name: 'Refresh' }).click();
  await answered;
}

describe('the dashboard in Chromium', () => {
  it('serves the app with its CSP, a no-cache page, immutable assets and an SPA fallback', async () => {
    const res = await fetch(url('/p/some/route'));
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    const asset = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)![1];
    const js = await fetch(`${t.url}${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('cache-control')).toContain('immutable');
    expect((await fetch(`${t.url}/dashboard/assets/missing.js`)).status).toBe(404);
  });

  it('signs in with the owner token: the paywalls are listed by name; the token stays in the tab', async () => {
    await page.goto(url());
    // The tab's title names the view (it was "Paywall Proxy — Dashboard" on every view).
    expect(await page.title()).toBe('Sign in · Paywall Proxy Dashboard');
    await page.getByLabel('Token').fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('not valid').waitFor(WAIT);
    await screenshot(page, 'dashboard-sign-in');
    await page.getByLabel('Token').fill(t.ownerToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Acme Support Bot' }).waitFor(WAIT);
    expect(await page.title()).toBe('Paywalls · Paywall Proxy Dashboard');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(2);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
  });

  it('creates a paywall: the API key is shown once, with a copy button', async () => {
    await page.getByLabel('Name', { exact: true }).fill('Inkwell Writer');
    await page.getByRole('button', { name: 'Create paywall' }).click();
    const key = page.locator('[data-secret]');
    await key.waitFor(WAIT);
    apiKey = (await key.innerText()).trim();
    expect(apiKey.length).toBeGreaterThan(20);
    await expect(page.getByRole('button', { name: 'Copy' }).isVisible()).resolves.toBe(true);
    await page.getByRole('link', { name: 'Inkwell Writer' }).waitFor(WAIT);
    await screenshot(page, 'dashboard-paywalls');
    // The key works, and it is the new paywall's.
    const me = await t.gql(apiKey, `{ paywall { id name } }`);
    expect(me.data.paywall.name).toBe('Inkwell Writer');
    paywallId = me.data.paywall.id;
    await page.getByRole('button', { name: 'Done' }).click();
    await expect(page.locator('[data-secret]').count()).resolves.toBe(0);
  });

  it('connects the provider and a webhook endpoint; prices a model, end-user price next to cost', async () => {
    await page.getByRole('link', { name: 'Inkwell Writer' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);

    await nav(page, 'Settings');
    await page.getByLabel('Markup').fill('1.5');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await shot(page, () => page.getByText('Saved.').waitFor(WAIT));
    await page.getByLabel('Provider base URL').fill(fake.baseUrl);
    await page.getByLabel('Provider API key').fill('sk-upstream-provider-secret-0001');
    await page.getByRole('button', { name: 'Connect provider' }).click();
    await page.getByRole('button', { name: 'Replace provider' }).waitFor(WAIT);
    // The cap field of a chat whose client sent none: max_completion_tokens unless chosen otherwise.
    await page.getByText('max_completion_tokens', { exact: true }).waitFor(WAIT);
    await expect(page.getByLabel('Cap field when the client sends none').inputValue()).resolves.toBe(
      'MAX_COMPLETION_TOKENS',
    );
    await screenshot(page, 'dashboard-settings');

    await nav(page, 'Webhooks');
    await page.getByLabel('Endpoint URL').fill(hooks.url('/hook'));
    await page.getByLabel('Events').fill('paywall.balance.*');
    await page.getByRole('button', { name: 'Subscribe' }).click();
    await page.getByRole('region', { name: 'Signing secret' }).waitFor(WAIT);
    await page.getByRole('cell', { name: hooks.url('/hook') }).waitFor(WAIT);

    await nav(page, 'Models & prices');
    await page.getByText('No models priced yet').waitFor(WAIT);
    await page.getByLabel('Model id').fill(MODEL);
    await page.getByLabel('Prompt cost per token (USDC)').fill('0.000002');
    await page.getByLabel('Completion cost per token (USDC)').fill('0.000005');
    await page.getByLabel('Price per request (USDC)').fill('0.001');
    await page.getByRole('button', { name: 'Save price' }).click();
    const row = page.getByRole('table', { name: 'Model prices' }).getByRole('row').filter({ hasText: MODEL });
    await row.waitFor(WAIT);
    // Per million tokens: cost 2.00 → end-user 3.00 (markup 1.5); completion 5.00 → 7.50.
    const cells = await row.getByRole('cell').allInnerTexts();
    expect(cells.slice(1, 6)).toEqual(['2.00', '3.00', '5.00', '7.50', '0.001']);

    // Usage bucket prices (docs/reference.md §13): empty fields follow, their placeholder the price followed.
    await page.getByRole('button', { name: `Edit ${MODEL}` }).click();
    const bucket = (name: string) => page.getByLabel(name, { exact: true });
    const cached = bucket('Cached input');
    await expect(cached.inputValue()).resolves.toBe('');
    await expect(cached.getAttribute('placeholder')).resolves.toBe('0.000002');
    await expect(bucket('Audio output').getAttribute('placeholder')).resolves.toBe('0.000005');
    await page.getByText('an empty field follows the prompt cost').waitFor(WAIT);
    await cached.fill('0.0000005');
    await bucket('Cache write').fill('0.0000025');
    await bucket('Reasoning').fill('0.000008');
    await screenshot(page, 'dashboard-models-bucket-form');
    await page.getByRole('button', { name: 'Save price' }).click();
    await page.getByText(`Saved ${MODEL}.`).waitFor(WAIT);
    const prices = `{ models { id costPricing { ...P } pricing { ...P } } }
      fragment P on ModelPricing { prompt completion request cacheRead cacheWrite audioPrompt reasoning audioCompletion }`;
    const saved = await t.gql(apiKey, prices);
    expect(saved.data.models).toEqual([
      {
        id: MODEL,
        costPricing: {
          prompt: '0.000002',
          completion: '0.000005',
          request: '0.001',
          cacheRead: '0.0000005',
          cacheWrite: '0.0000025',
          audioPrompt: '0.000002',
          reasoning: '0.000008',
          audioCompletion: '0.000005',
        },
        pricing: {
          prompt: '0.000003',
          completion: '0.0000075',
          request: '0.001',
          cacheRead: '0.00000075',
          cacheWrite: '0.00000375',
          audioPrompt: '0.000003',
          reasoning: '0.000012',
          audioCompletion: '0.0000075',
        },
      },
    ]);
    // The table: below the prompt and completion prices, the buckets priced apart (per million tokens).
    await row.getByText('cache write').first().waitFor(WAIT);
    expect((await row.getByRole('cell').allInnerTexts()).slice(1, 6)).toEqual([
      '2.00\ncached 0.50\ncache write 2.50',
      '3.00\ncached 0.75\ncache write 3.75',
      '5.00\nreasoning 8.00',
      '7.50\nreasoning 12.00',
      '0.001',
    ]);

    // Editing shows the prices of their own; emptying one makes it follow the prompt price again.
    await page.getByRole('button', { name: `Edit ${MODEL}` }).click();
    await expect(cached.inputValue()).resolves.toBe('0.0000005');
    await expect(bucket('Audio input').inputValue()).resolves.toBe('');
    await expect(bucket('Cache write').inputValue()).resolves.toBe('0.0000025');
    await bucket('Cache write').fill('');
    await page.getByRole('button', { name: 'Save price' }).click();
    await page.getByText(`Saved ${MODEL}.`).waitFor(WAIT);
    await row
      .getByText('cache write')
      .first()
      .waitFor({ ...WAIT, state: 'detached' });
    const after = (await t.gql(apiKey, prices)).data.models[0].costPricing;
    expect(after).toMatchObject({ cacheRead: '0.0000005', cacheWrite: '0.000002', reasoning: '0.000008' });
    expect((await row.getByRole('cell').allInnerTexts()).slice(1, 6)).toEqual([
      '2.00\ncached 0.50',
      '3.00\ncached 0.75',
      '5.00\nreasoning 8.00',
      '7.50\nreasoning 12.00',
      '0.001',
    ]);

    // Images and audio (docs/reference.md §22): prices per image, per second, per 1,000 characters.
    await page.getByRole('button', { name: `Edit ${MODEL}` }).click();
    await bucket('Per image (size quality price; …)').fill('1024x1024 hd 0.08; * * 0.2');
    await bucket('Per second of audio').fill('0.0001');
    await bucket('Per 1,000 characters').fill('0.015');
    await page.getByRole('button', { name: 'Save price' }).click();
    await page.getByText(`Saved ${MODEL}.`).waitFor(WAIT);
    const units = await t.gql(
      apiKey,
      `{ models { costPricing { image { size quality price } audioSecond characters1k } } }`,
    );
    expect(units.data.models[0].costPricing).toEqual({
      image: [
        { size: '1024x1024', quality: 'hd', price: '0.08' },
        { size: '*', quality: '*', price: '0.2' },
      ],
      audioSecond: '0.0001',
      characters1k: '0.015',
    });
    // The table shows what end users pay (x 1.5); editing again shows the cost prices as entered.
    await row.getByText('1024x1024 hd: 0.12/image').waitFor(WAIT);
    await row.getByText('0.00015/s of audio').waitFor(WAIT);
    await row.getByText('0.0225/1k chars').waitFor(WAIT);
    await page.getByRole('button', { name: `Edit ${MODEL}` }).click();
    await expect(bucket('Per image (size quality price; …)').inputValue()).resolves.toBe(
      '1024x1024 hd 0.08; * * 0.2',
    );
    await expect(bucket('Per second of audio').inputValue()).resolves.toBe('0.0001');
    // Whether the model reasons (thinking and reasoning effort translated for it): the catalogue's word
    // (it does not know gpt-test) until the owner gives theirs.
    const reasons = page.getByLabel('Reasoning model');
    await expect(reasons.inputValue()).resolves.toBe('');
    await reasons.selectOption('true');
    await page.getByRole('button', { name: 'Save price' }).click();
    await page.getByText(`Saved ${MODEL}.`).waitFor(WAIT);
    await row.getByText('reasons', { exact: true }).waitFor(WAIT);
    expect((await t.gql(apiKey, `{ models { reasoningModel reasoningModelSource } }`)).data.models).toEqual([
      { reasoningModel: true, reasoningModelSource: 'PRICING' },
    ]);
    await page.getByRole('button', { name: `Edit ${MODEL}` }).click();
    await expect(reasons.inputValue()).resolves.toBe('true');
    await page.getByRole('button', { name: 'Clear' }).click();
    await screenshot(page, 'dashboard-models');
  });

  it('deposits to a user: the Live tab shows it without reloading; the ledger shows it', async () => {
    await live.bringToFront();
    await signIn(live, t.ownerToken);
    await live.getByRole('link', { name: 'Inkwell Writer' }).click();
    await nav(live, 'Live');
    await live.getByText('Waiting for events').waitFor(WAIT);
    const liveUrl = live.url();
    await page.bringToFront();

    await nav(page, 'Users');
    await page.getByText('No end users yet').waitFor(WAIT);
    await page.getByLabel('User', { exact: true }).fill('alice');
    await page.getByLabel('Amount (USDC)').fill('5');
    await page.getByLabel('Idempotency key').fill('signup-alice');
    // A double click sends one request (the form waits for its answer)…
    await page.getByRole('button', { name: 'Deposit', exact: true }).dblclick();
    await page.getByText('Deposited 5.000000 USDC to alice. Balance 5.000000 USDC.').waitFor(WAIT);

    // The feed (graphql-ws) got it; the tab never navigated.
    const feed = live.getByRole('list', { name: 'Live events' });
    await feed.getByText('paywall.balance.deposit.created').waitFor(WAIT);
    await feed.getByText('user alice · amount 5.000000 USDC').waitFor(WAIT);
    expect(live.url()).toBe(liveUrl);

    // …and a second click on the same, still filled form keeps the key: a replay, said so, applied once.
    await expect(page.getByLabel('Idempotency key').inputValue()).resolves.toBe('signup-alice');
    await page.getByRole('button', { name: 'Deposit', exact: true }).click();
    await page
      .getByText(
        'Already applied: 5.000000 USDC was deposited to alice with this idempotency key; nothing was deposited again. Balance 5.000000 USDC.',
      )
      .waitFor(WAIT);
    const deposits = await t.db.query<{ n: number; sum: string }>(
      `select count(*)::int as n, sum(amount_raw)::text as sum from transfer
        where kind = 'deposit' and end_user_id = (select id from end_user where paywall_id = $1 and external_id = 'alice')`,
      [paywallId],
    );
    expect(deposits).toEqual([{ n: 1, sum: '5000000' }]);

    // A new amount is a new operation: a new key. A manual charge, twice: charged once.
    await page.getByLabel('Amount (USDC)').fill('1.25');
    await expect(page.getByLabel('Idempotency key').inputValue()).resolves.not.toBe('signup-alice');
    await page.getByRole('button', { name: 'Charge', exact: true }).click();
    await page.getByText('Charged 1.250000 USDC to alice. Balance 3.750000 USDC.').waitFor(WAIT);
    await page.getByRole('button', { name: 'Charge', exact: true }).click();
    await page
      .getByText(
        'Already applied: 1.250000 USDC was charged to alice with this idempotency key; nothing was charged again. Balance 3.750000 USDC.',
      )
      .waitFor(WAIT);
    await screenshot(page, 'dashboard-users-already-applied');
    // Then a chat request through the proxy with the key the dashboard showed.
    const chat = await t.rest('POST', '/v1/chat/completions', {
      token: apiKey,
      body: { model: MODEL, user: 'alice', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(chat.status).toBe(200);
    await feed.getByText('paywall.usage.charge.created').waitFor(WAIT);
    await live.bringToFront();
    await screenshot(live, 'dashboard-live');
    await page.bringToFront();

    // Ledger of alice: deposit, charge, usage; balance 5 − 1.25 − 0.0015855 (11×3 + 7×7.5 µUSDC + 0.001).
    await page.getByRole('button', { name: 'Search' }).waitFor(WAIT);
    await page.getByLabel('Find a user').fill('alice');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('button', { name: 'alice', exact: true }).click();
    const ledger = page.getByRole('table', { name: 'Ledger' });
    await ledger.getByRole('cell', { name: 'usage', exact: true }).waitFor(WAIT);
    const rows = await ledger.getByRole('row').allInnerTexts();
    expect(rows.slice(1).map((r) => r.split('\t').slice(1, 4).join(' '))).toEqual([
      'usage −0.001086 3.748914',
      'charge −1.250000 3.750000',
      'deposit +5.000000 5.000000',
    ]);
    await expect(page.getByTestId('user-balance').innerText()).resolves.toBe('3.748914 USDC');
    await screenshot(page, 'dashboard-users');
  });

  it('the overview chart and tables show the revenue, cost and margin of the day', async () => {
    await nav(page, 'Overview');
    await page.getByRole('button', { name: '7 days' }).click();
    const totals = page.getByLabel('Totals');
    await totals.getByText('1.251086').waitFor(WAIT);
    // Revenue 1.25 + 0.001086; provider cost 11×0.000002 + 7×0.000005 = 0.000057; margin the difference.
    // Headlines: cents from 1 USDC up, all 6 decimals below it (never "0.00" for a non-zero amount).
    await expect(page.getByTestId('total-revenue').innerText()).resolves.toBe('1.25 USDC');
    await expect(page.getByTestId('total-provider-cost').innerText()).resolves.toBe('0.000057 USDC');
    await expect(page.getByTestId('total-margin').innerText()).resolves.toBe('1.25 USDC');
    await totals.getByText('1.251029 · revenue − provider cost').waitFor(WAIT);
    await expect(page.getByTestId('total-requests').innerText()).resolves.toBe('2');
    const models = page.getByRole('table', { name: 'Models' });
    expect(await models.getByRole('row').filter({ hasText: MODEL }).innerText()).toMatch(
      /gpt-test\s+1\s+18\s+0\.001086\s+0\.001029/,
    );
    expect(await page.getByRole('table', { name: 'Users' }).getByRole('row').nth(1).innerText()).toMatch(
      /alice\s+2\s+18\s+1\.251086\s+1\.251029/,
    );
    // The chart has a bar for today (recharts draws one path per non-zero bar).
    await page.locator('.recharts-bar-rectangle path').first().waitFor(WAIT);
    // Plain usage (11 prompt, 7 completion tokens): all of it in the Input and Output buckets.
    await expect(page.getByTestId('bucket-prompt').innerText()).resolves.toBe('11');
    await expect(page.getByTestId('bucket-cacheRead').innerText()).resolves.toBe('0');
    await expect(page.getByTestId('bucket-completion').innerText()).resolves.toBe('7');
    await screenshot(page, 'dashboard-overview-today');
  });

  it('the overview shows tokens by usage bucket for usage with cached input and reasoning', async () => {
    // An OpenAI answer of a reasoning model with a cached prompt: 1200 input tokens of which 1000 cached,
    // 300 output tokens of which 200 reasoning. At the bucket prices set above: 200×2 + 1000×0.5 + 200×8 +
    // 100×5 = 3000 µUSDC cost; charge 0.001 + 1.5 × 0.003 = 0.0055 USDC.
    fake.next({
      rawUsage: {
        prompt_tokens: 1200,
        completion_tokens: 300,
        total_tokens: 1500,
        prompt_tokens_details: { cached_tokens: 1000, audio_tokens: 0 },
        completion_tokens_details: {
          reasoning_tokens: 200,
          audio_tokens: 0,
          accepted_prediction_tokens: 0,
          rejected_prediction_tokens: 0,
        },
      },
    });
    const chat = await t.rest('POST', '/v1/chat/completions', {
      token: apiKey,
      body: { model: MODEL, user: 'alice', messages: [{ role: 'user', content: 'think' }] },
    });
    expect(chat.status).toBe(200);
    expect(chat.body.usage).toMatchObject({ prompt_tokens: 1200, completion_tokens: 300, cost: '0.0055' });

    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);
    await page.getByRole('button', { name: '7 days' }).click();
    // Revenue 1.251086 + 0.0055; provider cost 0.000057 + 0.003 (the buckets at their cost prices).
    await page.getByLabel('Totals').getByText('1.256586').waitFor(WAIT);
    await expect(page.getByTestId('total-provider-cost').innerText()).resolves.toBe('0.003057 USDC');
    // Prompt tokens 11 + 1200: 211 input, 1,000 cached; completion 7 + 300: 107 output, 200 reasoning.
    const prompt = page.getByRole('region', { name: 'Prompt tokens' });
    await prompt.getByText('1,211').waitFor(WAIT);
    const figures = async (ids: string[]) =>
      Promise.all(ids.map((id) => page.getByTestId(`bucket-${id}`).innerText()));
    expect(await figures(['prompt', 'cacheRead', 'cacheWrite', 'audioPrompt'])).toEqual([
      '211',
      '1,000',
      '0',
      '0',
    ]);
    expect(await page.getByRole('region', { name: 'Completion tokens' }).locator('h3').innerText()).toMatch(
      /^Completion tokens\s+307$/,
    );
    expect(await figures(['completion', 'reasoning', 'audioCompletion'])).toEqual(['107', '200', '0']);
    const byBucket = page.getByRole('table', { name: 'Tokens by bucket' });
    expect(await byBucket.getByRole('columnheader').allTextContents()).toEqual([
      'Model',
      'Input',
      'Cached input',
      'Cache write',
      'Audio input',
      'Image input',
      'Output',
      'Reasoning',
      'Audio output',
      'Image output',
    ]);
    expect((await byBucket.getByRole('row').allInnerTexts()).slice(1)).toEqual([
      'gpt-test\t211\t1,000\t0\t0\t0\t107\t200\t0\t0',
    ]);
    // The same as the API's usage report.
    const usage = await t.gql(
      apiKey,
      `query($d: String!) { paywall { usage(from: $d, to: $d, groupBy: DAY) { totals {
        promptTokens completionTokens cacheReadTokens cacheWriteTokens audioPromptTokens reasoningTokens audioCompletionTokens } } } }`,
      { d: new Date().toISOString().slice(0, 10) },
    );
    expect(usage.data.paywall.usage.totals).toEqual({
      promptTokens: 1211,
      completionTokens: 307,
      cacheReadTokens: 1000,
      cacheWriteTokens: 0,
      audioPromptTokens: 0,
      reasoningTokens: 200,
      audioCompletionTokens: 0,
    });
    await page.getByRole('heading', { name: 'Tokens by usage bucket' }).scrollIntoViewIfNeeded();
    await screenshot(page, 'dashboard-overview-buckets');
  });

  it('small amounts: exact headlines, distinct y-axis ticks; at 390 px tables say they scroll', async () => {
    const tiny = await t.createPaywall('DEFAULT', 'Tiny Amounts');
    await t.db.query(
      `insert into end_user (id, paywall_id, external_id) values (gen_random_uuid(), $1, 'penny-user-with-a-long-name')`,
      [tiny.id],
    );
    // 100 raw units (0.0001 USDC) two days ago, 40 today.
    await t.db.query(
      `insert into charge (id, paywall_id, user_id, kind, status, amount_raw, created_at, settled_at)
       select gen_random_uuid(), $1, u.id, 'manual', 'completed', v.amount, v.at, v.at
         from end_user u, (values (100, now() - interval '2 days'), (40, now())) v(amount, at)
        where u.paywall_id = $1`,
      [tiny.id],
    );
    await page.goto(url(`/p/${tiny.id}/overview`));
    await page.getByRole('button', { name: '7 days' }).click();
    await expect(page.getByTestId('total-revenue').innerText()).resolves.toBe('0.000140 USDC');
    await page.locator('.recharts-bar-rectangle path').first().waitFor(WAIT);
    // The main chart's y-axis labels (recharts draws them in a layer of their own).
    const ticks = await page
      .locator('.chart .recharts-yAxis-tick-labels .recharts-cartesian-axis-tick-value')
      .evaluateAll((els) => els.map((e) => e.textContent));
    // Steps of 0.000025 up to the largest day (0.0001): each tick readable, no two alike.
    expect(ticks).toEqual(['0', '0.000025', '0.000050', '0.000075', '0.000100']);
    await screenshot(page, 'dashboard-overview-small-amounts');

    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const users = page.getByRole('table', { name: 'Users' });
      await users.getByRole('cell', { name: 'penny-user-with-a-long-name' }).waitFor(WAIT);
      const scroller = page.locator('.table-scroll', { has: users });
      const wrap = scroller.locator('.table-wrap');
      const [scrollWidth, clientWidth] = await wrap.evaluate((el) => [el.scrollWidth, el.clientWidth]);
      expect(scrollWidth).toBeGreaterThan(clientWidth); // cut at this width…
      const hint = scroller.getByText('scroll →');
      await hint.waitFor(WAIT); // …and it says so
      await screenshot(page, 'dashboard-overview-phone-scroll');
      // Scrolled to its end, the hint goes.
      await wrap.evaluate((el) => el.scrollTo({ left: el.scrollWidth }));
      await hint.waitFor({ ...WAIT, state: 'detached' });
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
      // Back to the paywall the next tests work on.
      await page.goto(url(`/p/${paywallId}/overview`));
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);
    }
  });

  it('at 390 px no page is wider than the screen: the user ledger and the other tables scroll inside their card', async () => {
    await nav(page, 'Users');
    expect(await page.title()).toBe('Users · Paywall Proxy Dashboard');
    await page.getByLabel('Find a user').fill('alice');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('button', { name: 'alice', exact: true }).click();
    await page
      .getByRole('table', { name: 'Ledger' })
      .getByRole('cell', { name: 'usage', exact: true })
      .first()
      .waitFor(WAIT);
    await page.setViewportSize({ width: 390, height: 844 });
    /** The document's width once the layout settled at this size (it must not exceed the viewport). */
    const pageWidth = () =>
      page.evaluate(
        () =>
          new Promise<number>((resolve) =>
            requestAnimationFrame(() =>
              resolve(Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)),
            ),
          ),
      );
    const widths: Record<string, number> = {};
    try {
      await shot(page, async () => {
        const ledger = page.getByRole('table', { name: 'Ledger' });
        await ledger.getByRole('cell', { name: 'usage', exact: true }).first().waitFor(WAIT);
        widths['Users (ledger)'] = await pageWidth();
        await screenshot(page, 'dashboard-users-ledger-390');
        // The ledger's actions are reachable: its card scrolls sideways to them.
        const wrap = page.locator('.table-wrap', { has: ledger });
        await wrap.evaluate((el) => el.scrollTo({ left: el.scrollWidth }));
        // The other pages with tables, each once its first table is drawn.
        for (const section of ['Overview', 'Webhooks', 'Models & prices', 'Settings']) {
          await nav(page, section);
          await page.locator('main table').first().waitFor(WAIT);
          widths[section] = await pageWidth();
        }
        await screenshot(page, 'dashboard-settings-390');
      });
      expect(Object.entries(widths).filter(([, w]) => w > 390)).toEqual([]);
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it('shows a failed webhook delivery with its response, and redelivers it', async () => {
    await nav(page, 'Webhooks');
    await page.getByLabel('Status').selectOption('error');
    await page.getByLabel('Event type').fill('paywall.balance.deposit.created');
    const deliveries = page.getByRole('table', { name: 'Deliveries' });
    // The worker delivers in the background: refresh until the refusal is logged.
    for (let i = 0; ; i++) {
      if (await deliveries.getByText('error').count()) break;
      if (i > 60) throw new Error('the failed delivery never showed');
      await refresh();
    }
    await deliveries.getByRole('button', { name: 'Open' }).first().click();
    await page.getByText('{"error":"not ready"}').waitFor(WAIT);
    await screenshot(page, 'dashboard-webhooks');
    // Close closes (the click must not reach the row, which would open it again); Open opens it again.
    await deliveries.getByRole('button', { name: 'Close' }).click();
    await page.getByText('{"error":"not ready"}').waitFor({ ...WAIT, state: 'hidden' });
    await deliveries.getByRole('button', { name: 'Open' }).first().click();
    await page.getByText('{"error":"not ready"}').waitFor(WAIT);

    hookFails = false;
    await page.getByRole('button', { name: 'Redeliver' }).click();
    await page.getByText('Redelivery queued').waitFor(WAIT);
    await hooks.waitFor(
      (all) =>
        all.some(
          (r) =>
            r.body?.event?.type === 'paywall.balance.deposit.created' && r.body?.delivery?.attempts === 2,
        ),
      30_000,
      'the redelivery',
    );
    await page.getByLabel('Status').selectOption('success');
    for (let i = 0; ; i++) {
      if (await deliveries.getByText('success').count()) break;
      if (i > 60) throw new Error('the redelivered delivery never showed as success');
      await refresh();
    }
    expect(await deliveries.getByRole('row').nth(1).innerText()).toMatch(
      /paywall\.balance\.deposit\.created\s+success\s+2\s+200/,
    );
  });

  it('a paywall API key sees only its paywall', async () => {
    const other = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    try {
      const p = await other.newPage();
      await signIn(p, apiKey);
      await p.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);
      await p.getByText('Signed in with a paywall API key').waitFor(WAIT);
      expect(await p.locator('#paywall-switch').innerText()).toBe('Inkwell Writer');
      expect(await p.getByText('Acme Support Bot').count()).toBe(0);
      expect(await p.getByRole('link', { name: 'All paywalls' }).count()).toBe(0);
      // The all-paywalls page lists its own alone too.
      await p.goto(url('/'));
      await p.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);
      expect(p.url()).toContain(`/dashboard/p/${paywallId}/overview`);
    } finally {
      await other.close();
    }
  });

  it('named providers of two kinds: listed with kind, key and health; a model routed with a fallback; disconnect', async () => {
    // A paywall of its own (the totals the other tests check stay as they are), and a provider that fails.
    const relay = await t.createPaywall('DEFAULT', 'Relay Routes');
    const broken = await FakeUpstream.start();
    broken.behavior = { status: 500 };
    try {
      await page.goto(url(`/p/${relay.id}/settings`));
      await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor(WAIT);
      await page.getByText('No provider connected').waitFor(WAIT);
      // The form starts on `default`, OpenAI-compatible, with the cap field of that kind.
      await expect(page.getByLabel('Provider name').inputValue()).resolves.toBe('default');
      await expect(page.getByLabel('Provider kind').inputValue()).resolves.toBe('OPENAI');
      const connect = async (name: string, kind: 'OPENAI' | 'ANTHROPIC', baseUrl: string, key: string) => {
        await page.getByLabel('Provider name').fill(name);
        await page.getByLabel('Provider kind').selectOption(kind);
        // The cap field is an OpenAI-compatible API's matter: not offered for Anthropic.
        await expect(page.getByLabel('Cap field when the client sends none').count()).resolves.toBe(
          kind === 'OPENAI' ? 1 : 0,
        );
        await page.getByLabel('Provider base URL').fill(baseUrl);
        await page.getByLabel('Provider API key').fill(key);
        await page.getByRole('button', { name: 'Connect provider' }).click();
        await shot(page, () => page.getByText(`Connected ${name}.`).waitFor(WAIT));
        await expect(page.getByLabel('Provider API key').inputValue()).resolves.toBe('');
      };
      await connect('default', 'OPENAI', fake.baseUrl, 'sk-openai-default-key-7a1b');
      await connect('claude', 'ANTHROPIC', fake.baseUrl, 'sk-ant-api03-claude-key-9c2d');
      await connect('flaky', 'OPENAI', broken.baseUrl, 'sk-flaky-provider-key-e5f6');

      const table = page.getByRole('table', { name: 'Providers' });
      /** The table is not wider than its card shows (no "scroll →"). */
      const fits = (tbl: typeof table) =>
        page.locator('.table-wrap', { has: tbl }).evaluate((el) => el.scrollWidth <= el.clientWidth + 1);
      const row = (name: string) =>
        table.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });
      await row('flaky').waitFor(WAIT);
      expect(await table.getByRole('columnheader').allTextContents()).toEqual([
        'Name',
        'Kind',
        'Base URL',
        'Key',
        'Health',
        '',
      ]);
      const cells = async (name: string) => (await row(name).getByRole('cell').allInnerTexts()).slice(0, 5);
      expect(await cells('default')).toEqual([
        'default',
        'OpenAI-compatible\ncap max_completion_tokens',
        fake.baseUrl,
        expect.stringMatching(/^…7a1b\nsince \w/),
        'No requests in 5 min',
      ]);
      expect(await cells('claude')).toEqual([
        'claude',
        'Anthropic',
        fake.baseUrl,
        expect.stringMatching(/^…9c2d\nsince \w/),
        'No requests in 5 min',
      ]);
      const listed = await t.gql(relay.apiKey, `{ paywall { providers { name kind apiKeyLastFour } } }`);
      expect(listed.data.paywall.providers).toEqual(
        expect.arrayContaining([
          { name: 'default', kind: 'OPENAI', apiKeyLastFour: '7a1b' },
          { name: 'claude', kind: 'ANTHROPIC', apiKeyLastFour: '9c2d' },
          { name: 'flaky', kind: 'OPENAI', apiKeyLastFour: 'e5f6' },
        ]),
      );
      expect(listed.data.paywall.providers).toHaveLength(3);
      // The form's button says when a name is taken: connecting it replaces that provider.
      await page.getByLabel('Provider name').fill('backup');
      await page.getByRole('button', { name: 'Connect provider' }).waitFor(WAIT);
      await page.getByLabel('Provider name').fill('claude');
      await page.getByRole('button', { name: 'Replace provider' }).waitFor(WAIT);
      await page.getByRole('button', { name: 'Clear' }).click();
      await expect(page.getByLabel('Provider name').inputValue()).resolves.toBe('default');

      // Models: one routed to claude under Anthropic's model id, falling back to default; one on flaky.
      await nav(page, 'Models & prices');
      await page.getByText('No models priced yet').waitFor(WAIT);
      const price = async (id: string, provider: string, upstream: string, fallbacks: string) => {
        await page.getByLabel('Model id').fill(id);
        await page.getByLabel('Prompt cost per token (USDC)').fill('0.000003');
        await page.getByLabel('Completion cost per token (USDC)').fill('0.000015');
        await page.getByLabel('Provider', { exact: true }).selectOption(provider);
        await page.getByLabel('Upstream model').fill(upstream);
        await page.getByLabel('Fallbacks').fill(fallbacks);
        await page.getByRole('button', { name: 'Save price' }).click();
        await shot(page, () => page.getByText(`Saved ${id}.`).waitFor(WAIT));
      };
      await price('sonnet', 'claude', 'claude-sonnet-4-5', 'default');
      await price('flaky-model', 'flaky', '', '');
      const models = page.getByRole('table', { name: 'Model prices' });
      // Below the model id: its provider, then its fallbacks; the model id sent upstream when not its own.
      const route = (id: string) => models.getByRole('row').filter({ hasText: id }).getByRole('cell').first();
      await expect(route('sonnet').innerText()).resolves.toBe(
        'sonnet\nvia claude → default\nas claude-sonnet-4-5',
      );
      await expect(route('flaky-model').innerText()).resolves.toBe('flaky-model\nvia flaky');
      const routes = await t.gql(relay.apiKey, `{ models { id provider upstreamModel fallbacks } }`);
      expect(routes.data.models).toEqual(
        expect.arrayContaining([
          { id: 'sonnet', provider: 'claude', upstreamModel: 'claude-sonnet-4-5', fallbacks: ['default'] },
          { id: 'flaky-model', provider: 'flaky', upstreamModel: 'flaky-model', fallbacks: [] },
        ]),
      );
      // Editing shows the route as saved.
      await page.getByRole('button', { name: 'Edit sonnet' }).click();
      await expect(page.getByLabel('Provider', { exact: true }).inputValue()).resolves.toBe('claude');
      await expect(page.getByLabel('Upstream model').inputValue()).resolves.toBe('claude-sonnet-4-5');
      await expect(page.getByLabel('Fallbacks').inputValue()).resolves.toBe('default');
      await page.getByRole('button', { name: 'Clear' }).click();
      await expect(fits(models)).resolves.toBe(true);
      await screenshot(page, 'models-routes');

      // Two chat requests of a funded user to the model on the failing provider: both fail upstream.
      const funded = await t.rest('POST', '/v1/user/balance/deposit', {
        token: relay.apiKey,
        body: { user: 'bob', amount: '1' },
      });
      expect(funded.status).toBe(200);
      for (let i = 0; i < 2; i++) {
        const chat = await t.rest('POST', '/v1/chat/completions', {
          token: relay.apiKey,
          headers: { 'X-Paywall-User': 'bob' },
          body: { model: 'flaky-model', messages: [{ role: 'user', content: 'hi' }] },
        });
        expect(chat.status).toBeGreaterThanOrEqual(500);
      }
      expect(broken.chatRequests).toHaveLength(2);

      // Settings: the failing provider's health, with its last error; the others had no requests.
      await nav(page, 'Settings');
      await row('flaky').getByText('2 errors of 2 in 5 min (100%)').waitFor(WAIT);
      await expect(row('flaky').getByRole('cell').nth(4).innerText()).resolves.toMatch(
        /^2 errors of 2 in 5 min \(100%\)\nLast error HTTP 500\n.*\d\d:\d\d/,
      );
      await expect(row('default').getByRole('cell').nth(4).innerText()).resolves.toBe('No requests in 5 min');
      // The table fits this width (1280 px): no sideways scrolling, the Disconnect buttons in view.
      await expect(fits(table)).resolves.toBe(true);
      await screenshot(page, 'settings-providers');

      // On a phone the page does not overflow: the table scrolls in its card.
      await page.setViewportSize({ width: 390, height: 844 });
      try {
        await row('flaky').waitFor(WAIT);
        const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth);
        expect(pageWidth).toBeLessThanOrEqual(390);
        await page.getByText('scroll →').first().waitFor(WAIT);
        await screenshot(page, 'settings-providers-phone');
      } finally {
        await page.setViewportSize({ width: 1280, height: 860 });
      }

      // Disconnecting claude (confirmed): gone from the list and the API; its model says so.
      await page.getByRole('button', { name: 'Disconnect claude' }).click();
      await row('claude').waitFor({ ...WAIT, state: 'detached' });
      await row('default').waitFor(WAIT);
      const left = await t.gql(relay.apiKey, `{ paywall { providers { name } } }`);
      expect(left.data.paywall.providers.map((p: { name: string }) => p.name).sort()).toEqual([
        'default',
        'flaky',
      ]);
      await nav(page, 'Models & prices');
      await route('sonnet').getByText('claude not connected').waitFor(WAIT);
    } finally {
      await broken.close();
      // Back to the paywall the next tests work on.
      await page.goto(url(`/p/${paywallId}/overview`));
      await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor(WAIT);
    }
  });

  it('a year of a busy paywall on the overview (roll-ups plus today), and the SHARED earnings page', async () => {
    const demo = await t.createPaywall('SHARED', 'Orbit Research');
    // 60 days of charges: 3 models, 40 users, growing traffic; settled in the past (rolled up) and today.
    await t.db.query(
      `insert into end_user (id, paywall_id, external_id)
       select gen_random_uuid(), $1, 'user-' || lpad(g::text, 2, '0') from generate_series(1, 40) g`,
      [demo.id],
    );
    await t.db.query(
      `insert into model_price (paywall_id, model_id, prompt_pico, completion_pico)
       values ($1, 'gpt-4o-mini', 150000, 600000), ($1, 'gpt-4o', 2500000, 10000000), ($1, 'llama-3-70b', 600000, 600000)`,
      [demo.id],
    );
    // 9,000 charges over the last 90 days, denser towards today (a growing app); days before today are
    // rolled up by the first usage query, today's are read from the charges. The GPT models' prompts are
    // partly cached, gpt-4o reasons (the usage buckets a settlement keeps in metadata.buckets).
    await t.db.query(
      `insert into charge (id, paywall_id, user_id, kind, status, amount_raw, model, prompt_tokens, completion_tokens, metadata, created_at, settled_at)
       select gen_random_uuid(), $1, u.id, 'usage', 'completed',
              (pt::bigint * m.p * 18 / 10 + ct::bigint * m.c * 18 / 10) / 1000000 + 200, m.id, pt, ct,
              jsonb_build_object('buckets', jsonb_build_object('prompt', pt - cr, 'cacheRead', cr, 'cacheWrite', 0,
                'audioPrompt', 0, 'reasoning', rt, 'audioCompletion', 0, 'completion', ct - rt)), at, at
         from (select g, pt, ct, at, ui, mi, case when mi < 2 then pt * (g % 4) / 5 else 0 end as cr,
                      case when mi = 1 then ct * (g % 3) / 4 else 0 end as rt
                 from (select g, (300 + (g * 37) % 1700) as pt, (40 + (g * 53) % 460) as ct,
                      now() - floor(90 * power(g / 9000.0, 1.7)) * interval '1 day' - ((g * 7) % 600) * interval '1 second' as at,
                      (g * g) % 40 as ui, g % 3 as mi
                 from generate_series(1, 9000) g) s0) s
         join (select id, row_number() over (order by external_id) - 1 as n from end_user where paywall_id = $1) u on u.n = s.ui
         join (values (0, 'gpt-4o-mini', 150000, 600000), (1, 'gpt-4o', 2500000, 10000000), (2, 'llama-3-70b', 600000, 600000))
              as m(n, id, p, c) on m.n = s.mi`,
      [demo.id],
    );
    const [want] = await t.db.query<{ n: string; revenue: string; cached: string; reasoning: string }>(
      `select count(*)::text as n, sum(amount_raw)::text as revenue,
              sum((metadata->'buckets'->>'cacheRead')::bigint)::text as cached,
              sum((metadata->'buckets'->>'reasoning')::bigint)::text as reasoning
         from charge where paywall_id = $1 and settled_at >= (now() at time zone 'UTC')::date - 89`,
      [demo.id],
    );
    await page.goto(url(`/p/${demo.id}/overview`));
    await page.getByRole('button', { name: '90 days' }).click();
    await page.getByTestId('total-requests').getByText(Number(want.n).toLocaleString('en-US')).waitFor(WAIT);
    const revenue = shown(want.revenue);
    await page.getByLabel('Totals').getByText(revenue).first().waitFor(WAIT);
    await page.locator('.recharts-bar-rectangle path').nth(20).waitFor(WAIT);
    // Tokens by bucket over rolled-up days and today: the charges' own figures.
    await expect(page.getByTestId('bucket-cacheRead').innerText()).resolves.toBe(
      Number(want.cached).toLocaleString('en-US'),
    );
    await expect(page.getByTestId('bucket-reasoning').innerText()).resolves.toBe(
      Number(want.reasoning).toLocaleString('en-US'),
    );
    const file = await screenshot(page, 'dashboard-overview');
    mkdirSync(new URL('../docs/img/', import.meta.url), { recursive: true });
    if (process.env.UPDATE_DOCS_SCREENSHOT)
      copyFileSync(file, new URL('../docs/img/dashboard-overview.png', import.meta.url));

    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByLabel('Totals').getByText(revenue).first().waitFor(WAIT);
    await screenshot(page, 'dashboard-overview-phone');
    await page.setViewportSize({ width: 1280, height: 860 });

    await page.goto(url(`/p/${demo.id}/earnings`));
    await page.getByRole('heading', { level: 1, name: 'Earnings' }).waitFor(WAIT);
    await page.getByText('No withdrawals yet.').waitFor(WAIT);
    await page.getByText('No earnings yet').waitFor(WAIT);

    // A wallet user pays 2 USDC; the developer asks for 0.5 of it: the PENDING row's Cancel button is
    // inside its card at this width (1100 px), and cancels.
    await connectShared(t, demo as unknown as ProxyPaywall, 'user-01', 5_000_000n);
    const charged = await t.rest('POST', '/v1/user/charge', {
      token: demo.apiKey,
      body: { user: 'user-01', amount: '2' },
    });
    expect(charged.body).toMatchObject({ success: true });
    const asked = await t.gql(
      demo.apiKey,
      `mutation($i: RequestWithdrawalInput!) { requestWithdrawal(input: $i) { status } }`,
      { i: { amount: '0.5', destination: 'acct_123' } },
    );
    expect(asked.data.requestWithdrawal.status).toBe('PENDING');
    await page.setViewportSize({ width: 1100, height: 860 });
    await page.reload();
    const cancel = page.getByRole('button', { name: 'Cancel', exact: true });
    await cancel.waitFor(WAIT);
    const card = (await page.locator('.card', { hasText: 'Withdrawals' }).last().boundingBox())!;
    const button = (await cancel.boundingBox())!;
    expect(button.x + button.width).toBeLessThanOrEqual(card.x + card.width);
    await screenshot(page, 'dashboard-earnings');
    await cancel.click();
    await page.getByText('CANCELED').waitFor(WAIT);
    await page.setViewportSize({ width: 1280, height: 860 });

    // The SHARED overview shows what the paywall really earned (Paywall.earnings), beside revenue and cost.
    await nav(page, 'Overview');
    const earned = page.getByLabel('Earnings');
    await earned.waitFor(WAIT);
    await expect(page.getByTestId('earnings-available').innerText()).resolves.toBe('2.000000 USDC');
    await expect(page.getByTestId('earnings-pending').innerText()).resolves.toBe('0.000000 USDC');
    await expect(page.getByTestId('earnings-withdrawn').innerText()).resolves.toBe('0.000000 USDC');
    await expect(page.getByTestId('earnings-platform-fees').innerText()).resolves.toBe('0.000000 USDC');
    await screenshot(page, 'dashboard-overview-shared');

    // SHARED: the users page also lists wallet connections.
    await nav(page, 'Users');
    const connections = page.getByRole('table', { name: 'Wallet connections' });
    await connections.getByRole('cell', { name: 'user-01' }).waitFor(WAIT);
    expect(await connections.getByRole('cell', { name: 'active' }).count()).toBe(1);
    await page
      .getByRole('button', { name: /^user-\d\d$/ })
      .first()
      .waitFor(WAIT);
    await screenshot(page, 'dashboard-users-shared');
  });

  it('an owner with more paywalls than one page: the list says so, a later paywall still opens by its link', async () => {
    // 100 archived paywalls created before all the others (archived: the per-owner bound does not count them).
    await t.db.query(
      `insert into paywall (id, owner_id, name, mode, api_key_hash, api_key_last_four, archived_at, created_at, updated_at)
       select gen_random_uuid(), p.owner_id, 'Old ' || g, 'DEFAULT', md5(g::text || p.id) || md5(p.id::text), '0000',
              now(), '2020-01-01'::timestamptz + g * interval '1 minute', now()
         from paywall p, generate_series(1, 100) g where p.id = $1`,
      [paywallId],
    );
    await page.goto(url('/'));
    await page.getByText('Showing your first 100 paywalls').waitFor(WAIT);
    expect(await page.getByRole('link', { name: 'Inkwell Writer' }).count()).toBe(0); // on a later page
    await page.goto(url(`/p/${paywallId}/users`));
    await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor(WAIT);
    await expect(page.locator('#paywall-switch option:checked').innerText()).resolves.toBe('Inkwell Writer');
    await page.getByRole('cell', { name: 'alice', exact: true }).waitFor(WAIT);
  });
});
