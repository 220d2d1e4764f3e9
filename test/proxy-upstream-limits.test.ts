import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
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
import { chatCost, usdcDecimal } from '../src/shared/money.js';
import { countText } from '../src/modules/proxy/token-counter.js';
import { INSTANCE_ID, VIA_HEADER } from '../src/modules/proxy/upstream-client.js';
import { MAX_TOKEN_COUNT } from '../src/modules/proxy/wire-format.js';
import { sweepAbandonedHolds } from '../src/modules/ledger/abandoned-holds.js';

/**
 * Issue 10, upstream findings: answer size limit (UPSTREAM_MAX_BYTES), huge usage numbers, idle vs
 * absolute timeouts (UPSTREAM_TIMEOUT_MS / UPSTREAM_MAX_DURATION_MS), proxy loops, and settling the
 * holds of streams whose instance died for the progress they recorded.
 */

const PRICE = { promptPico: 2_000_000n, completionPico: 5_000_000n, requestPico: 1_000_000_000n };
const MARKUP = 1_500_000n;
const MiB = 1024 * 1024;
const hi = [{ role: 'user' as const, content: 'Say hello' }];
const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A provider written by hand per test (huge or stalling answers), on loopback. */
class RawUpstream {
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void> = async (_q, res) => {
    res.writeHead(500);
    res.end();
  };
  /** Bytes the last answer wrote, and whether the proxy closed the connection before it ended. */
  written = 0;
  closedEarly = false;
  ended = false;
  private constructor(
    private readonly server: Server,
    readonly baseUrl: string,
  ) {}

  static async start(): Promise<RawUpstream> {
    const self: { r?: RawUpstream } = {};
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const r = self.r!;
        r.written = 0;
        r.closedEarly = false;
        r.ended = false;
        res.on('close', () => {
          if (!res.writableFinished) r.closedEarly = true;
        });
        r.handler(req, res).catch(() => res.destroy());
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    self.r = new RawUpstream(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
    return self.r;
  }

  /** Writes `s`, waiting for the socket to take it (a real server under backpressure). */
  async write(res: ServerResponse, s: string): Promise<boolean> {
    if (res.destroyed) return false;
    this.written += Buffer.byteLength(s);
    if (!res.write(s))
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    return !res.destroyed;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-raw', object: 'chat.completion.chunk', created: 1, model: MODEL, choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;

/** POSTs a chat request and reads the whole answer (SSE data lines for a stream). */
async function post(t: TestApp, pw: ProxyPaywall, user: string, body: Record<string, unknown>, path = '') {
  const res = await fetch(`${t.url}/v1${path}/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${pw.apiKey}`,
      'content-type': 'application/json',
      'x-paywall-user': user,
    },
    body: JSON.stringify({ model: MODEL, messages: hi, ...body }),
  });
  const text = await res.text();
  const data = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* a stream */
  }
  return { res, text, json, data };
}

/** The content a client read from chat SSE data lines, and the error event if the stream ended in one. */
function streamed(data: string[]): { content: string; error: any } {
  let content = '';
  let error: any = null;
  for (const d of data) {
    if (d === '[DONE]') continue;
    const c = JSON.parse(d);
    if (c.error) error = c.error;
    for (const ch of c.choices ?? []) content += ch.delta?.content ?? '';
  }
  return { content, error };
}

const costOf = (prompt: number, completion: number) => chatCost(PRICE, MARKUP, prompt, completion);

let t: TestApp;
let fake: FakeUpstream;
let raw: RawUpstream;
let pw: ProxyPaywall;
let pwRaw: ProxyPaywall;

beforeAll(async () => {
  t = await startTestApp({ UPSTREAM_MAX_BYTES: String(MiB), UPSTREAM_TIMEOUT_MS: '400' });
  fake = await FakeUpstream.start();
  raw = await RawUpstream.start();
  pw = await createProxyPaywall(t, fake);
  pwRaw = await createProxyPaywall(t, raw as unknown as FakeUpstream);
});
afterAll(async () => {
  await t.close();
  await fake.close();
  await raw.close();
});
beforeEach(() => fake.reset());

describe('UPSTREAM_MAX_BYTES: answers larger than the limit', () => {
  it('a whole JSON answer over the limit is a 502 upstream_error, read no further than the limit, nothing charged', async () => {
    await deposit(t, pwRaw, 'big-json', '1');
    raw.handler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      await raw.write(
        res,
        '{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"content":"',
      );
      const piece = 'a'.repeat(64 * 1024);
      // 64 MiB if nobody stops it: far more than the socket buffers take.
      for (let i = 0; i < 1024; i++) if (!(await raw.write(res, piece))) return;
      res.end('"}}]}');
      raw.ended = true;
    };
    const r = await post(t, pwRaw, 'big-json', {});
    expect(r.res.status).toBe(502);
    expect(r.json.error).toMatchObject({ type: 'api_error', code: 'upstream_error', param: null });
    expect(r.json.error.message).toMatch(/1048576-byte limit \(UPSTREAM_MAX_BYTES\)/);
    // The proxy closed the connection long before the provider finished writing.
    await eventually(
      async () => raw.closedEarly,
      (v) => v,
    );
    expect(raw.ended).toBe(false);
    expect(raw.written).toBeLessThan(40 * MiB);
    const [charge] = await chargesOf(t, pwRaw, 'big-json');
    expect(charge).toMatchObject({ status: 'released', amount: '0', error_code: 'upstream_too_large' });
    expect(await money(t, pwRaw, 'big-json')).toMatchObject({ balance: 1_000_000n, held: 0n });
    await expectLedgerProven(t.db);
  });

  it('an answer announcing a content-length over the limit is refused at its headers, without reading it', async () => {
    await deposit(t, pwRaw, 'big-announced', '1');
    raw.handler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(5 * MiB) });
      // Slowly (but never idle for UPSTREAM_TIMEOUT_MS): a proxy reading it would wait for seconds.
      const piece = 'a'.repeat(64 * 1024);
      for (let i = 0; i < 80; i++) {
        if (!(await raw.write(res, piece))) return;
        await sleep(200);
      }
      res.end();
      raw.ended = true;
    };
    const r = await post(t, pwRaw, 'big-announced', {});
    expect(r.res.status).toBe(502);
    expect(r.json.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect(r.json.error.message).toMatch(/1048576-byte limit/);
    await eventually(
      async () => raw.closedEarly,
      (v) => v,
    );
    // Refused at its headers: the provider had written little of its 5 MiB when the proxy hung up.
    expect(raw.written).toBeLessThan(MiB);
    expect(raw.ended).toBe(false);
    expect((await chargesOf(t, pwRaw, 'big-announced'))[0]).toMatchObject({
      status: 'released',
      amount: '0',
      error_code: 'upstream_too_large',
    });
    expect(await money(t, pwRaw, 'big-announced')).toMatchObject({ balance: 1_000_000n, held: 0n });
  });

  it('a stream over the limit is cut with an error event and charged exactly for what was relayed', async () => {
    await deposit(t, pwRaw, 'big-stream', '1');
    // Each event carries one short word of content and 4 KiB of other data (as logprobs would).
    const pad = 'p'.repeat(4096);
    raw.handler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      await raw.write(res, chunk({ role: 'assistant', content: '' }));
      for (let i = 0; i < 10_000; i++)
        if (!(await raw.write(res, chunk({ content: ` w${i}` }, { pad })))) return;
      res.end('data: [DONE]\n\n');
      raw.ended = true;
    };
    const r = await post(t, pwRaw, 'big-stream', { stream: true });
    expect(r.res.status).toBe(200);
    const { content, error } = streamed(r.data);
    expect(error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect(error.message).toMatch(
      /exceeded the 1048576-byte limit \(UPSTREAM_MAX_BYTES\); the stream was cut/,
    );
    expect(r.data.at(-1)).not.toBe('[DONE]');
    // What the client got is below the limit, and the provider was stopped long before its end.
    expect(Buffer.byteLength(r.text)).toBeLessThan(MiB + 64 * 1024);
    expect(content.length).toBeGreaterThan(0);
    await eventually(
      async () => raw.closedEarly,
      (v) => v,
    );
    expect(raw.ended).toBe(false);

    const [charge] = await chargesOf(t, pwRaw, 'big-stream');
    const completion = countText(content);
    const expected = costOf(charge.metadata.promptEstimate, completion);
    expect(BigInt(charge.hold)).toBeGreaterThan(expected);
    expect(charge).toMatchObject({
      status: 'completed',
      error_code: 'upstream_too_large',
      completion_tokens: completion,
      amount: expected.toString(),
      uncollected: '0',
    });
    expect(await money(t, pwRaw, 'big-stream')).toMatchObject({ balance: 1_000_000n - expected, held: 0n });
    await expectLedgerProven(t.db);
  });
});

describe('provider usage numbers beyond int4 and 2^53', () => {
  /**
   * A charge whose provider reported `MAX_TOKEN_COUNT` (what any larger number is read as) on both sides:
   * clamped to what the request could produce (docs/reference.md §5.7), the cap sent upstream and the
   * prompt's bound, charged exactly for that, the excess recorded; never the whole balance.
   */
  function expectClamped(charge: any): bigint {
    const over = charge.metadata.overReported;
    expect(charge.completion_tokens).toBe(charge.max_completion_tokens);
    expect(charge.completion_tokens + over.output).toBe(MAX_TOKEN_COUNT);
    expect(charge.prompt_tokens + over.input).toBe(MAX_TOKEN_COUNT);
    // The estimate, the body's bytes and the provider's framing (8,192): a few thousand, not billions.
    expect(charge.prompt_tokens).toBeGreaterThan(8192);
    expect(charge.prompt_tokens).toBeLessThan(8192 + 1000);
    const cost = costOf(charge.prompt_tokens, charge.completion_tokens);
    expect(charge).toMatchObject({ status: 'completed', amount: cost.toString(), uncollected: '0' });
    return cost;
  }

  it.each([
    ['above 2^31', 2 ** 31 + 5, 2 ** 32],
    ['above 2^53 (not safe integers)', 2 ** 53 + 10, 2 ** 60],
    ['1e300', 1e300, 1e300],
  ])(
    'a whole answer reporting usage %s is clamped to what the request could produce and charged for that',
    async (label, prompt, completion) => {
      const user = `huge-${label.replace(/\W/g, '')}`;
      await deposit(t, pw, user, '1');
      fake.next({ usage: { prompt_tokens: prompt, completion_tokens: completion }, ignoreMaxTokens: true });
      const r = await post(t, pw, user, {});
      expect(r.res.status).toBe(200);
      const [charge] = await chargesOf(t, pw, user);
      const cost = expectClamped(charge);
      expect(r.json.usage.cost).toBe(usdcDecimal(cost));
      expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - cost, held: 0n });
      await expectLedgerProven(t.db);
    },
  );

  it('a stream and a Responses answer with huge usage are clamped too (never above the balance)', async () => {
    await deposit(t, pw, 'huge-stream', '1');
    fake.next({ usage: { prompt_tokens: 2 ** 40, completion_tokens: 2 ** 55 }, ignoreMaxTokens: true });
    const r = await post(t, pw, 'huge-stream', { stream: true, stream_options: { include_usage: true } });
    expect(r.data.at(-1)).toBe('[DONE]');
    const [c1] = await chargesOf(t, pw, 'huge-stream');
    const cost1 = expectClamped(c1);
    expect(await money(t, pw, 'huge-stream')).toMatchObject({ balance: 1_000_000n - cost1, held: 0n });

    await deposit(t, pw, 'huge-responses', '1');
    fake.next({ usage: { prompt_tokens: 3e20, completion_tokens: 2 ** 31 }, ignoreMaxTokens: true });
    const res = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'huge-responses' },
      body: { model: MODEL, input: 'Hi' },
    });
    expect(res.status).toBe(200);
    const [c2] = await chargesOf(t, pw, 'huge-responses');
    const cost2 = expectClamped(c2);
    expect(await money(t, pw, 'huge-responses')).toMatchObject({ balance: 1_000_000n - cost2, held: 0n });
    await expectLedgerProven(t.db);
  });
});

describe('UPSTREAM_TIMEOUT_MS is an idle limit', () => {
  it('a slow but active stream lasting far longer than the idle limit completes and is charged fully', async () => {
    await deposit(t, pw, 'slow', '1');
    // 20 chunks 150 ms apart: 3 s, with an idle limit of 400 ms. Cut by an absolute limit, it would
    // miss words and end with an error event (the cut itself is timed in the fault suite).
    fake.next({ content: words(20), chunkDelayMs: 150, usage: { prompt_tokens: 11, completion_tokens: 40 } });
    const r = await post(t, pw, 'slow', { stream: true });
    expect(streamed(r.data)).toEqual({ content: words(20), error: null });
    expect(r.data.at(-1)).toBe('[DONE]');
    const [charge] = await chargesOf(t, pw, 'slow');
    expect(charge).toMatchObject({
      status: 'completed',
      error_code: null,
      amount: costOf(11, 40).toString(),
    });
    expect(await money(t, pw, 'slow')).toMatchObject({ balance: 1_000_000n - costOf(11, 40), held: 0n });
  });

  it('an idle stream is cut after the idle limit and charged for what it produced', async () => {
    await deposit(t, pwRaw, 'idle', '1');
    raw.handler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const w of ['Hello', ' there', ' friend']) await raw.write(res, chunk({ content: w }));
      await sleep(3000);
      if (await raw.write(res, chunk({ content: ' late' }))) res.end('data: [DONE]\n\n');
    };
    const r = await post(t, pwRaw, 'idle', { stream: true });
    const { content, error } = streamed(r.data);
    expect(content).toBe('Hello there friend');
    expect(error).toMatchObject({
      code: 'upstream_error',
      message: 'The model provider timed out mid-stream.',
    });
    const [charge] = await chargesOf(t, pwRaw, 'idle');
    const expected = costOf(charge.metadata.promptEstimate, countText(content));
    expect(charge).toMatchObject({
      status: 'completed',
      error_code: 'upstream_timeout',
      amount: expected.toString(),
    });
    expect(await money(t, pwRaw, 'idle')).toMatchObject({ balance: 1_000_000n - expected, held: 0n });
    await expectLedgerProven(t.db);
  });

  it('UPSTREAM_MAX_DURATION_MS bounds an active stream: cut and settled for what it produced', async () => {
    const t2 = await startTestApp({ UPSTREAM_TIMEOUT_MS: '5000', UPSTREAM_MAX_DURATION_MS: '1000' });
    try {
      const pw2 = await createProxyPaywall(t2, fake);
      await deposit(t2, pw2, 'long', '1');
      fake.next({ content: words(40), chunkDelayMs: 100 });
      const r = await post(t2, pw2, 'long', { stream: true });
      const { content, error } = streamed(r.data);
      expect(error?.message).toMatch(/maximum duration \(UPSTREAM_MAX_DURATION_MS\)/);
      expect(content.length).toBeGreaterThan(0);
      expect(content.length).toBeLessThan(words(40).length);
      const [charge] = await chargesOf(t2, pw2, 'long');
      const expected = costOf(charge.metadata.promptEstimate, countText(content));
      expect(charge).toMatchObject({
        status: 'completed',
        error_code: 'upstream_timeout',
        amount: expected.toString(),
      });
      expect(await money(t2, pw2, 'long')).toMatchObject({ balance: 1_000_000n - expected, held: 0n });
      await expectLedgerProven(t2.db);
    } finally {
      await t2.close();
    }
  });
});

describe('proxy loops', () => {
  it('a provider whose base URL is the service itself is refused at the first hop, nothing charged', async () => {
    const loop = await createProxyPaywall(t, fake);
    const r0 = await t.gql(
      loop.apiKey,
      `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`,
      {
        i: { baseUrl: `${t.url}/v1/u/looper`, apiKey: loop.apiKey },
      },
    );
    expect(r0.errors).toBeUndefined();
    await deposit(t, loop, 'looper', '1');
    const r = await post(t, loop, 'looper', {}, '/u/looper');
    expect(r.res.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'proxy_loop', param: null });
    expect(r.json.error.message).toMatch(/came back to the Paywall Proxy that forwarded it/);
    // One request held and released (the outer one); the inner one was refused before any hold.
    const charges = await chargesOf(t, loop, 'looper');
    expect(charges.map((c) => [c.status, c.amount, c.error_code])).toEqual([
      ['released', '0', 'upstream_400'],
    ]);
    expect(await money(t, loop, 'looper')).toMatchObject({ balance: 1_000_000n, held: 0n });
    await expectLedgerProven(t.db);
  });

  it('one Paywall Proxy in front is allowed (and named upstream); two hops are refused', async () => {
    await deposit(t, pw, 'hops', '1');
    const one = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'hops', [VIA_HEADER]: 'front-proxy' },
      body: { model: MODEL, messages: hi },
    });
    expect(one.status).toBe(200);
    expect(fake.chatRequests[0].headers[VIA_HEADER]).toBe(`front-proxy, ${INSTANCE_ID}`);

    const two = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'hops', [VIA_HEADER]: 'a, b' },
      body: { model: MODEL, messages: hi },
    });
    expect(two.status).toBe(400);
    expect(two.body.error.code).toBe('proxy_loop');
    expect(fake.chatRequests).toHaveLength(1);
    expect(await chargesOf(t, pw, 'hops')).toHaveLength(1);
  });
});

describe('holds of a dead instance (the sweeper)', () => {
  async function insertHold(
    tt: TestApp,
    p: ProxyPaywall,
    user: string,
    hold: number,
    progress: Record<string, unknown> | null,
  ): Promise<string> {
    const [row] = await tt.db.query<any>(
      `with e as (select id, account_id from end_user where paywall_id = $1 and external_id = $2),
            a as (update ledger_account set held_raw = held_raw + $3 where id = (select account_id from e))
       insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, stream, metadata, created_at)
       select gen_random_uuid(), $1, e.id, e.account_id, 'usage', 'held', $3, $4, true,
              case when $5::jsonb is null then '{}'::jsonb else jsonb_build_object('progress', $5::jsonb) end,
              now() - interval '2 hours'
         from e returning id`,
      [p.id, user, hold, MODEL, progress === null ? null : JSON.stringify(progress)],
    );
    return row.id;
  }

  it('settles an abandoned hold for the progress its stream recorded, releases one without (or with a bad record)', async () => {
    await deposit(t, pw, 'dead', '1');
    const progress = {
      promptTokens: 11,
      completionTokens: 300,
      captured: '3283',
      earnings: '3283',
      fee: '0',
      provider: '0',
      uncollected: '0',
    };
    const settled = await insertHold(t, pw, 'dead', 9000, progress);
    const released = await insertHold(t, pw, 'dead', 4000, null);
    const bad = await insertHold(t, pw, 'dead', 1000, { ...progress, captured: '5000', earnings: '5000' });
    await expectLedgerProven(t.db);
    expect(await sweepAbandonedHolds(t.db, 60 * 60_000, [])).toBe(3);

    const byId = new Map((await chargesOf(t, pw, 'dead')).map((c) => [c.id, c]));
    expect(byId.get(settled)).toMatchObject({
      status: 'completed',
      amount: '3283',
      prompt_tokens: 11,
      completion_tokens: 300,
      error_code: 'abandoned',
    });
    expect(byId.get(settled)!.metadata.progress).toBeUndefined();
    expect(byId.get(released)).toMatchObject({ status: 'released', amount: '0', error_code: 'abandoned' });
    expect(byId.get(bad)).toMatchObject({ status: 'released', amount: '0', error_code: 'abandoned' });
    expect(await money(t, pw, 'dead')).toMatchObject({ balance: 1_000_000n - 3283n, held: 0n });
    const created = (await eventsOf(t, pw, 'paywall.usage.charge.created')).filter(
      (e) => e.data.activityId === settled,
    );
    expect(created).toHaveLength(1);
    expect(created[0].data).toMatchObject({ cost: '0.003283', completionTokens: 300 });
    const failed = (await eventsOf(t, pw, 'paywall.proxy.request.failed')).filter((e) =>
      [settled, released, bad].includes(e.data.requestId),
    );
    expect(failed.map((e) => e.data.errorCode)).toEqual(['abandoned', 'abandoned', 'abandoned']);
    expect(await sweepAbandonedHolds(t.db, 60 * 60_000, [])).toBe(0);
    await expectLedgerProven(t.db);
  });

  it('a long stream records its progress; a sweep (its instance presumed dead) charges it, and the late finisher does not charge again', async () => {
    await deposit(t, pw, 'progress', '1');
    const proxy = t.app.services.proxy;
    proxy.progressIntervalMs = 100;
    try {
      fake.next({
        content: words(30),
        chunkDelayMs: 60,
        usage: { prompt_tokens: 11, completion_tokens: 60 },
      });
      const answer = post(t, pw, 'progress', { stream: true });
      const recorded = await eventually(
        async () => (await chargesOf(t, pw, 'progress'))[0]?.metadata?.progress ?? null,
        (p) => p !== null && p.completionTokens >= 5,
      );
      expect(recorded).not.toBeNull();
      // Another instance sweeping: this hold is old enough and not in its in-flight set.
      expect(await sweepAbandonedHolds(t.db, 0, [])).toBe(1);
      const [swept] = await chargesOf(t, pw, 'progress');
      expect(swept).toMatchObject({ status: 'completed', error_code: 'abandoned' });
      expect(BigInt(swept.amount)).toBeGreaterThan(0n);
      expect(BigInt(swept.amount)).toBe(costOf(swept.metadata.promptEstimate, swept.completion_tokens));
      await answer;
      const [after] = await chargesOf(t, pw, 'progress');
      expect(after.amount).toBe(swept.amount);
      expect(await money(t, pw, 'progress')).toMatchObject({
        balance: 1_000_000n - BigInt(swept.amount),
        held: 0n,
      });
      await expectLedgerProven(t.db);
    } finally {
      proxy.progressIntervalMs = 5000;
    }
  });

  it('a stream that ends normally leaves no progress record behind', async () => {
    await deposit(t, pw, 'clean', '1');
    const proxy = t.app.services.proxy;
    proxy.progressIntervalMs = 50;
    try {
      fake.next({ content: words(10), chunkDelayMs: 40 });
      const r = await post(t, pw, 'clean', { stream: true });
      expect(r.data.at(-1)).toBe('[DONE]');
      const [c] = await chargesOf(t, pw, 'clean');
      expect(c).toMatchObject({ status: 'completed', amount: costOf(11, 7).toString() });
      expect(c.metadata.progress).toBeUndefined();
    } finally {
      proxy.progressIntervalMs = 5000;
    }
  });
});
