import { spawn } from 'node:child_process';
import { join } from 'node:path';
import OpenAI from 'openai';
import { loadConfig } from '../src/config.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  FEES_ACCOUNT_ID,
  PROVIDER_ACCOUNT_ID,
  uncollectedByPaywall,
} from '../src/modules/accounts/accounts.js';
import { fundWallet } from './helpers/wallet-fixtures.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { connectShared, money, type ProxyPaywall } from './helpers/proxy-setup.js';

/** docs/reference.md §8 "Built-in provider": the operator's models served to SHARED paywalls with no provider. */

const BUILTIN_KEY = 'sk-builtin-operator-key-0001';
const OWN_KEY = 'sk-own-provider-key-00000001';
const BUILTIN_MODELS = [
  {
    id: 'builtin-large',
    prompt: '0.000002',
    completion: '0.000008',
    request: '0.0001',
    maxCompletionTokens: 500,
  },
  { id: 'builtin-small', prompt: '0.0000001', completion: '0.0000004', displayName: 'Small' },
];

let t: TestApp;
let fake: FakeUpstream;
let own: FakeUpstream;
beforeAll(async () => {
  fake = await FakeUpstream.start();
  own = await FakeUpstream.start();
  t = await startTestApp({
    BUILTIN_PROVIDER_BASE_URL: fake.baseUrl,
    BUILTIN_PROVIDER_API_KEY: BUILTIN_KEY,
    BUILTIN_MODELS: JSON.stringify(BUILTIN_MODELS),
    PLATFORM_FEE_BPS: '1000',
  });
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
  await own?.close();
});
beforeEach(() => {
  fake.reset();
  own.reset();
});

const gqlOk = async (token: string, query: string, variables?: Record<string, unknown>) => {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
};
const setMarkup = (pw: ProxyPaywall, markup: string) =>
  t.gql(pw.apiKey, `mutation($m: String) { updatePaywall(input: {markup: $m}) { markup } }`, { m: markup });
const setPrice = (pw: ProxyPaywall, input: Record<string, unknown>) =>
  gqlOk(
    pw.apiKey,
    `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id builtinProvider } }`,
    {
      i: input,
    },
  );
const connectOwn = (pw: ProxyPaywall) =>
  gqlOk(pw.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl: own.baseUrl, apiKey: OWN_KEY },
  });
const disconnectOwn = (pw: ProxyPaywall) => gqlOk(pw.apiKey, `mutation { disconnectProvider { id } }`);
const listIds = async (pw: ProxyPaywall) =>
  ((await t.rest('GET', '/v1/models', { token: pw.apiKey })).body.data as { id: string }[]).map((m) => m.id);
const paywallView = async (pw: ProxyPaywall) =>
  (await gqlOk(pw.apiKey, `{ paywall { mode markup builtinProvider provider { baseUrl } } }`)).paywall;
/** The paywall as the request path sees it (mode and markup from the API key). */
const info = async (pw: ProxyPaywall) => (await t.app.services.paywalls.authenticateKey(pw.apiKey))!;
const hi = [{ role: 'user' as const, content: 'Hello' }];
const chat = (pw: ProxyPaywall, user: string, model: string) =>
  t.rest('POST', '/v1/chat/completions', {
    token: pw.apiKey,
    headers: { 'X-Paywall-User': user },
    body: { model, messages: hi },
  });

/**
 * A connected SHARED user with `raw` units to spend. Today the spendable balance is the end user's row;
 * when the shared wallet lands, this becomes "connect through the hosted pages and add test funds".
 */
/** Connects the user to a new wallet funded with `raw` (a wallet user, its account, a deposit from world). */
async function fundSharedUser(pw: ProxyPaywall, user: string, raw: bigint) {
  await chat(pw, user, 'builtin-small'); // creates the user (answered with the connect link)
  return connectShared(t, pw, user, raw);
}

const balanceOf = async (accountId: string) =>
  BigInt(
    (await t.db.query(`select balance_raw::text as b from ledger_account where id = $1`, [accountId]))[0].b,
  );

describe('built-in provider: catalogue', () => {
  it('a SHARED paywall created a second ago lists the built-in models at cost x markup (request as is)', async () => {
    const pw = await t.createPaywall('SHARED', 'Shared app');
    const list = await t.rest('GET', '/v1/models', { token: pw.apiKey });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      object: 'list',
      data: [
        {
          id: 'builtin-large',
          object: 'model',
          created: expect.any(Number),
          owned_by: 'Shared app',
          name: 'builtin-large',
          display_name: 'builtin-large',
          description: '',
          pricing: {
            prompt: '0.000002',
            completion: '0.000008',
            request: '0.0001',
            input_cache_read: '0.000002',
            input_cache_write: '0.000002',
            internal_reasoning: '0.000008',
            audio_prompt: '0.000002',
            audio_completion: '0.000008',
            image_prompt: '0.000002',
            image_completion: '0.000008',
            image: [],
            audio_second: null,
            characters_1k: null,
          },
        },
        {
          id: 'builtin-small',
          object: 'model',
          created: expect.any(Number),
          owned_by: 'Shared app',
          name: 'Small',
          display_name: 'Small',
          description: '',
          pricing: {
            prompt: '0.0000001',
            completion: '0.0000004',
            request: '0',
            input_cache_read: '0.0000001',
            input_cache_write: '0.0000001',
            internal_reasoning: '0.0000004',
            audio_prompt: '0.0000001',
            audio_completion: '0.0000004',
            image_prompt: '0.0000001',
            image_completion: '0.0000004',
            image: [],
            audio_second: null,
            characters_1k: null,
          },
        },
      ],
    });
    expect(Math.abs(list.body.data[0].created - Date.now() / 1000)).toBeLessThan(60);
    expect(await paywallView(pw)).toEqual({
      mode: 'SHARED',
      markup: '1',
      builtinProvider: true,
      provider: null,
    });

    expect((await setMarkup(pw, '1.5')).errors).toBeUndefined();
    const one = await t.rest('GET', '/v1/models/builtin-large', { token: pw.apiKey });
    expect(one.status).toBe(200);
    expect(one.body.pricing).toEqual({
      prompt: '0.000003',
      completion: '0.000012',
      request: '0.0001',
      input_cache_read: '0.000003',
      input_cache_write: '0.000003',
      internal_reasoning: '0.000012',
      audio_prompt: '0.000003',
      audio_completion: '0.000012',
      image_prompt: '0.000003',
      image_completion: '0.000012',
      image: [],
      audio_second: null,
      characters_1k: null,
    });
    const sdk = new OpenAI({ apiKey: pw.apiKey, baseURL: `${t.url}/v1`, maxRetries: 0 });
    expect((await sdk.models.retrieve('builtin-small')).id).toBe('builtin-small');

    const gql = await gqlOk(
      t.ownerToken,
      `query($pw: ID) {
        models(paywallId: $pw) { id builtinProvider maxCompletionTokens pricing { prompt completion request }
                                 costPricing { prompt completion request } }
        model(paywallId: $pw, id: "builtin-small") { id pricing { prompt completion } }
      }`,
      { pw: pw.id },
    );
    expect(gql.models).toEqual([
      {
        id: 'builtin-large',
        builtinProvider: true,
        maxCompletionTokens: 500,
        pricing: { prompt: '0.000003', completion: '0.000012', request: '0.0001' },
        costPricing: { prompt: '0.000002', completion: '0.000008', request: '0.0001' },
      },
      {
        id: 'builtin-small',
        builtinProvider: true,
        maxCompletionTokens: 4096, // none configured, an id the catalogue does not know: the default in force
        pricing: { prompt: '0.00000015', completion: '0.0000006', request: '0' },
        costPricing: { prompt: '0.0000001', completion: '0.0000004', request: '0' },
      },
    ]);
    expect(gql.model).toEqual({
      id: 'builtin-small',
      pricing: { prompt: '0.00000015', completion: '0.0000006' },
    });

    // The request path's price carries the provider's cost, exactly, in pico-USDC.
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-large')).toEqual({
      modelId: 'builtin-large',
      promptPico: 2_000_000n,
      completionPico: 8_000_000n,
      cacheReadPico: null,
      cacheWritePico: null,
      audioPromptPico: null,
      reasoningPico: null,
      audioCompletionPico: null,
      requestPico: 100_000_000n,
      maxCompletionTokens: 500,
      reasoningModel: null,
      dailyRequestLimit: null,
      providerCost: {
        promptPico: 2_000_000n,
        completionPico: 8_000_000n,
        requestPico: 100_000_000n,
        cacheReadPico: null,
        cacheWritePico: null,
        audioPromptPico: null,
        reasoningPico: null,
        audioCompletionPico: null,
      },
      provider: null,
      upstreamModel: null,
      fallbacks: [],
      displayName: null,
      description: null,
      createdAt: null,
      updatedAt: null,
    });
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'gpt-4o')).toBeNull();
  });

  it("the paywall's own price wins for a built-in model; its other rows are neither listed nor served", async () => {
    const pw = await t.createPaywall('SHARED');
    expect(
      await setPrice(pw, {
        modelId: 'builtin-small',
        prompt: '0.000001',
        completion: '0.000002',
        request: '0.01',
      }),
    ).toEqual({ setModelPricing: { id: 'builtin-small', builtinProvider: true } });
    expect(await setPrice(pw, { modelId: 'my-own-model', prompt: '0.000001' })).toEqual({
      setModelPricing: { id: 'my-own-model', builtinProvider: false },
    });
    const list = await t.rest('GET', '/v1/models', { token: pw.apiKey });
    expect(list.body.data.map((m: any) => [m.id, m.pricing])).toEqual([
      [
        'builtin-large',
        {
          prompt: '0.000002',
          completion: '0.000008',
          request: '0.0001',
          input_cache_read: '0.000002',
          input_cache_write: '0.000002',
          internal_reasoning: '0.000008',
          audio_prompt: '0.000002',
          audio_completion: '0.000008',
          image_prompt: '0.000002',
          image_completion: '0.000008',
          image: [],
          audio_second: null,
          characters_1k: null,
        },
      ],
      [
        'builtin-small',
        {
          prompt: '0.000001',
          completion: '0.000002',
          request: '0.01',
          input_cache_read: '0.000001',
          input_cache_write: '0.000001',
          internal_reasoning: '0.000002',
          audio_prompt: '0.000001',
          audio_completion: '0.000002',
          image_prompt: '0.000001',
          image_completion: '0.000002',
          image: [],
          audio_second: null,
          characters_1k: null,
        },
      ],
    ]);
    const price = await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-small');
    expect(price).toMatchObject({
      promptPico: 1_000_000n,
      completionPico: 2_000_000n,
      requestPico: 10_000_000_000n,
      providerCost: { promptPico: 100_000n, completionPico: 400_000n, requestPico: 0n },
    });
    // A model the built-in provider does not have cannot be served by it.
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'my-own-model')).toBeNull();
    const missing = await t.rest('GET', '/v1/models/my-own-model', { token: pw.apiKey });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('model_not_found');
    const refused = await chat(pw, 'ann', 'my-own-model');
    expect(refused.status).toBe(404);
    expect(refused.body.error).toMatchObject({ code: 'model_not_found', param: 'model' });

    // Removing its own price brings back the built-in one.
    await gqlOk(pw.apiKey, `mutation { removeModelPricing(modelId: "builtin-small") }`);
    expect((await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-small'))!.promptPico).toBe(
      100_000n,
    );
  });

  it('DEFAULT paywalls never get the built-in models', async () => {
    const pw = await t.createPaywall('DEFAULT');
    expect(await listIds(pw)).toEqual([]);
    expect((await paywallView(pw)).builtinProvider).toBe(false);
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-large')).toBeNull();
    expect(await t.app.services.providers.getUpstream(await info(pw))).toBeNull();
    const r = await chat(pw, 'bob', 'builtin-large');
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('model_not_found');
    // A DEFAULT paywall's own price for a built-in id is its own business: no provider cost.
    await setPrice(pw, { modelId: 'builtin-large', prompt: '0.000001' });
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-large')).toMatchObject({
      promptPico: 1_000_000n,
      providerCost: null,
    });
    expect((await setMarkup(pw, '0.5')).errors).toBeUndefined();
  });

  it('connectProvider takes precedence: built-in models hidden, its own rows served; disconnect brings them back', async () => {
    const pw = await t.createPaywall('SHARED');
    await setPrice(pw, { modelId: 'my-own-model', prompt: '0.000001' });
    // Served by the built-in provider now: its own price for a built-in model is at least the cost.
    await setPrice(pw, { modelId: 'builtin-small', prompt: '0.000003', completion: '0.000001' });
    expect(await listIds(pw)).toEqual(['builtin-large', 'builtin-small']);

    await connectOwn(pw);
    expect(await listIds(pw)).toEqual(['builtin-small', 'my-own-model']);
    expect(await paywallView(pw)).toMatchObject({
      builtinProvider: false,
      provider: { baseUrl: own.baseUrl },
    });
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-large')).toBeNull();
    expect(await t.app.services.modelPrices.getPrice(await info(pw), 'builtin-small')).toMatchObject({
      promptPico: 3_000_000n,
      providerCost: null,
    });
    const up = await t.app.services.providers.getUpstream(await info(pw));
    expect(up).toMatchObject({ baseUrl: own.baseUrl, apiKey: OWN_KEY });
    const models = await gqlOk(pw.apiKey, `{ models { id builtinProvider } }`);
    expect(models.models).toEqual([
      { id: 'builtin-small', builtinProvider: false },
      { id: 'my-own-model', builtinProvider: false },
    ]);

    await disconnectOwn(pw);
    expect(await listIds(pw)).toEqual(['builtin-large', 'builtin-small']);
    expect((await paywallView(pw)).builtinProvider).toBe(true);
  });

  it('lists the built-in provider among the providers of a SHARED paywall, named `builtin`, without its key or URL', async () => {
    const pw = await t.createPaywall('SHARED');
    await connectOwn(pw);
    const data = await gqlOk(
      pw.apiKey,
      `{ paywall { providers { name kind builtin baseUrl apiKeyLastFour } } }`,
    );
    expect(data.paywall.providers).toEqual([
      {
        name: 'default',
        kind: 'OPENAI',
        builtin: false,
        baseUrl: own.baseUrl,
        apiKeyLastFour: OWN_KEY.slice(-4),
      },
      // The operator's URL is the operator's (it may name a host of its private network): not shown.
      { name: 'builtin', kind: 'OPENAI', builtin: true, baseUrl: '', apiKeyLastFour: '' },
    ]);
    // A DEFAULT paywall has no built-in provider.
    const plain = await t.createPaywall('DEFAULT');
    expect((await gqlOk(plain.apiKey, `{ paywall { providers { name } } }`)).paywall.providers).toEqual([]);
    // `builtin` is reserved: a paywall cannot connect a provider of its own under that name.
    const r = await t.gql(
      pw.apiKey,
      `mutation { connectProvider(input: {name: "builtin", baseUrl: "${own.baseUrl}", apiKey: "sk-0123456789abcd"}) { id } }`,
    );
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'name' });
  });
});

describe('built-in provider: forwarding', () => {
  it('gives a SHARED paywall without a provider the built-in upstream (operator URL and key)', async () => {
    const pw = await t.createPaywall('SHARED');
    const up = await t.app.services.providers.getUpstream(await info(pw));
    expect(up).toMatchObject({ baseUrl: fake.baseUrl, apiKey: BUILTIN_KEY });
    // One pool for all paywalls.
    const other = await t.createPaywall('SHARED');
    expect(await t.app.services.providers.getUpstream(await info(other))).toBe(up);
  });

  it('an unconnected user of a built-in model gets the connect link (model found, provider present)', async () => {
    const pw = await t.createPaywall('SHARED');
    const r = await chat(pw, 'kim', 'builtin-large');
    expect(r.status).toBe(200);
    expect(r.body.paywall.reason).toBe('not_connected');
    expect(r.body.choices[0].message.content).toContain('/connect/');
    expect(fake.chatRequests).toHaveLength(0);
    const unknown = await chat(pw, 'kim', 'not-a-builtin-model');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('model_not_found');
  });

  it('forwards a paid chat to the built-in provider with its key as bearer, charged at cost x markup', async () => {
    const pw = await t.createPaywall('SHARED');
    expect((await setMarkup(pw, '2')).errors).toBeUndefined();
    const wallet = await fundSharedUser(pw, 'lee', 1_000_000n);
    const providerBefore = await balanceOf(PROVIDER_ACCOUNT_ID);
    const feesBefore = await balanceOf(FEES_ACCOUNT_ID);
    fake.behavior = { usage: { prompt_tokens: 10, completion_tokens: 20 } };
    const r = await chat(pw, 'lee', 'builtin-large');
    expect(r.status).toBe(200);
    expect(r.body.choices[0].message.content).toBe('Hello from the fake upstream!');
    expect(fake.chatRequests).toHaveLength(1);
    const sent = fake.chatRequests[0];
    expect(sent.headers.authorization).toBe(`Bearer ${BUILTIN_KEY}`);
    expect(JSON.stringify(sent.headers)).not.toContain(pw.apiKey);
    // No BUILTIN_PROVIDER_CAP_PARAMETER: the cap goes in max_completion_tokens (docs/reference.md §13).
    expect(sent.body).toMatchObject({ model: 'builtin-large', max_completion_tokens: 500 });
    expect(sent.body.max_tokens).toBeUndefined();
    expect(sent.body.user).toBeUndefined();
    expect(own.chatRequests).toHaveLength(0);
    // request 100 + 2 x (10 x 2 + 20 x 8) = 100 + 360 = 460 raw units.
    expect(r.body.usage.cost).toBe('0.00046');
    expect((await money(t, pw, 'lee')).balance).toBe(1_000_000n - 460n);
    // The split (docs/reference.md §8 "Fee base"): the provider's cost 100 + 10 x 2 + 20 x 8 = 280 to the platform's
    // provider account; of the 180 left, the fee floor(180 x 1000 / 10000) = 18; the paywall earns 162.
    expect(await balanceOf(wallet.accountId)).toBe(1_000_000n - 460n);
    expect((await balanceOf(PROVIDER_ACCOUNT_ID)) - providerBefore).toBe(280n);
    expect((await balanceOf(FEES_ACCOUNT_ID)) - feesBefore).toBe(18n);
    const e = await t.gql(pw.apiKey, `{ paywall { earnings { available fees } } }`);
    expect(e.data.paywall.earnings).toEqual({ available: '0.000162', fees: '0.000018' });
    await expectLedgerProven(t.db);
  });
});

describe("built-in provider: what a hold cannot cover is never the operator's loss", () => {
  // A real 1x1 PNG: a provider bills an image by its detail and pixels, not its bytes.
  const PNG =
    'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

  it('refuses forty image parts from a 0.03 USDC wallet before the built-in provider bills them', async () => {
    const pw = await t.createPaywall('SHARED');
    const wallet = await fundSharedUser(pw, 'probe', 30_000n);
    const providerBefore = await balanceOf(PROVIDER_ACCOUNT_ID);
    // What the probe's provider billed: 60,020 prompt tokens for the forty parts.
    fake.behavior = { usage: { prompt_tokens: 60_020, completion_tokens: 7 } };
    const content = [
      { type: 'text', text: 'Describe these.' },
      ...Array.from({ length: 40 }, () => ({ type: 'image_url', image_url: { url: PNG } })),
    ];
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': 'probe' },
      body: { model: 'builtin-large', messages: [{ role: 'user', content }] },
    });
    expect(r.status).toBe(200);
    expect(r.body.paywall.reason).toBe('insufficient_balance');
    expect(fake.chatRequests).toHaveLength(0);
    expect(await balanceOf(wallet.accountId)).toBe(30_000n);
    expect(await balanceOf(PROVIDER_ACCOUNT_ID)).toBe(providerBefore);
    expect((await uncollectedByPaywall(t.db)).filter((u) => u.paywallId === pw.id)).toEqual([]);
    await expectLedgerProven(t.db);
  });

  it('a wallet that cannot pay what was billed owes the rest: refused, then its next funds repay the provider first', async () => {
    const pw = await t.createPaywall('SHARED');
    expect((await setMarkup(pw, '2')).errors).toBeUndefined();
    const wallet = await fundSharedUser(pw, 'owes', 1_000n);
    const providerBefore = await balanceOf(PROVIDER_ACCOUNT_ID);
    const feesBefore = await balanceOf(FEES_ACCOUNT_ID);
    // The provider bills more input than the estimate (within what the request's bytes can make):
    // 1,000 + 10 tokens cost 100 + 2 x (1,000 x 2 + 10 x 8) = 4,260 raw units, of which the provider's
    // own cost is 100 + 1,000 x 2 + 10 x 8 = 2,180.
    fake.behavior = { usage: { prompt_tokens: 1000, completion_tokens: 10 } };
    expect((await chat(pw, 'owes', 'builtin-large')).status).toBe(200);
    const [first] = await t.db.query(
      `select id, amount_raw::text as amount, uncollected_raw::text as uncollected, hold_raw::text as hold
         from charge where paywall_id = $1 and kind = 'usage' and status <> 'released'`,
      [pw.id],
    );
    // The hold and the rest of the wallet: all 1,000; the provider's share first, so all of it.
    expect(BigInt(first.hold)).toBeLessThan(1_000n);
    expect(first).toMatchObject({ amount: '1000', uncollected: '3260' });
    expect(await balanceOf(wallet.accountId)).toBe(0n);
    expect((await balanceOf(PROVIDER_ACCOUNT_ID)) - providerBefore).toBe(1_000n);

    // Owing, the wallet is refused (even once funded, until the debt is repaid).
    fake.reset();
    fake.behavior = { usage: { prompt_tokens: 10, completion_tokens: 20 } };
    const refused = await chat(pw, 'owes', 'builtin-large');
    expect(refused.body.paywall.reason).toBe('insufficient_balance');
    expect(fake.chatRequests).toHaveLength(0);

    await fundWallet(t.db, wallet.accountId, 1_000_000n);
    const served = await chat(pw, 'owes', 'builtin-large');
    expect(served.body.paywall).toBeUndefined();
    expect(served.body.usage.cost).toBe('0.00046');
    // Repaid 3,260: the provider's unpaid 1,180 first, then the fee floor(2,080 x 10 %) = 208, the paywall
    // 1,872. Then the new chat: 460 (provider 280, fee 18, paywall 162).
    expect(await balanceOf(wallet.accountId)).toBe(1_000_000n - 3_260n - 460n);
    expect((await balanceOf(PROVIDER_ACCOUNT_ID)) - providerBefore).toBe(1_000n + 1_180n + 280n);
    expect((await balanceOf(FEES_ACCOUNT_ID)) - feesBefore).toBe(208n + 18n);
    const e = await t.gql(pw.apiKey, `{ paywall { earnings { available } } }`);
    expect(e.data.paywall.earnings.available).toBe('0.002034');
    expect((await uncollectedByPaywall(t.db)).filter((u) => u.paywallId === pw.id)).toEqual([
      { paywallId: pw.id, uncollected: '3260', recovered: '3260', outstanding: '0' },
    ]);
    await expectLedgerProven(t.db);
  });
});

describe('built-in provider: markup', () => {
  it('refuses a markup below 1 while the built-in provider serves a SHARED paywall', async () => {
    const pw = await t.createPaywall('SHARED');
    const bad = await setMarkup(pw, '0.99');
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'markup' });
    expect(bad.errors?.[0].message).toMatch(/at least 1.*built-in provider/);
    const rest = await t.rest('POST', '/graphql', {
      token: pw.apiKey,
      body: { query: `{ paywall { markup } }` },
    });
    expect(rest.body.data.paywall.markup).toBe('1');
    expect((await setMarkup(pw, '1')).errors).toBeUndefined();
    expect((await setMarkup(pw, '1.25')).errors).toBeUndefined();

    // With its own provider the owner may sell below its cost; after disconnecting, the built-in
    // provider does not serve it until the markup is back at 1 or more.
    await connectOwn(pw);
    expect((await setMarkup(pw, '0.5')).errors).toBeUndefined();
    await disconnectOwn(pw);
    expect((await paywallView(pw)).builtinProvider).toBe(false);
    expect(await listIds(pw)).toEqual([]);
    expect(await t.app.services.providers.getUpstream(await info(pw))).toBeNull();
    expect((await setMarkup(pw, '0.75')).errors?.[0].extensions).toMatchObject({ param: 'markup' });
    expect((await setMarkup(pw, '1')).errors).toBeUndefined();
    expect((await paywallView(pw)).builtinProvider).toBe(true);
    expect(await listIds(pw)).toEqual(['builtin-large', 'builtin-small']);
  });
});

describe('built-in provider: configuration', () => {
  const env = (models: string) => ({
    BUILTIN_PROVIDER_BASE_URL: 'https://models.example.com/v1/',
    BUILTIN_PROVIDER_API_KEY: 'sk-operator',
    BUILTIN_MODELS: models,
  });

  it('parses prices exactly into pico-USDC and drops the trailing slash', () => {
    const c = loadConfig(env(JSON.stringify(BUILTIN_MODELS)));
    expect(c.BUILTIN_PROVIDER).toEqual({
      baseUrl: 'https://models.example.com/v1',
      apiKey: 'sk-operator',
      capParameter: 'MAX_COMPLETION_TOKENS',
      models: [
        {
          id: 'builtin-large',
          displayName: null,
          description: null,
          promptPico: 2_000_000n,
          completionPico: 8_000_000n,
          requestPico: 100_000_000n,
          cacheReadPico: null,
          cacheWritePico: null,
          audioPromptPico: null,
          reasoningPico: null,
          audioCompletionPico: null,
          maxCompletionTokens: 500,
        },
        {
          id: 'builtin-small',
          displayName: 'Small',
          description: null,
          promptPico: 100_000n,
          completionPico: 400_000n,
          requestPico: 0n,
          cacheReadPico: null,
          cacheWritePico: null,
          audioPromptPico: null,
          reasoningPico: null,
          audioCompletionPico: null,
          maxCompletionTokens: null,
        },
      ],
    });
    expect(loadConfig({}).BUILTIN_PROVIDER).toBeNull();
    expect(loadConfig({ BUILTIN_MODELS: '', BUILTIN_PROVIDER_BASE_URL: '' }).BUILTIN_PROVIDER).toBeNull();
  });

  it('BUILTIN_PROVIDER_CAP_PARAMETER: MAX_TOKENS or MAX_COMPLETION_TOKENS, nothing else, never alone', () => {
    const models = JSON.stringify(BUILTIN_MODELS);
    expect(
      loadConfig({ ...env(models), BUILTIN_PROVIDER_CAP_PARAMETER: 'MAX_TOKENS' }).BUILTIN_PROVIDER
        ?.capParameter,
    ).toBe('MAX_TOKENS');
    expect(
      loadConfig({ ...env(models), BUILTIN_PROVIDER_CAP_PARAMETER: '' }).BUILTIN_PROVIDER?.capParameter,
    ).toBe('MAX_COMPLETION_TOKENS');
    expect(() => loadConfig({ ...env(models), BUILTIN_PROVIDER_CAP_PARAMETER: 'max_tokens' })).toThrow(
      /BUILTIN_PROVIDER_CAP_PARAMETER must be MAX_COMPLETION_TOKENS or MAX_TOKENS/,
    );
    expect(() => loadConfig({ BUILTIN_PROVIDER_CAP_PARAMETER: 'MAX_TOKENS' })).toThrow(
      /BUILTIN_PROVIDER_BASE_URL[\s\S]*BUILTIN_PROVIDER_API_KEY[\s\S]*BUILTIN_MODELS/,
    );
  });

  it.each([
    ['not json', /BUILTIN_MODELS: must be JSON/],
    ['{}', /BUILTIN_MODELS: must be a non-empty JSON array/],
    ['[]', /BUILTIN_MODELS: must be a non-empty JSON array/],
    [
      '[{"id":"m","prompt":0.000002,"completion":"0"}]',
      /BUILTIN_MODELS: \[0\]\.prompt must be a USDC decimal/,
    ],
    ['[{"id":"m","prompt":"1e-6","completion":"0"}]', /BUILTIN_MODELS: \[0\]\.prompt/],
    ['[{"id":"m","prompt":"0.0000000000001","completion":"0"}]', /BUILTIN_MODELS: \[0\]\.prompt/],
    ['[{"id":"m","prompt":"-1","completion":"0"}]', /BUILTIN_MODELS: \[0\]\.prompt/],
    ['[{"id":"m","prompt":"1"}]', /BUILTIN_MODELS: \[0\]\.completion/],
    ['[{"id":"m","prompt":"1","completion":"1","request":"x"}]', /BUILTIN_MODELS: \[0\]\.request/],
    ['[{"prompt":"1","completion":"1"}]', /BUILTIN_MODELS: \[0\]\.id/],
    ['[{"id":"a b","prompt":"1","completion":"1"}]', /BUILTIN_MODELS: \[0\]\.id/],
    [
      '[{"id":"m","prompt":"1","completion":"1"},{"id":"m","prompt":"1","completion":"1"}]',
      /\[1\]\.id "m" is listed twice/,
    ],
    ['[{"id":"m","prompt":"1","completion":"1","maxCompletionTokens":8}]', /\[0\]\.maxCompletionTokens/],
    ['[{"id":"m","prompt":"1","completion":"1","promt":"1"}]', /\[0\] has unknown field\(s\): promt/],
  ])('refuses BUILTIN_MODELS=%s with a message naming the variable', (models, message) => {
    expect(() => loadConfig(env(models))).toThrow(message);
  });

  it('refuses half a configuration and bad URLs or keys, naming each variable', () => {
    expect(() => loadConfig({ BUILTIN_PROVIDER_BASE_URL: 'https://m.example.com/v1' })).toThrow(
      /BUILTIN_PROVIDER_API_KEY[\s\S]*BUILTIN_MODELS/,
    );
    expect(() => loadConfig({ BUILTIN_MODELS: JSON.stringify(BUILTIN_MODELS) })).toThrow(
      /BUILTIN_PROVIDER_BASE_URL/,
    );
    expect(() =>
      loadConfig({ ...env(JSON.stringify(BUILTIN_MODELS)), BUILTIN_PROVIDER_BASE_URL: 'ftp://x' }),
    ).toThrow(/BUILTIN_PROVIDER_BASE_URL: .*http\(s\)/);
    expect(() =>
      loadConfig({ ...env(JSON.stringify(BUILTIN_MODELS)), BUILTIN_PROVIDER_BASE_URL: 'https://u:p@x/v1' }),
    ).toThrow(/BUILTIN_PROVIDER_BASE_URL/);
    let message = '';
    try {
      loadConfig({ ...env(JSON.stringify(BUILTIN_MODELS)), BUILTIN_PROVIDER_API_KEY: 'has space secret' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/BUILTIN_PROVIDER_API_KEY/);
    expect(message).not.toContain('secret');
  });

  it('the service refuses to start with a bad BUILTIN_MODELS, saying why', async () => {
    const main = join(process.cwd(), 'dist', 'src', 'main.js');
    const proc = spawn(process.execPath, [main], {
      env: {
        PATH: process.env.PATH,
        LOG_LEVEL: 'silent',
        PORT: '0',
        ...env('[{"id":"m","prompt":"0.1"}]'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    proc.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
    expect(code).not.toBe(0);
    expect(err).toMatch(/Invalid configuration:[\s\S]*BUILTIN_MODELS: \[0\]\.completion/);
  });
});
