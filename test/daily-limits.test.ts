import OpenAI from 'openai';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { startInstances, OWNER_TOKEN } from './helpers/instances.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
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
 * Daily usage limits (docs/reference.md §10): counted in the hold's statement, exact under concurrency and across
 * instances; over a limit the request is not forwarded and gets a `rate_limited` reply; the day is UTC
 * (the clock is moved, never slept).
 */
const CHAT_COST = 1086n; // 11 prompt + 7 completion tokens at the proxy-setup prices, markup 1.5
const hi = [{ role: 'user' as const, content: 'hi' }];

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
beforeEach(() => {
  fake.reset();
  t.app.services.clock.now = () => new Date('2026-11-23T12:00:00.000Z');
});

async function limits(pw: ProxyPaywall, input: Record<string, unknown>) {
  const r = await t.gql(
    pw.apiKey,
    `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { dailyRequestLimit dailySpendLimit } }`,
    { i: input },
  );
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.updatePaywall;
}

const chat = (pw: ProxyPaywall, user: string) =>
  client(t, pw, user).chat.completions.create({ model: MODEL, messages: hi }) as Promise<any>;

describe('daily request limit', () => {
  it('is read and written through updatePaywall; null removes it; bad values are refused', async () => {
    const pw = await createProxyPaywall(t, fake);
    expect(await limits(pw, { dailyRequestLimit: 3, dailySpendLimit: '2.5' })).toEqual({
      dailyRequestLimit: 3,
      dailySpendLimit: '2.500000',
    });
    expect(await limits(pw, { dailyRequestLimit: null })).toEqual({
      dailyRequestLimit: null,
      dailySpendLimit: '2.500000',
    });
    expect(await limits(pw, { dailySpendLimit: null })).toEqual({
      dailyRequestLimit: null,
      dailySpendLimit: null,
    });
    for (const i of [{ dailyRequestLimit: -1 }, { dailySpendLimit: '-1' }, { dailySpendLimit: 'abc' }]) {
      const r = await t.gql(
        pw.apiKey,
        `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`,
        { i },
      );
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: Object.keys(i)[0] });
    }
  });

  it('20 concurrent chats with a limit of 3: exactly 3 forwarded and charged, 17 rate_limited replies', async () => {
    const pw = await createProxyPaywall(t, fake);
    await limits(pw, { dailyRequestLimit: 3 });
    await deposit(t, pw, 'ann', '1');
    const answers = await Promise.all(Array.from({ length: 20 }, () => chat(pw, 'ann')));
    const limited = answers.filter((a) => a.paywall);
    expect(answers.length - limited.length).toBe(3);
    expect(fake.chatRequests).toHaveLength(3);
    expect(limited).toHaveLength(17);
    for (const a of limited) {
      expect(a.paywall).toEqual({ reason: 'rate_limited', url: null, resetsAt: '2026-11-24T00:00:00.000Z' });
      expect(a.choices[0].message.content).toBe(
        "You have reached today's limit of 3 requests per day for this app. It resets on 24 Nov 2026 at 00:00 UTC; please try again then.",
      );
      expect(a.choices[0].finish_reason).toBe('stop');
    }
    expect(await money(t, pw, 'ann')).toMatchObject({ balance: 1_000_000n - 3n * CHAT_COST, held: 0n });
    const events = await eventsOf(t, pw, 'paywall.usage.rate.limited');
    expect(events).toHaveLength(17);
    expect(events[0].data).toEqual({
      paywallId: pw.id,
      ownerUserId: expect.any(String),
      limit: 'dailyRequestLimit',
      value: '3',
      date: '2026-11-23',
      model: MODEL,
      walletUserId: expect.any(String),
    });
    const blocked = await eventsOf(t, pw, 'paywall.proxy.request.blocked');
    expect(blocked.map((e) => e.data.reason)).toEqual(Array(17).fill('rate_limited'));
    // Another user of the same paywall has a day of their own.
    await deposit(t, pw, 'ben', '1');
    expect((await chat(pw, 'ben')).paywall).toBeUndefined();
    await expectLedgerProven(t.db);
  });

  it('resets at 00:00 UTC', async () => {
    const pw = await createProxyPaywall(t, fake);
    await limits(pw, { dailyRequestLimit: 1 });
    await deposit(t, pw, 'cat', '1');
    t.app.services.clock.now = () => new Date('2026-11-23T23:59:59.999Z');
    expect((await chat(pw, 'cat')).paywall).toBeUndefined();
    expect((await chat(pw, 'cat')).paywall).toMatchObject({ reason: 'rate_limited' });
    t.app.services.clock.now = () => new Date('2026-11-24T00:00:00.000Z');
    expect((await chat(pw, 'cat')).paywall).toBeUndefined();
    const again = await chat(pw, 'cat');
    expect(again.paywall).toEqual({
      reason: 'rate_limited',
      url: null,
      resetsAt: '2026-11-25T00:00:00.000Z',
    });
    expect(fake.chatRequests).toHaveLength(2);
  });

  it('the stream form of the rate_limited reply is an ordinary SSE stream', async () => {
    const pw = await createProxyPaywall(t, fake);
    await limits(pw, { dailyRequestLimit: 0 });
    await deposit(t, pw, 'dan', '1');
    const stream = client(t, pw, 'dan').chat.completions.stream({ model: MODEL, messages: hi, stream: true });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0].message.content).toMatch(/^You have reached today's limit of 0 requests per day/);
    expect(final.choices[0].finish_reason).toBe('stop');
    expect(fake.chatRequests).toHaveLength(0);
  });
});

describe('daily spend limit and per-model limit', () => {
  it('a spend limit of 0.003 lets two chats through (holds count while they run) and refuses the third', async () => {
    const pw = await createProxyPaywall(t, fake);
    await limits(pw, { dailySpendLimit: '0.003' });
    await deposit(t, pw, 'eve', '1');
    expect((await chat(pw, 'eve')).usage.cost).toBe('0.001086');
    expect((await chat(pw, 'eve')).usage.cost).toBe('0.001086');
    // 2172 spent: 828 left, less than the 0.001 request price alone.
    const third = await chat(pw, 'eve');
    expect(third.paywall).toMatchObject({ reason: 'rate_limited', url: null });
    expect(third.choices[0].message.content).toMatch(/limit of 0\.003 USDC of usage per day/);
    const [ev] = await eventsOf(t, pw, 'paywall.usage.rate.limited');
    expect(ev.data).toMatchObject({ limit: 'dailySpendLimit', value: '0.003' });
    expect(await money(t, pw, 'eve')).toMatchObject({ balance: 1_000_000n - 2n * CHAT_COST, held: 0n });
  });

  it('setModelPricing dailyRequestLimit limits one model per user and day', async () => {
    const pw = await createProxyPaywall(t, fake);
    const set = await t.gql(
      pw.apiKey,
      `mutation { setModelPricing(input: {modelId: "${MODEL}", dailyRequestLimit: 2}) { id dailyRequestLimit } }`,
    );
    expect(set.data.setModelPricing).toEqual({ id: MODEL, dailyRequestLimit: 2 });
    await deposit(t, pw, 'fay', '1');
    expect((await chat(pw, 'fay')).paywall).toBeUndefined();
    expect((await chat(pw, 'fay')).paywall).toBeUndefined();
    const third = await chat(pw, 'fay');
    expect(third.paywall).toMatchObject({ reason: 'rate_limited' });
    expect(third.choices[0].message.content).toMatch(/limit of 2 requests per day with gpt-test/);
    const cleared = await t.gql(
      pw.apiKey,
      `mutation { setModelPricing(input: {modelId: "${MODEL}", dailyRequestLimit: null}) { dailyRequestLimit } }`,
    );
    expect(cleared.data.setModelPricing.dailyRequestLimit).toBeNull();
    expect((await chat(pw, 'fay')).paywall).toBeUndefined();
  });
});

describe('free models', () => {
  it('a model priced 0 serves a user with a large balance and counts against the request limit', async () => {
    const pw = await createProxyPaywall(t, fake);
    const set = await t.gql(
      pw.apiKey,
      `mutation { setModelPricing(input: {modelId: "free-model", prompt: "0", completion: "0", request: "0"}) { id } }`,
    );
    expect(set.errors).toBeUndefined();
    await limits(pw, { dailyRequestLimit: 1 });
    await deposit(t, pw, 'hal', '100000');
    const free = () =>
      client(t, pw, 'hal').chat.completions.create({ model: 'free-model', messages: hi }) as Promise<any>;
    const first = await free();
    expect(first.paywall).toBeUndefined();
    expect(first.usage.cost).toBe('0');
    expect((await free()).paywall).toMatchObject({ reason: 'rate_limited' });
    expect(await money(t, pw, 'hal')).toMatchObject({ balance: 100_000_000_000n, held: 0n });
  });
});

describe('two instances on one database', () => {
  it('share one daily limit exactly', async () => {
    const cluster = await startInstances(2);
    try {
      const [a, b] = cluster.instances;
      const created = await a.gql(
        OWNER_TOKEN,
        `mutation { createPaywall(input: {name: "Limited", mode: DEFAULT}) { apiKey paywall { id } } }`,
      );
      const apiKey = created.data.createPaywall.apiKey;
      for (const q of [
        `mutation { connectProvider(input: {baseUrl: "${fake.baseUrl}", apiKey: "${PROVIDER_KEY}"}) { id } }`,
        `mutation { setModelPricing(input: {modelId: "${MODEL}", prompt: "0.000002", completion: "0.000005", request: "0.001"}) { id } }`,
        `mutation { updatePaywall(input: {dailyRequestLimit: 5}) { id } }`,
      ])
        expect((await a.gql(apiKey, q)).errors).toBeUndefined();
      const dep = await a.rest('POST', '/v1/user/balance/deposit', {
        token: apiKey,
        body: { user: 'gus', amount: '1' },
      });
      expect(dep.status).toBe(200);
      const sdk = (url: string) =>
        new OpenAI({
          apiKey,
          baseURL: `${url}/v1`,
          defaultHeaders: { 'X-Paywall-User': 'gus' },
          maxRetries: 0,
        });
      const answers = await Promise.all(
        Array.from(
          { length: 30 },
          (_, i) =>
            sdk(i % 2 ? a.url : b.url).chat.completions.create({
              model: MODEL,
              messages: hi,
            }) as Promise<any>,
        ),
      );
      expect(answers.filter((x) => !x.paywall)).toHaveLength(5);
      expect(answers.filter((x) => x.paywall?.reason === 'rate_limited')).toHaveLength(25);
      expect(fake.chatRequests).toHaveLength(5);
      await expectLedgerProven(cluster.db);
    } finally {
      await cluster.close();
    }
  });
});
