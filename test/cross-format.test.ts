import { readFileSync } from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { chargesOf, client, deposit, money, type ProxyPaywall } from './helpers/proxy-setup.js';

/**
 * docs/reference.md §15 "Across formats", through the official SDKs against one paywall with an
 * OpenAI-kind provider (`default`) and an Anthropic-kind provider (`claude`), both real loopback
 * servers: chat completions and Responses for a Claude model are translated to the Messages API, the
 * Messages API for a GPT model to chat completions; every call is charged to the raw unit from the
 * provider's usage buckets.
 */

const fixture = (path: string) => readFileSync(new URL(`./fixtures/${path}`, import.meta.url), 'utf8');
/** Anthropic's streaming reference: text, then a get_weather tool_use; usage 472 in, 89 out. */
const ANTHROPIC_TOOL_STREAM = fixture('anthropic/stream-tool-use.txt');
/** A recorded gpt-4o stream: a get_weather tool call; usage 91 in (64 cached), 14 out. */
const OPENAI_TOOL_STREAM = fixture('openai/chat-stream-tool-call.txt');

const GPT = 'gpt-test';
const CLAUDE = 'claude-test';
const UPSTREAM_CLAUDE = 'claude-sonnet-4-5-20250929';
const ANTHROPIC_KEY = 'sk-ant-provider-secret-0009';
const OPENAI_KEY = 'sk-openai-provider-secret-0008';

/** Cost prices in pico-USDC per token, per request; markup 1.5. */
const PRICES = {
  [GPT]: {
    request: 1_000_000_000n,
    prompt: 2_000_000n,
    cacheRead: 500_000n,
    cacheWrite: 2_000_000n,
    completion: 5_000_000n,
  },
  [CLAUDE]: {
    request: 100_000_000n,
    prompt: 3_000_000n,
    cacheRead: 300_000n,
    cacheWrite: 3_750_000n,
    completion: 15_000_000n,
  },
};
const MARKUP_PPM = 1_500_000n;

/** request + markup x Σ bucket tokens x price, rounded up to a raw unit (10⁻⁶ USDC). */
function expectedRaw(
  model: keyof typeof PRICES,
  u: { uncached: number; cacheRead?: number; cacheWrite?: number; output: number },
): bigint {
  const p = PRICES[model];
  const sum =
    BigInt(u.uncached) * p.prompt +
    BigInt(u.cacheRead ?? 0) * p.cacheRead +
    BigInt(u.cacheWrite ?? 0) * p.cacheWrite +
    BigInt(u.output) * p.completion;
  const scaled = p.request * 1_000_000n + MARKUP_PPM * sum;
  return (scaled + 10n ** 12n - 1n) / 10n ** 12n;
}
const usdc = (raw: bigint) => `${raw / 1_000_000n}.${(raw % 1_000_000n).toString().padStart(6, '0')}`;

let t: TestApp;
let openai: FakeUpstream;
let claude: FakeUpstream;
let pw: ProxyPaywall;

async function gqlOk(query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(pw.apiKey, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

beforeAll(async () => {
  openai = await FakeUpstream.start();
  claude = await FakeUpstream.start();
  t = await startTestApp();
  pw = await t.createPaywall('DEFAULT');
  const connect = `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`;
  await gqlOk(connect, { i: { baseUrl: openai.baseUrl, apiKey: OPENAI_KEY } });
  await gqlOk(connect, {
    i: { name: 'claude', kind: 'ANTHROPIC', baseUrl: claude.baseUrl, apiKey: ANTHROPIC_KEY },
  });
  const price = `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`;
  await gqlOk(price, {
    i: {
      modelId: GPT,
      prompt: '0.000002',
      cacheRead: '0.0000005',
      completion: '0.000005',
      request: '0.001',
      maxCompletionTokens: 1000,
    },
  });
  await gqlOk(price, {
    i: {
      modelId: CLAUDE,
      provider: 'claude',
      upstreamModel: UPSTREAM_CLAUDE,
      prompt: '0.000003',
      cacheRead: '0.0000003',
      cacheWrite: '0.00000375',
      completion: '0.000015',
      request: '0.0001',
      maxCompletionTokens: 1000,
    },
  });
  await gqlOk(`mutation { updatePaywall(input: {markup: "1.5"}) { id } }`);
});
afterAll(async () => {
  await t?.close();
  await openai?.close();
  await claude?.close();
});
beforeEach(() => {
  openai.reset();
  claude.reset();
});

let n = 0;
async function funded(amount = '1'): Promise<string> {
  const user = `xf-user-${++n}`;
  await deposit(t, pw, user, amount);
  return user;
}

const anthropicSdk = (user: string) =>
  new Anthropic({
    baseURL: t.url,
    apiKey: pw.apiKey,
    defaultHeaders: { 'x-paywall-user': user },
    maxRetries: 0,
  });

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a given location',
    parameters: {
      type: 'object',
      properties: { location: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['location'],
    },
  },
};

describe('chat completions for a model on an Anthropic provider', () => {
  it('JSON: translated to Messages (system, cap, upstream model, provider key), answered as a chat completion, charged from the cache buckets', async () => {
    const user = await funded();
    claude.next({
      content: 'Hi there',
      rawUsage: {
        input_tokens: 21,
        cache_read_input_tokens: 3001,
        cache_creation_input_tokens: 1200,
        output_tokens: 2,
      },
    });
    const r = await client(t, pw, user).chat.completions.create({
      model: CLAUDE,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
      max_tokens: 200,
    });
    const sent = claude.messagesRequests[0];
    expect(sent.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent.headers.authorization).toBeUndefined();
    expect(sent.body).toMatchObject({
      model: UPSTREAM_CLAUDE,
      system: 'Be brief.',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'Say hello' }],
    });
    expect(sent.body.metadata).toBeUndefined();
    expect(r.object).toBe('chat.completion');
    expect(r.choices[0]).toMatchObject({
      message: { role: 'assistant', content: 'Hi there' },
      finish_reason: 'stop',
    });
    const raw = expectedRaw(CLAUDE, { uncached: 21, cacheRead: 3001, cacheWrite: 1200, output: 2 });
    expect(r.usage).toMatchObject({
      prompt_tokens: 21 + 3001 + 1200,
      completion_tokens: 2,
      prompt_tokens_details: { cached_tokens: 3001 },
    });
    expect((r.usage as any).cost).toBe(usdc(raw).replace(/0+$/, '').replace(/\.$/, ''));
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('a streamed tool call, read by the openai SDK’s stream helper: text, parsed arguments, finish reason, charged once', async () => {
    const user = await funded();
    claude.next({ sse: ANTHROPIC_TOOL_STREAM });
    const runner = client(t, pw, user).chat.completions.stream({
      model: CLAUDE,
      messages: [{ role: 'user', content: 'What is the weather like in San Francisco?' }],
      tools: [weatherTool],
      stream_options: { include_usage: true },
    });
    const done = await runner.finalChatCompletion();
    const choice = done.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe("Okay, let's check the weather for San Francisco, CA:");
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0] as any;
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({
      location: 'San Francisco, CA',
      unit: 'fahrenheit',
    });
    expect(claude.messagesRequests[0].body.tools).toEqual([
      {
        name: 'get_weather',
        description: 'Get the current weather in a given location',
        input_schema: weatherTool.function.parameters,
      },
    ]);
    const raw = expectedRaw(CLAUDE, { uncached: 472, output: 89 });
    expect(done.usage).toMatchObject({ prompt_tokens: 472, completion_tokens: 89 });
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
    const charges = await chargesOf(t, pw, user);
    expect(charges.map((c) => [c.status, c.amount])).toEqual([['completed', raw.toString()]]);
  });

  it('a field the Messages API cannot express: 400 naming it, nothing held, nothing sent', async () => {
    const user = await funded();
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: CLAUDE, messages: [{ role: 'user', content: 'hi' }], n: 2 },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ param: 'n', code: 'unsupported_parameter' });
    expect(claude.requests).toHaveLength(0);
    expect(await chargesOf(t, pw, user)).toEqual([]);
  });

  it('embeddings for a model on an Anthropic provider: 400 naming the model', async () => {
    const user = await funded();
    const r = await t.rest('POST', '/v1/embeddings', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: CLAUDE, input: 'hello' },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ param: 'model' });
    expect(claude.requests).toHaveLength(0);
  });
});

describe('the Responses API for a model on an Anthropic provider', () => {
  it('JSON and stream, read by the openai SDK (finalResponse), charged from the answer’s usage', async () => {
    const user = await funded();
    claude.next({ content: 'Hello from Claude', rawUsage: { input_tokens: 30, output_tokens: 4 } });
    const r = await client(t, pw, user).responses.create({
      model: CLAUDE,
      input: 'Say hello',
      instructions: 'Be brief.',
    });
    expect(r.output_text).toBe('Hello from Claude');
    expect(r.status).toBe('completed');
    expect(claude.messagesRequests[0].body).toMatchObject({ system: 'Be brief.', model: UPSTREAM_CLAUDE });
    const first = expectedRaw(CLAUDE, { uncached: 30, output: 4 });

    claude.next({ sse: ANTHROPIC_TOOL_STREAM });
    const stream = client(t, pw, user).responses.stream({
      model: CLAUDE,
      input: 'What is the weather like in San Francisco?',
      tools: [
        { type: 'function', name: 'get_weather', parameters: weatherTool.function.parameters, strict: false },
      ],
    });
    const final = await stream.finalResponse();
    const call = final.output.find((o: any) => o.type === 'function_call') as any;
    expect(JSON.parse(call.arguments)).toEqual({ location: 'San Francisco, CA', unit: 'fahrenheit' });
    expect(final.usage).toMatchObject({ input_tokens: 472, output_tokens: 89 });
    const second = expectedRaw(CLAUDE, { uncached: 472, output: 89 });
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - first - second, held: 0n });
  });
});

describe('the Messages API for a model on an OpenAI-compatible provider', () => {
  it('messages.create: translated to chat completions, answered as a message, charged from the chat usage', async () => {
    const user = await funded();
    openai.next({ content: 'Hello back', usage: { prompt_tokens: 12, completion_tokens: 2 } });
    const msg = await anthropicSdk(user).messages.create({
      model: GPT,
      max_tokens: 100,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Say hello' }],
      metadata: { user_id: user },
    });
    const sent = openai.chatRequests[0];
    expect(sent.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(sent.headers['x-api-key']).toBeUndefined();
    expect(sent.body).toMatchObject({
      model: GPT,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
      max_completion_tokens: 100,
    });
    expect(JSON.stringify(sent.body)).not.toContain(user);
    expect(msg).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'Hello back' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 12, output_tokens: 2 },
    });
    const raw = expectedRaw(GPT, { uncached: 12, output: 2 });
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('a streamed tool call, read by Anthropic’s SDK (messages.stream → finalMessage), charged once with the cached bucket', async () => {
    const user = await funded();
    openai.next({ sse: OPENAI_TOOL_STREAM });
    const stream = anthropicSdk(user).messages.stream({
      model: GPT,
      max_tokens: 200,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [
        {
          name: 'get_weather',
          description: 'weather',
          input_schema: { type: 'object', properties: { location: { type: 'string' } } },
        },
      ],
    });
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    const tool = final.content.find((b) => b.type === 'tool_use') as any;
    expect(tool).toMatchObject({ name: 'get_weather', input: { location: 'Paris, France' } });
    expect(openai.chatRequests[0].body).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(openai.chatRequests[0].body.tools[0]).toMatchObject({
      type: 'function',
      function: { name: 'get_weather' },
    });
    const raw = expectedRaw(GPT, { uncached: 91 - 64, cacheRead: 64, output: 14 });
    expect(final.usage).toMatchObject({ output_tokens: 14, cache_read_input_tokens: 64 });
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('messages.countTokens for a model on an OpenAI-compatible provider: counted here, not charged, nothing sent', async () => {
    const user = await funded();
    const r = await anthropicSdk(user).messages.countTokens({
      model: GPT,
      messages: [{ role: 'user', content: 'Say hello to the whole world' }],
    });
    expect(r.input_tokens).toBeGreaterThan(3);
    expect(openai.requests).toHaveLength(0);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n, held: 0n });
  });

  it('a field chat completions cannot express: Anthropic’s 400 naming it, nothing sent', async () => {
    const user = await funded();
    const r = await t.rest('POST', '/v1/messages', {
      headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': user },
      body: {
        model: GPT,
        max_tokens: 100,
        messages: [{ role: 'user', content: 'hi' }],
        thinking: { type: 'enabled', budget_tokens: 1024 },
      },
    });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(r.body.error.message).toContain('thinking');
    expect(openai.requests).toHaveLength(0);
    expect(await chargesOf(t, pw, user)).toEqual([]);
  });
});

describe('100 concurrent mixed calls on one funded user', () => {
  it('chat, Responses, Messages and embeddings (both providers) never overspend; the ledger proof holds', async () => {
    // Enough for some of them only: each call holds up to its cap at these prices.
    const user = await funded('0.05');
    const sdk = client(t, pw, user);
    const ant = anthropicSdk(user);
    const calls = Array.from({ length: 100 }, (_, i) => {
      const kind = i % 5;
      const model = i % 2 ? CLAUDE : GPT;
      if (kind === 0)
        return sdk.chat.completions.create({
          model,
          messages: [{ role: 'user', content: `hi ${i}` }],
          max_tokens: 50,
        });
      if (kind === 1) return sdk.responses.create({ model, input: `hi ${i}`, max_output_tokens: 50 });
      if (kind === 2)
        return ant.messages.create({
          model,
          max_tokens: 50,
          messages: [{ role: 'user', content: `hi ${i}` }],
        });
      if (kind === 3)
        return sdk.chat.completions
          .create({ model, messages: [{ role: 'user', content: `hi ${i}` }], max_tokens: 50, stream: true })
          .then(async (s) => {
            for await (const _ of s);
          });
      return sdk.embeddings.create({ model: GPT, input: `hello ${i}` });
    });
    const settled = await Promise.allSettled(calls);
    const ok = settled.filter((s) => s.status === 'fulfilled').length;
    expect(ok).toBeGreaterThan(0);
    const m = await money(t, pw, user);
    expect(m.held).toBe(0n);
    // (A balance below zero cannot be written: a CHECK refuses it. What can break is conservation.)
    expect(m.balance).toBe(m.ledgerSum);
    // Every raw unit that left the balance is a transfer of one of its charges: captured at settlement,
    // or a provider's count above the hold's estimate collected later (recorded as uncollected first).
    const [moved] = await t.db.query<{ sum: string }>(
      `select coalesce(sum(x.amount_raw), 0)::text as sum
         from transfer x join charge c on c.id = x.charge_id join end_user u on u.id = c.user_id
        where u.paywall_id = $1 and u.external_id = $2`,
      [pw.id, user],
    );
    expect(BigInt(moved.sum)).toBe(50_000n - m.balance);
    const charged = (await chargesOf(t, pw, user)).reduce((sum, c) => sum + BigInt(c.amount), 0n);
    expect(charged).toBeLessThanOrEqual(50_000n);
    await expectLedgerProven(t.db);
  });
});
