import OpenAI from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  client,
  createProxyPaywall,
  deposit,
  eventsOf,
  eventually,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { chatCost } from '../src/shared/money.js';

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

const PRICE = { promptPico: 2_000_000n, completionPico: 5_000_000n, requestPico: 1_000_000_000n };
const MARKUP = 1_500_000n;
const hi = [{ role: 'user' as const, content: 'Say hello' }];
const WORDS = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await createProxyPaywall(t, fake);
});
afterAll(async () => {
  await t.close();
  await fake.close();
});
beforeEach(() => fake.reset());

/** Raw SSE data lines of a streamed answer (what a client sees on the wire). */
async function rawStream(body: Record<string, unknown>, user: string) {
  const res = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${pw.apiKey}`,
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
  return { res, data };
}

describe('streaming chat completions', () => {
  it('relays the stream through the SDK, reports usage with the cost, and charges the exact amount', async () => {
    await deposit(t, pw, 'alice', '1');
    const stream = await client(t, pw, 'alice').chat.completions.create({
      model: MODEL,
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: any = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('Hello from the fake upstream!');
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({
      prompt_tokens: 11,
      completion_tokens: 7,
      total_tokens: 18,
      cost: '0.001086',
      balance: '0.998914',
    });
    // Settled before the stream ended: the balance is final when the client has read [DONE].
    const m = await money(t, pw, 'alice');
    expect(m).toMatchObject({ balance: 1_000_000n - 1086n, held: 0n, ledgerSum: 1_000_000n - 1086n });
    const [charge] = await chargesOf(t, pw, 'alice');
    expect(charge).toMatchObject({
      status: 'completed',
      amount: '1086',
      stream: true,
      prompt_tokens: 11,
      completion_tokens: 7,
    });
    await expectLedgerProven(t.db);

    const [r] = fake.chatRequests;
    expect(r.body.stream).toBe(true);
    expect(r.body.stream_options).toEqual({ include_usage: true });
    expect(JSON.stringify(r)).not.toContain(pw.apiKey);

    const types = (await eventsOf(t, pw))
      .filter(
        (e) =>
          e.data.requestId === charge.id ||
          e.data.deferredRequestId === charge.id ||
          e.data.activityId === charge.id,
      )
      .map((e) => e.type);
    expect(types).toEqual([
      'paywall.proxy.request.started',
      'paywall.usage.charge.deferred',
      'paywall.proxy.request.completed',
      'paywall.usage.charge.created',
    ]);
  });

  it('asks the upstream for usage but strips the usage chunk when the client did not ask', async () => {
    await deposit(t, pw, 'bob', '1');
    const { res, data } = await rawStream({}, 'bob');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(data[data.length - 1]).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.every((c) => c.choices.length > 0 && !c.usage)).toBe(true);
    // Chunks other than usage are relayed as the upstream wrote them.
    expect(chunks[0]).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-fake-/),
      system_fingerprint: 'fp_fake',
    });
    expect(fake.chatRequests[0].body.stream_options).toEqual({ include_usage: true });
    expect(fake.chatRequests[0].body.max_completion_tokens).toBe(1000);
    expect(fake.chatRequests[0].body.max_tokens).toBeUndefined();
    expect((await money(t, pw, 'bob')).balance).toBe(1_000_000n - 1086n);
    await expectLedgerProven(t.db);
  });

  it('handles usage on the finish chunk: content at once, usage (with cost and balance) as the last chunk when asked, removed when not', async () => {
    await deposit(t, pw, 'carol', '1');
    fake.behavior = { usageOnFinishChunk: true };
    const asked = await rawStream({ stream_options: { include_usage: true } }, 'carol');
    const parsed = asked.data.slice(0, -1).map((d) => JSON.parse(d));
    const withUsage = parsed.filter((c) => c.usage);
    expect(withUsage).toHaveLength(1);
    expect(withUsage[0]).toBe(parsed[parsed.length - 1]);
    expect(withUsage[0].choices).toEqual([]);
    expect(withUsage[0].usage).toMatchObject({ completion_tokens: 7, cost: '0.001086', balance: '0.998914' });
    expect(parsed[parsed.length - 2].choices[0].finish_reason).toBe('stop');

    const notAsked = await rawStream({}, 'carol');
    const chunks = notAsked.data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(chunks[chunks.length - 1].choices[0].finish_reason).toBe('stop');
    expect((await money(t, pw, 'carol')).balance).toBe(1_000_000n - 2n * 1086n);
    await expectLedgerProven(t.db);
  });

  it('reports metered usage itself when the upstream sends none and the client asked', async () => {
    await deposit(t, pw, 'dave', '1');
    fake.behavior = { usage: null };
    const { data } = await rawStream({ stream_options: { include_usage: true } }, 'dave');
    const last = JSON.parse(data[data.length - 2]);
    const [charge] = await chargesOf(t, pw, 'dave');
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({
      prompt_tokens: charge.prompt_tokens,
      completion_tokens: charge.completion_tokens,
      cost: (Number(charge.amount) / 1e6).toString(),
    });
    expect(charge.completion_tokens).toBeGreaterThan(0);
    expect((await money(t, pw, 'dave')).balance).toBe(1_000_000n - BigInt(charge.amount));
    await expectLedgerProven(t.db);
  });

  it('charges only what was produced when the client disconnects after 3 chunks', async () => {
    await deposit(t, pw, 'erin', '1');
    fake.behavior = { content: WORDS, usage: { prompt_tokens: 11, completion_tokens: 30 }, chunkDelayMs: 60 };
    const stream = await client(t, pw, 'erin').chat.completions.create({
      model: MODEL,
      messages: hi,
      stream: true,
    });
    let seen = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) seen++;
      if (seen === 3) break; // the SDK aborts the request
    }
    const [charge] = await eventually(
      () => chargesOf(t, pw, 'erin'),
      (c) => c[0]?.status !== 'held',
    );
    expect(charge.status).toBe('completed');
    expect(charge.error_code).toBe('canceled');
    // Counted by the proxy (no usage arrives): the words relayed before the abort, far fewer than 30.
    expect(charge.completion_tokens).toBeGreaterThanOrEqual(3 * 2);
    expect(charge.completion_tokens).toBeLessThan(30);
    const cost = chatCost(PRICE, MARKUP, charge.prompt_tokens, charge.completion_tokens);
    expect(charge.amount).toBe(cost.toString());
    const m = await money(t, pw, 'erin');
    expect(m).toMatchObject({ balance: 1_000_000n - cost, held: 0n });
    await expectLedgerProven(t.db);
    // The upstream request was aborted too.
    await eventually(
      async () => fake.chatRequests[0].aborted,
      (a) => a,
    );
    expect(fake.chatRequests[0].aborted).toBe(true);
    expect(fake.chatRequests[0].chunksSent).toBeLessThan(30);
    const canceled = (await eventsOf(t, pw, 'paywall.proxy.request.canceled')).find(
      (e) => e.data.requestId === charge.id,
    );
    expect(canceled).toBeDefined();
  });

  it('answers an upstream 500 with a 502 before any chunk, and charges nothing', async () => {
    await deposit(t, pw, 'fred', '1');
    fake.next({ status: 500 });
    const err = await client(t, pw, 'fred')
      .chat.completions.create({ model: MODEL, messages: hi, stream: true })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(502);
    expect(err.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect(await money(t, pw, 'fred')).toMatchObject({ balance: 1_000_000n, held: 0n });
    const [charge] = await chargesOf(t, pw, 'fred');
    expect(charge).toMatchObject({ status: 'released', amount: '0' });
    await expectLedgerProven(t.db);
  });

  it('ends with an error event and settles what was produced when the upstream dies mid-stream', async () => {
    await deposit(t, pw, 'gina', '1');
    fake.next({ content: WORDS, dieAfterChunks: 4, chunkDelayMs: 5 });
    const stream = await client(t, pw, 'gina').chat.completions.create({
      model: MODEL,
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    })().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.message).toMatch(/provider failed mid-stream/);
    expect(text).toBe('word0 word1 word2 word3');
    const [charge] = await chargesOf(t, pw, 'gina');
    expect(charge.status).toBe('completed');
    expect(charge.error_code).toBe('upstream_error');
    expect(charge.completion_tokens).toBeGreaterThan(0);
    const cost = chatCost(PRICE, MARKUP, charge.prompt_tokens, charge.completion_tokens);
    expect(charge.amount).toBe(cost.toString());
    expect(await money(t, pw, 'gina')).toMatchObject({ balance: 1_000_000n - cost, held: 0n });
    await expectLedgerProven(t.db);
    const failed = (await eventsOf(t, pw, 'paywall.proxy.request.failed')).find(
      (e) => e.data.requestId === charge.id,
    );
    expect(failed.data.errorCode).toBe('upstream_error');
  });
});

describe('concurrency', () => {
  it('100 concurrent streams of one user with a balance for 10: never negative, no hold left open', async () => {
    const p = await createProxyPaywall(t, fake, { maxCompletionTokens: 20 });
    const funded = 10n * 1086n;
    await deposit(t, p, 'zed', (Number(funded) / 1e6).toString());
    fake.behavior = { chunkDelayMs: 5 };
    const sdk = client(t, p, 'zed');
    const results = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const stream = await sdk.chat.completions.create({ model: MODEL, messages: hi, stream: true });
        let text = '';
        let blocked = false;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta?.content ?? '';
          if ((chunk as any).paywall) blocked = true;
        }
        return { text, blocked };
      }),
    );
    const served = results.filter((r) => !r.blocked);
    expect(served.length).toBeGreaterThan(0);
    expect(served.every((r) => r.text === 'Hello from the fake upstream!')).toBe(true);
    expect(results.filter((r) => r.blocked).every((r) => r.text.includes('Top up here'))).toBe(true);

    const charges = await chargesOf(t, p, 'zed');
    expect(charges.filter((c) => c.status === 'held')).toHaveLength(0);
    expect(charges.filter((c) => c.status === 'completed')).toHaveLength(served.length);
    const spent = charges.reduce((sum, c) => sum + BigInt(c.amount), 0n);
    expect(spent).toBe(BigInt(served.length) * 1086n);
    expect(spent).toBeLessThanOrEqual(funded);
    const m = await money(t, p, 'zed');
    expect(m).toMatchObject({ balance: funded - spent, held: 0n, ledgerSum: funded - spent });
    expect(m.balance).toBeGreaterThanOrEqual(0n);
    await expectLedgerProven(t.db);
    expect(fake.chatRequests).toHaveLength(served.length);
  });
});
