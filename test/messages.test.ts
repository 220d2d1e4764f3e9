import Anthropic, {
  APIError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
} from '@anthropic-ai/sdk';
import { startTestApp, type TestApp } from './helpers/app.js';
import { anthropicErrorBody } from './helpers/anthropic-fixture.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { textTokens as countText } from './helpers/expected-cost.js';
import {
  chargesOf,
  createProxyPaywall,
  deposit,
  eventsOf,
  eventually,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * POST /v1/messages (docs/reference.md §15): Anthropic's Messages API under the payment rules of chat,
 * through Anthropic's official SDK.
 */

let t: TestApp;
let fake: FakeUpstream;
/** A paywall whose one provider is OpenAI-compatible (selling MODEL). */
let openaiPw: ProxyPaywall;
/** A paywall selling CLAUDE through an ANTHROPIC-kind provider named `claude` (the fake). */
let pw: ProxyPaywall;

const ANTHROPIC_KEY = 'sk-ant-provider-secret-0001';
const CLAUDE = 'claude-test';
/** The model id the provider knows (setModelPricing's upstreamModel). */
const UPSTREAM_CLAUDE = 'claude-sonnet-4-5-20250929';

/** Cost prices in 10⁻¹² USDC per token (pico), and the markup in ppm: the test's own arithmetic. */
const PICO = {
  request: 100_000_000n, // 0.0001 USDC
  prompt: 3_000_000n, // 0.000003
  cacheRead: 300_000n, // 0.0000003
  cacheWrite: 3_750_000n, // 0.00000375
  completion: 15_000_000n, // 0.000015
};
const MARKUP_PPM = 1_500_000n;

/**
 * request + markup x (uncached input x prompt + cache reads x cacheRead + cache writes x cacheWrite +
 * output x completion), rounded up to a raw unit (10⁻⁶ USDC = 10¹² of pico x ppm).
 */
function expectedRaw(u: { input: number; cacheRead: number; cacheWrite: number; output: number }): bigint {
  const sum =
    BigInt(u.input) * PICO.prompt +
    BigInt(u.cacheRead) * PICO.cacheRead +
    BigInt(u.cacheWrite) * PICO.cacheWrite +
    BigInt(u.output) * PICO.completion;
  const scaled = PICO.request * 1_000_000n + MARKUP_PPM * sum;
  return (scaled + 10n ** 12n - 1n) / 10n ** 12n;
}

/** Anthropic usage as its API reference defines it (Usage): cache fields, cache_creation by TTL, tier. */
const CACHED_USAGE = {
  input_tokens: 21,
  cache_creation_input_tokens: 1200,
  cache_read_input_tokens: 3001,
  cache_creation: { ephemeral_5m_input_tokens: 1200, ephemeral_1h_input_tokens: 0 },
  output_tokens: 7,
  service_tier: 'standard',
};
const CACHED_RAW = () => expectedRaw({ input: 21, cacheRead: 3001, cacheWrite: 1200, output: 7 });

const usdc = (raw: bigint) =>
  `${raw / 1_000_000n}.${(raw % 1_000_000n).toString().padStart(6, '0')}`.replace(/\.?0+$/, '');

async function gqlOk(token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

/** A DEFAULT paywall with an ANTHROPIC provider `claude` at the fake, selling CLAUDE with bucket prices. */
async function anthropicPaywall(): Promise<ProxyPaywall> {
  const p = await t.createPaywall('DEFAULT');
  await gqlOk(p.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl: fake.baseUrl, apiKey: ANTHROPIC_KEY, name: 'claude', kind: 'ANTHROPIC' },
  });
  await gqlOk(p.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: {
      modelId: CLAUDE,
      provider: 'claude',
      upstreamModel: UPSTREAM_CLAUDE,
      prompt: '0.000003',
      completion: '0.000015',
      cacheRead: '0.0000003',
      cacheWrite: '0.00000375',
      request: '0.0001',
      maxCompletionTokens: 1000,
    },
  });
  await gqlOk(p.apiKey, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
    i: { markup: '1.5' },
  });
  return p;
}

/** Anthropic's SDK against the service: the paywall key in `x-api-key`, the user in X-Paywall-User. */
const anthropic = (apiKey: string, user?: string, opts: { bearer?: boolean } = {}) =>
  new Anthropic({
    baseURL: t.url,
    ...(opts.bearer ? { authToken: apiKey, apiKey: null } : { apiKey }),
    defaultHeaders: user ? { 'x-paywall-user': user } : {},
    maxRetries: 0,
  });

/** The `anthropic-version` Anthropic's SDK 1.10.0 sends (passed on as it is). */
const SDK_VERSION_HEADER = '2026-10-21';

const ask = { max_tokens: 50, messages: [{ role: 'user' as const, content: 'Hello' }] };

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  openaiPw = await createProxyPaywall(t, fake);
  pw = await anthropicPaywall();
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

describe('Messages errors in Anthropic’s shape (raised by the SDK as its error classes)', () => {
  it('a bad key: 401 authentication_error (AuthenticationError), in x-api-key and as a bearer token', async () => {
    for (const bearer of [false, true]) {
      const err = await anthropic('pk_not_a_key', 'alice', { bearer })
        .messages.create({ model: MODEL, ...ask })
        .catch((e) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err.status).toBe(401);
      expect(err.error).toEqual({
        type: 'error',
        error: { type: 'authentication_error', message: 'Invalid API key.' },
      });
    }
    const none = await t.rest('POST', '/v1/messages', { body: { model: MODEL, ...ask } });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({
      type: 'error',
      error: {
        type: 'authentication_error',
        message: 'Missing API key: send it as `Authorization: Bearer <key>` or `x-api-key`.',
      },
    });
    expect(fake.requests).toHaveLength(0);
  });

  it('no end user: 400 invalid_request_error (BadRequestError)', async () => {
    const err = await anthropic(openaiPw.apiKey)
      .messages.create({ model: MODEL, ...ask })
      .catch((e) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect(err.error.type).toBe('error');
    expect(err.error.error.type).toBe('invalid_request_error');
    expect(err.error.error.message).toMatch(/No end user given/);
    // It names Anthropic's own field, the one an Anthropic SDK user can set, not only OpenAI's body `user`.
    expect(err.error.error.message).toMatch(/`metadata\.user_id`/);
    expect(fake.requests).toHaveLength(0);
  });

  it('a model the paywall does not sell: 404 not_found_error (NotFoundError)', async () => {
    const err = await anthropic(openaiPw.apiKey, 'alice')
      .messages.create({ model: 'claude-unknown', ...ask })
      .catch((e) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    expect(err.error.error.message).toContain('claude-unknown');
  });

  it('a body Anthropic would refuse: 400 naming the field, before anything is held or sent', async () => {
    const r = await t.rest('POST', '/v1/messages', {
      headers: { 'x-api-key': openaiPw.apiKey, 'x-paywall-user': 'alice' },
      body: { model: MODEL, messages: ask.messages },
    });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
    const json = await t.rest('POST', '/v1/u/alice/messages', {
      headers: { 'x-api-key': openaiPw.apiKey, 'content-type': 'application/json' },
      body: '{"model":',
    });
    expect(json.status).toBe(400);
    expect(json.body).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'request body is not valid JSON' },
    });
    expect(fake.requests).toHaveLength(0);
  });

  it('x-api-key authenticates the other /v1 routes too (OpenAI’s error shape there)', async () => {
    const models = await t.rest('GET', '/v1/models', { headers: { 'x-api-key': openaiPw.apiKey } });
    expect(models.status).toBe(200);
    const bad = await t.rest('GET', '/v1/models', { headers: { 'x-api-key': 'nope' } });
    expect(bad.status).toBe(401);
    expect(bad.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
  });
});

describe('POST /v1/messages on an ANTHROPIC provider, charged from Anthropic’s usage buckets', () => {
  it('messages.create: the answer as the provider sent it, charged request + markup x buckets, rounded up; usage gains cost and cost_details', async () => {
    await deposit(t, pw, 'm-alice', '1');
    fake.next({ rawUsage: CACHED_USAGE });
    const { data: msg, response } = await anthropic(pw.apiKey, 'm-alice')
      .messages.create({ model: CLAUDE, max_tokens: 50, system: 'Be brief.', messages: ask.messages })
      .withResponse();

    const raw = CACHED_RAW();
    expect(raw).toBe(8453n); // 0.0001 + 1.5 x (21 x 0.000003 + 3001 x 0.0000003 + 1200 x 0.00000375 + 7 x 0.000015)
    expect(msg.type).toBe('message');
    expect(msg.role).toBe('assistant');
    expect(msg.model).toBe(UPSTREAM_CLAUDE);
    expect(msg.content).toEqual([{ type: 'text', text: 'Hello from the fake upstream!' }]);
    expect(msg.stop_reason).toBe('end_turn');
    const usage = msg.usage as any;
    expect(usage).toMatchObject({ ...CACHED_USAGE, cost: usdc(raw) });
    expect(Object.keys(usage.cost_details).sort()).toEqual(
      [
        'audio_completion',
        'audio_prompt',
        'cache_read',
        'cache_write',
        'completion',
        'prompt',
        'reasoning',
        'request',
      ].sort(),
    );
    expect(usage.cost_details).toMatchObject({
      request: '0.0001',
      prompt: '0.0000945', // 1.5 x 21 x 0.000003
      cache_read: '0.00135045', // 1.5 x 3001 x 0.0000003
      cache_write: '0.00675', // 1.5 x 1200 x 0.00000375
      completion: '0.0001575', // 1.5 x 7 x 0.000015
    });
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(raw));
    expect(response.headers.get('x-paywall-balance')).toBe(usdc(1_000_000n - raw));

    expect(await money(t, pw, 'm-alice')).toEqual({
      balance: 1_000_000n - raw,
      held: 0n,
      ledgerSum: 1_000_000n - raw,
    });
    const [charge] = await chargesOf(t, pw, 'm-alice');
    expect(charge).toMatchObject({
      status: 'completed',
      model: CLAUDE,
      prompt_tokens: 21 + 3001 + 1200,
      completion_tokens: 7,
      max_completion_tokens: 50,
      amount: raw.toString(),
      stream: false,
    });
    expect(charge.metadata.buckets).toMatchObject({
      prompt: 21,
      cacheRead: 3001,
      cacheWrite: 1200,
      completion: 7,
    });

    // Upstream: /v1/messages with the provider's key, Anthropic's version header, the upstream model id
    // and the hold's cap; never the paywall key or the end user.
    expect(fake.requests).toHaveLength(1);
    const [up] = fake.messagesRequests;
    expect(up.url).toBe('/v1/messages');
    expect(up.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    // The version the SDK sent is passed on (1.10.0 sends its own, not the default).
    expect(up.headers['anthropic-version']).toBe(SDK_VERSION_HEADER);
    expect(up.headers.authorization).toBeUndefined();
    expect(up.headers['x-paywall-user']).toBeUndefined();
    expect(JSON.stringify(up.headers)).not.toContain(pw.apiKey);
    expect(up.body).toEqual({
      model: UPSTREAM_CLAUDE,
      max_tokens: 50,
      system: 'Be brief.',
      messages: ask.messages,
    });
    await expectLedgerProven(t.db);
  });

  it('metadata.user_id names the end user and never goes upstream; max_tokens is capped at the model’s maximum; max_tokens stops', async () => {
    await deposit(t, pw, 'm-bob', '1');
    fake.next({ content: 'one two three four five six', usage: { prompt_tokens: 9, completion_tokens: 4 } });
    const msg = await anthropic(pw.apiKey).messages.create({
      model: CLAUDE,
      max_tokens: 4,
      messages: ask.messages,
      metadata: { user_id: 'm-bob' },
    });
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.content).toEqual([{ type: 'text', text: 'one two three four' }]);
    expect(fake.messagesRequests[0].body).toEqual({
      model: UPSTREAM_CLAUDE,
      max_tokens: 4,
      messages: ask.messages,
    });
    const raw = expectedRaw({ input: 9, cacheRead: 0, cacheWrite: 0, output: 4 });
    expect((msg.usage as any).cost).toBe(usdc(raw));
    expect((await money(t, pw, 'm-bob')).balance).toBe(1_000_000n - raw);

    // Over the model's maxCompletionTokens (1000): the cap sent is 1000; the path names the user.
    const r = await t.rest('POST', '/v1/u/m-bob/messages', {
      headers: { 'x-api-key': pw.apiKey },
      body: { model: CLAUDE, max_tokens: 5000, messages: ask.messages },
    });
    expect(r.status).toBe(200);
    expect(fake.messagesRequests[1].body.max_tokens).toBe(1000);
    // A client that sends no anthropic-version: the default goes upstream.
    expect(fake.messagesRequests[1].headers['anthropic-version']).toBe('2023-06-01');
    expect(fake.messagesRequests[1].headers['anthropic-beta']).toBeUndefined();
    expect((await chargesOf(t, pw, 'm-bob')).map((c) => c.max_completion_tokens)).toEqual([4, 1000]);
  });

  it('metadata.user_id comes after the path: an SDK on /u/{user}/v1 that fills it with its own id is served as the path’s user', async () => {
    await deposit(t, pw, 'm-dora', '1');
    // Claude Code's kind of metadata.user_id: its own id, not the paywall's end user.
    const client = new Anthropic({ baseURL: `${t.url}/u/m-dora`, apiKey: pw.apiKey, maxRetries: 0 });
    const msg = await client.messages.create({
      model: CLAUDE,
      ...ask,
      metadata: { user_id: 'user_4f1c_account__session_9b2e' },
    });
    expect(msg.content).toEqual([{ type: 'text', text: expect.any(String) }]);
    expect(fake.messagesRequests[0].body.metadata).toBeUndefined();
    expect(await chargesOf(t, pw, 'm-dora')).toHaveLength(1);
    expect((await money(t, pw, 'm-dora')).balance).toBeLessThan(1_000_000n);
    // The header outranks the path: naming another user there is still refused.
    const other = await t.rest('POST', '/v1/u/m-dora/messages', {
      headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': 'm-erin' },
      body: { model: CLAUDE, ...ask },
    });
    expect(other.status).toBe(400);
    expect(other.body.error.type).toBe('invalid_request_error');
  });

  it('messages.stream: events relayed, finalMessage() whole, charged the same; the final message_delta’s usage carries cost', async () => {
    await deposit(t, pw, 'm-carol', '1');
    fake.next({ rawUsage: CACHED_USAGE, deltaRepeatsInput: true });
    const client = new Anthropic({
      baseURL: t.url,
      apiKey: pw.apiKey,
      defaultHeaders: { 'x-paywall-user': 'm-carol', 'anthropic-beta': 'prompt-caching-2024-07-31' },
      maxRetries: 0,
    });
    const stream = client.messages.stream({ model: CLAUDE, max_tokens: 50, messages: ask.messages });
    const seen: any[] = [];
    stream.on('streamEvent', (e) => seen.push(e));
    const final = await stream.finalMessage();

    const raw = CACHED_RAW();
    expect(final.content).toEqual([{ type: 'text', text: 'Hello from the fake upstream!' }]);
    expect(final.stop_reason).toBe('end_turn');
    expect(final.usage).toMatchObject({
      input_tokens: 21,
      cache_read_input_tokens: 3001,
      cache_creation_input_tokens: 1200,
      output_tokens: 7,
    });
    expect(seen.map((e) => e.type)).toEqual([
      'message_start',
      'content_block_start',
      ...'Hello from the fake upstream!'.match(/\s*\S+/g)!.map(() => 'content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const delta = seen.find((e) => e.type === 'message_delta');
    expect(delta.usage).toMatchObject({
      input_tokens: 21,
      cache_read_input_tokens: 3001,
      cache_creation_input_tokens: 1200,
      output_tokens: 7,
      cost: usdc(raw),
      balance: usdc(1_000_000n - raw),
    });
    expect(delta.usage.cost_details).toMatchObject({ cache_read: '0.00135045', cache_write: '0.00675' });
    expect(await money(t, pw, 'm-carol')).toEqual({
      balance: 1_000_000n - raw,
      held: 0n,
      ledgerSum: 1_000_000n - raw,
    });
    const [charge] = await chargesOf(t, pw, 'm-carol');
    expect(charge).toMatchObject({ status: 'completed', stream: true, amount: raw.toString() });

    const [up] = fake.messagesRequests;
    expect(up.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31');
    expect(up.headers['anthropic-version']).toBe(SDK_VERSION_HEADER);
    expect(up.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(up.body).toEqual({ model: UPSTREAM_CLAUDE, max_tokens: 50, messages: ask.messages, stream: true });
    await expectLedgerProven(t.db);
  });

  it('messages.countTokens: forwarded as it is (upstream model id, no end user), not charged', async () => {
    await deposit(t, pw, 'm-dan', '1');
    fake.next({ usage: { prompt_tokens: 2095, completion_tokens: 0 } });
    const before = await money(t, pw, 'm-dan');
    const count = await anthropic(pw.apiKey, 'm-dan').messages.countTokens({
      model: CLAUDE,
      system: 'Be brief.',
      messages: ask.messages,
    });
    expect(count).toEqual({ input_tokens: 2095 });
    expect(await money(t, pw, 'm-dan')).toEqual(before);
    expect(await chargesOf(t, pw, 'm-dan')).toHaveLength(0);
    const [up] = fake.countTokensRequests;
    expect(up.url).toBe('/v1/messages/count_tokens');
    expect(up.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(up.body).toEqual({ model: UPSTREAM_CLAUDE, system: 'Be brief.', messages: ask.messages });
  });

  it('a user who cannot pay: an ordinary message holding the link with the paywall field, JSON and streamed; nothing sent upstream', async () => {
    const blocked = (await eventsOf(t, pw, 'paywall.proxy.request.blocked')).length;
    const msg: any = await anthropic(pw.apiKey, 'm-broke').messages.create({ model: CLAUDE, ...ask });
    expect(msg).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: CLAUDE,
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0, cost: '0' },
      paywall: { reason: 'insufficient_balance' },
    });
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.content[0].type).toBe('text');
    expect(msg.content[0].text).toContain(msg.paywall.url);

    const stream = anthropic(pw.apiKey, 'm-broke').messages.stream({ model: CLAUDE, ...ask });
    const final: any = await stream.finalMessage();
    expect(final.content).toEqual([
      {
        type: 'text',
        text: msg.content[0].text.replace(msg.paywall.url, final.paywall.url),
        citations: null,
      },
    ]);
    expect(final.stop_reason).toBe('end_turn');
    expect(final.paywall).toMatchObject({ reason: 'insufficient_balance' });
    expect(final.content[0].text).toContain(final.paywall.url);

    expect(fake.requests).toHaveLength(0);
    expect((await eventsOf(t, pw, 'paywall.proxy.request.blocked')).length).toBe(blocked + 2);
  });

  it('a provider’s 4xx is passed through in Anthropic’s shape; a 5xx is a 502 api_error; nothing is charged', async () => {
    await deposit(t, pw, 'm-erin', '1');
    const tooLong = anthropicErrorBody(
      'invalid_request_error',
      'prompt is too long: 210000 tokens > 200000 maximum',
    );
    fake.next({ status: 400, errorBody: tooLong });
    const err = await anthropic(pw.apiKey, 'm-erin')
      .messages.create({ model: CLAUDE, ...ask })
      .catch((e) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect(err.error).toEqual(tooLong);

    fake.next({ status: 404, errorText: '<html>not here</html>' });
    const page = await t.rest('POST', '/v1/messages', {
      headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': 'm-erin' },
      body: { model: CLAUDE, ...ask },
    });
    expect(page.status).toBe(404);
    expect(page.body).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: 'The model provider refused the request (HTTP 404).' },
    });

    fake.next({ status: 529 });
    const down = await anthropic(pw.apiKey, 'm-erin')
      .messages.create({ model: CLAUDE, ...ask })
      .catch((e) => e);
    expect(down).toBeInstanceOf(InternalServerError);
    expect(down.status).toBe(502);
    expect(down.error).toMatchObject({ type: 'error', error: { type: 'api_error' } });

    expect((await money(t, pw, 'm-erin')).balance).toBe(1_000_000n);
  });

  it('an error event mid-stream reaches the SDK as Anthropic’s error; the stream is charged for what it produced', async () => {
    await deposit(t, pw, 'm-fay', '1');
    fake.next({
      content: 'one two three four',
      usage: { prompt_tokens: 9, completion_tokens: 4 },
      errorEventAfterChunks: 2,
    });
    const err = await anthropic(pw.apiKey, 'm-fay')
      .messages.stream({ model: CLAUDE, ...ask })
      .finalMessage()
      .catch((e) => e);
    expect(err).toBeInstanceOf(APIError);
    expect(err.error).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    // message_start's output_tokens (1) is a placeholder: the two words relayed are counted.
    const produced = countText('one two');
    const raw = expectedRaw({ input: 9, cacheRead: 0, cacheWrite: 0, output: produced });
    // The SDK stops at the error event, which is relayed as it arrives; the stream settles when the
    // provider's answer ends, a moment later.
    const [charge] = await eventually(
      () => chargesOf(t, pw, 'm-fay'),
      (rows) => rows[0]?.status !== 'held',
    );
    // The charge is collected (`completed`); the request's failure is its error_code.
    expect(charge).toMatchObject({
      status: 'completed',
      error_code: 'upstream_error',
      prompt_tokens: 9,
      completion_tokens: produced,
      amount: raw.toString(),
    });
    expect(await money(t, pw, 'm-fay')).toEqual({
      balance: 1_000_000n - raw,
      held: 0n,
      ledgerSum: 1_000_000n - raw,
    });
  });
});
