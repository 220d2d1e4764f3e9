import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import {
  chargesOf,
  client,
  connectShared,
  createProxyPaywall,
  deposit,
  MODEL,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { COST_DETAIL_KEYS, parseDecimal } from '../src/shared/money.js';

/**
 * docs/reference.md §13 "Receipts": `Charge.receipt` and `Charge.usage` give the same numbers as the
 * charge (its amount and uncollected part in the database) and as the answer (`usage.cost`,
 * `usage.cost_details`), to the raw unit, in both modes.
 */

let t: TestApp;
let fake: FakeUpstream;
beforeAll(async () => {
  fake = await FakeUpstream.start();
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

/** Cost prices: cached input and reasoning have prices of their own (markup 1.5, see createProxyPaywall). */
async function bucketPaywall(mode: 'DEFAULT' | 'SHARED'): Promise<ProxyPaywall> {
  const pw = await createProxyPaywall(t, fake, { mode });
  const r = await t.gql(
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
  expect(r.errors).toBeUndefined();
  return pw;
}

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
  id kind status amount uncollected model promptTokens completionTokens
  usage { promptTokens cacheReadTokens cacheWriteTokens audioPromptTokens reasoningTokens audioCompletionTokens completionTokens }
  receipt { model requestPrice total totalRaw lines { bucket label tokens unitPrice amount } }
} } } } }`;

async function chargesByGraphql(pw: ProxyPaywall, user: string): Promise<any[]> {
  const r = await t.gql(pw.apiKey, CHARGES, { u: user });
  expect(r.errors).toBeUndefined();
  return r.data.user.charges.edges.map((e: any) => e.node);
}

/** A decimal string as an exact integer of 10^-18 USDC (finer than any unit price x tokens). */
const atto = (d: string): bigint => parseDecimal(d, 18)!;

/** The receipt of 2,006 input tokens (1,920 cached) and 299 output tokens (192 reasoning) at markup 1.5. */
const EXPECTED_LINES = [
  { bucket: 'prompt', label: 'Input', tokens: 86, unitPrice: '0.000003', amount: '0.000258' },
  { bucket: 'cacheRead', label: 'Cached input', tokens: 1920, unitPrice: '0.00000075', amount: '0.00144' },
  { bucket: 'reasoning', label: 'Reasoning', tokens: 192, unitPrice: '0.000015', amount: '0.00288' },
  { bucket: 'completion', label: 'Output', tokens: 107, unitPrice: '0.0000075', amount: '0.0008025' },
];

describe.each(['DEFAULT', 'SHARED'] as const)('Charge.receipt and Charge.usage (%s)', (mode) => {
  it('give the tokens per bucket, the end-user unit prices and the total of the charge and of the answer', async () => {
    const pw = await bucketPaywall(mode);
    const user = `reader-${mode.toLowerCase()}`;
    if (mode === 'DEFAULT') await deposit(t, pw, user, '1');
    else {
      await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey });
      await connectShared(t, pw, user, 1_000_000n);
    }
    fake.next({ rawUsage: openAiUsage(2006, 1920, 299, 192) });
    const chat = await client(t, pw, user).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Summarise the chapter' }],
    });
    const usage = chat.usage as any;
    // request 0.001 + 0.000258 + 0.00144 + 0.00288 + 0.0008025 = 0.0063805, rounded up to a raw unit.
    expect(usage.cost).toBe('0.006381');

    const [node] = await chargesByGraphql(pw, user);
    const [row] = await chargesOf(t, pw, user);
    expect(node).toMatchObject({ id: row.id, kind: 'usage', status: 'completed', model: MODEL });
    expect(node.usage).toEqual({
      promptTokens: 86,
      cacheReadTokens: 1920,
      cacheWriteTokens: 0,
      audioPromptTokens: 0,
      reasoningTokens: 192,
      audioCompletionTokens: 0,
      completionTokens: 107,
    });
    expect([node.promptTokens, node.completionTokens]).toEqual([2006, 299]);

    const receipt = node.receipt;
    expect(receipt).toEqual({
      model: MODEL,
      requestPrice: '0.001',
      lines: EXPECTED_LINES,
      total: '0.006381',
      totalRaw: '6381',
    });
    // The same numbers as the charge: its amount in the database, the answer's cost and cost details.
    expect(BigInt(row.amount)).toBe(6381n);
    expect(row.uncollected).toBe('0');
    expect(parseDecimal(node.amount, 6)).toBe(BigInt(row.amount));
    expect(parseDecimal(receipt.total, 6)).toBe(BigInt(row.amount));
    expect(parseDecimal(usage.cost, 6)).toBe(BigInt(row.amount));
    expect(usage.cost_details.request).toBe(receipt.requestPrice);
    for (const line of receipt.lines) {
      expect(usage.cost_details[COST_DETAIL_KEYS[line.bucket as keyof typeof COST_DETAIL_KEYS]]).toBe(
        line.amount,
      );
      // amount = tokens x unit price, exactly.
      expect(atto(line.amount)).toBe(BigInt(line.tokens) * atto(line.unitPrice));
    }
    // Buckets without tokens have no line, and the answer shows them at 0.
    expect(usage.cost_details).toMatchObject({ cache_write: '0', audio_prompt: '0', audio_completion: '0' });
    // total = the request price and the lines, rounded up to a raw unit.
    const sum = receipt.lines.reduce((s: bigint, l: any) => s + atto(l.amount), atto(receipt.requestPrice));
    const unit = 10n ** 12n;
    expect((sum + unit - 1n) / unit).toBe(BigInt(row.amount));

    // New prices and a new markup later: the receipt keeps the prices of the moment of the charge.
    const repriced = await t.gql(
      pw.apiKey,
      `mutation($i: SetModelPricingInput!, $m: String) {
        setModelPricing(input: $i) { id } updatePaywall(input: {markup: $m}) { markup } }`,
      { i: { modelId: MODEL, prompt: '0.00001', cacheRead: '0.000004', reasoning: '0.00003' }, m: '2' },
    );
    expect(repriced.errors).toBeUndefined();
    const [again] = await chargesByGraphql(pw, user);
    expect(again.receipt).toEqual(receipt);
  });
});

describe('Charge.receipt of a charge the balance could not pay in full', () => {
  it('total = amount + uncollected: the receipt keeps the whole cost, the charge what was paid', async () => {
    // DEFAULT mode: in SHARED mode an app's own provider is never paid beyond the hold (docs/reference.md
    // §5.7), so only the built-in provider's answers leave anything uncollected there.
    const pw = await bucketPaywall('DEFAULT');
    await deposit(t, pw, 'short', '0.013619');
    // The provider bills 5,000 input tokens (the estimate counted a handful; still within what the
    // request could produce) and 80 reasoning + 20 output tokens of the cap (100).
    fake.next({ rawUsage: openAiUsage(5000, 0, 100, 80) });
    const chat = await client(t, pw, 'short').chat.completions.create({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Think hard' }],
    });
    const usage = chat.usage as any;
    const [node] = await chargesByGraphql(pw, 'short');
    const [row] = await chargesOf(t, pw, 'short');
    // 0.001 + 1.5 x (5,000 x 0.000002 + 80 x 0.00001 + 20 x 0.000005) = 0.01735.
    expect(node.receipt).toEqual({
      model: MODEL,
      requestPrice: '0.001',
      lines: [
        { bucket: 'prompt', label: 'Input', tokens: 5000, unitPrice: '0.000003', amount: '0.015' },
        { bucket: 'reasoning', label: 'Reasoning', tokens: 80, unitPrice: '0.000015', amount: '0.0012' },
        { bucket: 'completion', label: 'Output', tokens: 20, unitPrice: '0.0000075', amount: '0.00015' },
      ],
      total: '0.017350',
      totalRaw: '17350',
    });
    expect([row.amount, row.uncollected]).toEqual(['13619', '3731']);
    expect(BigInt(row.amount) + BigInt(row.uncollected)).toBe(parseDecimal(node.receipt.total, 6));
    expect([node.amount, node.uncollected]).toEqual(['0.013619', '0.003731']);
    // The answer's cost is what was paid; its details are the whole cost's lines.
    expect(usage.cost).toBe('0.013619');
    for (const line of node.receipt.lines)
      expect(usage.cost_details[COST_DETAIL_KEYS[line.bucket as keyof typeof COST_DETAIL_KEYS]]).toBe(
        line.amount,
      );
  });

  it('a manual charge has no receipt and no usage', async () => {
    const pw = await bucketPaywall('DEFAULT');
    await deposit(t, pw, 'buyer', '1');
    const r = await t.rest('POST', '/v1/user/charge', {
      token: pw.apiKey,
      body: { user: 'buyer', amount: '0.3' },
    });
    expect(r.body).toMatchObject({ success: true });
    const [node] = await chargesByGraphql(pw, 'buyer');
    expect(node).toMatchObject({ kind: 'manual', amount: '0.300000', usage: null, receipt: null });
  });
});
