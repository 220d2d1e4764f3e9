import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, eventually, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { sweepAbandonedHolds } from '../src/modules/ledger/abandoned-holds.js';
import { connectEndUser, createWallet, fundWallet } from './helpers/wallet-fixtures.js';
import { FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID, proveLedger } from '../src/modules/accounts/accounts.js';
import { usdcDecimal } from '../src/shared/money.js';

/**
 * Trust between strangers (issue 30, findings 1 and 2; docs/reference.md §5.7 and §8): the operator, the
 * app developers and the wallet owners do not trust each other. A hostile app and an honest one side by
 * side on one wallet: the hostile one cannot ride the operator's built-in provider, cannot charge for
 * usage its request could not produce, cannot put the wallet in debt with its own provider, and is
 * repaid nothing after it was disconnected; the honest one is charged exactly and never blocked.
 */

const BUILTIN_MODELS = [
  {
    id: 'builtin-large',
    prompt: '0.000002',
    completion: '0.000008',
    request: '0.0001',
    maxCompletionTokens: 500,
  },
  { id: 'builtin-small', prompt: '0.0000001', completion: '0.0000004' },
];
/** builtin-large at its cost prices (a paywall may sell it at these or above). */
const LARGE_AT_COST = { prompt: '0.000002', completion: '0.000008', request: '0.0001' };

let t: TestApp;
/** The operator's built-in provider. */
let op: FakeUpstream;
/** The hostile app's own provider. */
let evil: FakeUpstream;
/** The honest app's own provider. */
let good: FakeUpstream;

beforeAll(async () => {
  op = await FakeUpstream.start();
  evil = await FakeUpstream.start();
  good = await FakeUpstream.start();
  t = await startTestApp({
    BUILTIN_PROVIDER_BASE_URL: op.baseUrl,
    BUILTIN_PROVIDER_API_KEY: 'sk-builtin-operator-key-0001',
    BUILTIN_MODELS: JSON.stringify(BUILTIN_MODELS),
    PLATFORM_FEE_BPS: '1000',
  });
});
afterAll(async () => {
  await t?.close();
  await Promise.all([op?.close(), evil?.close(), good?.close()]);
});
beforeEach(() => {
  op.reset();
  evil.reset();
  good.reset();
});

const gql = (pw: ProxyPaywall, query: string, variables?: Record<string, unknown>) =>
  t.gql(pw.apiKey, query, variables);
const setPrice = (pw: ProxyPaywall, input: Record<string, unknown>) =>
  gql(pw, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id provider } }`, { i: input });
const connectProvider = (pw: ProxyPaywall, up: FakeUpstream) =>
  gql(pw, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl: up.baseUrl, apiKey: 'sk-app-own-provider-0001' },
  });
const setMarkup = (pw: ProxyPaywall, markup: string) =>
  gql(pw, `mutation($m: String) { updatePaywall(input: {markup: $m}) { markup } }`, { m: markup });
const chat = (pw: ProxyPaywall, user: string, model: string, content = 'hello') =>
  t.rest('POST', '/v1/chat/completions', {
    token: pw.apiKey,
    headers: { 'X-Paywall-User': user },
    body: { model, messages: [{ role: 'user', content }] },
  });

type Wallet = { walletUserId: string; accountId: string };
/** A SHARED end user of `pw` connected to `wallet`; returns its connection id. */
async function connect(pw: ProxyPaywall, user: string, wallet: Wallet): Promise<string> {
  await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey });
  await connectEndUser(t.db, pw.id, user, wallet);
  const [c] = await t.db.query(
    `select w.id from wallet_connection w join end_user e on e.id = w.end_user_id
      where e.paywall_id = $1 and e.external_id = $2 and w.revoked_at is null`,
    [pw.id, user],
  );
  return c.id;
}
const setAllowance = (wallet: Wallet, connectionId: string, amountRaw: bigint, period: 'month' | 'total') =>
  t.app.services.authorizations.setConnectionAllowance(wallet.walletUserId, connectionId, {
    amountRaw,
    period,
  });

async function account(id: string): Promise<{ balance: bigint; debt: bigint }> {
  const [a] = await t.db.query(
    `select balance_raw::text as balance, debt_raw::text as debt from ledger_account where id = $1`,
    [id],
  );
  return { balance: BigInt(a.balance), debt: BigInt(a.debt) };
}
async function earnings(pw: ProxyPaywall): Promise<bigint> {
  const [a] = await t.db.query(
    `select balance_raw::text as b from ledger_account where kind = 'earnings' and paywall_id = $1`,
    [pw.id],
  );
  return BigInt(a.b);
}
async function charges(pw: ProxyPaywall): Promise<any[]> {
  return t.db.query(
    `select id, status, amount_raw::text as amount, hold_raw::text as hold, uncollected_raw::text as uncollected,
            recovered_raw::text as recovered, completion_tokens, max_completion_tokens, error_code, metadata
       from charge where paywall_id = $1 and kind = 'usage' order by created_at`,
    [pw.id],
  );
}
/** The legs of a charge by kind (usage → earnings, fee, provider_cost), raw units. */
async function legs(chargeId: string): Promise<Record<string, bigint>> {
  const rows = await t.db.query(
    `select kind, sum(amount_raw)::text as amount from transfer where charge_id = $1 group by kind`,
    [chargeId],
  );
  return Object.fromEntries(rows.map((r: any) => [r.kind, BigInt(r.amount)]));
}
const eventTypes = async (pw: ProxyPaywall, type: string) =>
  (
    await t.db.query(`select data from event where paywall_id = $1 and type = $2 order by seq`, [pw.id, type])
  ).map((r: any) => r.data);
const clampedMetric = async (): Promise<number> => {
  const r = await t.rest('GET', '/metrics');
  const m = /^provider_usage_clamped_total (\d+)$/m.exec(String(r.body));
  return m ? Number(m[1]) : 0;
};

describe("finding 1: nobody rides the operator's built-in provider", () => {
  it('refuses another model, another upstream model or a price below cost through `builtin`; an honest route pays the cost leg in full', async () => {
    const hostile = await t.createPaywall('SHARED', 'Hostile app');
    expect((await connectProvider(hostile, evil)).errors).toBeUndefined();
    const refusals: [Record<string, unknown>, string, string][] = [
      // Another model on the operator's key, free.
      [
        { modelId: 'gpt-5-pro', provider: 'builtin', prompt: '0', completion: '0' },
        'provider',
        'invalid_value',
      ],
      [{ modelId: 'gpt-5-pro', prompt: '0.000001', fallbacks: ['builtin'] }, 'fallbacks', 'invalid_value'],
      // A built-in id sent upstream as another model.
      [
        { modelId: 'builtin-large', provider: 'builtin', upstreamModel: 'gpt-5-pro', ...LARGE_AT_COST },
        'upstreamModel',
        'invalid_value',
      ],
      // A built-in model below its cost: price 0, or one bucket a little under.
      [
        { modelId: 'builtin-large', provider: 'builtin', prompt: '0', completion: '0', request: '0' },
        'request',
        'markup_below_cost',
      ],
      [
        { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST, completion: '0.000007' },
        'completion',
        'markup_below_cost',
      ],
      [
        { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST, cacheRead: '0.000001' },
        'cacheRead',
        'markup_below_cost',
      ],
      // The image buckets follow the prompt and completion costs too (an image model such as gpt-image-1
      // among the operator's would otherwise make its images for nothing on the operator's key).
      [
        { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST, imageCompletion: '0' },
        'imageCompletion',
        'markup_below_cost',
      ],
      [
        { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST, imagePrompt: '0.000001' },
        'imagePrompt',
        'markup_below_cost',
      ],
      // Prices per unit have no operator's cost to be checked against (its costs are per token): a
      // speech answer sold per 1,000 characters would pay no provider leg at all.
      [
        { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST, characters1k: '0.000001' },
        'characters1k',
        'invalid_value',
      ],
      [
        { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST, audioSecond: '0.000001' },
        'audioSecond',
        'invalid_value',
      ],
      [
        {
          modelId: 'builtin-large',
          provider: 'builtin',
          ...LARGE_AT_COST,
          imagePrices: [{ size: '*', quality: '*', price: '0.000001' }],
        },
        'imagePrices',
        'invalid_value',
      ],
    ];
    for (const [input, param, errorCode] of refusals) {
      const r = await setPrice(hostile, input);
      expect({ input, ext: r.errors?.[0].extensions }).toEqual({
        input,
        ext: expect.objectContaining({ code: 'BAD_USER_INPUT', param, errorCode }),
      });
    }
    expect(
      (await setPrice(hostile, { modelId: 'gpt-5-pro', provider: 'builtin' })).errors?.[0].message,
    ).toMatch(/only the platform's built-in models/);
    // Nothing was stored.
    expect(
      (await t.db.query(`select model_id from model_price where paywall_id = $1`, [hostile.id])).length,
    ).toBe(0);
    // A markup below 1 makes the cost prices themselves below cost.
    expect((await setMarkup(hostile, '0.9')).errors).toBeUndefined();
    const under = await setPrice(hostile, {
      modelId: 'builtin-large',
      provider: 'builtin',
      ...LARGE_AT_COST,
    });
    expect(under.errors?.[0].extensions).toMatchObject({ param: 'prompt', errorCode: 'markup_below_cost' });

    // A paywall the built-in provider serves cannot sell a built-in model below its cost either.
    const served = await t.createPaywall('SHARED', 'Served app');
    const low = await setPrice(served, { modelId: 'builtin-small', prompt: '0', completion: '0' });
    expect(low.errors?.[0].extensions).toMatchObject({ param: 'prompt', errorCode: 'markup_below_cost' });

    // The honest app: its own provider, and builtin-large through `builtin` at cost x 1.5.
    const honest = await t.createPaywall('SHARED', 'Honest app');
    expect((await connectProvider(honest, good)).errors).toBeUndefined();
    expect((await setMarkup(honest, '1.5')).errors).toBeUndefined();
    const ok = await setPrice(honest, { modelId: 'builtin-large', provider: 'builtin', ...LARGE_AT_COST });
    expect(ok.errors).toBeUndefined();
    expect(ok.data.setModelPricing).toEqual({ id: 'builtin-large', provider: 'builtin' });
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    await connect(honest, 'hana', wallet);
    const providerBefore = (await account(PROVIDER_ACCOUNT_ID)).balance;
    const r = await chat(honest, 'hana', 'builtin-large');
    expect(r.status).toBe(200);
    expect(op.chatRequests.map((q) => q.body.model)).toEqual(['builtin-large']);
    expect(good.chatRequests).toHaveLength(0);
    // 11 + 7 tokens: the charge 100 + 1.5 x (11 x 2 + 7 x 8) = 217 raw units; the provider's cost
    // 100 + 22 + 56 = 178 (before the fix: no provider leg, all 217 to the app); fee floor(39 x 10 %) = 3.
    expect(r.headers.get('x-paywall-cost')).toBe('0.000217');
    const [c] = await charges(honest);
    expect(c).toMatchObject({ status: 'completed', amount: '217', uncollected: '0' });
    expect(c.metadata).toMatchObject({ provider: 'builtin', providerCost: '178' });
    expect(await legs(c.id)).toEqual({ provider_cost: 178n, fee: 3n, usage: 36n });
    expect((await account(PROVIDER_ACCOUNT_ID)).balance - providerBefore).toBe(178n);
    expect(await earnings(honest)).toBe(36n);
    expect(await account(wallet.accountId)).toEqual({ balance: 1_000_000n - 217n, debt: 0n });
    await expectLedgerProven(t.db);
  });

  it('refuses pricing rows written before the rule at request time: nothing held, nothing sent to the operator', async () => {
    const hostile = await t.createPaywall('SHARED', 'Old hostile app');
    expect((await connectProvider(hostile, evil)).errors).toBeUndefined();
    // Rows as an earlier version accepted them (written before the catalogue is first read).
    await t.db.query(
      `insert into model_price (paywall_id, model_id, prompt_pico, completion_pico, request_pico, provider,
                                upstream_model, fallbacks, created_at, updated_at)
       values ($1, 'gpt-5-pro', 0, 0, 0, 'builtin', null, '{}', now(), now()),
              ($1, 'builtin-large', 0, 0, 0, 'builtin', 'gpt-5-pro', '{}', now(), now()),
              ($1, 'builtin-small', 0, 0, 0, 'builtin', null, '{}', now(), now()),
              ($1, $2, 2000000, 5000000, 1000000000, null, null, '{builtin}', now(), now())`,
      [hostile.id, MODEL],
    );
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    await connect(hostile, 'mal', wallet);
    const cases: [string, RegExp][] = [
      ['gpt-5-pro', /only the platform's built-in models/],
      ['builtin-large', /upstreamModel/],
      ['builtin-small', /below the built-in provider's cost/],
    ];
    for (const [model, message] of cases) {
      const r = await chat(hostile, 'mal', model);
      expect({ model, status: r.status, code: r.body.error?.code, param: r.body.error?.param }).toEqual({
        model,
        status: 400,
        code: model === 'builtin-small' ? 'markup_below_cost' : 'invalid_value',
        param: 'model',
      });
      expect(r.body.error.message).toMatch(message);
    }
    // A fallback to `builtin` of another model is dropped: the app's provider fails, nobody else answers.
    evil.behavior = { status: 500 };
    const r = await chat(hostile, 'mal', MODEL);
    expect(r.status).toBe(502);
    expect(evil.chatRequests).toHaveLength(1);
    expect(op.chatRequests).toHaveLength(0);
    const held = await charges(hostile);
    expect(held.map((c) => [c.status, c.amount, c.error_code])).toEqual([
      ['released', '0', 'upstream_error'],
    ]);
    expect(await account(wallet.accountId)).toEqual({ balance: 1_000_000n, debt: 0n });
    await expectLedgerProven(t.db);
  });
});

describe("finding 2: an app never takes past the wallet owner's limit", () => {
  it("clamps impossible usage, never leaves an app's own provider as the wallet's debt, and repays nothing after disconnect", async () => {
    const hostile = await createProxyPaywall(t, evil, { mode: 'SHARED' });
    const honest = await createProxyPaywall(t, good, { mode: 'SHARED' });
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    const hostileConn = await connect(hostile, 'victim', wallet);
    await setAllowance(wallet, hostileConn, 20_000n, 'month');
    await connect(honest, 'victim', wallet);
    const clampedBefore = await clampedMetric();

    // 1. The hostile provider reports 500,000,000 completion tokens. The cap sent was 1,000 (the model's
    // maximum, affordable within the allowance): clamped to it. 5 + 1,000 tokens cost
    // 1000 + 1.5 x (5 x 2 + 1,000 x 5) = 8,515 raw units, within the hold. Before: the allowance's whole
    // 0.02 was captured and 2,499.98 USDC recorded as the wallet's debt.
    evil.next({ rawUsage: { prompt_tokens: 5, completion_tokens: 500_000_000, total_tokens: 500_000_005 } });
    const r1 = await chat(hostile, 'victim', MODEL);
    expect(r1.status).toBe(200);
    // The provider's usage is relayed as it sent it; the cost is what was charged.
    expect(r1.body.usage.cost).toBe('0.008515');
    const [c1] = await charges(hostile);
    expect(c1).toMatchObject({
      status: 'completed',
      amount: '8515',
      uncollected: '0',
      completion_tokens: 1000,
    });
    expect(c1.max_completion_tokens).toBe(1000);
    expect(c1.metadata.overReported).toEqual({ input: 0, output: 499_999_000 });
    expect(c1.metadata.appLoss).toBeUndefined();
    expect(await legs(c1.id)).toEqual({ usage: 8515n - 851n, fee: 851n });
    const [ev1] = await eventTypes(hostile, 'paywall.usage.charge.created');
    expect(ev1).toMatchObject({ cost: '0.008515', completionTokens: 1000 });
    expect(ev1.uncollected).toBeUndefined();
    // Counted as the provider's error in its health, and measured.
    const health = await gql(
      hostile,
      `{ paywall { providers { name health { requests errors lastError } } } }`,
    );
    expect(health.data.paywall.providers.find((p: any) => p.name === 'default')).toEqual({
      name: 'default',
      health: { requests: 1, errors: 1, lastError: 'reported usage beyond what the request could produce' },
    });
    expect((await clampedMetric()) - clampedBefore).toBe(1);

    // 2. Usage the request could produce, but more than its hold: a long prompt billed at 3,600 input
    // tokens (the estimate counted about 460). 1000 + 1.5 x (3,600 x 2 + 7 x 5) = 11,853 raw units. The
    // hold is captured; the rest is the app's loss (before: taken from the wallet up to the allowance,
    // the remainder recorded as the wallet's debt).
    evil.next({ usage: { prompt_tokens: 3600, completion_tokens: 7 } });
    const r2 = await chat(hostile, 'victim', MODEL, 'a'.repeat(3600));
    expect(r2.status).toBe(200);
    const [, c2] = await charges(hostile);
    const hold2 = BigInt(c2.hold);
    expect(hold2).toBeLessThan(11_853n);
    expect(c2).toMatchObject({ status: 'completed', amount: hold2.toString(), uncollected: '0' });
    expect(c2.metadata.appLoss).toBe((11_853n - hold2).toString());
    expect(c2.metadata.overReported).toBeUndefined();
    expect(r2.headers.get('x-paywall-cost')).toBe(usdcDecimal(hold2));
    const spentByHostile = 8515n + hold2;
    expect(await account(wallet.accountId)).toEqual({ balance: 1_000_000n - spentByHostile, debt: 0n });
    const [conn] = await t.db.query(
      `select allowance_spent_raw::text as spent from wallet_connection where id = $1`,
      [hostileConn],
    );
    expect(BigInt(conn.spent)).toBe(spentByHostile);
    const hostileEarnings = await earnings(hostile);
    expect(hostileEarnings).toBe(spentByHostile - 851n - hold2 / 10n);

    // 3. The honest app beside it: charged exactly (11 + 7 tokens: 1,086), never blocked.
    const h1 = await chat(honest, 'victim', MODEL);
    expect(h1.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(await earnings(honest)).toBe(1086n - 108n);

    // 4. The owner disconnects the hostile app and adds 2 USDC: the honest app's requests are served,
    // and nothing of it reaches the hostile app.
    expect((await t.rest('GET', '/v1/user/disconnect?user=victim', { token: hostile.apiKey })).status).toBe(
      200,
    );
    await fundWallet(t.db, wallet.accountId, 2_000_000n);
    const h2 = await chat(honest, 'victim', MODEL);
    expect(h2.body.paywall).toBeUndefined();
    expect(h2.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(await earnings(hostile)).toBe(hostileEarnings);
    expect(await earnings(honest)).toBe(2n * (1086n - 108n));
    expect(await account(wallet.accountId)).toEqual({
      balance: 3_000_000n - spentByHostile - 2n * 1086n,
      debt: 0n,
    });
    expect(await eventTypes(hostile, 'paywall.usage.charge.recovered')).toEqual([]);
    await expectLedgerProven(t.db);
  });

  it("clamps impossible input to the prompt's bound; what the hold did not cover is the hostile app's loss", async () => {
    const hostile = await createProxyPaywall(t, evil, { mode: 'SHARED' });
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    await connect(hostile, 'victim2', wallet);
    evil.next({ rawUsage: { prompt_tokens: 500_000_000, completion_tokens: 7, total_tokens: 500_000_007 } });
    expect((await chat(hostile, 'victim2', MODEL)).status).toBe(200);
    const [c] = await t.db.query(
      `select amount_raw::text as amount, hold_raw::text as hold, uncollected_raw::text as uncollected,
              prompt_tokens, completion_tokens, metadata from charge where paywall_id = $1`,
      [hostile.id],
    );
    // The estimate, the body's bytes and 8,192 tokens of framing: a few thousand input tokens at most.
    expect(c.prompt_tokens + c.metadata.overReported.input).toBe(500_000_000);
    expect(c.prompt_tokens).toBeGreaterThan(8192);
    expect(c.prompt_tokens).toBeLessThan(8192 + 200);
    expect(c.metadata.overReported.output).toBe(0);
    // 1000 + 1.5 x (bound x 2 + 7 x 5), above the hold: the hold is captured, the rest is the app's loss.
    const cost = 1000n + (3n * BigInt(2 * c.prompt_tokens + 35) + 1n) / 2n;
    expect(c).toMatchObject({ amount: c.hold, uncollected: '0', completion_tokens: 7 });
    expect(c.metadata.appLoss).toBe((cost - BigInt(c.hold)).toString());
    expect(await account(wallet.accountId)).toEqual({ balance: 1_000_000n - BigInt(c.hold), debt: 0n });
    await expectLedgerProven(t.db);
  });

  it('repays a built-in debt only to the app it is owed to, within its allowance, and never after disconnect', async () => {
    // The app served by the built-in provider (markup 2) and an honest app of its own provider.
    const owed = await t.createPaywall('SHARED', 'Built-in app');
    expect((await setMarkup(owed, '2')).errors).toBeUndefined();
    const honest = await createProxyPaywall(t, good, { mode: 'SHARED' });
    const wallet = await createWallet(t.db, { fundRaw: 1_000n });
    const owedConn = await connect(owed, 'debtor', wallet);
    await setAllowance(wallet, owedConn, 3_000n, 'total');
    await connect(honest, 'debtor', wallet);
    const providerBefore = (await account(PROVIDER_ACCOUNT_ID)).balance;
    const feesBefore = (await account(FEES_ACCOUNT_ID)).balance;

    // The built-in provider bills more input than the estimate (within the request's bytes): 1,000 + 10
    // tokens cost 100 + 2 x (1,000 x 2 + 10 x 8) = 4,260 raw units, the provider's cost 2,180. The wallet
    // has 1,000: all of it taken (the provider's share first), 3,260 owed.
    op.next({ usage: { prompt_tokens: 1000, completion_tokens: 10 } });
    expect((await chat(owed, 'debtor', 'builtin-large')).status).toBe(200);
    const [c] = await charges(owed);
    expect(c).toMatchObject({ amount: '1000', uncollected: '3260', recovered: '0' });
    expect(c.metadata).toMatchObject({ provider: 'builtin', providerCost: '2180' });
    expect(await account(wallet.accountId)).toEqual({ balance: 0n, debt: 3260n });

    // 1 USDC arrives; the honest app's request repays what the built-in app's allowance has room for:
    // 3,000 in total, 1,000 spent, so 2,000 (the provider's unpaid 1,180, the fee floor(820 x 10 %) = 82,
    // the app 738). Before: all 3,260, whatever the allowance. The rest (1,260) is owed to the built-in
    // app alone, which can collect nothing more: it does not refuse the honest app's request.
    await fundWallet(t.db, wallet.accountId, 1_000_000n);
    const first = await chat(honest, 'debtor', MODEL);
    expect(first.body.paywall).toBeUndefined();
    expect(first.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(good.chatRequests).toHaveLength(1);
    const [repaid] = await charges(owed);
    expect(repaid).toMatchObject({ uncollected: '3260', recovered: '2000' });
    expect(await account(wallet.accountId)).toEqual({ balance: 1_000_000n - 2_000n - 1_086n, debt: 1_260n });
    // The built-in app itself, its allowance spent, is refused and sends nothing.
    const opSent = op.chatRequests.length;
    const owedRefused = await chat(owed, 'debtor', 'builtin-large');
    expect(owedRefused.body.paywall?.reason).toBe('allowance_exceeded');
    expect(op.chatRequests).toHaveLength(opSent);
    expect((await account(PROVIDER_ACCOUNT_ID)).balance - providerBefore).toBe(1_000n + 1_180n);
    // The fee of the repayment, and floor(1,086 x 10 %) of the honest app's charge.
    expect((await account(FEES_ACCOUNT_ID)).balance - feesBefore).toBe(82n + 108n);
    expect(await earnings(owed)).toBe(738n);
    const [allow] = await t.db.query(
      `select allowance_spent_raw::text as spent from wallet_connection where id = $1`,
      [owedConn],
    );
    expect(allow.spent).toBe('3000');
    expect(
      (await eventTypes(owed, 'paywall.usage.charge.recovered')).map((e) => [e.amount, e.uncollected]),
    ).toEqual([[usdcDecimal(2_000n), usdcDecimal(1_260n)]]);

    // The owner disconnects the built-in app: what it is still owed is written off, never repaid, and
    // no longer blocks the wallet's other apps.
    expect((await t.rest('GET', '/v1/user/disconnect?user=debtor', { token: owed.apiKey })).status).toBe(200);
    const [off] = await charges(owed);
    expect(off).toMatchObject({ uncollected: '2000', recovered: '2000' });
    expect(off.metadata.writtenOff).toBe('1260');
    const served = await chat(honest, 'debtor', MODEL);
    expect(served.body.paywall).toBeUndefined();
    expect(served.headers.get('x-paywall-cost')).toBe('0.001086');
    expect(await account(wallet.accountId)).toEqual({ balance: 1_000_000n - 2_000n - 2n * 1_086n, debt: 0n });
    expect(await earnings(owed)).toBe(738n);
    expect(await eventTypes(owed, 'paywall.usage.charge.recovered')).toHaveLength(1);
    await expectLedgerProven(t.db);
  });
});

describe('a built-in answer settled by the sweeper', () => {
  it("keeps the built-in provider's cost on the charge (its stream's progress records it)", async () => {
    const pw = await t.createPaywall('SHARED', 'Built-in streams');
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    await connect(pw, 'streamer', wallet);
    const proxy = t.app.services.proxy;
    proxy.progressIntervalMs = 100;
    try {
      op.next({
        content: Array.from({ length: 30 }, (_, i) => `word${i}`).join(' '),
        chunkDelayMs: 60,
        usage: { prompt_tokens: 11, completion_tokens: 60 },
      });
      const answer = t.rest('POST', '/v1/chat/completions', {
        token: pw.apiKey,
        headers: { 'X-Paywall-User': 'streamer' },
        body: { model: 'builtin-large', messages: [{ role: 'user', content: 'hello' }], stream: true },
      });
      const progress = await eventually(
        async () => (await charges(pw))[0]?.metadata?.progress ?? null,
        (p) => p !== null && p.completionTokens >= 5,
      );
      expect(progress.meta).toEqual({ provider: 'builtin', providerCost: expect.stringMatching(/^\d+$/) });
      // Another instance sweeping: the hold is settled for what the stream recorded.
      expect(await sweepAbandonedHolds(t.db, 0, [])).toBe(1);
      const [swept] = await charges(pw);
      expect(swept).toMatchObject({ status: 'completed', error_code: 'abandoned' });
      expect(swept.metadata).toMatchObject({ provider: 'builtin' });
      const cost = BigInt(swept.metadata.providerCost);
      expect(cost).toBeGreaterThan(0n);
      expect((await legs(swept.id)).provider_cost).toBe(cost);
      await answer;
      await expectLedgerProven(t.db);
    } finally {
      proxy.progressIntervalMs = 5000;
    }
  });
});

describe('the ledger proof sees both', () => {
  it("flags a SHARED debt left by an app's own provider and a built-in answer sold below its cost", async () => {
    const pw = await createProxyPaywall(t, good, { mode: 'SHARED' });
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    await connect(pw, 'proof', wallet);
    await chat(pw, 'proof', MODEL);
    const [c] = await charges(pw);
    const before = await proveLedger(t.db);
    expect(before).toMatchObject({
      ok: true,
      sharedDebtCharges: [],
      builtinUnpaidCharges: [],
      misdebtedAccounts: [],
    });
    try {
      // What the old settlement wrote for an over-reporting app: uncollected usage as the wallet's debt.
      await t.db.query(`update charge set uncollected_raw = 499990000 where id = $1`, [c.id]);
      await t.db.query(`update ledger_account set debt_raw = debt_raw + 499990000 where id = $1`, [
        wallet.accountId,
      ]);
      expect((await proveLedger(t.db)).sharedDebtCharges).toEqual([c.id]);
      // A built-in answer that paid no provider cost (a price below it).
      await t.db.query(
        `update charge set uncollected_raw = 0,
                metadata = metadata || '{"provider": "builtin", "providerCost": "178"}'::jsonb where id = $1`,
        [c.id],
      );
      const proof = await proveLedger(t.db);
      expect(proof).toMatchObject({
        ok: false,
        sharedDebtCharges: [],
        builtinUnpaidCharges: [c.id],
        misdebtedAccounts: [wallet.accountId],
      });
    } finally {
      await t.db.query(
        `update charge set uncollected_raw = 0, metadata = metadata - 'provider' - 'providerCost' where id = $1`,
        [c.id],
      );
      await t.db.query(`update ledger_account set debt_raw = 0 where id = $1`, [wallet.accountId]);
    }
    await expectLedgerProven(t.db);
  });
});

describe('prices an app changes while its request is in flight', () => {
  it('a price and a markup raised after the hold do not reach the request: it is charged at the prices it was held at', async () => {
    const hostile = await createProxyPaywall(t, evil, { mode: 'SHARED' });
    const wallet = await createWallet(t.db, { fundRaw: 10_000_000n });
    // No spending limit: only the prices of the request bound what it takes.
    await connect(hostile, 'inflight', wallet);
    let release!: () => void;
    evil.next({ gate: new Promise<void>((r) => (release = r)) });
    const pending = chat(hostile, 'inflight', MODEL);
    await eventually(
      () => charges(hostile),
      (cs) => cs.some((c) => c.status === 'held'),
    );
    // While the provider works: 1,000 USDC per token, and a markup of 1,000.
    const raised = await setPrice(hostile, {
      modelId: MODEL,
      prompt: '1000',
      completion: '1000',
      request: '1000',
    });
    expect(raised.errors).toBeUndefined();
    expect((await setMarkup(hostile, '1000')).errors).toBeUndefined();
    release();
    const r = await pending;
    expect(r.status).toBe(200);
    // 11 + 7 tokens at the held prices (1.5 x): 1,086 raw units, as without the change.
    expect(r.headers.get('x-paywall-cost')).toBe('0.001086');
    const [c] = await charges(hostile);
    expect(c).toMatchObject({ status: 'completed', amount: '1086', uncollected: '0' });
    expect(await account(wallet.accountId)).toEqual({ balance: 10_000_000n - 1086n, debt: 0n });
    await expectLedgerProven(t.db);
  });
});

describe("the built-in provider's stored responses are per app", () => {
  // The operator's one key serves every SHARED app on the built-in provider, and the provider hands
  // whatever it stored under that key to anyone who names the id: a response another app relayed (or a
  // stored conversation, which no app creates through the service) must not be continued from this one.
  const responses = (pw: ProxyPaywall, user: string, body: Record<string, unknown>) =>
    t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': user },
      body: { model: 'builtin-large', max_output_tokens: 50, ...body },
    });

  it("refuses another app's response id and a stored conversation: nothing forwarded, held or charged", async () => {
    const victim = await t.createPaywall('SHARED', 'Victim app');
    const snoop = await t.createPaywall('SHARED', 'Snooping app');
    // Enough for the largest context window an unknown id is held at: only the rule refuses it.
    const wallet = await createWallet(t.db, { fundRaw: 5_000_000n });
    await connect(victim, 'vera', wallet);
    await connect(snoop, 'sam', wallet);
    op.behavior = { usage: { prompt_tokens: 10, completion_tokens: 5 } };

    const first = await responses(victim, 'vera', { input: 'My secret plan.' });
    expect(first.status).toBe(200);
    const id = first.body.id as string;
    expect(id).toMatch(/^resp_/);
    const snoopCharges = (await charges(snoop)).length;
    const before = await account(wallet.accountId);
    op.reset();

    const stolen = await responses(snoop, 'sam', { input: 'What was the plan?', previous_response_id: id });
    expect(stolen.status).toBe(400);
    expect(stolen.body.error).toMatchObject({
      type: 'invalid_request_error',
      param: 'previous_response_id',
      code: 'previous_response_not_found',
      message: `Previous response with id '${id}' not found.`,
    });
    const conversation = await responses(snoop, 'sam', { input: 'Go on.', conversation: 'conv_operator_1' });
    expect(conversation.status).toBe(400);
    expect(conversation.body.error).toMatchObject({ param: 'conversation', code: 'unsupported_parameter' });
    expect(op.responsesRequests).toHaveLength(0);
    expect(await charges(snoop)).toHaveLength(snoopCharges);
    expect(await account(wallet.accountId)).toEqual(before);

    // The app that relayed it still continues it for its own user.
    const again = await responses(victim, 'vera', { input: 'Go on.', previous_response_id: id });
    expect(again.status).toBe(200);
    expect(op.responsesRequests).toHaveLength(1);
    expect(op.responsesRequests[0].body.previous_response_id).toBe(id);
    await expectLedgerProven(t.db);
  });
});

describe('the built-in provider is sold by the token only', () => {
  // What the operator pays outside its token prices (a dearer service tier, hosted tools billed per call)
  // or keeps under its one key (stored prompts, uploaded files) is not for sale: a 400 before the hold.
  it('refuses a dearer service tier, billed hosted tools, stored prompts and files; an app’s own provider still gets them', async () => {
    const app = await t.createPaywall('SHARED', 'Tool-happy app');
    const wallet = await createWallet(t.db, { fundRaw: 5_000_000n });
    await connect(app, 'tess', wallet);
    op.behavior = { usage: { prompt_tokens: 10, completion_tokens: 5 } };
    const send = (path: string, body: Record<string, unknown>, pw: ProxyPaywall = app, user = 'tess') =>
      t.rest('POST', path, { token: pw.apiKey, headers: { 'X-Paywall-User': user }, body });
    const chatBody = { model: 'builtin-large', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] };
    const respBody = { model: 'builtin-large', max_output_tokens: 50, input: 'hi' };
    const refused: [string, Record<string, unknown>, string][] = [
      ['/v1/chat/completions', { ...chatBody, service_tier: 'priority' }, 'service_tier'],
      ['/v1/responses', { ...respBody, service_tier: 'scale' }, 'service_tier'],
      ['/v1/chat/completions', { ...chatBody, web_search_options: {} }, 'web_search_options'],
      ['/v1/responses', { ...respBody, tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [
        '/v1/responses',
        {
          ...respBody,
          tools: [
            { type: 'function', name: 'f' },
            { type: 'file_search', vector_store_ids: ['vs_1'] },
          ],
        },
        'tools[1].type',
      ],
      [
        '/v1/responses',
        { ...respBody, tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] },
        'tools[0].type',
      ],
      ['/v1/responses', { ...respBody, prompt: { id: 'pmpt_operator' } }, 'prompt'],
      [
        '/v1/responses',
        {
          ...respBody,
          input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-operator' }] }],
        },
        'input[0].content[0].file_id',
      ],
      [
        '/v1/chat/completions',
        {
          ...chatBody,
          messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-operator' } }] }],
        },
        'messages[0].content[0].file.file_id',
      ],
    ];
    const before = await account(wallet.accountId);
    for (const [path, body, param] of refused) {
      const r = await send(path, body);
      expect({ path, status: r.status, error: r.body.error }).toMatchObject({
        path,
        status: 400,
        error: { type: 'invalid_request_error', code: 'unsupported_parameter', param },
      });
    }
    expect(op.requests).toHaveLength(0);
    expect(await account(wallet.accountId)).toEqual(before);

    // The standard tiers and plain function tools are served.
    for (const tier of ['auto', 'default', 'flex'])
      expect((await send('/v1/chat/completions', { ...chatBody, service_tier: tier })).status).toBe(200);
    const fn = await send('/v1/responses', {
      ...respBody,
      tools: [{ type: 'function', name: 'f', parameters: {} }],
    });
    expect(fn.status).toBe(200);
    // Anthropic's own tier on a Messages request is dropped by the translation, not refused.
    const messages = await send('/v1/messages', { ...chatBody, service_tier: 'standard_only' });
    expect(messages.status).toBe(200);
    expect(op.requests).toHaveLength(5);
    expect(op.requests[4].body.service_tier).toBeUndefined();

    // An app's own provider is the app's to spend: the same fields reach it.
    const own = await createProxyPaywall(t, evil, { mode: 'SHARED' });
    await connect(own, 'tess', wallet);
    evil.behavior = { usage: { prompt_tokens: 10, completion_tokens: 5 } };
    const ownModel = { model: MODEL };
    const mine = await send(
      '/v1/chat/completions',
      { ...chatBody, ...ownModel, service_tier: 'priority' },
      own,
    );
    expect(mine.status).toBe(200);
    expect(evil.requests[0].body.service_tier).toBe('priority');
    await expectLedgerProven(t.db);
  });
});
