import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  connectShared,
  createProxyPaywall,
  deposit,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * Issue 30, findings 5, 6 and 7, and the limit on the free count_tokens endpoint (finding 3): a client's
 * request that no provider can take is the client's 400 before anything is held, forwarded or counted
 * against a provider; the built-in provider's refusals never show the operator's answer to an app's
 * developers; token counts are free but limited per key.
 */

const BUILTIN_KEY = 'sk-builtin-operator-secret-7777';
const BUILTIN_MODELS = [{ id: 'builtin-chat', prompt: '0.000002', completion: '0.000008' }];
const COUNT_TOKENS_PER_MINUTE = 3;
const DEPTH = 20_000;

let t: TestApp;
let primary: FakeUpstream;
let claude: FakeUpstream;
let builtin: FakeUpstream;
let pw: ProxyPaywall;
const logLines: any[] = [];

async function gqlOk(token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}
const route = (p: ProxyPaywall, i: Record<string, unknown>) =>
  gqlOk(p.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: { modelId: MODEL, ...i },
  });

/** A POST with a body given as text (a 20,000-deep body cannot go through JSON.stringify). */
const post = (path: string, token: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body,
  }).then(async (r) => ({ status: r.status, headers: r.headers, body: await r.json() }));

/** A JSON schema nested `depth` levels deep, as text. */
const deepSchema = (depth: number) =>
  '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"string"}' + '}}'.repeat(depth);

beforeAll(async () => {
  primary = await FakeUpstream.start();
  claude = await FakeUpstream.start();
  builtin = await FakeUpstream.start();
  t = await startTestApp(
    {
      BUILTIN_PROVIDER_BASE_URL: builtin.baseUrl,
      BUILTIN_PROVIDER_API_KEY: BUILTIN_KEY,
      BUILTIN_MODELS: JSON.stringify(BUILTIN_MODELS),
      COUNT_TOKENS_PER_MINUTE: String(COUNT_TOKENS_PER_MINUTE),
      LOG_LEVEL: 'warn',
    },
    { logStream: { write: (line: string) => logLines.push(JSON.parse(line)) } },
  );
  pw = await createProxyPaywall(t, primary);
  await gqlOk(pw.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { name: 'claude', kind: 'ANTHROPIC', baseUrl: claude.baseUrl, apiKey: 'sk-ant-fallback-0009' },
  });
});
afterAll(async () => {
  await t?.close();
  await primary?.close();
  await claude?.close();
  await builtin?.close();
});
beforeEach(async () => {
  primary.reset();
  claude.reset();
  builtin.reset();
  await route(pw, { provider: null, fallbacks: [] });
});

describe('a body nested too deep is the client’s 400 before the hold (finding 5)', () => {
  it('chat with a 20,000-deep tool schema: 400 invalid_request_error; nothing held, sent or counted against the provider', async () => {
    await deposit(t, pw, 'deep-chat', '1');
    await route(pw, { provider: null, fallbacks: ['claude'] });
    const body =
      `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],` +
      `"tools":[{"type":"function","function":{"name":"f","parameters":${deepSchema(DEPTH)}}}]}`;
    const r = await post('/v1/chat/completions', pw.apiKey, body, { 'x-paywall-user': 'deep-chat' });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_body' });
    expect(r.body.error.message).toContain('nested deeper than 128 levels');
    expect(primary.requests).toHaveLength(0);
    expect(claude.requests).toHaveLength(0);
    expect(t.app.services.proxy.health.snapshot(pw.id, 'default').requests).toBe(0);
    expect(t.app.services.proxy.health.snapshot(pw.id, 'claude').requests).toBe(0);
    expect(await chargesOf(t, pw, 'deep-chat')).toEqual([]);
    expect(await money(t, pw, 'deep-chat')).toMatchObject({ balance: 1_000_000n, held: 0n });
  });

  it('Messages with deep tool input and deep content: 400 in Anthropic’s shape, nothing sent', async () => {
    await deposit(t, pw, 'deep-messages', '1');
    await route(pw, { provider: 'claude', fallbacks: ['default'] });
    const deepTools =
      `{"model":"${MODEL}","max_tokens":100,"messages":[{"role":"user","content":"hi"}],` +
      `"tools":[{"name":"f","input_schema":${deepSchema(DEPTH)}}]}`;
    const deepContent =
      `{"model":"${MODEL}","max_tokens":100,"messages":[{"role":"user","content":` +
      '[{"type":"tool_result","tool_use_id":"t","content":'.repeat(DEPTH / 2) +
      '"x"' +
      '}]'.repeat(DEPTH / 2) +
      '}]}';
    for (const body of [deepTools, deepContent]) {
      const r = await post('/v1/messages', pw.apiKey, body, { 'x-paywall-user': 'deep-messages' });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message: 'request body is nested deeper than 128 levels of arrays and objects',
        },
      });
    }
    expect(claude.requests).toHaveLength(0);
    expect(primary.requests).toHaveLength(0);
    expect(t.app.services.proxy.health.snapshot(pw.id, 'claude').requests).toBe(0);
    expect(await chargesOf(t, pw, 'deep-messages')).toEqual([]);
  });

  it('a body 128 levels deep is still served', async () => {
    await deposit(t, pw, 'deep-ok', '1');
    const body =
      `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],` +
      `"tools":[{"type":"function","function":{"name":"f","parameters":${deepSchema(60)}}}]}`;
    const r = await post('/v1/chat/completions', pw.apiKey, body, { 'x-paywall-user': 'deep-ok' });
    expect(r.status).toBe(200);
    expect(primary.chatRequests).toHaveLength(1);
  });
});

describe('every provider of a route is validated before the hold (finding 6)', () => {
  it('a fallback’s translation refusal (n: 2 toward Anthropic) is a 400 before the primary is called or anything held', async () => {
    await deposit(t, pw, 'route-n', '1');
    await route(pw, { provider: null, fallbacks: ['claude'] });
    const attemptsBefore = t.app.services.proxy.health.snapshot(pw.id, 'default').requests;
    // Were the primary called, it would fail and hand the request to the fallback.
    primary.behavior = { status: 500 };
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'route-n' },
      body: { model: MODEL, n: 2, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'n' });
    expect(primary.requests).toHaveLength(0);
    expect(claude.requests).toHaveLength(0);
    expect(t.app.services.proxy.health.snapshot(pw.id, 'default').requests).toBe(attemptsBefore);
    expect(await chargesOf(t, pw, 'route-n')).toEqual([]);
    expect(await money(t, pw, 'route-n')).toMatchObject({ balance: 1_000_000n, held: 0n });
  });
});

describe('the built-in provider’s refusals are relayed without its body (finding 7)', () => {
  const leak = {
    error: {
      message: `Incorrect API key provided: ${BUILTIN_KEY}. You can find your API key at https://platform.example/account.`,
      type: 'invalid_request_error',
      param: null,
      code: 'invalid_api_key',
    },
  };

  it('a SHARED developer gets the status and a generic message (chat and Messages); the log keeps the body', async () => {
    const shared = await t.createPaywall('SHARED');
    const user = 'shared-user';
    // The first request creates the user (answered with the connect link); then a funded wallet.
    await t.rest('POST', '/v1/chat/completions', {
      token: shared.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: 'builtin-chat', messages: [{ role: 'user', content: 'hi' }] },
    });
    await connectShared(t, shared, user, 1_000_000n);
    builtin.next({ status: 400, errorBody: leak }, { status: 422, errorBody: leak });

    const chat = await t.rest('POST', '/v1/chat/completions', {
      token: shared.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: 'builtin-chat', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(builtin.chatRequests).toHaveLength(1);
    expect(chat.status).toBe(400);
    expect(chat.body).toEqual({
      error: {
        message: 'The model provider refused the request (HTTP 400).',
        type: 'invalid_request_error',
        param: null,
        code: 'upstream_error',
      },
    });

    const messages = await t.rest('POST', '/v1/messages', {
      token: shared.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: 'builtin-chat', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(messages.status).toBe(422);
    expect(messages.body).toEqual({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: 'The model provider refused the request (HTTP 422).',
      },
    });
    for (const answer of [chat, messages]) {
      expect(JSON.stringify(answer.body)).not.toContain(BUILTIN_KEY);
      expect(JSON.stringify(answer.body)).not.toContain('platform.example');
    }
    // Nothing charged for refusals.
    expect(await money(t, shared, user)).toMatchObject({ balance: 1_000_000n, held: 0n });
    const logged = logLines.filter((l) => l.msg === 'the built-in provider refused a request');
    expect(logged.map((l) => [l.paywallId, l.status])).toEqual([
      [shared.id, 400],
      [shared.id, 422],
    ]);
    expect(logged[0].body).toContain(BUILTIN_KEY);
    await expectLedgerProven(t.db);
  });

  it('an app’s own provider’s 4xx still reaches its client as the provider sent it', async () => {
    await deposit(t, pw, 'own-4xx', '1');
    const own = {
      ...leak,
      error: { ...leak.error, message: 'This model’s maximum context length is 8 tokens' },
    };
    primary.next({ status: 400, errorBody: own });
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'own-4xx' },
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(400);
    expect(r.body).toEqual(own);
  });
});

describe('count_tokens is free but limited per key (finding 3)', () => {
  it(`answers ${COUNT_TOKENS_PER_MINUTE} counts a minute per paywall key, then 429 in Anthropic’s shape with Retry-After`, async () => {
    const own = await createProxyPaywall(t, primary);
    const other = await createProxyPaywall(t, primary);
    const count = (p: ProxyPaywall) =>
      t.rest('POST', '/v1/messages/count_tokens', {
        token: p.apiKey,
        body: { model: MODEL, messages: [{ role: 'user', content: 'Hello, world' }] },
      });
    // Near the end of a clock minute the window could roll over between the calls: start in a fresh one.
    const second = new Date().getUTCSeconds();
    if (second > 55) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    for (let i = 0; i < COUNT_TOKENS_PER_MINUTE; i++) {
      const r = await count(own);
      expect(r.status).toBe(200);
      expect(r.body.input_tokens).toBeGreaterThan(0);
    }
    const over = await count(own);
    expect(over.status).toBe(429);
    expect(over.body).toEqual({
      type: 'error',
      error: { type: 'rate_limit_error', message: expect.stringContaining('3 token counts per minute') },
    });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    // Another key has its own count; chat on the limited key is not affected.
    expect((await count(other)).status).toBe(200);
    await deposit(t, own, 'after-counts', '1');
    const chat = await t.rest('POST', '/v1/chat/completions', {
      token: own.apiKey,
      headers: { 'x-paywall-user': 'after-counts' },
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(chat.status).toBe(200);
  });
});
