import OpenAI from 'openai';
import { chatFormat } from '../src/modules/proxy/chat-format.js';
import { responsesFormat } from '../src/modules/proxy/responses-format.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import type { CapParameter } from '../src/modules/providers/provider-client.js';
import { FakeUpstream, MAX_TOKENS_REFUSAL } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  client,
  connectShared,
  createProxyPaywall,
  deposit,
  MODEL,
  money,
  PROVIDER_KEY,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * docs/reference.md §13 "Cap sent upstream": the cap goes in the field the client used; when it sent
 * neither, chat sends `max_completion_tokens` (OpenAI's reasoning models refuse `max_tokens`), or
 * `max_tokens` for a provider connected with `capParameter: MAX_TOKENS`. Responses: `max_output_tokens`.
 *
 * `reasoning` answers like OpenAI's reasoning models: `max_tokens` gets their 400 `unsupported_parameter`.
 * `older` is a server that takes any field (what it was sent is what the test reads); it also serves as
 * the built-in provider, configured with BUILTIN_PROVIDER_CAP_PARAMETER=MAX_TOKENS.
 */

const BUILTIN_KEY = 'sk-builtin-operator-key-0001';
const hi = [{ role: 'user' as const, content: 'Say hello' }];
/** The fake's default usage (11 + 7 tokens) at createProxyPaywall's prices: 1086 raw units. */
const COST = 1086n;

let t: TestApp;
let reasoning: FakeUpstream;
let older: FakeUpstream;
let pw: ProxyPaywall;
let pwOld: ProxyPaywall;

beforeAll(async () => {
  reasoning = await FakeUpstream.start();
  older = await FakeUpstream.start();
  t = await startTestApp({
    BUILTIN_PROVIDER_BASE_URL: older.baseUrl,
    BUILTIN_PROVIDER_API_KEY: BUILTIN_KEY,
    BUILTIN_MODELS: JSON.stringify([
      { id: 'builtin-m', prompt: '0.000002', completion: '0.000008', maxCompletionTokens: 300 },
    ]),
    BUILTIN_PROVIDER_CAP_PARAMETER: 'MAX_TOKENS',
  });
  pw = await createProxyPaywall(t, reasoning);
  pwOld = await createProxyPaywall(t, older, { capParameter: 'MAX_TOKENS' });
});
afterAll(async () => {
  await t?.close();
  await reasoning?.close();
  await older?.close();
});
beforeEach(() => {
  reasoning.reset();
  reasoning.behavior = { refuseMaxTokens: true };
  older.reset();
});

/** A streamed chat over raw HTTP: the status, and the SSE data lines (or the JSON body of a refusal). */
async function stream(p: ProxyPaywall, user: string, body: Record<string, unknown>) {
  const res = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${p.apiKey}`,
      'content-type': 'application/json',
      'x-paywall-user': user,
    },
    body: JSON.stringify({ model: MODEL, messages: hi, stream: true, ...body }),
  });
  const text = await res.text();
  const data = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  return { status: res.status, contentType: res.headers.get('content-type'), text, data };
}

/** The cap fields of the one chat request `fake` received. */
function capsSent(fake: FakeUpstream) {
  expect(fake.chatRequests).toHaveLength(1);
  const { max_tokens, max_completion_tokens } = fake.chatRequests[0].body;
  return { max_tokens, max_completion_tokens };
}

describe('the body sent upstream (chat and Responses formats)', () => {
  /** The chat body sent upstream for a client's `body`, with a cap of 321 the hold affords. */
  const sent = (body: Record<string, unknown>, capParameter: CapParameter) =>
    JSON.parse(
      chatFormat.upstreamBody(chatFormat.parse({ model: MODEL, messages: hi, ...body }), 321, {
        model: MODEL,
        capParameter,
      }),
    );

  it.each<[string, Record<string, unknown>, CapParameter, Record<string, number>]>([
    ['no client cap, default provider', {}, 'MAX_COMPLETION_TOKENS', { max_completion_tokens: 321 }],
    ['no client cap, MAX_TOKENS provider', {}, 'MAX_TOKENS', { max_tokens: 321 }],
    ['max_tokens, default provider', { max_tokens: 900 }, 'MAX_COMPLETION_TOKENS', { max_tokens: 321 }],
    ['max_tokens, MAX_TOKENS provider', { max_tokens: 900 }, 'MAX_TOKENS', { max_tokens: 321 }],
    [
      'max_completion_tokens, MAX_TOKENS provider',
      { max_completion_tokens: 900 },
      'MAX_TOKENS',
      { max_completion_tokens: 321 },
    ],
    [
      'both, default provider',
      { max_tokens: 900, max_completion_tokens: 800 },
      'MAX_COMPLETION_TOKENS',
      { max_tokens: 321, max_completion_tokens: 321 },
    ],
  ])('chat, %s: exactly these cap fields', (_, body, capParameter, caps) => {
    const out = sent(body, capParameter);
    expect({ max_tokens: out.max_tokens, max_completion_tokens: out.max_completion_tokens }).toEqual({
      max_tokens: undefined,
      max_completion_tokens: undefined,
      ...caps,
    });
  });

  it.each<CapParameter>(['MAX_COMPLETION_TOKENS', 'MAX_TOKENS'])(
    'Responses with a %s provider: max_output_tokens only',
    (capParameter) => {
      const req = responsesFormat.parse({ model: MODEL, input: 'hi', max_output_tokens: 900 });
      const out = JSON.parse(responsesFormat.upstreamBody(req, 321, { capParameter, model: req.model }));
      expect(out.max_output_tokens).toBe(321);
      expect(out.max_tokens).toBeUndefined();
      expect(out.max_completion_tokens).toBeUndefined();
    },
  );
});

describe('a provider connected with the default capParameter (an OpenAI reasoning model)', () => {
  it('a client that sent no cap: max_completion_tokens upstream, no max_tokens; answered and charged', async () => {
    await deposit(t, pw, 'ann', '1');
    const c = await client(t, pw, 'ann').chat.completions.create({ model: MODEL, messages: hi });
    // 1000 = the model's maxCompletionTokens (the balance affords more).
    expect(capsSent(reasoning)).toEqual({ max_tokens: undefined, max_completion_tokens: 1000 });
    expect('max_tokens' in reasoning.chatRequests[0].body).toBe(false);
    expect(c.choices[0].message.content).toBe('Hello from the fake upstream!');
    expect(c.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, cost: '0.001086' });
    expect((await money(t, pw, 'ann')).balance).toBe(1_000_000n - COST);
    const [charge] = await chargesOf(t, pw, 'ann');
    expect(charge).toMatchObject({ status: 'completed', amount: '1086', max_completion_tokens: 1000 });
    await expectLedgerProven(t.db);
  });

  it('a stream with no client cap: max_completion_tokens upstream, relayed to [DONE] and charged', async () => {
    await deposit(t, pw, 'bea', '1');
    const r = await stream(pw, 'bea', { stream_options: { include_usage: true } });
    expect(r.status).toBe(200);
    expect(r.contentType).toMatch(/^text\/event-stream/);
    expect(capsSent(reasoning)).toEqual({ max_tokens: undefined, max_completion_tokens: 1000 });
    expect(reasoning.chatRequests[0].body.stream_options).toEqual({ include_usage: true });
    expect(r.data.at(-1)).toBe('[DONE]');
    const usage = JSON.parse(r.data.at(-2)!).usage;
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, cost: '0.001086' });
    expect((await money(t, pw, 'bea')).balance).toBe(1_000_000n - COST);
    await expectLedgerProven(t.db);
  });

  it("a client that sent max_tokens keeps it; the model's 400 is passed on and nothing is charged", async () => {
    await deposit(t, pw, 'cid', '1');
    const err = await client(t, pw, 'cid')
      .chat.completions.create({ model: MODEL, messages: hi, max_tokens: 50 })
      .catch((e) => e);
    expect(capsSent(reasoning)).toEqual({ max_tokens: 50, max_completion_tokens: undefined });
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.status).toBe(400);
    expect(err.error).toEqual(MAX_TOKENS_REFUSAL.error);
    expect(await money(t, pw, 'cid')).toMatchObject({ balance: 1_000_000n, held: 0n });
    const [charge] = await chargesOf(t, pw, 'cid');
    expect(charge).toMatchObject({ status: 'released', amount: '0', error_code: 'upstream_400' });
    await expectLedgerProven(t.db);
  });

  it('a stream whose client sent max_tokens: the same 400, as JSON, nothing charged', async () => {
    await deposit(t, pw, 'dan', '1');
    const r = await stream(pw, 'dan', { max_tokens: 40 });
    expect(capsSent(reasoning)).toEqual({ max_tokens: 40, max_completion_tokens: undefined });
    expect(r.status).toBe(400);
    expect(r.contentType).toMatch(/^application\/json/);
    expect(JSON.parse(r.text)).toEqual(MAX_TOKENS_REFUSAL);
    expect(await money(t, pw, 'dan')).toMatchObject({ balance: 1_000_000n, held: 0n });
    expect((await chargesOf(t, pw, 'dan'))[0]).toMatchObject({ status: 'released', amount: '0' });
    await expectLedgerProven(t.db);
  });

  it('a client that sent max_completion_tokens keeps it, with its own value', async () => {
    await deposit(t, pw, 'eve', '1');
    await client(t, pw, 'eve').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_completion_tokens: 50,
    });
    expect(capsSent(reasoning)).toEqual({ max_tokens: undefined, max_completion_tokens: 50 });
    expect((await money(t, pw, 'eve')).balance).toBe(1_000_000n - COST);
    expect((await chargesOf(t, pw, 'eve'))[0]).toMatchObject({ amount: '1086', max_completion_tokens: 50 });
  });

  it('a cap lowered to what the balance affords goes in max_completion_tokens too', async () => {
    // 0.0012 USDC: after the request price and the prompt, fewer than 1000 completion tokens.
    await deposit(t, pw, 'fay', '0.0012');
    reasoning.behavior = { refuseMaxTokens: true, usage: { prompt_tokens: 11, completion_tokens: 5 } };
    await client(t, pw, 'fay').chat.completions.create({ model: MODEL, messages: hi });
    const [charge] = await chargesOf(t, pw, 'fay');
    expect(charge.max_completion_tokens).toBeLessThan(1000);
    expect(capsSent(reasoning)).toEqual({
      max_tokens: undefined,
      max_completion_tokens: charge.max_completion_tokens,
    });
    expect(charge).toMatchObject({ status: 'completed' });
    expect(BigInt(charge.amount)).toBeGreaterThan(0n);
  });

  it('GraphQL createChatCompletion with no cap sends max_completion_tokens; with maxTokens, max_tokens', async () => {
    await deposit(t, pw, 'gus', '1');
    const MUTATION = `mutation($i: ChatCompletionInput!) {
      createChatCompletion(input: $i) { choices { message { content } } usage { cost } } }`;
    const ok = await t.gql(pw.apiKey, MUTATION, { i: { model: MODEL, user: 'gus', messages: hi } });
    expect(ok.errors).toBeUndefined();
    expect(ok.data.createChatCompletion.usage.cost).toBe('0.001086');
    expect(capsSent(reasoning)).toEqual({ max_tokens: undefined, max_completion_tokens: 1000 });

    reasoning.reset();
    reasoning.behavior = { refuseMaxTokens: true };
    const refused = await t.gql(pw.apiKey, MUTATION, {
      i: { model: MODEL, user: 'gus', messages: hi, maxTokens: 30 },
    });
    expect(capsSent(reasoning)).toEqual({ max_tokens: 30, max_completion_tokens: undefined });
    expect(refused.errors?.[0].message).toBe(MAX_TOKENS_REFUSAL.error.message);
    expect(refused.errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      param: 'max_tokens',
      errorCode: 'unsupported_parameter',
    });
    expect((await money(t, pw, 'gus')).balance).toBe(1_000_000n - COST);
  });

  it('the Responses API keeps max_output_tokens (neither chat field)', async () => {
    await deposit(t, pw, 'hal', '1');
    const r = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'hal' },
      body: { model: MODEL, input: 'Say hello' },
    });
    expect(r.status).toBe(200);
    expect(reasoning.responsesRequests).toHaveLength(1);
    const sent = reasoning.responsesRequests[0].body;
    expect(sent.max_output_tokens).toBe(1000);
    expect(sent.max_tokens).toBeUndefined();
    expect(sent.max_completion_tokens).toBeUndefined();
    expect((await money(t, pw, 'hal')).balance).toBe(1_000_000n - COST);
  });
});

describe('a provider connected with capParameter: MAX_TOKENS (an older server)', () => {
  it('a client that sent no cap: max_tokens upstream, not max_completion_tokens; charged', async () => {
    await deposit(t, pwOld, 'ida', '1');
    const c = await client(t, pwOld, 'ida').chat.completions.create({ model: MODEL, messages: hi });
    expect(capsSent(older)).toEqual({ max_tokens: 1000, max_completion_tokens: undefined });
    expect('max_completion_tokens' in older.chatRequests[0].body).toBe(false);
    expect((c.usage as any)?.cost).toBe('0.001086');
    expect((await money(t, pwOld, 'ida')).balance).toBe(1_000_000n - COST);
  });

  it('a stream with no client cap: max_tokens upstream', async () => {
    await deposit(t, pwOld, 'jo', '1');
    const r = await stream(pwOld, 'jo', {});
    expect(r.status).toBe(200);
    expect(r.data.at(-1)).toBe('[DONE]');
    expect(capsSent(older)).toEqual({ max_tokens: 1000, max_completion_tokens: undefined });
    expect((await money(t, pwOld, 'jo')).balance).toBe(1_000_000n - COST);
  });

  it("a client's own field is kept: max_completion_tokens alone, or both with the smaller value", async () => {
    await deposit(t, pwOld, 'kai', '1');
    await client(t, pwOld, 'kai').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_completion_tokens: 60,
    });
    expect(capsSent(older)).toEqual({ max_tokens: undefined, max_completion_tokens: 60 });
    older.reset();
    await client(t, pwOld, 'kai').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_tokens: 80,
      max_completion_tokens: 70,
    });
    expect(capsSent(older)).toEqual({ max_tokens: 70, max_completion_tokens: 70 });
    expect((await money(t, pwOld, 'kai')).balance).toBe(1_000_000n - 2n * COST);
  });
});

describe('connectProvider capParameter', () => {
  const CONNECT = `mutation($i: ConnectProviderInput!) {
    connectProvider(input: $i) { id provider { baseUrl capParameter } } }`;
  const connect = (p: ProxyPaywall, extra: Record<string, unknown> = {}) =>
    t.gql(p.apiKey, CONNECT, { i: { baseUrl: older.baseUrl, apiKey: PROVIDER_KEY, ...extra } });

  it('shows it on the provider; omitted on a reconnect means MAX_COMPLETION_TOKENS; takes effect at once', async () => {
    const p = await createProxyPaywall(t, older);
    await deposit(t, p, 'lou', '1');
    const shown = await t.gql(p.apiKey, `{ paywall { provider { capParameter } } }`);
    expect(shown.data.paywall.provider).toEqual({ capParameter: 'MAX_COMPLETION_TOKENS' });

    const r = await connect(p, { capParameter: 'MAX_TOKENS' });
    expect(r.errors).toBeUndefined();
    expect(r.data.connectProvider.provider).toEqual({ baseUrl: older.baseUrl, capParameter: 'MAX_TOKENS' });
    await client(t, p, 'lou').chat.completions.create({ model: MODEL, messages: hi });
    expect(capsSent(older)).toEqual({ max_tokens: 1000, max_completion_tokens: undefined });

    older.reset();
    const again = await connect(p);
    expect(again.data.connectProvider.provider.capParameter).toBe('MAX_COMPLETION_TOKENS');
    await client(t, p, 'lou').chat.completions.create({ model: MODEL, messages: hi });
    expect(capsSent(older)).toEqual({ max_tokens: undefined, max_completion_tokens: 1000 });
  });

  it('refuses a value outside the enum, changing nothing; the column refuses one too', async () => {
    const p = await createProxyPaywall(t, older, { capParameter: 'MAX_TOKENS' });
    const bad = await connect(p, { capParameter: 'max_tokens' });
    expect(bad.errors?.[0].message).toMatch(/CapParameter/);
    const shown = await t.gql(p.apiKey, `{ paywall { provider { capParameter } } }`);
    expect(shown.data.paywall.provider.capParameter).toBe('MAX_TOKENS');
    await expect(
      t.db.query(`update provider set cap_parameter = 'MAX_OUTPUT_TOKENS' where paywall_id = $1`, [p.id]),
    ).rejects.toThrow(/provider_cap_parameter_check/);
  });
});

describe('the built-in provider', () => {
  it('uses BUILTIN_PROVIDER_CAP_PARAMETER (here MAX_TOKENS) when the client sent no cap', async () => {
    const shared = await t.createPaywall('SHARED');
    // The first request creates the user (answered with the connect link, nothing forwarded).
    const first = await client(t, shared, 'max').chat.completions.create({
      model: 'builtin-m',
      messages: hi,
    });
    expect((first as any).paywall.reason).toBe('not_connected');
    expect(older.chatRequests).toHaveLength(0);
    await connectShared(t, shared, 'max', 1_000_000n);
    const c = await client(t, shared, 'max').chat.completions.create({ model: 'builtin-m', messages: hi });
    expect((c as any).paywall).toBeUndefined();
    expect(older.chatRequests[0].headers.authorization).toBe(`Bearer ${BUILTIN_KEY}`);
    expect(capsSent(older)).toEqual({ max_tokens: 300, max_completion_tokens: undefined });
    // 11 x 0.000002 + 7 x 0.000008 = 0.000078 at markup 1.
    expect((c.usage as any)?.cost).toBe('0.000078');
  });
});

/**
 * docs/reference.md §20: the client's cap goes upstream unchanged, in its own field, unless the balance
 * or the owner's maxCompletionTokens is lower (then `x-paywall-cap` says what was sent); with no client cap
 * the model's maximum output (the catalogue's, here gpt-4o's 16,384) is sent and bounds the hold. Thinking budgets stay below the cap.
 */
describe("the client's cap is kept (§20)", () => {
  let p: ProxyPaywall;
  const gql = async (query: string, i: Record<string, unknown>) => {
    const r = await t.gql(p.apiKey, query, { i });
    expect(r.errors).toBeUndefined();
  };
  const post = (path: string, user: string, body: Record<string, unknown>) =>
    fetch(`${t.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${p.apiKey}`,
        'content-type': 'application/json',
        'x-paywall-user': user,
      },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    // The model ids gpt-test (owner's cap 1000) and the catalogue's gpt-4o on the `older` fake (any field).
    p = await createProxyPaywall(t, older);
    const price = `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`;
    await gql(price, { modelId: 'gpt-4o', prompt: '0.000002', completion: '0.000005' });
    await gql(`mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
      name: 'claude',
      kind: 'ANTHROPIC',
      baseUrl: older.baseUrl,
      apiKey: 'sk-ant-fake-0001',
    });
    await gql(price, {
      modelId: 'claude-sonnet-4-20250514',
      provider: 'claude',
      prompt: '0.000003',
      completion: '0.000015',
    });
  });

  it("a client's max_tokens above the old 4,096 default goes upstream unchanged, without x-paywall-cap", async () => {
    await deposit(t, p, 'cap-ann', '1');
    const r = await post('/v1/chat/completions', 'cap-ann', {
      model: 'gpt-4o',
      messages: hi,
      max_tokens: 32000,
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-paywall-cap')).toBeNull();
    expect(capsSent(older)).toEqual({ max_tokens: 32000, max_completion_tokens: undefined });
    expect((await chargesOf(t, p, 'cap-ann'))[0]).toMatchObject({ max_completion_tokens: 32000 });
  });

  it('no client cap: the catalogue’s maximum is sent (max_output_tokens; chat max_completion_tokens, not max_tokens) and named in x-paywall-cap; the hold is bounded by it', async () => {
    await deposit(t, p, 'cap-bea', '1');
    const r = await post('/v1/responses', 'cap-bea', { model: 'gpt-4o', input: 'Say hello' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-paywall-cap')).toBe('16384');
    expect(older.responsesRequests[0].body.max_output_tokens).toBe(16384);
    const c = await post('/v1/chat/completions', 'cap-bea', { model: 'gpt-4o', messages: hi });
    expect(c.status).toBe(200);
    expect(c.headers.get('x-paywall-cap')).toBe('16384');
    expect(capsSent(older)).toEqual({ max_tokens: undefined, max_completion_tokens: 16384 });
    const charges = await chargesOf(t, p, 'cap-bea');
    expect(charges.map((ch) => ch.max_completion_tokens)).toEqual([16384, 16384]);
  });

  it('no client cap on a model the catalogue does not know: the 4,096 held is sent (chat and Responses), so the provider cannot answer past the hold', async () => {
    await gql(`mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      modelId: 'house-llm-7b',
      prompt: '0.000001',
      completion: '0.000002',
    });
    await deposit(t, p, 'cap-unk', '1');
    const c = await post('/v1/chat/completions', 'cap-unk', { model: 'house-llm-7b', messages: hi });
    expect(c.status).toBe(200);
    expect(capsSent(older)).toEqual({ max_tokens: undefined, max_completion_tokens: 4096 });
    const r = await post('/v1/responses', 'cap-unk', { model: 'house-llm-7b', input: 'Say hello' });
    expect(r.status).toBe(200);
    expect(older.responsesRequests[0].body.max_output_tokens).toBe(4096);
    const charges = await chargesOf(t, p, 'cap-unk');
    expect(charges.map((ch) => ch.max_completion_tokens)).toEqual([4096, 4096]);
  });

  it.each([false, true])(
    'a provider that ignores the cap and reports no usage is charged at most the cap the client sent (stream: %s)',
    async (streamed) => {
      const user = `cap-over-${streamed}`;
      await deposit(t, p, user, '1');
      // 800 words for max_tokens 20, and no usage: the service counts what was relayed.
      older.next({ ignoreMaxTokens: true, usage: null, content: 'word '.repeat(800).trim() });
      const r = await post('/v1/chat/completions', user, {
        model: MODEL,
        messages: hi,
        max_tokens: 20,
        stream: streamed,
      });
      expect(r.status).toBe(200);
      await r.text();
      // Before: 800 completion tokens were charged (7,021 raw units for a hold of 1,171).
      const [c] = await chargesOf(t, p, user);
      expect(c).toMatchObject({ status: 'completed', completion_tokens: 20, max_completion_tokens: 20 });
      expect(c.amount).toBe(c.hold);
      expect((await money(t, p, user)).balance).toBe(1_000_000n - BigInt(c.hold));
    },
  );

  it("the owner's lower maxCompletionTokens lowers the client's cap, in its own field, and says so", async () => {
    await deposit(t, p, 'cap-cid', '1');
    const r = await post('/v1/chat/completions', 'cap-cid', { model: MODEL, messages: hi, max_tokens: 5000 });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-paywall-cap')).toBe('1000');
    expect(capsSent(older)).toEqual({ max_tokens: 1000, max_completion_tokens: undefined });
  });

  it('a balance that cannot afford the cap: the lower cap is sent, and x-paywall-cap says it (JSON and stream)', async () => {
    await deposit(t, p, 'cap-dee', '0.05');
    const r = await post('/v1/chat/completions', 'cap-dee', {
      model: 'gpt-4o',
      messages: hi,
      max_tokens: 32000,
    });
    expect(r.status).toBe(200);
    const sent = older.chatRequests[0].body.max_tokens;
    expect(sent).toBeLessThan(32000);
    expect(r.headers.get('x-paywall-cap')).toBe(String(sent));
    older.reset();
    const s = await post('/v1/chat/completions', 'cap-dee', {
      model: 'gpt-4o',
      messages: hi,
      max_tokens: 32000,
      stream: true,
    });
    expect(s.status).toBe(200);
    await s.text();
    expect(s.headers.get('x-paywall-cap')).toBe(String(older.chatRequests[0].body.max_tokens));
    expect(older.chatRequests[0].body.max_tokens).toBeLessThan(32000);
  });

  it('Claude Code with budget_tokens 10,000 and 0.05 USDC: max_tokens > budget_tokens ≥ 1,024, never a provider 400', async () => {
    await deposit(t, p, 'cap-eve', '0.05');
    const r = await post('/v1/messages', 'cap-eve', {
      model: 'claude-sonnet-4-20250514',
      max_tokens: 32000,
      thinking: { type: 'enabled', budget_tokens: 10000 },
      messages: [{ role: 'user', content: 'Think, then say hello' }],
    });
    expect(r.status).toBe(200);
    const body = older.messagesRequests[0].body;
    expect(body.max_tokens).toBeLessThan(10000);
    expect(body.max_tokens).toBeGreaterThan(body.thinking.budget_tokens);
    expect(body.thinking.budget_tokens).toBeGreaterThanOrEqual(1024);
    expect(body.thinking.budget_tokens).toBe(body.max_tokens - 1);
    expect(r.headers.get('x-paywall-cap')).toBe(String(body.max_tokens));
  });

  it("thinking on a model the owner caps at or below thinking's smallest budget: 400 before the hold, nothing forwarded or held", async () => {
    await gql(`mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      modelId: 'claude-3-5-haiku-20241022',
      provider: 'claude',
      prompt: '0.000001',
      completion: '0.000005',
      maxCompletionTokens: 1024,
    });
    await deposit(t, p, 'cap-gil', '1');
    const thinking = {
      model: 'claude-3-5-haiku-20241022',
      max_tokens: 8000,
      thinking: { type: 'enabled', budget_tokens: 2000 },
      messages: [{ role: 'user', content: 'Think, then say hello' }],
    };
    const r = await post('/v1/messages', 'cap-gil', thinking);
    expect(r.status).toBe(400);
    const body = await r.json();
    expect(body.type).toBe('error');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toContain('caps claude-3-5-haiku-20241022');
    expect(body.error.message).toContain('1024 tokens');
    expect(older.messagesRequests).toHaveLength(0);
    expect(await chargesOf(t, p, 'cap-gil')).toHaveLength(0);
    expect((await money(t, p, 'cap-gil')).balance).toBe(1_000_000n);
    // Without thinking the same request goes, capped at the owner's 1,024.
    const { thinking: _dropped, ...plain } = thinking;
    const ok = await post('/v1/messages', 'cap-gil', plain);
    expect(ok.status).toBe(200);
    expect(older.messagesRequests[0].body.max_tokens).toBe(1024);
    expect(ok.headers.get('x-paywall-cap')).toBe('1024');
  });

  it('a reasoning effort translated into thinking: its budget below a cap the balance lowered, or the top-up reply when not even the smallest fits', async () => {
    // Chat toward Anthropic: a reasoning effort becomes thinking (`high`: a 24,576-token budget).
    const chat = (user: string, extra: Record<string, unknown>) =>
      post('/v1/chat/completions', user, {
        model: 'claude-sonnet-4-20250514',
        messages: [{ role: 'user', content: 'Think, then say hello' }],
        ...extra,
      });
    await deposit(t, p, 'cap-hal', '0.05');
    const r = await chat('cap-hal', { reasoning_effort: 'high' });
    expect(r.status).toBe(200);
    expect((await r.json()).paywall).toBeUndefined();
    const body = older.messagesRequests[0].body;
    expect(body.max_tokens).toBeLessThan(24576);
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: body.max_tokens - 1 });
    expect(r.headers.get('x-paywall-cap')).toBe(String(body.max_tokens));
    // 0.01 USDC affords fewer than the 1,025 tokens thinking needs: the top-up reply, nothing forwarded.
    older.reset();
    await deposit(t, p, 'cap-ike', '0.01');
    const blocked = await chat('cap-ike', { reasoning_effort: 'low' });
    expect(blocked.status).toBe(200);
    expect((await blocked.json()).paywall).toMatchObject({ reason: 'insufficient_balance' });
    expect(older.messagesRequests).toHaveLength(0);
    expect((await money(t, p, 'cap-ike')).balance).toBe(10_000n);
    // The client's own cap below thinking's smallest budget: thinking dropped and named, as the client chose.
    const small = await chat('cap-ike', { reasoning_effort: 'low', max_tokens: 500 });
    expect((await small.json()).paywall).toBeUndefined();
    expect(small.headers.get('x-paywall-dropped-fields')).toContain('reasoning_effort');
    expect(older.messagesRequests[0].body).not.toHaveProperty('thinking');
  });

  it('thinking whose smallest budget the balance cannot afford: the top-up reply, nothing forwarded', async () => {
    await deposit(t, p, 'cap-fin', '0.01');
    const r = await post('/v1/messages', 'cap-fin', {
      model: 'claude-sonnet-4-20250514',
      max_tokens: 32000,
      thinking: { type: 'enabled', budget_tokens: 10000 },
      messages: [{ role: 'user', content: 'Think, then say hello' }],
    });
    expect(r.status).toBe(200);
    const body = await r.json();
    expect(body).toMatchObject({ type: 'message', paywall: { reason: 'insufficient_balance' } });
    expect(older.messagesRequests).toHaveLength(0);
    expect((await money(t, p, 'cap-fin')).balance).toBe(10_000n);
    // Without thinking, the same balance is enough for a smaller answer.
    const plain = await post('/v1/messages', 'cap-fin', {
      model: 'claude-sonnet-4-20250514',
      max_tokens: 32000,
      messages: [{ role: 'user', content: 'Say hello' }],
    });
    expect((await plain.json()).paywall).toBeUndefined();
    expect(older.messagesRequests).toHaveLength(1);
  });
});
