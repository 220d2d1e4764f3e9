import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  DEEPSEEK_CHAT_CACHED,
  OPENAI_CHAT_AUDIO,
  OPENAI_CHAT_REASONING_CACHED,
  OPENAI_RESPONSES_REASONING_CACHED,
  OPENROUTER_CHAT_CACHE_WRITE,
} from './helpers/provider-usage.js';
import {
  chargesOf,
  client,
  connectShared,
  createProxyPaywall,
  deposit,
  eventsOf,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { chatUsage, messagesUsage, responsesUsage } from '../src/modules/proxy/provider-usage.js';
import { splitUsage } from '../src/shared/usage-buckets.js';
import { PROVIDER_ACCOUNT_ID } from '../src/modules/accounts/accounts.js';

/**
 * docs/reference.md §13: each provider's usage is split into buckets, every token counted once, and
 * charged request + markup x Σ bucket tokens x bucket price, rounded up to a raw unit.
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

// Cost prices in pico-USDC (10⁻¹² USDC) per token, as set below; markup 1.5; request 0.001.
const PICO = {
  prompt: 2_000_000n,
  cacheRead: 500_000n,
  cacheWrite: 2_500_000n,
  audioPrompt: 40_000_000n,
  reasoning: 10_000_000n,
  audioCompletion: 80_000_000n,
  completion: 5_000_000n,
};
const REQUEST_PICO = 1_000_000_000n;
const MARKUP_PPM = 1_500_000n;
type Buckets = Record<keyof typeof PICO, number>;
const hi = [{ role: 'user' as const, content: 'Say hello' }];

/** The expected charge, written out here rather than taken from the code under test. */
function expectedRaw(b: Buckets): bigint {
  let sum = 0n;
  for (const k of Object.keys(PICO) as (keyof typeof PICO)[]) sum += BigInt(b[k]) * PICO[k];
  const scaled = REQUEST_PICO * 1_000_000n + MARKUP_PPM * sum; // pico x ppm
  const unit = 1_000_000n * 1_000_000n; // one raw unit (10⁻⁶ USDC) in pico x ppm
  return (scaled + unit - 1n) / unit;
}
const usdc = (raw: bigint) => (Number(raw) / 1e6).toFixed(6);
/** markup x tokens x price as an exact decimal (the cost_details figure). */
function part(tokens: number, pico: bigint): string {
  const scaled = MARKUP_PPM * BigInt(tokens) * pico; // 10⁻¹⁸ USDC
  const v = (scaled + 999_999n) / 1_000_000n; // 10⁻¹² USDC, rounded up
  const s = v.toString().padStart(13, '0');
  return `${s.slice(0, -12)}.${s.slice(-12)}`.replace(/\.?0+$/, '') || '0';
}

/** Every bucket at 0 (splitUsage also names the image buckets, §22). */
const zero: Buckets & { imagePrompt: number; imageCompletion: number } = {
  prompt: 0,
  cacheRead: 0,
  cacheWrite: 0,
  audioPrompt: 0,
  imagePrompt: 0,
  reasoning: 0,
  audioCompletion: 0,
  imageCompletion: 0,
  completion: 0,
};

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await createProxyPaywall(t, fake, { maxCompletionTokens: 4000 });
  const r = await t.gql(
    pw.apiKey,
    `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { pricing { cacheRead cacheWrite audioPrompt reasoning audioCompletion } } }`,
    {
      i: {
        modelId: MODEL,
        cacheRead: '0.0000005',
        cacheWrite: '0.0000025',
        audioPrompt: '0.00004',
        reasoning: '0.00001',
        audioCompletion: '0.00008',
      },
    },
  );
  expect(r.errors).toBeUndefined();
  // End-user prices: cost x 1.5.
  expect(r.data.setModelPricing.pricing).toEqual({
    cacheRead: '0.00000075',
    cacheWrite: '0.00000375',
    audioPrompt: '0.00006',
    reasoning: '0.000015',
    audioCompletion: '0.00012',
  });
});
afterAll(async () => {
  await t.close();
  await fake.close();
});
beforeEach(() => fake.reset());

describe("reading providers' usage into buckets", () => {
  it('OpenAI chat: cached and audio inside prompt_tokens, reasoning and audio inside completion_tokens', () => {
    const r = chatUsage(OPENAI_CHAT_REASONING_CACHED)!;
    expect(splitUsage(r.input!, r.output!, r)).toEqual({
      ...zero,
      prompt: 86,
      cacheRead: 1920,
      reasoning: 192,
      completion: 108,
    });
    const a = chatUsage(OPENAI_CHAT_AUDIO)!;
    expect(splitUsage(a.input!, a.output!, a)).toEqual({
      ...zero,
      prompt: 40,
      audioPrompt: 80,
      audioCompletion: 60,
      completion: 30,
    });
  });

  it('DeepSeek: prompt_cache_hit_tokens is cache read, counted once', () => {
    const r = chatUsage(DEEPSEEK_CHAT_CACHED)!;
    expect(splitUsage(r.input!, r.output!, r)).toEqual({
      ...zero,
      prompt: 476,
      cacheRead: 1024,
      reasoning: 250,
      completion: 150,
    });
    // Both OpenAI's and DeepSeek's fields for the same hits: still counted once.
    const both = chatUsage({ ...DEEPSEEK_CHAT_CACHED, prompt_tokens_details: { cached_tokens: 1024 } })!;
    expect(splitUsage(both.input!, both.output!, both).cacheRead).toBe(1024);
  });

  it('Responses: cached inside input_tokens, reasoning inside output_tokens', () => {
    const r = responsesUsage(OPENAI_RESPONSES_REASONING_CACHED)!;
    expect(splitUsage(r.input!, r.output!, r)).toEqual({
      ...zero,
      prompt: 476,
      cacheRead: 1024,
      reasoning: 1024,
      completion: 162,
    });
  });

  it('Anthropic Messages: cache reads and writes come on top of input_tokens', () => {
    const r = messagesUsage({
      input_tokens: 50,
      cache_creation_input_tokens: 1200,
      cache_read_input_tokens: 3000,
      output_tokens: 400,
    })!;
    expect(r.input).toBe(4250);
    expect(splitUsage(r.input!, r.output!, r)).toEqual({
      ...zero,
      prompt: 50,
      cacheRead: 3000,
      cacheWrite: 1200,
      completion: 400,
    });
  });

  it('itemised parts larger than their total are clipped: no token is billed twice, no bucket below 0', () => {
    const r = chatUsage({
      prompt_tokens: 10,
      completion_tokens: 5,
      prompt_tokens_details: { cached_tokens: 8, audio_tokens: 8 },
      completion_tokens_details: { reasoning_tokens: 9 },
    })!;
    expect(splitUsage(r.input!, r.output!, r)).toEqual({
      ...zero,
      prompt: 0,
      cacheRead: 8,
      audioPrompt: 2,
      reasoning: 5,
      completion: 0,
    });
  });
});

/** One request per provider shape; the balance, the answer and the event all show the same charge. */
async function expectCharged(user: string, buckets: Buckets, usage: any) {
  const [charge] = (await chargesOf(t, pw, user)).slice(-1);
  const raw = expectedRaw(buckets);
  expect(charge.amount).toBe(raw.toString());
  // The image buckets are kept only when they have tokens (none here).
  const { imagePrompt: _ip, imageCompletion: _ic, ...kept } = buckets as Record<string, number>;
  expect(charge.metadata.buckets).toEqual(kept);
  expect(usage.cost).toBe(usdc(raw));
  expect(usage.cost_details).toEqual({
    request: '0.001',
    prompt: part(buckets.prompt, PICO.prompt),
    cache_read: part(buckets.cacheRead, PICO.cacheRead),
    cache_write: part(buckets.cacheWrite, PICO.cacheWrite),
    audio_prompt: part(buckets.audioPrompt, PICO.audioPrompt),
    reasoning: part(buckets.reasoning, PICO.reasoning),
    audio_completion: part(buckets.audioCompletion, PICO.audioCompletion),
    completion: part(buckets.completion, PICO.completion),
  });
  const events = await eventsOf(t, pw, 'paywall.usage.charge.created');
  const ev = events.find((e) => e.data.activityId === charge.id);
  expect(ev.data).toMatchObject({
    promptTokens: buckets.prompt + buckets.cacheRead + buckets.cacheWrite + buckets.audioPrompt,
    completionTokens: buckets.completion + buckets.reasoning + buckets.audioCompletion,
    cacheReadTokens: buckets.cacheRead,
    cacheWriteTokens: buckets.cacheWrite,
    audioPromptTokens: buckets.audioPrompt,
    reasoningTokens: buckets.reasoning,
    audioCompletionTokens: buckets.audioCompletion,
    cost: usdc(raw).replace(/\.?0+$/, ''),
    costDetails: usage.cost_details,
  });
  return { charge, raw };
}

describe('charges per provider shape (docs/reference.md §13)', () => {
  const cases: [string, Record<string, unknown>, Buckets][] = [
    [
      'OpenAI chat (reasoning model, cache hit)',
      OPENAI_CHAT_REASONING_CACHED,
      { ...zero, prompt: 86, cacheRead: 1920, reasoning: 192, completion: 108 },
    ],
    [
      'OpenAI chat (audio in and out)',
      OPENAI_CHAT_AUDIO,
      { ...zero, prompt: 40, audioPrompt: 80, audioCompletion: 60, completion: 30 },
    ],
    [
      'DeepSeek chat (cache hit)',
      DEEPSEEK_CHAT_CACHED,
      { ...zero, prompt: 476, cacheRead: 1024, reasoning: 250, completion: 150 },
    ],
    [
      'OpenRouter-style chat (cache write; its own cost fields ignored)',
      OPENROUTER_CHAT_CACHE_WRITE,
      { ...zero, prompt: 200, cacheWrite: 2800, completion: 50 },
    ],
  ];

  for (const [i, [name, rawUsage, buckets]] of cases.entries()) {
    it(`${name}: JSON answer`, async () => {
      const user = `json-${i}`;
      await deposit(t, pw, user, '10');
      const before = await money(t, pw, user);
      fake.behavior = { rawUsage };
      const c: any = await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
      const { raw } = await expectCharged(user, buckets, c.usage);
      const after = await money(t, pw, user);
      expect(before.balance - after.balance).toBe(raw);
      expect(after.held).toBe(0n);
    });

    it(`${name}: stream`, async () => {
      const user = `sse-${i}`;
      await deposit(t, pw, user, '10');
      const before = await money(t, pw, user);
      fake.behavior = { rawUsage };
      const stream = await client(t, pw, user).chat.completions.create({
        model: MODEL,
        messages: hi,
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: any = null;
      for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
      const { raw } = await expectCharged(user, buckets, usage);
      expect(before.balance - (await money(t, pw, user)).balance).toBe(raw);
    });
  }

  const responsesBuckets = { ...zero, prompt: 476, cacheRead: 1024, reasoning: 1024, completion: 162 };

  it('OpenAI Responses (reasoning, cache hit): JSON answer', async () => {
    await deposit(t, pw, 'resp-json', '10');
    const before = await money(t, pw, 'resp-json');
    fake.behavior = { rawUsage: OPENAI_RESPONSES_REASONING_CACHED };
    const r: any = await client(t, pw, 'resp-json').responses.create({ model: MODEL, input: 'Say hello' });
    const { raw } = await expectCharged('resp-json', responsesBuckets, r.usage);
    expect(before.balance - (await money(t, pw, 'resp-json')).balance).toBe(raw);
  });

  it('OpenAI Responses (reasoning, cache hit): stream', async () => {
    await deposit(t, pw, 'resp-sse', '10');
    const before = await money(t, pw, 'resp-sse');
    fake.behavior = { rawUsage: OPENAI_RESPONSES_REASONING_CACHED };
    const stream = await client(t, pw, 'resp-sse').responses.create({
      model: MODEL,
      input: 'Say hello',
      stream: true,
    });
    let usage: any = null;
    for await (const e of stream) if (e.type === 'response.completed') usage = e.response.usage;
    const { raw } = await expectCharged('resp-sse', responsesBuckets, usage);
    expect(before.balance - (await money(t, pw, 'resp-sse')).balance).toBe(raw);
  });

  it('the hold counts input at the dearer of prompt and cache write, output at the dearer of completion and reasoning', async () => {
    await deposit(t, pw, 'hold-max', '10');
    fake.behavior = { rawUsage: OPENAI_CHAT_REASONING_CACHED };
    await client(t, pw, 'hold-max').chat.completions.create({ model: MODEL, messages: hi, max_tokens: 1000 });
    const [charge] = await chargesOf(t, pw, 'hold-max');
    const estimate = BigInt(charge.metadata.promptEstimate);
    // request + 1.5 x (estimate x 0.0000025 (cache write) + 1000 x 0.00001 (reasoning)), rounded up.
    const scaled =
      REQUEST_PICO * 1_000_000n + MARKUP_PPM * (estimate * PICO.cacheWrite + 1000n * PICO.reasoning);
    expect(BigInt(charge.hold)).toBe((scaled + 10n ** 12n - 1n) / 10n ** 12n);
  });

  it('the GraphQL charge record shows the buckets', async () => {
    await deposit(t, pw, 'gql-buckets', '10');
    fake.behavior = { rawUsage: OPENAI_CHAT_REASONING_CACHED };
    await client(t, pw, 'gql-buckets').chat.completions.create({ model: MODEL, messages: hi });
    const r = await t.gql(
      pw.apiKey,
      `{ user(externalId: "gql-buckets") { charges(first: 1) { edges { node { promptTokens completionTokens usage { promptTokens cacheReadTokens cacheWriteTokens audioPromptTokens reasoningTokens audioCompletionTokens completionTokens } } } } } }`,
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.user.charges.edges[0].node).toEqual({
      promptTokens: 2006,
      completionTokens: 300,
      usage: {
        promptTokens: 86,
        cacheReadTokens: 1920,
        cacheWriteTokens: 0,
        audioPromptTokens: 0,
        reasoningTokens: 192,
        audioCompletionTokens: 0,
        completionTokens: 108,
      },
    });
    await expectLedgerProven(t.db);
  });

  it('with the default prices (no bucket price set) the charge is what two buckets charge', async () => {
    const plain = await createProxyPaywall(t, fake, { maxCompletionTokens: 4000 });
    await deposit(t, plain, 'plain', '10');
    const before = await money(t, plain, 'plain');
    fake.behavior = { rawUsage: OPENAI_CHAT_REASONING_CACHED };
    const c: any = await client(t, plain, 'plain').chat.completions.create({ model: MODEL, messages: hi });
    // request 0.001 + 1.5 x (2006 x 0.000002 + 300 x 0.000005) = 0.009268
    expect(c.usage.cost).toBe('0.009268');
    expect(before.balance - (await money(t, plain, 'plain')).balance).toBe(9268n);
  });
});

describe("the built-in provider's cost per bucket (SHARED)", () => {
  let t2: TestApp;
  let up: FakeUpstream;
  beforeAll(async () => {
    up = await FakeUpstream.start();
    t2 = await startTestApp({
      BUILTIN_PROVIDER_BASE_URL: up.baseUrl,
      BUILTIN_PROVIDER_API_KEY: 'sk-builtin-operator-key-0002',
      BUILTIN_MODELS: JSON.stringify([
        {
          id: 'builtin-reasoner',
          prompt: '0.000002',
          completion: '0.000008',
          request: '0.0001',
          cacheRead: '0.0000005',
          reasoning: '0.00001',
          maxCompletionTokens: 500,
        },
      ]),
    });
  });
  afterAll(async () => {
    await t2?.close();
    await up?.close();
  });

  it('the platform is paid each bucket at the built-in cost price; the wallet at cost x markup', async () => {
    const shared = await t2.createPaywall('SHARED');
    const m = await t2.gql(shared.apiKey, `mutation { updatePaywall(input: {markup: "2"}) { markup } }`);
    expect(m.errors).toBeUndefined();
    await t2.rest('POST', '/v1/chat/completions', {
      token: shared.apiKey,
      body: { model: 'builtin-reasoner', user: 'rea', messages: hi },
    });
    await connectShared(t2, shared, 'rea', 1_000_000n);
    const providerBalance = async () =>
      BigInt(
        (
          await t2.db.query('select balance_raw::text as b from ledger_account where id = $1', [
            PROVIDER_ACCOUNT_ID,
          ])
        )[0]?.b ?? '0',
      );
    const before = await providerBalance();
    up.behavior = { rawUsage: OPENAI_CHAT_REASONING_CACHED };
    const r = await t2.rest('POST', '/v1/chat/completions', {
      token: shared.apiKey,
      body: { model: 'builtin-reasoner', user: 'rea', messages: hi },
    });
    expect(r.status).toBe(200);
    // Buckets: prompt 86, cache read 1920, reasoning 192, completion 108. At cost (pico-USDC):
    // 100,000,000 + 86 x 2,000,000 + 1920 x 500,000 + 192 x 10,000,000 + 108 x 8,000,000 = 4,016,000,000 → 4016 raw.
    expect((await providerBalance()) - before).toBe(4016n);
    // The wallet: request 100 + 2 x 3,916 = 7932 raw units.
    expect(r.body.usage.cost).toBe('0.007932');
    expect((await money(t2, shared, 'rea')).balance).toBe(1_000_000n - 7932n);
    await expectLedgerProven(t2.db);
  });
});
