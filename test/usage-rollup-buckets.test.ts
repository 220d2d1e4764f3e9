import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import {
  MODEL,
  chargesOf,
  client,
  createProxyPaywall,
  deposit,
  eventually,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * Usage reports by bucket (docs/reference.md §13): charges made through the proxy from real usage objects
 * (OpenAI's prompt_tokens_details / completion_tokens_details, OpenRouter's cache_write_tokens), summed by
 * Paywall.usage over rolled-up days and today's raw charges, per day, model and end user.
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

const FIELDS = `key requests revenue providerCost margin promptTokens completionTokens cacheReadTokens
  cacheWriteTokens audioPromptTokens reasoningTokens audioCompletionTokens`;
const USAGE = `query($from: String!, $to: String!, $g: UsageGroupBy!) {
  paywall { usage(from: $from, to: $to, groupBy: $g) { totals { ${FIELDS} } buckets { ${FIELDS} } } }
}`;
const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

async function usage(from: string, to: string, g: 'DAY' | 'MODEL' | 'USER') {
  const r = await t.gql(pw.apiKey, USAGE, { from, to, g });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.paywall.usage;
}

async function gqlOk(query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(pw.apiKey, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

const SET_PRICE = `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) {
  costPricing { prompt completion cacheRead cacheWrite audioPrompt reasoning audioCompletion } } }`;

/** A chat request of `user` answered with `rawUsage` (a provider's own usage object); its charge. */
async function chat(user: string, rawUsage: Record<string, unknown> | undefined, stream = false) {
  fake.next(rawUsage ? { rawUsage } : {});
  const before = (await chargesOf(t, pw, user)).length;
  if (stream) {
    const s = await client(t, pw, user).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of s) void chunk;
  } else {
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, user, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(200);
  }
  // Settled once the answer is over (a stream's settlement may finish just after its last chunk).
  const charges = await eventually(
    () => chargesOf(t, pw, user),
    (all) => all.length === before + 1 && all[before].status === 'completed',
  );
  return charges[before];
}

/** Moves a settled charge `days` UTC days back (the usage report counts it by its settlement day). */
const settleDaysAgo = (chargeId: string, days: number) =>
  t.db.query(
    `update charge set created_at = created_at - $2::int * interval '1 day',
                       settled_at = settled_at - $2::int * interval '1 day' where id = $1`,
    [chargeId, days],
  );

beforeAll(async () => {
  fake = await FakeUpstream.start();
  t = await startTestApp();
  // Cost prices: prompt 0.000002, completion 0.000005, request 0.001, markup 1.5 (helpers/proxy-setup.ts);
  // cached input read 0.0000005, cache write 0.0000025 and reasoning 0.000008 of their own; audio in and
  // out follow prompt and completion.
  pw = await createProxyPaywall(t, fake);
  await gqlOk(SET_PRICE, {
    i: { modelId: MODEL, cacheRead: '0.0000005', cacheWrite: '0.0000025', reasoning: '0.000008' },
  });
  await deposit(t, pw, 'ann', '5');
  await deposit(t, pw, 'bob', '5');

  // 3 days ago (rolled up by the first usage read):
  // ann, OpenAI (cached input and reasoning): 1200 in = 1000 cached + 200; 300 out = 200 reasoning + 100.
  // Cost 200×2 + 1000×0.5 + 200×8 + 100×5 = 3000 µUSDC; charge 1000 + 1.5 × 3000 = 5500 raw.
  const a = await chat('ann', {
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
  });
  expect(a.amount).toBe('5500');
  // bob, OpenAI audio, streamed: 50 in = 10 audio + 40; 40 out = 15 audio + 25 (audio follows prompt and
  // completion). Cost 40×2 + 10×2 + 15×5 + 25×5 = 300 µUSDC; charge 1000 + 450 = 1450 raw.
  const b = await chat(
    'bob',
    {
      prompt_tokens: 50,
      completion_tokens: 40,
      total_tokens: 90,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 10 },
      completion_tokens_details: {
        reasoning_tokens: 0,
        audio_tokens: 15,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    },
    true,
  );
  expect(b.amount).toBe('1450');
  expect(b.metadata.buckets).toEqual({
    prompt: 40,
    cacheRead: 0,
    cacheWrite: 0,
    audioPrompt: 10,
    reasoning: 0,
    audioCompletion: 15,
    completion: 25,
  });
  // ann, a charge settled before buckets existed (no metadata.buckets): 100 prompt, 50 completion, cost 450.
  await t.db.query(
    `insert into charge (id, paywall_id, user_id, kind, status, amount_raw, model, prompt_tokens, completion_tokens, created_at, settled_at)
     select gen_random_uuid(), $1, u.id, 'usage', 'completed', 2000, $2, 100, 50, now(), now()
       from end_user u where u.paywall_id = $1 and u.external_id = 'ann'`,
    [pw.id, MODEL],
  );
  for (const c of [...(await chargesOf(t, pw, 'ann')), ...(await chargesOf(t, pw, 'bob'))])
    if (c.kind === 'usage') await settleDaysAgo(c.id, 3);

  // Today (read from the charges):
  // bob, OpenRouter (cache write): 194 in = 100 written to the cache + 94; 2 out.
  // Cost 94×2 + 100×2.5 + 2×5 = 448 µUSDC; charge 1000 + 672 = 1672 raw.
  const c = await chat('bob', {
    completion_tokens: 2,
    completion_tokens_details: { reasoning_tokens: 0 },
    cost: 0.95,
    cost_details: { upstream_inference_cost: 19 },
    prompt_tokens: 194,
    prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 100, audio_tokens: 0 },
    total_tokens: 196,
  });
  expect(c.amount).toBe('1672');
  // ann, plain usage (11 prompt, 7 completion): cost 57; charge 1000 + 85.5 → 1086 raw.
  expect((await chat('ann', undefined)).amount).toBe('1086');
  // bob, a manual charge whose caller metadata says "buckets": not usage, counts no tokens.
  const manual = await t.rest('POST', '/v1/user/charge', {
    token: pw.apiKey,
    body: { user: 'bob', amount: '0.25', metadata: { buckets: { cacheRead: 'lots', reasoning: 7 } } },
  });
  expect(manual.status).toBe(200);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await fake?.close();
});

const NO_BUCKETS = {
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  audioPromptTokens: 0,
  reasoningTokens: 0,
  audioCompletionTokens: 0,
};

describe('Paywall.usage by bucket', () => {
  it('by day: the bucket tokens of a rolled-up day and of today, totals still all input and all output', async () => {
    const u = await usage(day(-5), day(0), 'DAY');
    const byKey = Object.fromEntries(u.buckets.map((b: any) => [b.key, b]));
    // ann's OpenAI charge + bob's audio charge + ann's charge from before buckets.
    expect(byKey[day(-3)]).toEqual({
      key: day(-3),
      requests: 3,
      revenue: '0.008950',
      providerCost: '0.003750',
      margin: '0.005200',
      promptTokens: 1350,
      completionTokens: 390,
      cacheReadTokens: 1000,
      cacheWriteTokens: 0,
      audioPromptTokens: 10,
      reasoningTokens: 200,
      audioCompletionTokens: 15,
    });
    // bob's OpenRouter charge + ann's plain one + bob's manual charge (0.25, no tokens, no cost).
    expect(byKey[day(0)]).toEqual({
      key: day(0),
      requests: 3,
      revenue: '0.252758',
      providerCost: '0.000505',
      margin: '0.252253',
      promptTokens: 205,
      completionTokens: 9,
      ...NO_BUCKETS,
      cacheWriteTokens: 100,
    });
    expect(byKey[day(-1)]).toEqual({
      key: day(-1),
      requests: 0,
      revenue: '0.000000',
      providerCost: '0.000000',
      margin: '0.000000',
      promptTokens: 0,
      completionTokens: 0,
      ...NO_BUCKETS,
    });
    expect(u.totals).toEqual({
      key: '',
      requests: 6,
      revenue: '0.261708',
      providerCost: '0.004255',
      margin: '0.257453',
      promptTokens: 1555,
      completionTokens: 399,
      cacheReadTokens: 1000,
      cacheWriteTokens: 100,
      audioPromptTokens: 10,
      reasoningTokens: 200,
      audioCompletionTokens: 15,
    });
    // Day -3 came from the roll-up, which keeps the buckets.
    const [rolled] = await t.db.query(
      `select rolled_through::text as d from usage_rollup where paywall_id = $1`,
      [pw.id],
    );
    expect(rolled.d >= day(-3)).toBe(true);
    const rows = await t.db.query(
      `select model, requests::int, cost_raw::text, prompt_tokens::int, completion_tokens::int,
              cache_read_tokens::int, cache_write_tokens::int, audio_prompt_tokens::int, reasoning_tokens::int,
              audio_completion_tokens::int
         from usage_day_model where paywall_id = $1 and day = $2::date`,
      [pw.id, day(-3)],
    );
    expect(rows).toEqual([
      {
        model: MODEL,
        requests: 3,
        cost_raw: '3750',
        prompt_tokens: 1350,
        completion_tokens: 390,
        cache_read_tokens: 1000,
        cache_write_tokens: 0,
        audio_prompt_tokens: 10,
        reasoning_tokens: 200,
        audio_completion_tokens: 15,
      },
    ]);
  });

  it('by model: the model has every bucket, manual charges none', async () => {
    const m = await usage(day(-5), day(0), 'MODEL');
    expect(m.buckets).toEqual([
      {
        key: '',
        requests: 1,
        revenue: '0.250000',
        providerCost: '0.000000',
        margin: '0.250000',
        promptTokens: 0,
        completionTokens: 0,
        ...NO_BUCKETS,
      },
      {
        key: MODEL,
        requests: 5,
        revenue: '0.011708',
        providerCost: '0.004255',
        margin: '0.007453',
        promptTokens: 1555,
        completionTokens: 399,
        cacheReadTokens: 1000,
        cacheWriteTokens: 100,
        audioPromptTokens: 10,
        reasoningTokens: 200,
        audioCompletionTokens: 15,
      },
    ]);
  });

  it('by user: running totals keep the buckets; ranges that start after or end at the rolled-up day', async () => {
    const all = await usage(day(-5), day(0), 'USER');
    expect(all.buckets).toEqual([
      {
        key: 'bob',
        requests: 3,
        revenue: '0.253122',
        providerCost: '0.000748',
        margin: '0.252374',
        promptTokens: 244,
        completionTokens: 42,
        cacheReadTokens: 0,
        cacheWriteTokens: 100,
        audioPromptTokens: 10,
        reasoningTokens: 0,
        audioCompletionTokens: 15,
      },
      {
        key: 'ann',
        requests: 3,
        revenue: '0.008586',
        providerCost: '0.003507',
        margin: '0.005079',
        promptTokens: 1311,
        completionTokens: 357,
        cacheReadTokens: 1000,
        cacheWriteTokens: 0,
        audioPromptTokens: 0,
        reasoningTokens: 200,
        audioCompletionTokens: 0,
      },
    ]);
    expect(all.totals).toMatchObject({ requests: 6, cacheReadTokens: 1000, cacheWriteTokens: 100 });
    // The rolled-up day alone (running totals minus the ones before it).
    const rolled = await usage(day(-3), day(-3), 'USER');
    expect(
      rolled.buckets.map((b: any) => [
        b.key,
        b.promptTokens,
        b.completionTokens,
        b.cacheReadTokens,
        b.audioPromptTokens,
        b.reasoningTokens,
        b.audioCompletionTokens,
      ]),
    ).toEqual([
      ['ann', 1300, 350, 1000, 0, 200, 0],
      ['bob', 50, 40, 0, 10, 0, 15],
    ]);
    // From the day after: today's charges only.
    const today = await usage(day(-2), day(0), 'USER');
    expect(
      today.buckets.map((b: any) => [
        b.key,
        b.promptTokens,
        b.completionTokens,
        b.cacheWriteTokens,
        b.cacheReadTokens,
      ]),
    ).toEqual([
      ['bob', 194, 2, 100, 0],
      ['ann', 11, 7, 0, 0],
    ]);
  });

  it('setModelPricing: a null bucket price follows the prompt or completion price again; an omitted one is kept', async () => {
    const set = async (i: Record<string, unknown>) =>
      (await gqlOk(SET_PRICE, { i: { modelId: 'other-model', ...i } })).setModelPricing.costPricing;
    expect(
      await set({ prompt: '0.000003', completion: '0.00001', cacheRead: '0.000001', reasoning: '0.00002' }),
    ).toEqual({
      prompt: '0.000003',
      completion: '0.00001',
      cacheRead: '0.000001',
      cacheWrite: '0.000003',
      audioPrompt: '0.000003',
      reasoning: '0.00002',
      audioCompletion: '0.00001',
    });
    // Omitted: kept.
    expect(await set({ prompt: '0.000004' })).toMatchObject({ prompt: '0.000004', cacheRead: '0.000001' });
    // null: follows again (and then a new prompt price).
    expect(await set({ cacheRead: null, audioPrompt: '0.00005' })).toMatchObject({
      cacheRead: '0.000004',
      audioPrompt: '0.00005',
      reasoning: '0.00002',
    });
    expect(await set({ prompt: '0.000006', reasoning: null })).toMatchObject({
      prompt: '0.000006',
      cacheRead: '0.000006',
      audioPrompt: '0.00005',
      reasoning: '0.00001',
    });
  });
});
