import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { launchBrowser, screenshot, SCREENSHOT_DIR } from './helpers/browser.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { chargesOf, client, createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { fundWallet } from './helpers/wallet-fixtures.js';
import { COST_DETAIL_KEYS, parseDecimal } from '../src/shared/money.js';
import { usdcText } from '../src/pages/components.js';

/**
 * docs/reference.md §13 "Receipts", in Chromium: the wallet page's receipt of a usage charge shows the
 * model, the tokens per bucket, each bucket's end-user price per token and amount, and the total, and
 * every number is the charge's (GraphQL Charge.receipt, the charge row) and the answer's (usage.cost,
 * usage.cost_details), to the raw unit. A charge the balance could not pay in full shows what was paid
 * and what is owed.
 */

let t: TestApp;
let smtp: SmtpCatcher;
let fake: FakeUpstream;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let pw: ProxyPaywall;

const USER = 'ines';
const EMAIL = 'ines@example.com';

beforeAll(async () => {
  smtp = await startSmtpCatcher();
  fake = await FakeUpstream.start();
  t = await startTestApp({ SMTP_URL: smtp.url, PLATFORM_FEE_BPS: '250' });
  pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  const named = await t.gql(pw.apiKey, `mutation { updatePaywall(input: {name: "Inkwell Writer"}) { id } }`);
  expect(named.errors).toBeUndefined();
  // Cached input and reasoning have cost prices of their own (markup 1.5, see createProxyPaywall).
  const priced = await t.gql(
    pw.apiKey,
    `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`,
    {
      i: {
        modelId: MODEL,
        prompt: '0.000002',
        completion: '0.000005',
        request: '0.001',
        cacheRead: '0.0000005',
        reasoning: '0.00001',
        maxCompletionTokens: 1000,
      },
    },
  );
  expect(priced.errors).toBeUndefined();
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

/** OpenAI's chat usage object: cached input inside prompt_tokens, reasoning inside completion_tokens. */
const openAiUsage = (prompt: number, cached: number, completion: number, reasoning: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
  completion_tokens_details: {
    reasoning_tokens: reasoning,
    audio_tokens: 0,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0,
  },
});

const CHARGES = `query($u: String!) { user(externalId: $u) { charges(first: 10) { edges { node {
  id amount uncollected receipt { model requestPrice total lines { bucket label tokens unitPrice amount } }
} } } } }`;

/** A decimal string as an exact integer of 10^-18 USDC. */
const atto = (d: string): bigint => parseDecimal(d, 18)!;
/** "1,920" → 1920. */
const tokensOf = (text: string): number => Number(text.replace(/,/g, ''));
/**
 * "0.006381 USDC", "0.00262 USDC", "1,250.00 USDC" → raw units: the one way the pages write money
 * (usdcText: at least 2 decimals, every significant one up to 6, never rounded).
 */
const rawOf = (text: string): bigint => {
  const m = /^(\d{1,3}(?:,\d{3})*\.\d{2,6}) USDC$/.exec(text.trim());
  if (!m || (m[1].split('.')[1].length > 2 && m[1].endsWith('0')))
    throw new Error(`not a USDC amount as the pages write it: ${JSON.stringify(text)}`);
  return parseDecimal(m[1].replace(/,/g, ''), 6)!;
};

/** The receipt under the charge's row (found by its reference, the charge id). */
const receiptOf = (chargeId: string): Locator =>
  page.locator('details.receipt', { has: page.locator('.r-ref', { hasText: chargeId }) });

/** Every figure of an opened receipt, as the page shows it. */
async function readReceipt(r: Locator) {
  /** The text of the element, or '' when the receipt has none there (the request line's empty cells). */
  const text = async (within: Locator, sel: string) => {
    const l = within.locator(sel);
    return (await l.count()) ? (await l.innerText()).trim() : '';
  };
  const lines = [];
  for (const row of await r.locator('table.receipt-lines > tbody > tr').all()) {
    lines.push({
      bucket: await row.getAttribute('data-bucket'),
      label: await text(row, '.r-label'),
      tokens: await text(row, '.r-tokens'),
      unitPrice: await text(row, '.r-unit-exact'),
      perMillion: await text(row, '.r-per-m'),
      amount: await text(row, '.r-amt'),
    });
  }
  return {
    model: await text(r, '.r-model'),
    lines,
    total: await text(r, '[data-testid="receipt-total"]'),
    paid: await text(r, '[data-testid="receipt-paid"]'),
    owed: await text(r, '[data-testid="receipt-owed"]'),
  };
}

describe('the receipt on the hosted wallet page, in Chromium', () => {
  let chatA: any;
  let chatB: any;

  it('sign in and connect through the hosted pages; two chats are charged to the wallet', async () => {
    const link = await t.rest('GET', `/v1/user/connect?user=${USER}`, { token: pw.apiKey });
    await page.goto(link.body.url);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByRole('button', { name: 'Send code' }).click();
    await page.getByLabel('Code').fill(await smtp.waitForCode(EMAIL));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('is connected').first().waitFor();
    const [wu] = await t.db.query(`select account_id from wallet_user where email = $1`, [EMAIL]);
    // 0.02 USDC: enough for the first chat, not for all of the second.
    await fundWallet(t.db, wu.account_id, 20_000n);

    // A: 2,006 input tokens of which 1,920 were read from the cache; 299 output tokens of which 192 reasoning.
    fake.next({ rawUsage: openAiUsage(2006, 1920, 299, 192) });
    chatA = await client(t, pw, USER).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Summarise the chapter' }],
    });
    expect(chatA.usage.cost).toBe('0.006381');
    // B: the upstream reports far past the cap (100 tokens): clamped to the cap (all of it reasoning, as
    // reported first), and of that the wallet pays what the hold took; the app covers the rest (§5.7).
    fake.next({ rawUsage: openAiUsage(40, 0, 2000, 1800) });
    chatB = await client(t, pw, USER).chat.completions.create({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Think hard' }],
    });
    // The hold: request 0.001 + the prompt's estimate (8 x 0.000003) + 100 output tokens at the dearest
    // output price (reasoning, 0.000015): 0.002524.
    expect(chatB.usage.cost).toBe('0.002524');
  });

  it('every number of the receipt is the charge’s and the answer’s, to the raw unit', async () => {
    const [rowA] = await chargesOf(t, pw, USER);
    const gql = await t.gql(pw.apiKey, CHARGES, { u: USER });
    expect(gql.errors).toBeUndefined();
    const nodeA = gql.data.user.charges.edges.map((e: any) => e.node).find((n: any) => n.id === rowA.id);

    await page.goto(`${t.url}/wallet`);
    await page.getByRole('heading', { name: 'Your wallet' }).waitFor();
    // One row per charge with its receipt under it, closed until asked for.
    const entries = (await page.locator('table.activity > tbody > tr.entry').allInnerTexts()).map((r) =>
      r.split('\t').map((c) => c.trim()),
    );
    expect(entries.map((r) => r.slice(1))).toEqual([
      ['Inkwell Writer', MODEL, usdcText(-2_524n)],
      ['Inkwell Writer', MODEL, usdcText(-6_381n)],
      ['—', 'Test funds', '+0.02 USDC'],
    ]);
    expect(await page.locator('details.receipt').count()).toBe(2);
    const receipt = receiptOf(rowA.id);
    expect(await receipt.getAttribute('open')).toBeNull();
    expect(await receipt.locator('.receipt-body').isVisible()).toBe(false);
    expect((await receipt.locator('summary').innerText()).trim()).toBe('Receipt · 2,305 tokens');

    // The summary is a native control: the keyboard opens it.
    await receipt.locator('summary').focus();
    await page.keyboard.press('Enter');
    await receipt.locator('.receipt-body').waitFor({ state: 'visible' });
    const shown = await readReceipt(receipt);

    // What the end user reads (worked out by hand: cost prices x markup 1.5).
    expect(shown).toEqual({
      model: MODEL,
      lines: [
        {
          bucket: 'prompt',
          label: 'Input',
          tokens: '86',
          unitPrice: '0.000003',
          perMillion: '3.00 per 1M',
          amount: '0.000258',
        },
        {
          bucket: 'cacheRead',
          label: 'Cached input',
          tokens: '1,920',
          unitPrice: '0.00000075',
          perMillion: '0.75 per 1M',
          amount: '0.00144',
        },
        {
          bucket: 'reasoning',
          label: 'Reasoning',
          tokens: '192',
          unitPrice: '0.000015',
          perMillion: '15.00 per 1M',
          amount: '0.00288',
        },
        {
          bucket: 'completion',
          label: 'Output',
          tokens: '107',
          unitPrice: '0.0000075',
          perMillion: '7.50 per 1M',
          amount: '0.0008025',
        },
        {
          bucket: 'request',
          label: 'Per request',
          tokens: '',
          unitPrice: '',
          perMillion: '',
          amount: '0.001',
        },
      ],
      total: '0.006381 USDC',
      paid: '',
      owed: '',
    });

    // The same as the charge (GraphQL Charge.receipt and the charge row) ...
    const r = nodeA.receipt;
    expect(shown.model).toBe(r.model);
    const tokenLines = shown.lines.filter((l) => l.bucket !== 'request');
    expect(tokenLines.map((l) => [l.bucket, l.label, tokensOf(l.tokens), l.unitPrice, l.amount])).toEqual(
      r.lines.map((l: any) => [l.bucket, l.label, l.tokens, l.unitPrice, l.amount]),
    );
    expect(shown.lines.find((l) => l.bucket === 'request')!.amount).toBe(r.requestPrice);
    expect(rawOf(shown.total!)).toBe(BigInt(rowA.amount));
    expect(rawOf(shown.total!)).toBe(parseDecimal(r.total, 6));
    expect(rowA.uncollected).toBe('0');
    // ... and as the answer: usage.cost and usage.cost_details.
    expect(rawOf(shown.total!)).toBe(parseDecimal(chatA.usage.cost, 6));
    for (const l of tokenLines)
      expect(l.amount).toBe(
        chatA.usage.cost_details[COST_DETAIL_KEYS[l.bucket as keyof typeof COST_DETAIL_KEYS]],
      );
    expect(shown.lines.find((l) => l.bucket === 'request')!.amount).toBe(chatA.usage.cost_details.request);
    // Each amount is its tokens x its unit price; the total is their sum rounded up to a raw unit.
    for (const l of tokenLines) expect(atto(l.amount)).toBe(BigInt(tokensOf(l.tokens)) * atto(l.unitPrice));
    const sum = shown.lines.reduce((s, l) => s + atto(l.amount), 0n);
    expect((sum + 10n ** 12n - 1n) / 10n ** 12n).toBe(rawOf(shown.total!));
    await screenshot(page, 'receipt');
  });

  it('a provider that reported past the cap: clamped, the wallet pays the hold, the app covers the rest', async () => {
    const rowB = (await chargesOf(t, pw, USER))[1];
    const receipt = receiptOf(rowB.id);
    await receipt.locator('summary').click();
    await receipt.locator('.receipt-body').waitFor({ state: 'visible' });
    const shown = await readReceipt(receipt);
    // 40 input and 100 output tokens (the cap; 1,900 reported beyond it are not charged).
    expect(shown.lines.map((l) => [l.label, l.tokens, l.unitPrice, l.amount])).toEqual([
      ['Input', '40', '0.000003', '0.00012'],
      ['Reasoning', '100', '0.000015', '0.0015'],
      ['Per request', '', '', '0.001'],
    ]);
    // 0.001 + 0.00012 + 0.0015 = 0.00262; the hold took 0.002524; the app bears 0.000096; nothing is owed.
    expect([shown.total, shown.paid, shown.owed]).toEqual(['0.00262 USDC', '0.002524 USDC', '']);
    expect((await receipt.locator('[data-testid="receipt-covered"]').innerText()).trim()).toBe(
      '0.000096 USDC',
    );
    expect(rawOf(shown.paid!)).toBe(BigInt(rowB.amount));
    expect(rawOf(shown.paid!)).toBe(parseDecimal(chatB.usage.cost, 6));
    expect(rowB.uncollected).toBe('0');
    expect(await receipt.locator('.receipt-note').innerText()).toContain(
      'the app covers the rest, never your balance.',
    );
    await screenshot(page, 'receipt-app-covered');
  });

  it('on a phone both receipts fit the screen, every figure in view', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    await page.reload();
    for (const summary of await page.locator('details.receipt > summary').all()) await summary.click();
    const figures = page.locator(
      'details.receipt .r-model, details.receipt .r-tokens:not(.r-none), details.receipt .r-unit-exact, details.receipt .r-amt, details.receipt tfoot td',
    );
    // 2 models; 6 token counts and 6 unit prices (4 + 2 buckets); 8 amounts (with the request price
    // twice); 4 totals (A: total; B: total, paid, covered by the app).
    expect(await figures.count()).toBe(2 + 6 + 6 + 8 + 4);
    for (const cell of await figures.all()) {
      const box = (await cell.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(390);
    }
    // The page does not scroll sideways.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    // The labels keep their words: "Reference" on one line, not "Refere / nce" (long words elsewhere wrap).
    const labels = await page.locator('details.receipt[open] dl.receipt-meta dt').evaluateAll((els) =>
      els.map((el) => {
        const range = document.createRange();
        range.selectNodeContents(el);
        return [el.textContent, range.getClientRects().length]; // one rectangle per line of text
      }),
    );
    expect(labels).toEqual([
      ['Model', 1],
      ['Reference', 1],
      ['Model', 1],
      ['Reference', 1],
    ]);
    await screenshot(page, 'receipt-phone');
    // The activity card alone, at full size.
    await page.locator('table.activity').screenshot({ path: `${SCREENSHOT_DIR}receipt-phone-activity.png` });
  });
});
