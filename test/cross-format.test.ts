import { readFileSync } from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { chargesOf, client, deposit, eventually, money, type ProxyPaywall } from './helpers/proxy-setup.js';

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

  it('an error chunk mid-stream ends the translated stream at Anthropic’s error event (no end_turn after it); charged for the text relayed, as a failed request', async () => {
    const user = await funded();
    openai.next({
      content: 'one two three four',
      usage: { prompt_tokens: 9, completion_tokens: 4 },
      errorEventAfterChunks: 2,
    });
    const res = await fetch(`${t.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': user, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: GPT,
        max_tokens: 100,
        stream: true,
        messages: [{ role: 'user', content: 'Count' }],
      }),
    });
    const events = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('event: '))
      .map((l) => l.slice(7));
    expect(events.at(-1)).toBe('error');
    expect(events).not.toContain('message_delta');
    expect(events).not.toContain('message_stop');
    const [charge] = await eventually(
      () => chargesOf(t, pw, user),
      (rows) => rows[0]?.status !== 'held',
    );
    // No usage came (the error came first): the input is the service's count, the output the text relayed.
    expect(charge).toMatchObject({ status: 'completed', error_code: 'upstream_error' });
    expect(charge.completion_tokens).toBeGreaterThan(0);
    const raw = expectedRaw(GPT, { uncached: charge.prompt_tokens, output: charge.completion_tokens });
    expect(charge.amount).toBe(raw.toString());
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
        mcp_servers: [{ type: 'url', url: 'https://mcp.example.com', name: 'x' }],
      },
    });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(r.body.error.message).toContain('mcp_servers');
    expect(openai.requests).toHaveLength(0);
    expect(await chargesOf(t, pw, user)).toEqual([]);
  });

  it('an OpenAI provider’s 4xx reaches the Messages client as Anthropic’s error, typed by its status (OpenAI’s own types are not Anthropic’s); nothing charged', async () => {
    const user = await funded();
    // OpenAI's API reference: its 401 and 404 say `invalid_request_error`, its 429 `tokens` / `requests`.
    const cases = [
      {
        status: 401,
        error: {
          message: 'Incorrect API key provided: sk-proj-****.',
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
        type: 'authentication_error',
      },
      {
        status: 404,
        error: {
          message: 'The model `gpt-x` does not exist or you do not have access to it.',
          type: 'invalid_request_error',
          param: null,
          code: 'model_not_found',
        },
        type: 'not_found_error',
      },
      {
        status: 429,
        error: {
          message: 'Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000.',
          type: 'tokens',
          param: null,
          code: 'rate_limit_exceeded',
        },
        type: 'rate_limit_error',
      },
      {
        status: 400,
        error: {
          message: "This model's maximum context length is 128000 tokens.",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
        type: 'invalid_request_error',
      },
    ];
    for (const c of cases) {
      openai.next({ status: c.status, errorBody: { error: c.error } });
      const r = await t.rest('POST', '/v1/messages', {
        headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': user },
        body: { model: GPT, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] },
      });
      expect({ status: r.status, body: r.body }).toEqual({
        status: c.status,
        body: { type: 'error', error: { type: c.type, message: c.error.message } },
      });
    }
    expect((await money(t, pw, user)).balance).toBe(1_000_000n);
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

/**
 * docs/reference.md §21: what agent tools send across formats is dropped (and named in
 * `x-paywall-dropped-fields`) or mapped, not refused; translated answers name the client's model, carry
 * every field Anthropic's SDK types declare, and reasoning is charged at the reasoning price.
 */
describe('agent tools across formats (§21)', () => {
  const REASONER = 'gpt-reasoner'; // upstream `o3`: the catalogue knows it reasons
  const THINKER = 'claude-thinker'; // marked `reasoningModel: true` by the owner
  /** pico-USDC per token */
  const R = { request: 0n, prompt: 2_000_000n, completion: 8_000_000n, reasoning: 12_000_000n };
  const rawOf = (prompt: number, completion: number, reasoning: number) => {
    const sum =
      BigInt(prompt) * R.prompt + BigInt(completion) * R.completion + BigInt(reasoning) * R.reasoning;
    return (MARKUP_PPM * sum + 10n ** 12n - 1n) / 10n ** 12n;
  };

  beforeAll(async () => {
    const price = `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id reasoningModel } }`;
    await gqlOk(price, {
      i: {
        modelId: REASONER,
        upstreamModel: 'o3',
        prompt: '0.000002',
        completion: '0.000008',
        reasoning: '0.000012',
      },
    });
    await gqlOk(price, {
      i: {
        modelId: THINKER,
        provider: 'claude',
        upstreamModel: 'claude-sonnet-4-20250514',
        reasoningModel: true,
        prompt: '0.000002',
        completion: '0.000008',
        reasoning: '0.000012',
      },
    });
  });

  it('Claude Code toward an OpenAI reasoning model: thinking → reasoning_effort, system messages merged, the rest dropped and named; reasoning charged at its price', async () => {
    const user = await funded();
    openai.next({
      answer: {
        id: 'chatcmpl-r1',
        object: 'chat.completion',
        created: 1,
        model: 'o3-2025-04-16',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Done.' }, finish_reason: 'stop' }],
        usage: {
          prompt_tokens: 40,
          completion_tokens: 50,
          completion_tokens_details: { reasoning_tokens: 30 },
        },
      },
    });
    const r = await t.rest('POST', '/v1/messages', {
      headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': user, 'anthropic-version': '2023-06-01' },
      body: {
        model: REASONER,
        max_tokens: 32000,
        system: [{ type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } }],
        messages: [
          { role: 'system', content: 'Also: be brief.' },
          {
            role: 'user',
            content: [{ type: 'text', text: 'List files', cache_control: { type: 'ephemeral' } }],
          },
        ],
        thinking: { type: 'enabled', budget_tokens: 10000 },
        metadata: { user_id: '{"device":"abc","session":"s1"}' },
        context_management: { edits: [{ type: 'clear_thinking_20251015' }] },
      },
    });
    expect(r.status).toBe(200);
    // metadata (Claude Code's holds only user_id, the end user's) is not sent: dropped and named (§21)
    expect(r.headers.get('x-paywall-dropped-fields')).toBe('metadata,context_management,cache_control');
    const sent = openai.chatRequests[0].body;
    expect(sent).toEqual({
      model: 'o3',
      messages: [
        { role: 'system', content: 'You are Claude Code.\n\nAlso: be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'List files' }] },
      ],
      max_completion_tokens: 32000, // the client's cap, kept
      reasoning_effort: 'medium', // 10,000 thinking tokens
    });
    expect(r.body).toMatchObject({
      model: REASONER, // the client's model, not the provider's
      container: null,
      stop_details: null,
      content: [{ type: 'text', text: 'Done.', citations: null }],
      usage: { input_tokens: 40, output_tokens: 50, output_tokens_details: { thinking_tokens: 30 } },
    });
    const raw = rawOf(40, 20, 30);
    expect(r.body.usage.cost).toBe(usdc(raw).replace(/0+$/, '').replace(/\.$/, ''));
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('thinking toward a model that does not reason is dropped and named; a stream’s message_start carries the input count', async () => {
    const user = await funded();
    openai.next({ sse: OPENAI_TOOL_STREAM });
    const body = {
      model: GPT,
      max_tokens: 500,
      messages: [
        { role: 'user' as const, content: 'What is the weather in Paris? Answer with a tool call.' },
      ],
    };
    const counted = await anthropicSdk(user).messages.countTokens(body);
    const r = await fetch(`${t.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pw.apiKey, 'x-paywall-user': user },
      body: JSON.stringify({
        ...body,
        stream: true,
        thinking: { type: 'enabled', budget_tokens: 2000 },
        output_config: { effort: 'high' },
      }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-paywall-dropped-fields')).toBe('thinking,output_config');
    const text = await r.text();
    const start = JSON.parse(
      text
        .split('\n')
        .find((l) => l.startsWith('data: {"type":"message_start"'))!
        .slice(6),
    );
    expect(start.message.usage.input_tokens).toBe(counted.input_tokens);
    expect(start.message.model).toBe(GPT);
    const sent = openai.chatRequests[0].body;
    expect(sent).not.toHaveProperty('reasoning_effort');
    expect(sent).not.toHaveProperty('thinking');
  });

  it('a translated Messages stream: message_start counts the input here, the last message_delta carries the provider’s usage, and every event has each field Anthropic’s SDK types declare (null where none)', async () => {
    const user = await funded();
    openai.next({ sse: OPENAI_TOOL_STREAM }); // usage 91 in (64 cached), 14 out
    const body = { model: GPT, max_tokens: 500, messages: [{ role: 'user' as const, content: 'Weather?' }] };
    const counted = await anthropicSdk(user).messages.countTokens(body);
    const r = await fetch(`${t.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pw.apiKey, 'x-paywall-user': user },
      body: JSON.stringify({ ...body, stream: true }),
    });
    expect(r.status).toBe(200);
    const events = (await r.text())
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)));
    const start = events.find((e) => e.type === 'message_start').message;
    // Message and Usage as @anthropic-ai/sdk declares them.
    for (const k of ['id', 'container', 'content', 'diagnostics', 'model', 'role', 'stop_details'])
      expect(start).toHaveProperty(k);
    for (const k of ['stop_reason', 'stop_sequence', 'type', 'usage']) expect(start).toHaveProperty(k);
    for (const k of [
      'cache_creation',
      'cache_creation_input_tokens',
      'cache_read_input_tokens',
      'inference_geo',
      'input_tokens',
      'output_tokens',
      'output_tokens_details',
      'server_tool_use',
      'service_tier',
      'speed',
    ])
      expect(start.usage).toHaveProperty(k);
    expect(start.usage.input_tokens).toBe(counted.input_tokens);
    expect(start.model).toBe(GPT);
    const deltas = events.filter((e) => e.type === 'message_delta');
    expect(deltas).toHaveLength(1);
    // RawMessageDeltaEvent.Delta: container, stop_details, stop_reason, stop_sequence.
    expect(deltas[0].delta).toEqual({
      container: null,
      stop_details: null,
      stop_reason: 'tool_use',
      stop_sequence: null,
    });
    // MessageDeltaUsage: the provider's count (91 in, 64 of them cached; 14 out).
    expect(deltas[0].usage).toMatchObject({
      input_tokens: 27,
      cache_read_input_tokens: 64,
      cache_creation_input_tokens: 0,
      output_tokens: 14,
      output_tokens_details: { thinking_tokens: 0 },
      server_tool_use: null,
    });
    const toolStart = events.find(
      (e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use',
    );
    expect(toolStart.content_block).toEqual({
      type: 'tool_use',
      id: expect.any(String),
      name: 'get_weather',
      input: {},
      caller: { type: 'direct' },
    });
  });

  it('Codex toward an Anthropic provider: include, client_metadata, store, verbosity dropped and named; reasoning → thinking below the cap; namespace tools and their calls under the client’s names', async () => {
    const user = await funded();
    claude.next({
      answer: {
        id: 'msg_ns1',
        type: 'message',
        role: 'assistant',
        model: 'claude-sonnet-4-20250514',
        content: [{ type: 'tool_use', id: 'toolu_1', name: 'shell__exec', input: { cmd: 'ls' } }],
        stop_reason: 'tool_use',
        stop_sequence: null,
        usage: { input_tokens: 100, output_tokens: 20 },
      },
    });
    const r = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: {
        model: THINKER,
        input: [{ role: 'user', content: [{ type: 'input_text', text: 'list files' }] }],
        max_output_tokens: 5000,
        include: ['reasoning.encrypted_content'],
        client_metadata: { originator: 'codex_exec' },
        store: false,
        prompt_cache_key: 'conv-1',
        reasoning: { effort: 'high', summary: 'auto' },
        text: { verbosity: 'low' },
        parallel_tool_calls: false,
        tools: [
          {
            type: 'namespace',
            name: 'shell',
            description: 'Shell tools',
            tools: [
              {
                type: 'function',
                name: 'exec',
                parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
              },
            ],
          },
        ],
      },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-paywall-dropped-fields')).toBe(
      'include,client_metadata,store,prompt_cache_key,text.verbosity',
    );
    const sent = claude.messagesRequests[0].body;
    expect(sent).toMatchObject({
      model: 'claude-sonnet-4-20250514',
      max_tokens: 5000,
      thinking: { type: 'enabled', budget_tokens: 4999 }, // high = 24,576, kept below max_tokens
      tools: [{ name: 'shell__exec', input_schema: { type: 'object' } }],
      tool_choice: { type: 'auto', disable_parallel_tool_use: true },
    });
    for (const f of ['include', 'client_metadata', 'store', 'prompt_cache_key', 'text', 'reasoning'])
      expect(sent).not.toHaveProperty(f);
    expect(r.body.model).toBe(THINKER);
    expect(r.body.output).toEqual([
      expect.objectContaining({
        type: 'function_call',
        call_id: 'toolu_1',
        name: 'exec',
        namespace: 'shell',
      }),
    ]);
    const raw = rawOf(100, 20, 0);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('a streamed call of a namespace tool comes back under the client’s names (namespace and function), in every event', async () => {
    const user = await funded();
    claude.next({ sse: ANTHROPIC_TOOL_STREAM.replace('"name":"get_weather"', '"name":"shell__exec"') });
    const r = await fetch(`${t.url}/v1/responses`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${pw.apiKey}`,
        'x-paywall-user': user,
      },
      body: JSON.stringify({
        model: CLAUDE,
        input: 'list files',
        stream: true,
        tools: [
          {
            type: 'namespace',
            name: 'shell',
            description: 'Shell tools',
            tools: [{ type: 'function', name: 'exec', parameters: { type: 'object', properties: {} } }],
          },
        ],
      }),
    });
    expect(r.status).toBe(200);
    const text = await r.text();
    expect(text).not.toContain('shell__exec');
    const events = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)));
    const calls = events
      .flatMap((e) => [e.item, ...(e.response?.output ?? [])])
      .filter((i) => i?.type === 'function_call');
    expect(calls.length).toBeGreaterThan(0);
    for (const c of calls) expect(c).toMatchObject({ name: 'exec', namespace: 'shell' });
    expect(claude.messagesRequests[0].body.tools).toEqual([expect.objectContaining({ name: 'shell__exec' })]);
  });

  it('Codex continuing a tool call on a reasoning Claude model: thinking on the turn that calls the tool, not on the one that answers it (Anthropic refuses thinking there without the earlier thinking, which a Responses client cannot send back); reasoning named as dropped', async () => {
    const user = await funded();
    claude.next({ content: 'Two files.', rawUsage: { input_tokens: 150, output_tokens: 4 } });
    const body = {
      model: THINKER,
      max_output_tokens: 30000,
      reasoning: { effort: 'medium' },
      tools: [{ type: 'function', name: 'exec', parameters: { type: 'object', properties: {} } }],
      input: [
        { role: 'user', content: 'list files' },
        { type: 'function_call', call_id: 'toolu_9', name: 'exec', arguments: '{"cmd":"ls"}' },
        { type: 'function_call_output', call_id: 'toolu_9', output: 'a.txt b.txt' },
      ],
    };
    const r = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body,
    });
    expect(r.status).toBe(200);
    expect(r.body.output[0].content[0].text).toBe('Two files.');
    expect(r.headers.get('x-paywall-dropped-fields')).toBe('reasoning');
    expect(claude.messagesRequests[0].body).not.toHaveProperty('thinking');
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - rawOf(150, 4, 0), held: 0n });

    // The same through chat completions (reasoning_effort, a tool message).
    claude.next({ content: 'Two files.', rawUsage: { input_tokens: 150, output_tokens: 4 } });
    const chat = await client(t, pw, user).chat.completions.create({
      model: THINKER,
      max_completion_tokens: 30000,
      reasoning_effort: 'high',
      messages: [
        { role: 'user', content: 'list files' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'toolu_8', type: 'function', function: { name: 'exec', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'toolu_8', content: 'a.txt b.txt' },
      ],
      tools: [
        { type: 'function', function: { name: 'exec', parameters: { type: 'object', properties: {} } } },
      ],
    });
    expect(chat.choices[0].message.content).toBe('Two files.');
    expect(claude.messagesRequests[1].body).not.toHaveProperty('thinking');
  });

  it('the end user named in the body (`user`) toward an Anthropic provider: not sent, and named as dropped (chat and Responses)', async () => {
    const user = await funded();
    claude.next({ content: 'Hi' });
    const chat = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], user, seed: 1 },
    });
    expect(chat.status).toBe(200);
    expect(chat.headers.get('x-paywall-dropped-fields')?.split(',').sort()).toEqual(['seed', 'user']);
    expect(claude.messagesRequests[0].body).not.toHaveProperty('user');
    claude.next({ content: 'Hi' });
    const responses = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      body: { model: CLAUDE, max_output_tokens: 50, input: 'Hi', user },
    });
    expect(responses.status).toBe(200);
    expect(responses.headers.get('x-paywall-dropped-fields')).toBe('user');
    expect(claude.messagesRequests[1].body).not.toHaveProperty('user');
    // Natively (an OpenAI provider) `user` is the paywall's, taken out as always, and not named.
    const native = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: GPT, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], user },
    });
    expect(native.status).toBe(200);
    expect(native.headers.get('x-paywall-dropped-fields')).toBeNull();
  });

  /** Anthropic's answer to the forced json_answer tool: its input is the JSON the client asked for. */
  const jsonToolAnswer = (id: string, toolId: string) => ({
    id,
    type: 'message',
    role: 'assistant',
    model: UPSTREAM_CLAUDE,
    content: [{ type: 'tool_use', id: toolId, name: 'json_answer', input: { city: 'Paris' } }],
    stop_reason: 'tool_use',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5 },
  });

  it('a json_schema response format becomes a forced tool; the answer’s text is its input as JSON', async () => {
    const user = await funded();
    claude.next({ answer: jsonToolAnswer('msg_js1', 'toolu_j') });
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    const r = await client(t, pw, user).chat.completions.create({
      model: CLAUDE,
      messages: [{ role: 'user', content: 'Capital of France as JSON' }],
      response_format: { type: 'json_schema', json_schema: { name: 'city', schema } },
    });
    expect(claude.messagesRequests[0].body).toMatchObject({
      tools: [{ name: 'json_answer', input_schema: schema }],
      tool_choice: { type: 'tool', name: 'json_answer' },
    });
    expect(r.choices[0]).toMatchObject({ message: { content: '{"city":"Paris"}' }, finish_reason: 'stop' });
    expect(r.model).toBe(CLAUDE);
  });

  it('json_schema as a forced tool through Responses (text.format) and streams (chat, Responses): the text is the tool’s input as JSON, finished, not a tool call', async () => {
    const user = await funded();
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    const sse = fixture('anthropic/stream-json-tool-recorded.txt').replace(
      '"name":"json"',
      '"name":"json_answer"',
    );
    const json = '{"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}';
    claude.next({ answer: jsonToolAnswer('msg_js2', 'toolu_k') });
    const text = { format: { type: 'json_schema' as const, name: 'city', schema } };
    const resp = await client(t, pw, user).responses.create({ model: CLAUDE, input: 'Capital?', text });
    expect(claude.messagesRequests[0].body).toMatchObject({
      tools: [{ name: 'json_answer', input_schema: schema }],
      tool_choice: { type: 'tool', name: 'json_answer' },
    });
    expect(resp).toMatchObject({ status: 'completed', output_text: '{"city":"Paris"}', model: CLAUDE });
    expect(resp.output.map((o) => o.type)).toEqual(['message']);

    claude.next({ sse });
    const stream = client(t, pw, user).responses.stream({ model: CLAUDE, input: 'Weather?', text });
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(json);
    expect(final.output.map((o) => o.type)).toEqual(['message']);

    claude.next({ sse });
    const chat = client(t, pw, user).chat.completions.stream({
      model: CLAUDE,
      messages: [{ role: 'user', content: 'Weather?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema } },
    });
    const done = await chat.finalChatCompletion();
    expect(done.choices[0]).toMatchObject({ message: { content: json }, finish_reason: 'stop' });
    expect(done.choices[0].message.tool_calls ?? []).toEqual([]);
  });

  it('an inline image toward Claude is held by Anthropic’s formula from its declared pixels, toward GPT by OpenAI’s tiles (§13)', async () => {
    const user = await funded();
    // A 1 x 1 PNG: 1 token for Anthropic ((1 x 1) / 750), not a 2048 x 2048 image's bound.
    const png =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const messages = [
      {
        role: 'user' as const,
        content: [
          { type: 'text' as const, text: 'What is this?' },
          { type: 'image_url' as const, image_url: { url: png } },
        ],
      },
    ];
    claude.next({ content: 'A dot', rawUsage: { input_tokens: 20, output_tokens: 2 } });
    await client(t, pw, user).chat.completions.create({ model: CLAUDE, messages, max_tokens: 10 });
    const text = await client(t, pw, user).chat.completions.create({
      model: GPT,
      messages: [{ role: 'user', content: 'What is this?' }],
      max_tokens: 10,
    });
    expect(text.choices[0].message.content).toBeTruthy();
    await client(t, pw, user).chat.completions.create({ model: GPT, messages, max_tokens: 10 });
    const [toClaude, textOnly, toGpt] = (await chargesOf(t, pw, user)).map(
      (c) => c.metadata.promptEstimate as number,
    );
    expect(toClaude - textOnly).toBeLessThanOrEqual(1 + 3); // the image part: 1 token (and its framing)
    // OpenAI bills a 1 x 1 image as one tile at most: gpt-test is no known family, so the largest
    // family's (gpt-4o-mini: 2,833 + 5,667), not 48,169.
    expect(toGpt - textOnly).toBeLessThanOrEqual(2833 + 5667);
    expect(toGpt - textOnly).toBeGreaterThan(0);
  });

  /** A 1 x 1 PNG, as an agent's screenshot or image file would come. */
  const PNG_B64 =
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

  it('Claude Code reading an image file on a GPT model: the tool result’s image goes in a user message after the tool messages (a tool message holds text only); answered and charged', async () => {
    const user = await funded();
    openai.next({ content: 'A red dot.', usage: { prompt_tokens: 120, completion_tokens: 4 } });
    const msg = await anthropicSdk(user).messages.create({
      model: GPT,
      max_tokens: 100,
      tools: [
        { name: 'Read', input_schema: { type: 'object', properties: { file_path: { type: 'string' } } } },
      ],
      messages: [
        { role: 'user', content: 'What is in shot.png and notes.txt?' },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_a', name: 'Read', input: { file_path: 'shot.png' } },
            { type: 'tool_use', id: 'toolu_b', name: 'Read', input: { file_path: 'notes.txt' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_a',
              content: [
                { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_B64 } },
              ],
            },
            { type: 'tool_result', tool_use_id: 'toolu_b', content: [{ type: 'text', text: 'buy milk' }] },
            { type: 'text', text: 'Describe both.' },
          ],
        },
      ],
    });
    expect(msg.content).toMatchObject([{ type: 'text', text: 'A red dot.' }]);
    const sent = openai.chatRequests[0].body.messages;
    expect(sent.slice(2)).toEqual([
      {
        role: 'tool',
        tool_call_id: 'toolu_a',
        content: '[The image of this result follows in the next user message.]',
      },
      { role: 'tool', tool_call_id: 'toolu_b', content: 'buy milk' },
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_B64}` } },
          { type: 'text', text: 'Describe both.' },
        ],
      },
    ]);
    const raw = expectedRaw(GPT, { uncached: 120, output: 4 });
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('Claude Code reading a PDF on a GPT model: the tool result’s document goes as a chat `file` part in the next user message, a text document as text; answered and charged', async () => {
    const user = await funded();
    openai.next({ content: 'It says hello.', usage: { prompt_tokens: 300, completion_tokens: 5 } });
    const pdf = Buffer.from('%PDF-1.4\n1 0 obj<</Type/Page>>endobj\ntrailer<<>>\n%%EOF\n').toString('base64');
    const msg = await anthropicSdk(user).messages.create({
      model: GPT,
      max_tokens: 100,
      tools: [
        { name: 'Read', input_schema: { type: 'object', properties: { file_path: { type: 'string' } } } },
      ],
      messages: [
        { role: 'user', content: 'Summarise doc.pdf and notes.txt' },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_p', name: 'Read', input: { file_path: 'doc.pdf' } },
            { type: 'tool_use', id: 'toolu_t', name: 'Read', input: { file_path: 'notes.txt' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_p',
              content: [
                { type: 'text', text: 'PDF file read: doc.pdf' },
                { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf } },
              ],
            },
            {
              type: 'tool_result',
              tool_use_id: 'toolu_t',
              content: [
                { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'buy milk' } },
              ],
            },
          ],
        },
      ],
    });
    expect(msg.content).toMatchObject([{ type: 'text', text: 'It says hello.' }]);
    expect(openai.chatRequests[0].body.messages.slice(2)).toEqual([
      {
        role: 'tool',
        tool_call_id: 'toolu_p',
        content: 'PDF file read: doc.pdf\n[The document of this result follows in the next user message.]',
      },
      { role: 'tool', tool_call_id: 'toolu_t', content: 'buy milk' },
      {
        role: 'user',
        content: [
          {
            type: 'file',
            file: { filename: 'document.pdf', file_data: `data:application/pdf;base64,${pdf}` },
          },
        ],
      },
    ]);
    const raw = expectedRaw(GPT, { uncached: 300, output: 5 });
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
  });

  it('Codex’s view_image on a Claude model: a function_call_output of input_image parts becomes a tool_result with an image block; answered and charged', async () => {
    const user = await funded();
    claude.next({ content: 'A red dot.', rawUsage: { input_tokens: 90, output_tokens: 5 } });
    const r = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: {
        model: CLAUDE,
        max_output_tokens: 200,
        tools: [{ type: 'function', name: 'view_image', parameters: { type: 'object', properties: {} } }],
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'Look at shot.png' }] },
          { type: 'function_call', call_id: 'call_v', name: 'view_image', arguments: '{"path":"shot.png"}' },
          {
            type: 'function_call_output',
            call_id: 'call_v',
            output: [
              { type: 'input_text', text: 'shot.png:' },
              { type: 'input_image', image_url: `data:image/png;base64,${PNG_B64}` },
            ],
          },
        ],
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.output[0].content[0].text).toBe('A red dot.');
    expect(claude.messagesRequests[0].body.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'call_v',
          content: [
            { type: 'text', text: 'shot.png:' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_B64 } },
          ],
        },
      ],
    });
    const rawCharge = expectedRaw(CLAUDE, { uncached: 90, output: 5 });
    expect(r.headers.get('x-paywall-cost')).toBe(usdc(rawCharge).replace(/\.?0+$/, ''));
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - rawCharge, held: 0n });
  });

  it('a tool’s image output in a Responses request is held at the image’s bound, not at its base64 read as text (§13)', async () => {
    const user = await funded();
    // A PNG whose header declares 64 x 64 pixels, padded to 300 KB: its bound is one tile, while its
    // base64 read as text is about 100,000 tokens.
    const png = Buffer.from(PNG_B64, 'base64');
    png.writeUInt32BE(64, 16);
    png.writeUInt32BE(64, 20);
    const big = Buffer.concat([png, Buffer.alloc(300_000, 7)]).toString('base64');
    const body = (output: unknown) => ({
      model: GPT,
      max_output_tokens: 50,
      input: [
        { role: 'user', content: 'Look at shot.png' },
        { type: 'function_call', call_id: 'call_v', name: 'view_image', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_v', output },
      ],
    });
    for (const output of ['done', [{ type: 'input_image', image_url: `data:image/png;base64,${big}` }]]) {
      const r = await t.rest('POST', '/v1/responses', {
        token: pw.apiKey,
        headers: { 'x-paywall-user': user },
        body: body(output),
      });
      expect(r.status).toBe(200);
    }
    const [text, image] = (await chargesOf(t, pw, user)).map((c) => c.metadata.promptEstimate as number);
    // gpt-test is no known family: the largest family's bound of a 64 x 64 image (gpt-4o-mini: 2,833 + 5,667).
    expect(image - text).toBeLessThanOrEqual(2833 + 5667);
  });

  it('refuses only what changes what the client parses or pays: hosted tools, logprobs', async () => {
    const user = await funded();
    const r = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: THINKER, input: 'hi', tools: [{ type: 'web_search' }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ param: 'tools[0].type', code: 'unsupported_parameter' });
    const c = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: CLAUDE, messages: [{ role: 'user', content: 'hi' }], logprobs: true },
    });
    expect(c.status).toBe(400);
    expect(c.body.error).toMatchObject({ param: 'logprobs', code: 'unsupported_parameter' });
    expect(claude.requests).toHaveLength(0);
    expect(await chargesOf(t, pw, user)).toEqual([]);
  });
});
