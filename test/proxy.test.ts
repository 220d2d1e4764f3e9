import OpenAI from 'openai';
import { countTokens } from 'gpt-tokenizer';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  client,
  connectShared,
  createProxyPaywall,
  deposit,
  eventsOf,
  MODEL,
  money,
  PROVIDER_KEY,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { chatCost, formatUsdc, usdcDecimal } from '../src/shared/money.js';

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

const PRICE = { promptPico: 2_000_000n, completionPico: 5_000_000n, requestPico: 1_000_000_000n };
const MARKUP = 1_500_000n;
const hi = [{ role: 'user' as const, content: 'Say hello' }];

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

describe('non-streaming chat completions', () => {
  it('answers through the openai SDK and charges the exact cost to the raw unit', async () => {
    await deposit(t, pw, 'alice', '1');
    const before = await money(t, pw, 'alice');
    const c = await client(t, pw, 'alice').chat.completions.create({ model: MODEL, messages: hi });

    expect(c.object).toBe('chat.completion');
    expect(c.choices[0].message.content).toBe('Hello from the fake upstream!');
    expect(c.choices[0].finish_reason).toBe('stop');
    // request 0.001 + 1.5 x (11 x 0.000002 + 7 x 0.000005) = 0.0010855 → 1086 raw units
    expect(c.usage).toMatchObject({
      prompt_tokens: 11,
      completion_tokens: 7,
      total_tokens: 18,
      cost: '0.001086',
    });

    const after = await money(t, pw, 'alice');
    expect(before.balance - after.balance).toBe(1086n);
    expect(after.held).toBe(0n);
    expect(after.ledgerSum).toBe(after.balance);

    const [charge] = await chargesOf(t, pw, 'alice');
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
    expect(BigInt(charge.hold)).toBeGreaterThanOrEqual(1086n);
    // One transfer: alice's account → the paywall's earnings (DEFAULT mode: no fee leg).
    const entries = await t.db.query(
      `select x.kind, x.amount_raw::text as a, x.charge_id, d.kind as debit, c.kind as credit, c.paywall_id
         from transfer x join ledger_account d on d.id = x.debit_account_id join ledger_account c on c.id = x.credit_account_id
        where x.charge_id = $1`,
      [charge.id],
    );
    expect(entries).toEqual([
      {
        kind: 'usage',
        a: '1086',
        charge_id: charge.id,
        debit: 'user',
        credit: 'earnings',
        paywall_id: pw.id,
      },
    ]);
    await expectLedgerProven(t.db);
  });

  it('sends the provider key and the capped max_completion_tokens upstream, never the paywall key or the user', async () => {
    await deposit(t, pw, 'bob', '1');
    await client(t, pw, 'bob').chat.completions.create({
      model: MODEL,
      messages: hi,
      temperature: 0.3,
      top_p: 0.9,
      tools: [
        {
          type: 'function',
          function: { name: 'get_weather', parameters: { type: 'object', properties: {} } },
        },
      ],
      response_format: { type: 'json_object' },
      user: 'bob',
      seed: 42,
    } as any);
    const [r] = fake.chatRequests;
    expect(r.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(JSON.stringify(r.headers)).not.toContain(pw.apiKey);
    expect(JSON.stringify(r.body)).not.toContain(pw.apiKey);
    expect(r.headers['x-paywall-user']).toBeUndefined();
    expect(r.body).toEqual({
      model: MODEL,
      messages: hi,
      temperature: 0.3,
      top_p: 0.9,
      tools: [
        {
          type: 'function',
          function: { name: 'get_weather', parameters: { type: 'object', properties: {} } },
        },
      ],
      response_format: { type: 'json_object' },
      seed: 42,
      // The model's maxCompletionTokens (the balance affords more), in max_completion_tokens: the client
      // sent no cap of its own (docs/reference.md §13 "Cap sent upstream").
      max_completion_tokens: 1000,
    });
    expect((await money(t, pw, 'bob')).balance).toBe(1_000_000n - 1086n);
    await expectLedgerProven(t.db);
  });

  it('identifies the user from the path for clients that can only set a base URL', async () => {
    await deposit(t, pw, 'carol', '1');
    const c = await client(t, pw, 'carol', true).chat.completions.create({ model: MODEL, messages: hi });
    expect(c.usage).toMatchObject({ cost: '0.001086' });
    expect((await money(t, pw, 'carol')).balance).toBe(1_000_000n - 1086n);
    await expectLedgerProven(t.db);
    // a different user in the body contradicts the path
    const r = await t.rest('POST', '/v1/u/carol/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, messages: hi, user: 'mallory' },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('user');
  });

  it('counts tokens itself when the upstream sends no usage', async () => {
    await deposit(t, pw, 'dave', '1');
    fake.behavior = { usage: null, content: 'Counting these words myself, please.' };
    const c = await client(t, pw, 'dave').chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Count for me', name: 'dave_1' },
      ],
    });
    const [charge] = await chargesOf(t, pw, 'dave');
    expect(charge.completion_tokens).toBe(countTokens('Counting these words myself, please.'));
    expect(charge.prompt_tokens).toBeGreaterThan(countTokens('You are terse.Count for me'));
    const cost = chatCost(PRICE, MARKUP, charge.prompt_tokens, charge.completion_tokens);
    expect(charge.amount).toBe(cost.toString());
    expect(c.usage).toMatchObject({
      prompt_tokens: charge.prompt_tokens,
      completion_tokens: charge.completion_tokens,
      cost: (Number(cost) / 1e6).toString(),
    });
    expect((await money(t, pw, 'dave')).balance).toBe(1_000_000n - cost);
    await expectLedgerProven(t.db);
  });

  it('records started, completed and usage.charge.created in order with the charge data', async () => {
    const p2 = await createProxyPaywall(t, fake);
    await deposit(t, p2, 'erin', '1');
    await client(t, p2, 'erin').chat.completions.create({ model: MODEL, messages: hi });
    const events = (await eventsOf(t, p2)).filter((e) => /^paywall\.(proxy|usage)\./.test(e.type));
    const [charge] = await chargesOf(t, p2, 'erin');
    const user = (
      await t.db.query(`select id from end_user where paywall_id = $1 and external_id = 'erin'`, [p2.id])
    )[0];
    expect(events.map((e) => e.type)).toEqual([
      'paywall.proxy.request.started',
      'paywall.proxy.request.completed',
      'paywall.usage.charge.created',
    ]);
    expect(events[0].data).toMatchObject({
      paywallId: p2.id,
      requestId: charge.id,
      walletUserId: user.id,
      model: MODEL,
    });
    expect(events[1].data).toMatchObject({ requestId: charge.id, walletUserId: user.id, model: MODEL });
    expect(events[2].data).toMatchObject({
      walletUserId: user.id,
      activityId: charge.id,
      model: MODEL,
      promptTokens: 11,
      completionTokens: 7,
      cost: '0.001086',
    });
    expect((await money(t, p2, 'erin')).balance).toBe(1_000_000n - 1086n);
    await expectLedgerProven(t.db);
  });
});

describe('holds and caps', () => {
  it('lowers max_tokens to what the balance affords and never charges more than the balance', async () => {
    // 0.0012 USDC: after the request fee and the prompt, about 20 completion tokens are affordable.
    await deposit(t, pw, 'frank', '0.0012');
    fake.behavior = { usage: { prompt_tokens: 11, completion_tokens: 500 } };
    const c = await client(t, pw, 'frank').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_tokens: 800,
    });
    const [r] = fake.chatRequests;
    const [charge] = await chargesOf(t, pw, 'frank');
    const estimate = charge.metadata.promptEstimate as number;
    const cap = r.body.max_tokens as number;
    expect(cap).toBe(charge.max_completion_tokens);
    expect(cap).toBeLessThan(800);
    // The cap is the largest the free balance affords: one token more would not fit.
    expect(chatCost(PRICE, MARKUP, estimate, cap)).toBeLessThanOrEqual(1200n);
    expect(chatCost(PRICE, MARKUP, estimate, cap + 1)).toBeGreaterThan(1200n);
    expect(BigInt(charge.hold)).toBe(chatCost(PRICE, MARKUP, estimate, cap));
    expect(r.body.max_completion_tokens).toBeUndefined();
    expect(c.usage?.completion_tokens).toBe(cap);
    const m = await money(t, pw, 'frank');
    expect(m.balance).toBeGreaterThanOrEqual(0n);
    expect(1200n - m.balance).toBe(BigInt(charge.amount));
    // The upstream reported more prompt tokens (11) than estimated: beyond the hold, the rest of the free
    // balance pays (the whole 0.0012 at most); only what it cannot pay is recorded as uncollected.
    const cost = chatCost(PRICE, MARKUP, 11, cap);
    expect(cost).toBeGreaterThan(BigInt(charge.hold));
    const captured = cost < 1200n ? cost : 1200n;
    expect(BigInt(charge.amount)).toBe(captured);
    expect(BigInt(charge.uncollected)).toBe(cost - captured);
    await expectLedgerProven(t.db);
  });

  it('keeps the field the client used (max_completion_tokens) and its smaller value', async () => {
    await deposit(t, pw, 'gina', '1');
    await client(t, pw, 'gina').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_completion_tokens: 50,
    });
    const [r] = fake.chatRequests;
    expect(r.body.max_completion_tokens).toBe(50);
    expect(r.body.max_tokens).toBeUndefined();
    expect((await money(t, pw, 'gina')).balance).toBe(1_000_000n - 1086n);
    await expectLedgerProven(t.db);
  });

  it('answers the top-up message when the balance affords fewer than 16 completion tokens, even for a smaller client cap', async () => {
    // docs/reference.md §5.3: "When the free balance cannot afford even 16 completion tokens, the reply is the top-up
    // message" — whatever the client's cap. The prompt estimate of these messages, from a funded request:
    await deposit(t, pw, 'cap-probe', '1');
    await client(t, pw, 'cap-probe').chat.completions.create({ model: MODEL, messages: hi, max_tokens: 5 });
    const estimate = (await chargesOf(t, pw, 'cap-probe'))[0].metadata.promptEstimate as number;
    fake.reset();

    // 15 tokens affordable: refused although the client asked for 5.
    await deposit(t, pw, 'cap-15', formatUsdc(chatCost(PRICE, MARKUP, estimate, 15)));
    const refused = await client(t, pw, 'cap-15').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_tokens: 5,
    });
    expect((refused as any).paywall.reason).toBe('insufficient_balance');
    expect(refused.choices[0].message.content).toContain('/topup/');
    expect(fake.chatRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'cap-15')).toEqual([]);

    // Exactly 16 affordable: forwarded with the client's 5, held for 5.
    await deposit(t, pw, 'cap-16', formatUsdc(chatCost(PRICE, MARKUP, estimate, 16)));
    fake.behavior = { usage: { prompt_tokens: estimate, completion_tokens: 5 } };
    const served = await client(t, pw, 'cap-16').chat.completions.create({
      model: MODEL,
      messages: hi,
      max_tokens: 5,
    });
    expect((served as any).paywall).toBeUndefined();
    expect(fake.chatRequests[0].body.max_tokens).toBe(5);
    const [charge] = await chargesOf(t, pw, 'cap-16');
    expect(BigInt(charge.hold)).toBe(chatCost(PRICE, MARKUP, estimate, 5));
    expect(BigInt(charge.amount)).toBe(chatCost(PRICE, MARKUP, estimate, 5));
    await expectLedgerProven(t.db);
  });

  it('records what the hold could not collect when the provider bills more input than the estimate', async () => {
    await deposit(t, pw, 'hank', '0.0012');
    // 1,000 input tokens where the estimate counted 8 (still within what the request's bytes can make,
    // docs/reference.md §5.7), and 20 of the 23 completion tokens the balance afforded.
    fake.behavior = { usage: { prompt_tokens: 1000, completion_tokens: 20 } };
    const c = await client(t, pw, 'hank').chat.completions.create({ model: MODEL, messages: hi });
    const [charge] = await chargesOf(t, pw, 'hank');
    const cost = chatCost(PRICE, MARKUP, 1000, 20);
    // The hold, then the rest of the free balance: all 0.0012 is taken; the rest is uncollected.
    expect(BigInt(charge.hold)).toBeLessThan(1200n);
    expect(charge.amount).toBe('1200');
    expect(BigInt(charge.uncollected)).toBe(cost - 1200n);
    expect(c.usage).toMatchObject({ completion_tokens: 20, cost: '0.0012' });
    const m = await money(t, pw, 'hank');
    expect(m.balance).toBe(0n);
    const [ev] = (await eventsOf(t, pw, 'paywall.usage.charge.created')).filter(
      (e) => e.data.activityId === charge.id,
    );
    expect(ev.data.cost).toBe('0.0012');
    expect(ev.data.uncollected).toBe(usdcDecimal(cost - 1200n));
    await expectLedgerProven(t.db);
  });
});

describe('payment-blocked replies', () => {
  it('answers an unfunded user with a top-up link as an ordinary completion; nothing reaches the upstream', async () => {
    const c = await client(t, pw, 'ivan').chat.completions.create({ model: MODEL, messages: hi });
    expect(c.object).toBe('chat.completion');
    expect(c.choices[0].finish_reason).toBe('stop');
    expect(c.choices[0].message.role).toBe('assistant');
    const paywall = (c as any).paywall;
    expect(paywall.reason).toBe('insufficient_balance');
    expect(paywall.url).toMatch(/^http/);
    expect(c.choices[0].message.content).toContain(paywall.url);
    expect(fake.chatRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'ivan')).toHaveLength(0);

    const types = (await eventsOf(t, pw)).filter(
      (e) => e.data.walletUserId !== undefined || e.type.includes('topup'),
    );
    const mine = types.filter((e) => JSON.stringify(e.subject).includes('ivan'));
    expect(mine.map((e) => e.type)).toEqual(
      expect.arrayContaining([
        'paywall.balance.topup.link.created',
        'paywall.proxy.request.started',
        'paywall.request.blocked',
        'paywall.proxy.request.blocked',
        'paywall.balance.depleted',
      ]),
    );
    const depleted = mine.find((e) => e.type === 'paywall.balance.depleted');
    expect(depleted.data.availableBalance).toBe('0');
    expect(Number(depleted.data.requestedAmount)).toBeGreaterThan(0.001);
    const blocked = mine.find((e) => e.type === 'paywall.proxy.request.blocked');
    expect(blocked.data.reason).toBe('insufficient_balance');
  });

  it('streams the blocked reply as a proper SSE stream the SDK renders', async () => {
    const stream = await client(t, pw, 'ivan').chat.completions.create({
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
      expect((chunk as any).paywall.reason).toBe('insufficient_balance');
    }
    expect(text).toMatch(/Top up here: http/);
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({ completion_tokens: 0, cost: '0' });
    expect(fake.chatRequests).toHaveLength(0);
  });

  it('uses the paywall’s own template', async () => {
    const p2 = await createProxyPaywall(t, fake);
    const r = await t.gql(
      p2.apiKey,
      `mutation { updatePaywall(input: {topupMessageTemplate: "Pay up at {url} please"}) { id } }`,
    );
    expect(r.errors).toBeUndefined();
    const c = await client(t, p2, 'jane').chat.completions.create({ model: MODEL, messages: hi });
    expect(c.choices[0].message.content).toBe(`Pay up at ${(c as any).paywall.url} please`);
  });

  it('answers an unconnected SHARED-mode user with a connect link, in both forms', async () => {
    const shared = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await client(t, shared, 'kim').chat.completions.create({ model: MODEL, messages: hi });
    expect((c as any).paywall.reason).toBe('not_connected');
    expect((c as any).paywall.url).toContain('/connect/');
    expect(c.choices[0].message.content).toContain((c as any).paywall.url);

    const stream = client(t, shared, 'kim').chat.completions.stream({
      model: MODEL,
      messages: hi,
      stream: true,
    });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0].message.content).toContain('/connect/');
    expect(final.choices[0].finish_reason).toBe('stop');
    expect(fake.chatRequests).toHaveLength(0);
    const types = (await eventsOf(t, shared)).map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining([
        'paywall.authorization.requested',
        'paywall.request.blocked',
        'paywall.proxy.request.blocked',
      ]),
    );
    expect(types).not.toContain('paywall.balance.depleted');

    // Once connected, an unfunded user gets the top-up reply instead (balance is checked after the connection).
    await connectShared(t, shared, 'kim');
    const c2 = await client(t, shared, 'kim').chat.completions.create({ model: MODEL, messages: hi });
    expect((c2 as any).paywall.reason).toBe('insufficient_balance');
    await expectLedgerProven(t.db);
  });
});

describe('errors', () => {
  it('passes an upstream 4xx through and charges nothing', async () => {
    await deposit(t, pw, 'liam', '1');
    fake.next({
      status: 400,
      errorBody: {
        error: {
          message: "This model's maximum context length is 8 tokens.",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      },
    });
    const err = await client(t, pw, 'liam')
      .chat.completions.create({ model: MODEL, messages: hi })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(400);
    expect(err.code).toBe('context_length_exceeded');
    expect(err.message).toMatch(/maximum context length/);
    const m = await money(t, pw, 'liam');
    expect(m).toMatchObject({ balance: 1_000_000n, held: 0n });
    const [charge] = await chargesOf(t, pw, 'liam');
    expect(charge).toMatchObject({ status: 'released', amount: '0', error_code: 'upstream_400' });
    await expectLedgerProven(t.db);
  });

  it('completes a provider 4xx body that lacks `param` and `code` (as OpenAI-compatible servers send) to OpenAI’s four fields, keeping its own', async () => {
    await deposit(t, pw, 'nils', '1');
    fake.next({
      status: 400,
      errorBody: { error: { message: 'context too long', type: 'BadRequestError', code: 400, extra: 1 } },
    });
    const r = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${pw.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: hi, user: 'nils' }),
    });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({
      error: { message: 'context too long', type: 'BadRequestError', param: null, code: '400', extra: 1 },
    });
    expect(await money(t, pw, 'nils')).toMatchObject({ balance: 1_000_000n, held: 0n });
  });

  it("gives a provider 4xx without an OpenAI body one typed by its status, and passes the provider's Retry-After", async () => {
    await deposit(t, pw, 'nora', '1');
    const post = () =>
      fetch(`${t.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pw.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: hi, user: 'nora' }),
      });
    for (const [status, type] of [
      [401, 'authentication_error'],
      [403, 'permission_error'],
      [404, 'not_found_error'],
      [422, 'invalid_request_error'],
    ] as const) {
      fake.next({ status, errorText: '<html><body>Not here</body></html>' });
      const r = await post();
      expect({ status: r.status, error: (await r.json()).error }).toEqual({
        status,
        error: { message: expect.any(String), type, param: null, code: 'upstream_error' },
      });
    }
    fake.next({ status: 429, errorHeaders: { 'retry-after': '7' } });
    const limited = await post();
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect((await limited.json()).error.message).toBe('fake upstream error 429');
    expect(await money(t, pw, 'nora')).toMatchObject({ balance: 1_000_000n, held: 0n });
    await expectLedgerProven(t.db);
  });

  it('turns an upstream 500 into a 502 upstream_error and charges nothing', async () => {
    await deposit(t, pw, 'mia', '1');
    fake.next({ status: 500 });
    const err = await client(t, pw, 'mia')
      .chat.completions.create({ model: MODEL, messages: hi })
      .catch((e) => e);
    expect(err.status).toBe(502);
    expect(err.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect(await money(t, pw, 'mia')).toMatchObject({ balance: 1_000_000n, held: 0n });
    const [charge] = await chargesOf(t, pw, 'mia');
    expect(charge.status).toBe('released');
    const failed = (await eventsOf(t, pw, 'paywall.proxy.request.failed')).find(
      (e) => e.data.requestId === charge.id,
    );
    expect(failed.data.errorCode).toBe('upstream_error');
    await expectLedgerProven(t.db);
  });

  it('turns an unreachable upstream into a 502 and releases the hold', async () => {
    const gone = await FakeUpstream.start();
    const p2 = await createProxyPaywall(t, gone);
    await gone.close();
    await deposit(t, p2, 'nina', '1');
    const err = await client(t, p2, 'nina')
      .chat.completions.create({ model: MODEL, messages: hi })
      .catch((e) => e);
    expect(err.status).toBe(502);
    expect(err.error.code).toBe('upstream_error');
    expect(await money(t, p2, 'nina')).toMatchObject({ balance: 1_000_000n, held: 0n });
    await expectLedgerProven(t.db);
  });

  it('answers an unknown model with an OpenAI-style 404', async () => {
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: 'no-such-model', messages: hi, user: 'alice' },
    });
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ type: 'not_found_error', code: 'model_not_found', param: 'model' });
  });

  it.each([
    [{ messages: hi }, 'model'],
    [{ model: MODEL }, 'messages'],
    [{ model: MODEL, messages: [] }, 'messages'],
    [{ model: MODEL, messages: 'hi' }, 'messages'],
    [{ model: MODEL, messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role'],
    [{ model: MODEL, messages: [{ content: 'x' }] }, 'messages[0].role'],
    [
      { model: MODEL, messages: [hi[0], { role: 'user', content: 'x', name: 'has space' }] },
      'messages[1].name',
    ],
    [{ model: MODEL, messages: [{ role: 'user', content: 'x', name: 'n'.repeat(65) }] }, 'messages[0].name'],
    [{ model: MODEL, messages: [{ role: 'user', content: 42 }] }, 'messages[0].content'],
    [{ model: MODEL, messages: hi, stream: 'yes' }, 'stream'],
    [{ model: MODEL, messages: hi, max_tokens: 0 }, 'max_tokens'],
    [{ model: MODEL, messages: hi, max_completion_tokens: 1.5 }, 'max_completion_tokens'],
    [{ model: 7, messages: hi }, 'model'],
  ])('rejects %j with a 400 naming %s, and charges nothing', async (body, param) => {
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body,
      headers: { 'X-Paywall-User': 'alice' },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(typeof r.body.error.message).toBe('string');
    expect(fake.chatRequests).toHaveLength(0);
  });

  it('needs a user', async () => {
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, messages: hi },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ param: 'user', code: 'missing_user' });
  });

  it('refuses a body over 1 MiB with 413 and a bad key with 401', async () => {
    const big = {
      model: MODEL,
      user: 'alice',
      messages: [{ role: 'user', content: 'x'.repeat(1024 * 1024 + 10) }],
    };
    const r = await t.rest('POST', '/v1/chat/completions', { token: pw.apiKey, body: big });
    expect(r.status).toBe(413);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'request_too_large' });
    const bad = await t.rest('POST', '/v1/chat/completions', {
      token: 'pk_live_not_a_key',
      body: { model: MODEL, messages: hi, user: 'alice' },
    });
    expect(bad.status).toBe(401);
    expect(fake.chatRequests).toHaveLength(0);
  });
});

describe('GraphQL', () => {
  const MUTATION = `mutation($i: ChatCompletionInput!) { createChatCompletion(input: $i) {
    id object model choices { index finishReason message { role content } }
    usage { promptTokens completionTokens totalTokens cost } paywall { reason url } } }`;

  it('createChatCompletion charges like REST and the charge shows on the user', async () => {
    await deposit(t, pw, 'olga', '1');
    const r = await t.gql(pw.apiKey, MUTATION, {
      i: { model: MODEL, user: 'olga', messages: hi, temperature: 0.5, extra: { seed: 7 } },
    });
    expect(r.errors).toBeUndefined();
    expect(r.data.createChatCompletion).toMatchObject({
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          finishReason: 'stop',
          message: { role: 'assistant', content: 'Hello from the fake upstream!' },
        },
      ],
      usage: { promptTokens: 11, completionTokens: 7, totalTokens: 18, cost: '0.001086' },
      paywall: null,
    });
    expect(fake.chatRequests[0].body).toMatchObject({ temperature: 0.5, seed: 7 });
    expect((await money(t, pw, 'olga')).balance).toBe(1_000_000n - 1086n);

    const q = await t.gql(
      pw.apiKey,
      `{ user(externalId: "olga") { charges { edges { node { kind status model promptTokens completionTokens amount hold uncollected } } } } }`,
    );
    expect(q.errors).toBeUndefined();
    const [node] = q.data.user.charges.edges.map((e: any) => e.node);
    expect(node).toMatchObject({
      kind: 'usage',
      status: 'completed',
      model: MODEL,
      promptTokens: 11,
      completionTokens: 7,
      amount: '0.001086',
      uncollected: '0.000000',
    });
    await expectLedgerProven(t.db);
  });

  it('returns the payment prompt with `paywall` set, and validates like REST', async () => {
    const r = await t.gql(pw.apiKey, MUTATION, { i: { model: MODEL, user: 'pete', messages: hi } });
    expect(r.errors).toBeUndefined();
    expect(r.data.createChatCompletion.paywall.reason).toBe('insufficient_balance');
    expect(r.data.createChatCompletion.choices[0].message.content).toContain(
      r.data.createChatCompletion.paywall.url,
    );

    const bad = await t.gql(pw.apiKey, MUTATION, {
      i: { model: MODEL, user: 'pete', messages: [{ role: 'robot', content: 'x' }] },
    });
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'messages[0].role' });
    const noUser = await t.gql(pw.apiKey, MUTATION, { i: { model: MODEL, messages: hi } });
    expect(noUser.errors?.[0].extensions).toMatchObject({ param: 'user' });
    const stream = await t.gql(pw.apiKey, MUTATION, {
      i: { model: MODEL, user: 'pete', messages: hi, extra: { stream: true } },
    });
    expect(stream.errors?.[0].extensions).toMatchObject({ param: 'stream' });
    expect(fake.chatRequests).toHaveLength(0);
  });
});
