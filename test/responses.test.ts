import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
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
import { countText } from '../src/modules/proxy/token-counter.js';
import { chatCost, usdcDecimal } from '../src/shared/money.js';

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

const PRICE = { promptPico: 2_000_000n, completionPico: 5_000_000n, requestPico: 1_000_000_000n };
const MARKUP = 1_500_000n;
const INPUT = 'Say hello';

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

describe('POST /v1/responses (docs/reference.md §11)', () => {
  it('answers through the openai SDK and charges the exact cost to the raw unit, with cost headers', async () => {
    await deposit(t, pw, 'r-alice', '1');
    const { data: r, response } = await client(t, pw, 'r-alice')
      .responses.create({ model: MODEL, input: INPUT })
      .withResponse();

    expect(r.object).toBe('response');
    expect(r.status).toBe('completed');
    expect(r.output_text).toBe('Hello from the fake upstream!');
    // request 0.001 + 1.5 x (11 x 0.000002 + 7 x 0.000005) = 0.0010855 → 1086 raw units
    expect(chatCost(PRICE, MARKUP, 11, 7)).toBe(1086n);
    expect(r.usage).toMatchObject({ input_tokens: 11, output_tokens: 7, total_tokens: 18, cost: '0.001086' });
    expect(response.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(response.headers.get('x-paywall-balance')).toBe('0.998914');

    const m = await money(t, pw, 'r-alice');
    expect(m.balance).toBe(1_000_000n - 1086n);
    expect(m.held).toBe(0n);
    expect(m.ledgerSum).toBe(m.balance);

    const [charge] = await chargesOf(t, pw, 'r-alice');
    expect(charge).toMatchObject({
      kind: 'usage',
      status: 'completed',
      model: MODEL,
      prompt_tokens: 11,
      completion_tokens: 7,
      amount: '1086',
      uncollected: '0',
      stream: false,
    });
    // Upstream: the Responses endpoint, the provider's key, the cap as max_output_tokens, no end-user id.
    const [up] = fake.responsesRequests;
    expect(up.url).toBe('/v1/responses');
    expect(up.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(up.body.max_output_tokens).toBe(1000);
    expect(up.body.max_output_tokens).toBe(charge.max_completion_tokens);
    expect(up.body.user).toBeUndefined();
    expect(up.body.input).toBe(INPUT);
    await expectLedgerProven(t.db);
  });

  it('identifies the user by the path and keeps the client’s smaller max_output_tokens', async () => {
    await deposit(t, pw, 'r-bob', '1');
    const r = await client(t, pw, 'r-bob', true).responses.create({
      model: MODEL,
      input: [{ role: 'user', content: INPUT }],
      max_output_tokens: 3,
    });
    expect(fake.responsesRequests[0].body.max_output_tokens).toBe(3);
    expect(r.usage?.output_tokens).toBe(3);
    // The upstream counted more prompt tokens (11) than the estimate: the hold is short, and the free
    // balance pays the rest (nothing uncollected).
    const [charge] = await chargesOf(t, pw, 'r-bob');
    const cost = chatCost(PRICE, MARKUP, 11, 3);
    expect(cost).toBeGreaterThan(BigInt(charge.hold));
    const expected = cost;
    expect(BigInt(charge.amount)).toBe(expected);
    expect(charge.uncollected).toBe('0');
    expect((r.usage as any).cost).toBe(usdcDecimal(expected));
    expect((await money(t, pw, 'r-bob')).balance).toBe(1_000_000n - expected);
    // A different user in the body than in the path is refused.
    const bad = await t.rest('POST', '/v1/u/r-bob/responses', {
      token: pw.apiKey,
      body: { model: MODEL, input: INPUT, user: 'someone-else' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('user_mismatch');
  });

  it('streams the events as they arrive and settles at response.completed (usage.cost)', async () => {
    await deposit(t, pw, 'r-carl', '1');
    const stream = await client(t, pw, 'r-carl').responses.create({
      model: MODEL,
      input: INPUT,
      stream: true,
    });
    const types: string[] = [];
    let text = '';
    let completed: any = null;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') {
        completed = ev.response;
        // Settled before the terminal event was written.
        expect((await money(t, pw, 'r-carl')).balance).toBe(1_000_000n - 1086n);
      }
    }
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(text).toBe('Hello from the fake upstream!');
    expect(completed.usage).toMatchObject({
      input_tokens: 11,
      output_tokens: 7,
      cost: '0.001086',
      balance: '0.998914',
    });
    const [charge] = await chargesOf(t, pw, 'r-carl');
    expect(charge).toMatchObject({ status: 'completed', amount: '1086', stream: true });
    expect(fake.responsesRequests[0].body.stream).toBe(true);
    await expectLedgerProven(t.db);
  });

  it('counts the tokens itself when the stream brings no usage, and charges a stream that dies for what it produced', async () => {
    await deposit(t, pw, 'r-dora', '1');
    fake.next({ usage: null });
    const stream = await client(t, pw, 'r-dora').responses.create({
      model: MODEL,
      input: INPUT,
      stream: true,
    });
    let completed: any = null;
    for await (const ev of stream) if (ev.type === 'response.completed') completed = ev.response;
    const [c1] = await chargesOf(t, pw, 'r-dora');
    expect(c1.status).toBe('completed');
    // No usage: the prompt is the estimate, the output what was relayed, counted here; exactly.
    const produced = countText('Hello from the fake upstream!');
    expect(c1.completion_tokens).toBe(produced);
    expect(c1.prompt_tokens).toBe(c1.metadata.promptEstimate);
    expect(c1.amount).toBe(chatCost(PRICE, MARKUP, c1.metadata.promptEstimate, produced).toString());
    expect(completed.usage.cost).toBe(usdcDecimal(BigInt(c1.amount)));
    expect(completed.usage.output_tokens).toBe(c1.completion_tokens);

    fake.next({ content: 'one two three four five six', dieAfterChunks: 2, chunkDelayMs: 5, usage: null });
    const s2 = await client(t, pw, 'r-dora').responses.create({ model: MODEL, input: INPUT, stream: true });
    await expect(
      (async () => {
        for await (const _ of s2) void _;
      })(),
    ).rejects.toThrow(/failed mid-stream/);
    const [, c2] = await chargesOf(t, pw, 'r-dora');
    expect(c2.status).toBe('completed');
    expect(c2.error_code).toBe('upstream_error');
    expect(c2.completion_tokens).toBe(2);
    expect(c2.amount).toBe(chatCost(PRICE, MARKUP, c2.metadata.promptEstimate, 2).toString());
    const m = await money(t, pw, 'r-dora');
    expect(m.held).toBe(0n);
    expect(m.balance).toBe(1_000_000n - BigInt(c1.amount) - BigInt(c2.amount));
    await expectLedgerProven(t.db);
  });

  it('gives a broke user the top-up link as an ordinary response (JSON and stream)', async () => {
    const r = await client(t, pw, 'r-broke').responses.create({ model: MODEL, input: INPUT });
    const paywall = (r as any).paywall;
    expect(r.object).toBe('response');
    expect(r.status).toBe('completed');
    expect(paywall.reason).toBe('insufficient_balance');
    expect(r.output_text).toContain(paywall.url);
    expect(r.usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });

    const stream = await client(t, pw, 'r-broke').responses.create({
      model: MODEL,
      input: INPUT,
      stream: true,
    });
    let text = '';
    let last = '';
    for await (const ev of stream) {
      last = ev.type;
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
    expect(last).toBe('response.completed');
    expect(text).toContain('Top up here');
    expect(fake.responsesRequests).toHaveLength(0);
    expect((await money(t, pw, 'r-broke')).balance).toBe(0n);
  });

  it('gives an unconnected SHARED-mode user the connect link; once connected and funded, charges the wallet', async () => {
    const shared = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const r = await client(t, shared, 'r-kim').responses.create({ model: MODEL, input: INPUT });
    expect((r as any).paywall.reason).toBe('not_connected');
    expect((r as any).paywall.url).toContain('/connect/');
    expect(r.output_text).toContain((r as any).paywall.url);
    expect(fake.responsesRequests).toHaveLength(0);

    await connectShared(t, shared, 'r-kim', 1_000_000n);
    const ok = await client(t, shared, 'r-kim').responses.create({ model: MODEL, input: INPUT });
    expect((ok.usage as any).cost).toBe('0.001086');
    expect((await money(t, shared, 'r-kim')).balance).toBe(1_000_000n - 1086n);
    await expectLedgerProven(t.db);
  });

  it('never overspends: 30 concurrent responses with a balance for 5', async () => {
    // The upstream reports 2 prompt tokens (below the estimate), so every charge is below its hold.
    fake.behavior = { usage: { prompt_tokens: 2, completion_tokens: 7 } };
    const cost = chatCost(PRICE, MARKUP, 2, 7);
    // The hold of one such request (cap 20), measured on another user. The cap is above the 16 tokens a
    // request must afford (docs/reference.md §5.3), so whether a request is served does not depend on
    // how the 30 holds are batched: five full holds fit, and what five settlements leave cannot pay a sixth.
    await deposit(t, pw, 'r-probe', '1');
    await client(t, pw, 'r-probe').responses.create({ model: MODEL, input: INPUT, max_output_tokens: 20 });
    const hold = BigInt((await chargesOf(t, pw, 'r-probe'))[0].hold);
    expect(hold).toBeGreaterThan(cost);

    await deposit(t, pw, 'r-many', usdcDecimal(5n * hold));
    const api = client(t, pw, 'r-many');
    const answers = await Promise.all(
      Array.from({ length: 30 }, () =>
        api.responses.create({ model: MODEL, input: INPUT, max_output_tokens: 20 }),
      ),
    );
    const served = answers.filter((a) => !(a as any).paywall);
    expect(served).toHaveLength(5);
    for (const a of answers.filter((x) => (x as any).paywall))
      expect((a as any).paywall.reason).toBe('insufficient_balance');
    const m = await money(t, pw, 'r-many');
    expect(m.held).toBe(0n);
    expect(m.balance).toBe(5n * hold - 5n * cost);
    expect(m.balance).toBeLessThan(hold);
    expect(m.balance).toBeGreaterThanOrEqual(0n);
    expect(m.ledgerSum).toBe(m.balance);
    await expectLedgerProven(t.db);
  });

  it('passes a provider 4xx through and turns a 5xx into 502 upstream_error, charging nothing', async () => {
    await deposit(t, pw, 'r-err', '1');
    fake.next({
      status: 400,
      errorBody: {
        error: {
          message: 'context too long',
          type: 'invalid_request_error',
          param: 'input',
          code: 'context_length_exceeded',
        },
      },
    });
    const bad = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'r-err' },
      body: { model: MODEL, input: INPUT },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('context_length_exceeded');
    expect(bad.headers.get('x-paywall-cost')).toBeNull();

    fake.next({ status: 503 });
    const down = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'x-paywall-user': 'r-err' },
      body: { model: MODEL, input: INPUT, stream: true },
    });
    expect(down.status).toBe(502);
    expect(down.body.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect((await money(t, pw, 'r-err')).balance).toBe(1_000_000n);
    expect((await chargesOf(t, pw, 'r-err')).every((c) => c.status === 'released')).toBe(true);
  });

  it('validates the request (user, model)', async () => {
    const none = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      body: { model: MODEL, input: INPUT },
    });
    expect(none.status).toBe(400);
    expect(none.body.error.code).toBe('missing_user');
    const unknown = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      body: { model: 'no-such-model', input: INPUT, user: 'r-val' },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('model_not_found');
  });
});

describe('x-paywall-cost / x-paywall-balance on chat completions (docs/reference.md §11)', () => {
  it('a whole chat answer carries the charge and the free balance after it', async () => {
    await deposit(t, pw, 'h-chat', '2');
    const { data: c, response } = await client(t, pw, 'h-chat')
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: INPUT }] })
      .withResponse();
    expect((c.usage as any).cost).toBe('0.001086');
    expect(response.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(response.headers.get('x-paywall-balance')).toBe('1.998914');
    expect((await money(t, pw, 'h-chat')).balance).toBe(2_000_000n - 1086n);
    // A blocked reply charges nothing: no headers.
    const { response: blocked } = await client(t, pw, 'h-nobody')
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: INPUT }] })
      .withResponse();
    expect(blocked.headers.get('x-paywall-cost')).toBeNull();
  });

  it('x-paywall-balance has exactly 6 fraction digits, trailing zeros kept, like balanceFormatted', async () => {
    await deposit(t, pw, 'h-zeros', '1.001086');
    const { response } = await client(t, pw, 'h-zeros')
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: INPUT }] })
      .withResponse();
    expect(response.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(response.headers.get('x-paywall-balance')).toBe('1.000000');
    const read = await t.rest('GET', '/v1/user/balance?user=h-zeros', { token: pw.apiKey });
    expect(read.body.balanceFormatted).toBe(response.headers.get('x-paywall-balance'));
  });
});

describe('metric labels never carry an end-user id', () => {
  it('labels /v1/u/{user}/… by the template', async () => {
    const users = Array.from({ length: 100 }, (_, i) => `path-user-${i}-zq`);
    for (let i = 0; i < users.length; i += 20)
      await Promise.all(
        users.slice(i, i + 20).map(async (u) => {
          await deposit(t, pw, u, '0.01');
          await client(t, pw, u, true).chat.completions.create({
            model: MODEL,
            messages: [{ role: 'user', content: INPUT }],
          });
        }),
      );
    await client(t, pw, users[0], true).responses.create({ model: MODEL, input: INPUT });
    const text = (await t.rest('GET', '/metrics')).body as string;
    for (const u of users) expect(text).not.toContain(u);
    expect(text).toContain('route="/v1/u/{user}/chat/completions"');
    expect(text).toContain('route="/v1/u/{user}/responses"');
  });
});
