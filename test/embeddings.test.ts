import OpenAI, { APIError } from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';
import { OPENAI_EMBEDDINGS_REQUEST, OPENAI_EMBEDDINGS_RESPONSE } from './helpers/embeddings-fixture.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  client,
  connectShared,
  createProxyPaywall,
  deposit,
  eventsOf,
  money,
  PROVIDER_KEY,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { expectedRaw, textTokens as countText, usdc as usdcDecimal } from './helpers/expected-cost.js';

/**
 * POST /v1/embeddings (docs/reference.md §14): OpenAI's embeddings API under the payment rules of chat, with
 * no completion. A user who cannot pay gets a 402 (over a daily limit a 429) with `paywall`, and nothing
 * reaches the provider.
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

const EMBED = 'text-embedding-3-small';
/** Cost prices: 0.00000002 USDC per input token (OpenAI's list price), 0.0001 USDC per request; markup 1.37. */
const PRICE = { promptPico: 20_000n, completionPico: 0n, requestPico: 100_000_000n };
const MARKUP = 1_370_000n;
/** An embeddings request's cost for its input tokens, computed apart from the service's money code. */
const promptCost = (tokens: number): bigint =>
  expectedRaw({ requestPico: PRICE.requestPico, markupPpm: MARKUP, tokens: [[tokens, PRICE.promptPico]] });

/** `usage.cost_details` of an embeddings answer: the request price and markup x tokens x prompt. */
function details(tokens: number, charged = true): Record<string, string> {
  const zero = { request: '0', prompt: '0', cache_read: '0', cache_write: '0', audio_prompt: '0' };
  const rest = { reasoning: '0', audio_completion: '0', completion: '0' };
  if (!charged) return { ...zero, ...rest };
  const pico = (MARKUP * BigInt(tokens) * PRICE.promptPico) / 1_000_000n; // exact here (10⁻¹² USDC)
  const prompt = `0.${pico.toString().padStart(12, '0')}`.replace(/0+$/, '');
  return { ...zero, ...rest, request: '0.0001', prompt };
}
const INPUT = OPENAI_EMBEDDINGS_REQUEST.input;
/** The fixture's 8 tokens: 0.0001 + 1.37 x 8 x 0.00000002 = 0.0001002192 USDC, rounded up to 101 raw units. */
const COST_8 = 101n;

/** A paywall (DEFAULT or SHARED) that sells the embedding model through the fake upstream, markup 1.37. */
async function embeddingsPaywall(mode: 'DEFAULT' | 'SHARED' = 'DEFAULT'): Promise<ProxyPaywall> {
  const p = await createProxyPaywall(t, fake, { mode, markup: '1.37' });
  const r = await t.gql(
    p.apiKey,
    `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id pricing { prompt request } } }`,
    { i: { modelId: EMBED, prompt: '0.00000002', request: '0.0001' } },
  );
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  expect(r.data.setModelPricing.pricing).toEqual({ prompt: '0.0000000274', request: '0.0001' });
  return p;
}

/** POST /v1/embeddings (or `path`) as a raw request: the whole body, top-level `paywall` included. */
const embed = (body: Record<string, unknown>, user?: string, path = '/v1/embeddings') =>
  t.rest('POST', path, {
    token: pw.apiKey,
    body,
    headers: user ? { 'x-paywall-user': user } : {},
  });

const blockedCount = async (p: ProxyPaywall) =>
  (await eventsOf(t, p, 'paywall.proxy.request.blocked')).length;

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await embeddingsPaywall();
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

describe('POST /v1/embeddings: charged like chat, with no completion', () => {
  it('answers through the openai SDK and charges request + markup x prompt_tokens x prompt, rounded up to the raw unit', async () => {
    expect(promptCost(8)).toBe(COST_8);
    await deposit(t, pw, 'e-alice', '1');
    // The SDK asks for base64 by default and decodes it: the proxy passes the encoding through.
    const { data: r, response } = await client(t, pw, 'e-alice')
      .embeddings.create({ model: EMBED, input: INPUT })
      .withResponse();

    expect(r.object).toBe('list');
    expect(r.model).toBe(EMBED);
    expect(r.data).toHaveLength(1);
    expect(r.data[0]).toMatchObject({ object: 'embedding', index: 0 });
    const vector = Array.from(r.data[0].embedding);
    expect(vector).toHaveLength(3);
    OPENAI_EMBEDDINGS_RESPONSE.data[0].embedding.forEach((v, i) => expect(vector[i]).toBeCloseTo(v, 7));
    expect(r.usage).toEqual({
      prompt_tokens: 8,
      total_tokens: 8,
      cost: '0.000101',
      cost_details: details(8),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-paywall-cost')).toBe('0.000101');
    expect(response.headers.get('x-paywall-balance')).toBe('0.999899');

    const m = await money(t, pw, 'e-alice');
    expect(m).toEqual({ balance: 1_000_000n - COST_8, held: 0n, ledgerSum: 1_000_000n - COST_8 });

    // The hold was request + markup x (input estimate x prompt), and nothing for a completion.
    const estimate = countText(INPUT);
    const [charge] = await chargesOf(t, pw, 'e-alice');
    expect(charge).toMatchObject({
      kind: 'usage',
      status: 'completed',
      model: EMBED,
      prompt_tokens: 8,
      completion_tokens: 0,
      max_completion_tokens: 0,
      amount: '101',
      hold: promptCost(estimate).toString(),
      uncollected: '0',
      stream: false,
      error_code: null,
    });
    expect(charge.metadata.promptEstimate).toBe(estimate);

    // Upstream: the embeddings endpoint, the provider's key, the client's body without the end user and
    // without any cap field.
    expect(fake.requests).toHaveLength(1);
    const [up] = fake.embeddingsRequests;
    expect(up.url).toBe('/v1/embeddings');
    expect(up.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(up.body).toEqual({ model: EMBED, input: INPUT, encoding_format: 'base64' });
    await expectLedgerProven(t.db);
  });

  it('embeds an array of strings as floats, charging the provider’s prompt_tokens (1234 → 134 raw units)', async () => {
    // 0.0001 + 1.37 x 1234 x 0.00000002 = 0.0001338116 USDC → 134 raw units.
    expect(promptCost(1234)).toBe(134n);
    await deposit(t, pw, 'e-bob', '1');
    fake.next({ usage: { prompt_tokens: 1234, completion_tokens: 0 } });
    const input = ['first document', 'second document', 'third one'];
    const { data: r, response } = await client(t, pw, 'e-bob')
      .embeddings.create({ model: EMBED, input, encoding_format: 'float', dimensions: 3 })
      .withResponse();
    expect(r.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const d of r.data) expect(d.embedding).toEqual(OPENAI_EMBEDDINGS_RESPONSE.data[0].embedding);
    expect(r.usage).toEqual({
      prompt_tokens: 1234,
      total_tokens: 1234,
      cost: '0.000134',
      cost_details: details(1234),
    });
    expect(response.headers.get('x-paywall-cost')).toBe('0.000134');
    expect(response.headers.get('x-paywall-balance')).toBe('0.999866');
    expect((await money(t, pw, 'e-bob')).balance).toBe(1_000_000n - 134n);

    const [charge] = await chargesOf(t, pw, 'e-bob');
    expect(charge).toMatchObject({ prompt_tokens: 1234, completion_tokens: 0, amount: '134' });
    // The estimate was far below what the provider billed: the free balance paid the rest.
    const estimate = input.reduce((n, s) => n + countText(s), 0);
    expect(charge.metadata.promptEstimate).toBe(estimate);
    expect(BigInt(charge.hold)).toBe(promptCost(estimate));
    expect(fake.embeddingsRequests[0].body).toEqual({
      model: EMBED,
      input,
      encoding_format: 'float',
      dimensions: 3,
    });
    await expectLedgerProven(t.db);
  });

  it('counts token ids one each, and settles from that count when the provider reports no usage', async () => {
    await deposit(t, pw, 'e-carl', '1');
    fake.next({ usage: null }, { usage: null });
    const tokenArrays = await client(t, pw, 'e-carl').embeddings.create({
      model: EMBED,
      input: [
        [1, 2, 3],
        [4, 5],
      ],
      encoding_format: 'float',
    });
    const cost5 = promptCost(5);
    expect(tokenArrays.data).toHaveLength(2);
    expect(tokenArrays.usage).toEqual({
      prompt_tokens: 5,
      total_tokens: 5,
      cost: usdcDecimal(cost5),
      cost_details: details(5),
    });

    const tokenIds = await client(t, pw, 'e-carl').embeddings.create({
      model: EMBED,
      input: [9, 8, 7, 6],
      encoding_format: 'float',
    });
    const cost4 = promptCost(4);
    expect(tokenIds.data).toHaveLength(1);
    expect(tokenIds.usage).toEqual({
      prompt_tokens: 4,
      total_tokens: 4,
      cost: usdcDecimal(cost4),
      cost_details: details(4),
    });

    const charges = await chargesOf(t, pw, 'e-carl');
    expect(charges.map((c) => [c.prompt_tokens, c.completion_tokens, c.amount, c.hold])).toEqual([
      [5, 0, cost5.toString(), cost5.toString()],
      [4, 0, cost4.toString(), cost4.toString()],
    ]);
    expect((await money(t, pw, 'e-carl')).balance).toBe(1_000_000n - cost5 - cost4);
  });

  it('holds and charges no completion, even for a model that has a completion price', async () => {
    const p = await embeddingsPaywall();
    const r = await t.gql(
      p.apiKey,
      `mutation { setModelPricing(input: {modelId: "${EMBED}", completion: "0.001", maxCompletionTokens: 500}) { id } }`,
    );
    expect(r.errors).toBeUndefined();
    // Exactly the hold: chat would need 16 completion tokens more (0.0219 USDC) and refuse it.
    const hold = promptCost(countText(INPUT));
    expect(hold).toBe(COST_8);
    await deposit(t, p, 'e-exact', usdcDecimal(hold));
    const e = await client(t, p, 'e-exact').embeddings.create({ model: EMBED, input: INPUT });
    expect(e.usage).toEqual({
      prompt_tokens: 8,
      total_tokens: 8,
      cost: '0.000101',
      cost_details: details(8),
    });
    const [charge] = await chargesOf(t, p, 'e-exact');
    expect(charge).toMatchObject({
      hold: hold.toString(),
      amount: '101',
      completion_tokens: 0,
      max_completion_tokens: 0,
    });
    expect(await money(t, p, 'e-exact')).toEqual({ balance: 0n, held: 0n, ledgerSum: 0n });
    expect(fake.embeddingsRequests[0].body).toEqual({
      model: EMBED,
      input: INPUT,
      encoding_format: 'base64',
    });
  });

  it('records started, completed and usage.charge.created (completionTokens 0)', async () => {
    const p2 = await embeddingsPaywall();
    await deposit(t, p2, 'e-dora', '1');
    await client(t, p2, 'e-dora').embeddings.create({ model: EMBED, input: INPUT });
    const events = (await eventsOf(t, p2)).filter((e) => /^paywall\.(proxy|usage)\./.test(e.type));
    const [charge] = await chargesOf(t, p2, 'e-dora');
    const [user] = await t.db.query<any>(
      `select id from end_user where paywall_id = $1 and external_id = 'e-dora'`,
      [p2.id],
    );
    expect(events.map((e) => e.type)).toEqual([
      'paywall.proxy.request.started',
      'paywall.proxy.request.completed',
      'paywall.usage.charge.created',
    ]);
    expect(events[0].data).toMatchObject({
      paywallId: p2.id,
      requestId: charge.id,
      walletUserId: user.id,
      model: EMBED,
      stream: false,
    });
    expect(events[1].data).toMatchObject({ requestId: charge.id, walletUserId: user.id, model: EMBED });
    expect(events[2].data).toMatchObject({
      walletUserId: user.id,
      activityId: charge.id,
      model: EMBED,
      promptTokens: 8,
      completionTokens: 0,
      cost: '0.000101',
    });
    expect(events[2].data.uncollected).toBeUndefined();
    expect(events[2].subject).toMatchObject({ type: 'charge', id: charge.id, externalId: 'e-dora' });
  });

  it('names the user like chat: in the path (/v1/u/{user}/embeddings) or the body `user`, never sent upstream', async () => {
    await deposit(t, pw, 'e-erin', '1');
    const viaPath = await client(t, pw, 'e-erin', true).embeddings.create({ model: EMBED, input: INPUT });
    expect((viaPath.usage as any).cost).toBe('0.000101');
    expect(fake.embeddingsRequests[0].url).toBe('/v1/embeddings');

    await deposit(t, pw, 'e-fred', '1');
    const noHeader = new OpenAI({ apiKey: pw.apiKey, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const viaBody = await noHeader.embeddings.create({ model: EMBED, input: INPUT, user: 'e-fred' });
    expect((viaBody.usage as any).cost).toBe('0.000101');
    expect(fake.embeddingsRequests[1].body.user).toBeUndefined();

    expect((await money(t, pw, 'e-erin')).balance).toBe(1_000_000n - COST_8);
    expect((await money(t, pw, 'e-fred')).balance).toBe(1_000_000n - COST_8);

    // A different user in the body than in the path is refused; no user at all too.
    const mismatch = await embed(
      { model: EMBED, input: INPUT, user: 'e-other' },
      undefined,
      '/v1/u/e-erin/embeddings',
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.code).toBe('user_mismatch');
    const nobody = await embed({ model: EMBED, input: INPUT });
    expect(nobody.status).toBe(400);
    expect(nobody.body.error).toMatchObject({
      type: 'invalid_request_error',
      param: 'user',
      code: 'missing_user',
    });
    expect(fake.embeddingsRequests).toHaveLength(2);
  });
});

describe('a user who cannot pay: 402, nothing forwarded', () => {
  it('a broke user gets 402 payment_required / insufficient_balance with paywall {reason, url}; nothing is held or charged', async () => {
    // 100 raw units: less than the 101 the hold needs.
    await deposit(t, pw, 'e-broke', '0.0001');
    const before = await money(t, pw, 'e-broke');
    const err = await client(t, pw, 'e-broke')
      .embeddings.create({ model: EMBED, input: INPUT })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ status: 402, type: 'payment_required', code: 'insufficient_balance' });

    const r = await embed({ model: EMBED, input: INPUT }, 'e-broke');
    expect(r.status).toBe(402);
    expect(r.headers.get('x-should-retry')).toBe('false');
    expect(r.headers.get('x-paywall-cost')).toBeNull();
    expect(Object.keys(r.body).sort()).toEqual(['error', 'paywall']);
    expect(r.body.error).toMatchObject({
      type: 'payment_required',
      param: null,
      code: 'insufficient_balance',
    });
    expect(r.body.paywall).toEqual({ reason: 'insufficient_balance', url: expect.stringMatching(/^http/) });
    expect(r.body.error.message).toContain(r.body.paywall.url);

    expect(fake.requests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'e-broke')).toHaveLength(0);
    expect(await money(t, pw, 'e-broke')).toEqual(before);
    expect(before.balance).toBe(100n);
    const depleted = (await eventsOf(t, pw, 'paywall.balance.depleted')).filter(
      (e) => e.subject.externalId === 'e-broke',
    );
    expect(depleted).toHaveLength(2);
    expect(depleted[0].data).toMatchObject({
      availableBalance: '0.0001',
      requestedAmount: usdcDecimal(promptCost(countText(INPUT))),
    });
    const blocked = (await eventsOf(t, pw, 'paywall.proxy.request.blocked')).filter(
      (e) => e.subject.externalId === 'e-broke',
    );
    expect(blocked.map((e) => [e.data.reason, e.data.model])).toEqual([
      ['insufficient_balance', EMBED],
      ['insufficient_balance', EMBED],
    ]);
  });

  it('a SHARED user who is not connected gets 402 not_connected with the connect link; once connected and funded, is served', async () => {
    const shared = await embeddingsPaywall('SHARED');
    const user = 'e-kim';
    const err = await client(t, shared, user)
      .embeddings.create({ model: EMBED, input: INPUT })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toMatchObject({ status: 402, type: 'payment_required', code: 'not_connected' });

    const r = await t.rest('POST', `/v1/u/${user}/embeddings`, {
      token: shared.apiKey,
      body: { model: EMBED, input: INPUT },
    });
    expect(r.status).toBe(402);
    expect(r.body.error).toMatchObject({ type: 'payment_required', code: 'not_connected' });
    expect(r.body.paywall).toEqual({ reason: 'not_connected', url: expect.stringContaining('/connect/') });
    expect(fake.requests).toHaveLength(0);
    const types = (await eventsOf(t, shared)).map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining([
        'paywall.authorization.requested',
        'paywall.request.blocked',
        'paywall.proxy.request.blocked',
      ]),
    );
    expect(types).not.toContain('paywall.balance.depleted');
    expect(types).not.toContain('paywall.usage.charge.created');

    const wallet = await connectShared(t, shared, user, 1_000_000n);
    const ok = await client(t, shared, user).embeddings.create({ model: EMBED, input: INPUT });
    expect((ok.usage as any).cost).toBe('0.000101');
    expect(fake.embeddingsRequests).toHaveLength(1);
    const [acct] = await t.db.query<any>(`select balance_raw::text as b from ledger_account where id = $1`, [
      wallet.accountId,
    ]);
    expect(BigInt(acct.b)).toBe(1_000_000n - COST_8);
    await expectLedgerProven(t.db);
  });

  it('over the daily request limit: 429 rate_limit_error with paywall {reason: rate_limited}; the SDK does not retry it', async () => {
    const p = await embeddingsPaywall();
    const set = await t.gql(p.apiKey, `mutation { updatePaywall(input: {dailyRequestLimit: 1}) { id } }`);
    expect(set.errors).toBeUndefined();
    await deposit(t, p, 'e-lim', '1');
    await client(t, p, 'e-lim').embeddings.create({ model: EMBED, input: INPUT });

    const r = await t.rest('POST', '/v1/embeddings', {
      token: p.apiKey,
      body: { model: EMBED, input: INPUT, user: 'e-lim' },
    });
    expect(r.status).toBe(429);
    expect(r.headers.get('x-should-retry')).toBe('false');
    expect(r.body.error).toMatchObject({
      type: 'rate_limit_error',
      param: null,
      code: 'daily_limit_exceeded',
    });
    expect(r.body.error.message).toContain('1 requests per day');
    expect(r.body.paywall).toEqual({
      reason: 'rate_limited',
      url: null,
      resetsAt: expect.stringMatching(/T00:00:00\.000Z$/),
    });

    // With the SDK's default retries (2), the refusal is still asked for once: x-should-retry: false.
    const before = await blockedCount(p);
    const retrying = new OpenAI({
      apiKey: p.apiKey,
      baseURL: `${t.url}/v1`,
      defaultHeaders: { 'X-Paywall-User': 'e-lim' },
      maxRetries: 2,
    });
    const err = await retrying.embeddings.create({ model: EMBED, input: INPUT }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'daily_limit_exceeded' });
    expect(await blockedCount(p)).toBe(before + 1);

    expect(fake.embeddingsRequests).toHaveLength(1);
    expect(await chargesOf(t, p, 'e-lim')).toHaveLength(1);
    expect((await money(t, p, 'e-lim')).balance).toBe(1_000_000n - COST_8);
    const limited = await eventsOf(t, p, 'paywall.usage.rate.limited');
    expect(limited).toHaveLength(2);
    expect(limited[0].data).toMatchObject({ limit: 'dailyRequestLimit', value: '1', model: EMBED });
  });
});

describe('refusals and failures charge nothing', () => {
  it('bad input is a 400 in the OpenAI error shape naming the field; nothing is forwarded or charged', async () => {
    await deposit(t, pw, 'e-bad', '1');
    const cases: [Record<string, unknown>, string, string][] = [
      [{ input: INPUT }, 'model', 'missing_required_parameter'],
      [{ model: EMBED }, 'input', 'missing_required_parameter'],
      [{ model: EMBED, input: '' }, 'input', 'invalid_value'],
      [{ model: EMBED, input: [] }, 'input', 'empty_array'],
      [{ model: EMBED, input: ['a', ''] }, 'input[1]', 'invalid_value'],
      [{ model: EMBED, input: ['a', 1] }, 'input[1]', 'invalid_type'],
      [{ model: EMBED, input: [1, -2] }, 'input[1]', 'invalid_type'],
      [{ model: EMBED, input: [[1, 2], []] }, 'input[1]', 'empty_array'],
      [{ model: EMBED, input: [[1, 2.5]] }, 'input[0][1]', 'invalid_type'],
      [{ model: EMBED, input: { text: 'x' } }, 'input', 'invalid_type'],
      [{ model: EMBED, input: [true] }, 'input[0]', 'invalid_type'],
    ];
    for (const [body, param, code] of cases) {
      const r = await embed(body, 'e-bad');
      expect({ body, status: r.status, error: r.body.error }).toEqual({
        body,
        status: 400,
        error: { message: expect.any(String), type: 'invalid_request_error', param, code },
      });
    }
    const unknown = await embed({ model: 'no-such-embedder', input: INPUT }, 'e-bad');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ type: 'not_found_error', code: 'model_not_found' });
    // The SDK gets the same 400.
    const err = await client(t, pw, 'e-bad')
      .embeddings.create({ model: EMBED, input: '' })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toMatchObject({ status: 400, param: 'input' });

    expect(fake.requests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'e-bad')).toHaveLength(0);
    expect((await money(t, pw, 'e-bad')).balance).toBe(1_000_000n);
  });

  it('an answer that is not a list of embeddings is a failed request (502), charged nothing', async () => {
    await deposit(t, pw, 'e-odd', '1');
    fake.next({ answer: { object: 'list', model: EMBED, usage: { prompt_tokens: 8, total_tokens: 8 } } });
    const r = await embed({ model: EMBED, input: INPUT }, 'e-odd');
    expect(r.status).toBe(502);
    expect(r.body.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    const [charge] = await chargesOf(t, pw, 'e-odd');
    expect(charge).toMatchObject({
      status: 'released',
      amount: '0',
      error_code: 'upstream_invalid_response',
    });
    const failed = (await eventsOf(t, pw, 'paywall.proxy.request.failed')).filter(
      (e) => e.data.requestId === charge.id,
    );
    expect(failed.map((e) => e.data.errorCode)).toEqual(['upstream_invalid_response']);

    // An empty list embedded nothing: relayed as it is, charged nothing.
    fake.next({
      answer: { object: 'list', data: [], model: EMBED, usage: { prompt_tokens: 0, total_tokens: 0 } },
    });
    const empty = await embed({ model: EMBED, input: INPUT }, 'e-odd');
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({
      object: 'list',
      data: [],
      model: EMBED,
      usage: { prompt_tokens: 0, total_tokens: 0, cost: '0', cost_details: details(0, false) },
    });
    expect(empty.headers.get('x-paywall-cost')).toBeNull();

    // A provider 4xx is passed through, charged nothing.
    fake.next({
      status: 400,
      errorBody: {
        error: {
          message: "This model's maximum context length is 8192 tokens",
          type: 'invalid_request_error',
          param: null,
          code: null,
        },
      },
    });
    const refused = await embed({ model: EMBED, input: INPUT }, 'e-odd');
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain('maximum context length');

    expect(fake.embeddingsRequests).toHaveLength(3);
    expect(await money(t, pw, 'e-odd')).toEqual({ balance: 1_000_000n, held: 0n, ledgerSum: 1_000_000n });
    await expectLedgerProven(t.db);
  });
});
