import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  client,
  createProxyPaywall,
  deposit,
  eventsOf,
  MODEL,
  money,
  PROVIDER_KEY,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * docs/reference.md §15 "Routing", "Fallbacks": a model names its provider, the model id sent there and
 * the providers tried next. A provider that refuses the connection, times out before answering, or
 * answers 429 or 5xx hands the same request to the next one before any byte reached the client; one
 * hold, one charge at the model's prices; the completed event names the provider that answered. A
 * provider that fails after the first byte is not retried.
 */

const BACKUP_KEY = 'sk-backup-provider-key-0002';
const UPSTREAM_MODEL = 'gpt-upstream-2025';
const hi = [{ role: 'user' as const, content: 'Say hello' }];
/** The fake's default usage (11 + 7 tokens) at createProxyPaywall's prices: 1086 raw units. */
const COST = 1086n;
const TIMEOUT_MS = 600;

let t: TestApp;
let primary: FakeUpstream;
let backup: FakeUpstream;
let pw: ProxyPaywall;
/** A loopback port nothing listens on: connections are refused. */
let closedUrl: string;
/** The service's JSON log lines. */
const logLines: any[] = [];

async function gqlOk(token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

const connect = (i: Record<string, unknown>) =>
  gqlOk(pw.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, { i });
const route = (i: Record<string, unknown>) =>
  gqlOk(
    pw.apiKey,
    `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id provider upstreamModel fallbacks } }`,
    { i: { modelId: MODEL, ...i } },
  );

beforeAll(async () => {
  primary = await FakeUpstream.start();
  backup = await FakeUpstream.start();
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  closedUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/v1`;
  await new Promise<void>((r) => probe.close(() => r()));
  t = await startTestApp(
    { UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS), LOG_LEVEL: 'info' },
    { logStream: { write: (line: string) => logLines.push(JSON.parse(line)) } },
  );
  pw = await createProxyPaywall(t, primary);
  await connect({ name: 'backup', baseUrl: backup.baseUrl, apiKey: BACKUP_KEY });
});
afterAll(async () => {
  await t?.close();
  await primary?.close();
  await backup?.close();
});
beforeEach(async () => {
  primary.reset();
  backup.reset();
  await connect({ baseUrl: primary.baseUrl, apiKey: PROVIDER_KEY });
  await route({ provider: null, upstreamModel: UPSTREAM_MODEL, fallbacks: ['backup'] });
});

let n = 0;
async function funded(): Promise<string> {
  const user = `route-user-${++n}`;
  await deposit(t, pw, user, '1');
  return user;
}

async function completedProviders(): Promise<string[]> {
  const events = await eventsOf(t, pw, 'paywall.proxy.request.completed');
  return events.map((e) => e.data.provider);
}

describe('model routes', () => {
  it('shows the route in GraphQL and lists both providers by name and kind', async () => {
    const data = await gqlOk(
      pw.apiKey,
      `{ paywall { providers { name kind builtin apiKeyLastFour } } model(id: "${MODEL}") { provider upstreamModel fallbacks } }`,
    );
    expect(data.paywall.providers).toEqual([
      { name: 'backup', kind: 'OPENAI', builtin: false, apiKeyLastFour: '0002' },
      { name: 'default', kind: 'OPENAI', builtin: false, apiKeyLastFour: '0001' },
    ]);
    expect(data.model).toEqual({ provider: 'default', upstreamModel: UPSTREAM_MODEL, fallbacks: ['backup'] });
  });

  it('sends the upstream model id and the provider key of the provider the model names', async () => {
    const user = await funded();
    const r = await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
    expect(r.choices[0].message.content).toBe('Hello from the fake upstream!');
    expect(primary.chatRequests).toHaveLength(1);
    expect(primary.chatRequests[0].body.model).toBe(UPSTREAM_MODEL);
    expect(primary.chatRequests[0].headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(backup.requests).toHaveLength(0);

    await route({ provider: 'backup', fallbacks: [] });
    await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
    expect(backup.chatRequests).toHaveLength(1);
    expect(backup.chatRequests[0].headers.authorization).toBe(`Bearer ${BACKUP_KEY}`);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - 2n * COST, held: 0n });
  });

  it('refuses a route to a provider that is not connected (nothing held or charged)', async () => {
    const user = await funded();
    await route({ provider: 'nowhere', fallbacks: [] });
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: MODEL, messages: hi },
    });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('provider_not_connected');
    expect(r.body.error.message).toContain('"nowhere"');
    expect(await chargesOf(t, pw, user)).toEqual([]);
  });

  it('refuses bad routes with a 400 naming the field, changing nothing', async () => {
    for (const [i, param] of [
      [{ provider: 'Bad Name' }, 'provider'],
      [{ provider: 'default', fallbacks: ['default'] }, 'fallbacks'],
      [{ fallbacks: ['a', 'a'] }, 'fallbacks'],
      [{ fallbacks: ['a', 'b', 'c', 'd', 'e', 'f'] }, 'fallbacks'],
      [{ upstreamModel: 'has space' }, 'upstreamModel'],
    ] as const) {
      const r = await t.gql(
        pw.apiKey,
        `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`,
        { i: { modelId: MODEL, ...i } },
      );
      expect([param, r.errors?.[0]?.extensions]).toMatchObject([param, { code: 'BAD_USER_INPUT', param }]);
    }
    const data = await gqlOk(pw.apiKey, `{ model(id: "${MODEL}") { provider upstreamModel fallbacks } }`);
    expect(data.model).toEqual({ provider: 'default', upstreamModel: UPSTREAM_MODEL, fallbacks: ['backup'] });
  });
});

describe('fallbacks', () => {
  for (const [what, status] of [
    ['500', 500],
    ['429', 429],
    ['503', 503],
  ] as const)
    it(`the primary answering ${what}: the fallback answers, charged once`, async () => {
      const user = await funded();
      primary.behavior = { status };
      const r = await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
      expect(r.choices[0].message.content).toBe('Hello from the fake upstream!');
      expect(r.usage).toMatchObject({ cost: '0.001086' });
      expect(primary.chatRequests).toHaveLength(1);
      expect(backup.chatRequests).toHaveLength(1);
      expect(backup.chatRequests[0].body.model).toBe(UPSTREAM_MODEL);
      const charges = await chargesOf(t, pw, user);
      expect(charges.map((c) => [c.status, c.amount])).toEqual([['completed', COST.toString()]]);
      expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - COST, held: 0n });
      expect((await completedProviders()).at(-1)).toBe('backup');
      // The access-log line names the provider that answered.
      const access = logLines.filter((l) => l.msg === 'request' && l.url === '/v1/chat/completions');
      expect(access.at(-1)).toMatchObject({ status: 200, provider: 'backup' });
    });

  it('the primary refusing the connection: the fallback answers, charged once', async () => {
    await connect({ baseUrl: closedUrl, apiKey: PROVIDER_KEY });
    const user = await funded();
    const r = await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
    expect(r.choices[0].message.content).toBe('Hello from the fake upstream!');
    expect(backup.chatRequests).toHaveLength(1);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - COST, held: 0n });
  });

  it('the primary timing out before its headers: the fallback answers, charged once', async () => {
    const user = await funded();
    primary.behavior = { delayMs: TIMEOUT_MS * 3 };
    const r = await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
    expect(r.choices[0].message.content).toBe('Hello from the fake upstream!');
    expect(backup.chatRequests).toHaveLength(1);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - COST, held: 0n });
  });

  it('a stream whose primary answers 500 is served by the fallback, charged once', async () => {
    const user = await funded();
    primary.behavior = { status: 500 };
    const stream = await client(t, pw, user).chat.completions.create({
      model: MODEL,
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: any = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('Hello from the fake upstream!');
    expect(usage.cost).toBe('0.001086');
    expect(backup.chatRequests).toHaveLength(1);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - COST, held: 0n });
  });

  it('a primary failing after the first byte is not retried: the stream ends in an error, charged for what was relayed', async () => {
    const user = await funded();
    primary.behavior = { dieAfterChunks: 2, chunkDelayMs: 5, usage: null };
    const stream = await client(t, pw, user).chat.completions.create({
      model: MODEL,
      messages: hi,
      stream: true,
    });
    let text = '';
    await expect(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      })(),
    ).rejects.toThrow();
    expect(text).toBe('Hello from');
    expect(backup.requests).toHaveLength(0);
    const [charge] = await chargesOf(t, pw, user);
    expect(charge.status).toBe('completed');
    expect(charge.error_code).toBe('upstream_error');
    expect(BigInt(charge.amount)).toBeGreaterThan(0n);
    expect(BigInt(charge.amount)).toBeLessThan(COST);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - BigInt(charge.amount), held: 0n });
  });

  it('every provider failing: the last answer is the answer, nothing charged', async () => {
    const user = await funded();
    primary.behavior = { status: 500 };
    backup.behavior = { status: 429, errorHeaders: { 'retry-after': '7' } };
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: MODEL, messages: hi },
    });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('7');
    expect(primary.chatRequests).toHaveLength(1);
    expect(backup.chatRequests).toHaveLength(1);
    expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n, held: 0n });
  });

  it('a 400 from the primary is the answer (the request is wrong, not the provider)', async () => {
    const user = await funded();
    primary.behavior = { status: 400 };
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': user },
      body: { model: MODEL, messages: hi },
    });
    expect(r.status).toBe(400);
    expect(backup.requests).toHaveLength(0);
  });

  it('provider health shows the failures of the last minutes and the last error', async () => {
    const health = async () => {
      const data = await gqlOk(
        pw.apiKey,
        `{ paywall { providers { name health { windowMinutes requests errors errorRate lastError lastErrorAt } } } }`,
      );
      return Object.fromEntries(data.paywall.providers.map((p: any) => [p.name, p.health]));
    };
    // Earlier tests of this file also used these providers: count what these three requests add.
    const before = await health();
    const user = await funded();
    primary.behavior = { status: 503 };
    for (let i = 0; i < 3; i++)
      await client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi });
    const byName = await health();
    expect(byName.default).toMatchObject({ windowMinutes: 5, lastError: 'HTTP 503' });
    expect(byName.default.errors - before.default.errors).toBe(3);
    expect(byName.default.requests - before.default.requests).toBe(3);
    expect(byName.default.errorRate).toBeGreaterThan(0);
    expect(Date.parse(byName.default.lastErrorAt)).toBeGreaterThan(Date.now() - 60_000);
    expect(byName.backup.requests - before.backup.requests).toBe(3);
    expect(byName.backup.errors - before.backup.errors).toBe(0);
  });

  it('the ledger proof holds', async () => {
    await expectLedgerProven(t.db);
  });
});
