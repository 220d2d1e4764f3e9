import { randomUUID } from 'node:crypto';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven, testHold, testSettlement } from './helpers/ledger.js';
import {
  connectShared,
  createProxyPaywall,
  deposit,
  eventsOf,
  MODEL,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID } from '../src/modules/accounts/accounts.js';
import { reserveHolds, settleHolds } from '../src/modules/ledger/holds.js';
import { refundFeePart } from '../src/modules/ledger/refund.service.js';

/**
 * Refunds (docs/reference.md §16 "Refunds", docs/ledger.md "Refunds") and charge ids (§16 "Charge ids"):
 * every balance is checked to the raw unit before and after, and the ledger proof after each test.
 */
const FEE_BPS = 250n;
const BUILTIN_MODELS = [{ id: 'builtin-small', prompt: '0.00001', completion: '0.00004' }];
const EMBED = 'text-embedding-3-small';

let t: TestApp;
let fake: FakeUpstream;
let builtin: FakeUpstream;
let dflt: ProxyPaywall;
let shared: ProxyPaywall;

beforeAll(async () => {
  fake = await FakeUpstream.start();
  builtin = await FakeUpstream.start();
  t = await startTestApp({
    PLATFORM_FEE_BPS: String(FEE_BPS),
    BUILTIN_PROVIDER_BASE_URL: builtin.baseUrl,
    BUILTIN_PROVIDER_API_KEY: 'sk-builtin-operator-key-0001',
    BUILTIN_MODELS: JSON.stringify(BUILTIN_MODELS),
  });
  dflt = await createProxyPaywall(t, fake);
  shared = await createProxyPaywall(t, fake, { mode: 'SHARED' });
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
  await builtin?.close();
});
beforeEach(() => {
  fake.reset();
  builtin.reset();
});

const gqlOk = async (token: string, query: string, variables?: Record<string, unknown>) => {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
};

const REFUND = `mutation($i: RefundChargeInput!) {
  refundCharge(input: $i) { id chargeId amount fromEarnings fromFee reason createdAt }
}`;
const refund = (pw: ProxyPaywall, i: Record<string, unknown>, token = pw.apiKey) =>
  t.gql(token, REFUND, { i });
/** A refusal's public code (extensions.errorCode), or the refund. */
async function refundCode(pw: ProxyPaywall, i: Record<string, unknown>): Promise<string> {
  const r = await refund(pw, i);
  return r.errors ? r.errors[0].extensions.errorCode : 'ok';
}

const balance = async (accountId: string): Promise<bigint> =>
  BigInt(
    (await t.db.query(`select balance_raw::text as b from ledger_account where id = $1`, [accountId]))[0].b,
  );
const earningsAccount = async (pw: ProxyPaywall): Promise<string> =>
  (await t.db.query(`select id from ledger_account where kind = 'earnings' and paywall_id = $1`, [pw.id]))[0]
    .id;
const userAccount = async (pw: ProxyPaywall, user: string): Promise<string> =>
  (
    await t.db.query(`select account_id from end_user where paywall_id = $1 and external_id = $2`, [
      pw.id,
      user,
    ])
  )[0].account_id;

/** Every balance a refund may touch, as raw bigints. */
async function snapshot(pw: ProxyPaywall, user: string) {
  const [payer, earnings] = [await userAccount(pw, user), await earningsAccount(pw)];
  const view = await gqlOk(pw.apiKey, `{ paywall { earnings { available fees } } }`);
  return {
    payer: await balance(payer),
    earnings: await balance(earnings),
    fees: await balance(FEES_ACCOUNT_ID),
    provider: await balance(PROVIDER_ACCOUNT_ID),
    earningsView: view.paywall.earnings,
  };
}

const manualCharge = async (pw: ProxyPaywall, user: string, amount: string) => {
  const r = await t.rest('POST', '/v1/user/charge', { token: pw.apiKey, body: { user, amount } });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ success: true });
  return r.body.chargeId as string;
};

const chargesView = async (pw: ProxyPaywall, user: string) =>
  (
    await gqlOk(
      pw.apiKey,
      `query($u: String!) { user(externalId: $u) { charges(first: 5) { edges { node {
         id kind status amount refundedAmount refundable
         refunds { id chargeId amount fromEarnings fromFee reason createdAt }
         receipt { total refunded net refunds { id amount } } } } } } }`,
      { u: user },
    )
  ).user.charges.edges.map((e: any) => e.node);

describe('refundFeePart: the fee parts of any sequence of refunds add up exactly', () => {
  it('gives back floor(refunded x fee / paid) in all, the whole fee with the whole charge', () => {
    const paid = 1_000_003n;
    const fee = 25_000n;
    for (const parts of [[1n, 1n, 1_000_001n], [333_333n, 333_333n, 333_337n], [999_999n, 4n], [paid]]) {
      let refunded = 0n;
      let feeBack = 0n;
      for (const p of parts) {
        const f = refundFeePart(paid, fee, refunded, feeBack, p);
        expect(f).toBeGreaterThanOrEqual(0n);
        expect(f).toBeLessThanOrEqual(p);
        refunded += p;
        feeBack += f;
        expect(feeBack).toBe((refunded * fee) / paid);
      }
      expect(refunded).toBe(paid);
      expect(feeBack).toBe(fee);
    }
    expect(refundFeePart(1000n, 0n, 0n, 0n, 1000n)).toBe(0n);
  });
});

describe('charge ids (docs/reference.md §16 "Charge ids")', () => {
  it('the manual charge JSON names the charge, equal to its id in GraphQL and to activityId in its events', async () => {
    await deposit(t, dflt, 'ids-ann', '1');
    const chargeId = await manualCharge(dflt, 'ids-ann', '0.25');
    expect(chargeId).toMatch(/^[0-9a-f-]{36}$/);
    const [c] = await chargesView(dflt, 'ids-ann');
    expect(c).toMatchObject({ id: chargeId, kind: 'manual', amount: '0.250000', refundable: '0.250000' });
    const events = (await eventsOf(t, dflt, 'paywall.balance.charge.')).filter(
      (e) => e.data.activityId === chargeId,
    );
    expect(events.map((e) => e.type)).toEqual([
      'paywall.balance.charge.created',
      'paywall.balance.charge.completed',
    ]);
    // GraphQL's charge mutation names it too; a refused charge names its failed charge.
    const g = await gqlOk(
      dflt.apiKey,
      `mutation { charge(input: {user: "ids-ann", amount: "5"}) { success chargeId charge { id status } } }`,
    );
    expect(g.charge).toMatchObject({ success: false, charge: { status: 'failed' } });
    expect(g.charge.chargeId).toBe(g.charge.charge.id);
    const refused = await t.rest('POST', '/v1/user/charge', {
      token: dflt.apiKey,
      body: { user: 'ids-ann', amount: '5' },
    });
    expect(refused.body).toMatchObject({ success: false, errorCode: 'insufficient_balance' });
    expect(refused.body.chargeId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('x-paywall-charge-id on whole chat, Responses, Messages and embeddings answers: the charge in GraphQL', async () => {
    const embed = await gqlOk(
      dflt.apiKey,
      `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`,
      { i: { modelId: EMBED, prompt: '0.00000002', request: '0.0001' } },
    );
    expect(embed.setModelPricing.id).toBe(EMBED);
    await deposit(t, dflt, 'ids-bob', '1');
    const headers = { 'X-Paywall-User': 'ids-bob' };
    const calls: [string, Record<string, unknown>, Record<string, string>][] = [
      ['/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Hello' }] }, headers],
      ['/v1/responses', { model: MODEL, input: 'Say hello' }, headers],
      [
        '/v1/messages',
        { model: MODEL, max_tokens: 50, messages: [{ role: 'user', content: 'Hello' }] },
        { ...headers, 'anthropic-version': '2023-06-01' },
      ],
      ['/v1/embeddings', { model: EMBED, input: 'The food was delicious' }, headers],
    ];
    for (const [path, body, h] of calls) {
      const r = await t.rest('POST', path, { token: dflt.apiKey, headers: h, body });
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      const id = r.headers.get('x-paywall-charge-id');
      const cost = r.headers.get('x-paywall-cost');
      const [latest] = await chargesView(dflt, 'ids-bob');
      expect({ path, id, cost }).toEqual({
        path,
        id: latest.id,
        cost: latest.amount.replace(/0+$/, '').replace(/\.$/, ''),
      });
      const event = (await eventsOf(t, dflt, 'paywall.usage.charge.created')).at(-1);
      expect(event.data.activityId).toBe(id);
    }
    expect(fake.requests.map((r) => r.url.split('/').at(-1))).toEqual([
      'completions',
      'responses',
      'completions',
      'embeddings',
    ]);
  });
});

describe('DEFAULT: the money goes back from the paywall’s earnings to the user’s account', () => {
  it('a partial refund, then the rest: an exact reversal, with the event, the ledger entry and the receipt', async () => {
    await deposit(t, dflt, 'dora', '2');
    const before = await snapshot(dflt, 'dora');
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: dflt.apiKey,
      headers: { 'X-Paywall-User': 'dora' },
      body: { model: MODEL, messages: [{ role: 'user', content: 'Hello' }] },
    });
    expect(r.headers.get('x-paywall-cost')).toBe('0.001086');
    const chargeId = r.headers.get('x-paywall-charge-id')!;
    const charged = await snapshot(dflt, 'dora');
    expect(charged.payer).toBe(before.payer - 1086n);
    expect(charged.earnings).toBe(before.earnings + 1086n);

    const first = await refund(dflt, { chargeId, amount: '0.000086', reason: 'Answer was cut short' });
    expect(first.errors).toBeUndefined();
    expect(first.data.refundCharge).toMatchObject({
      chargeId,
      amount: '0.000086',
      fromEarnings: '0.000086',
      fromFee: '0.000000',
      reason: 'Answer was cut short',
    });
    const mid = await snapshot(dflt, 'dora');
    expect(mid.payer).toBe(charged.payer + 86n);
    expect(mid.earnings).toBe(charged.earnings - 86n);

    // The rest, amount left out: 0.001000.
    const rest = await refund(dflt, { chargeId });
    expect(rest.data.refundCharge).toMatchObject({ amount: '0.001000', reason: null });
    const after = await snapshot(dflt, 'dora');
    expect(after).toEqual(before);

    // Nothing left: refused, nothing changes (the same "rest" again answers the refund it repeats).
    expect((await refund(dflt, { chargeId })).data.refundCharge).toEqual(rest.data.refundCharge);
    expect(await refundCode(dflt, { chargeId, reason: 'more' })).toBe('charge_already_refunded');
    expect(await refundCode(dflt, { chargeId, amount: '0.000001' })).toBe('charge_already_refunded');
    expect(await snapshot(dflt, 'dora')).toEqual(before);

    const [c] = await chargesView(dflt, 'dora');
    expect(c).toMatchObject({
      id: chargeId,
      amount: '0.001086',
      refundedAmount: '0.001086',
      refundable: '0.000000',
      receipt: { total: '0.001086', refunded: '0.001086', net: '0.000000' },
    });
    expect(c.refunds.map((x: any) => [x.id, x.amount, x.reason])).toEqual([
      [first.data.refundCharge.id, '0.000086', 'Answer was cut short'],
      [rest.data.refundCharge.id, '0.001000', null],
    ]);
    expect(c.receipt.refunds.map((x: any) => x.id)).toEqual(c.refunds.map((x: any) => x.id));

    const events = (await eventsOf(t, dflt, 'paywall.balance.refund.created')).filter(
      (e) => e.data.chargeId === chargeId,
    );
    const userId = (
      await t.db.query(`select id from end_user where paywall_id = $1 and external_id = 'dora'`, [dflt.id])
    )[0].id;
    expect(events.map((e) => e.data)).toEqual([
      {
        paywallId: dflt.id,
        ownerUserId: expect.any(String),
        activityId: first.data.refundCharge.id,
        chargeId,
        amount: '0.000086',
        walletUserId: userId,
        externalUserId: 'dora',
        reason: 'Answer was cut short',
      },
      expect.objectContaining({ activityId: rest.data.refundCharge.id, amount: '0.001', reason: null }),
    ]);
    expect(events[0].subject).toEqual({ type: 'charge', id: chargeId, externalId: 'dora' });

    // The user's ledger: each refund is an entry of its own, money in, naming the charge.
    const ledger = await gqlOk(
      dflt.apiKey,
      `{ user(externalId: "dora") { balance ledgerEntries(first: 10) { edges { node { id kind amount chargeId metadata } } } } }`,
    );
    const entries = ledger.user.ledgerEntries.edges.map((e: any) => e.node);
    expect(entries.slice(0, 3).map((e: any) => [e.kind, e.amount, e.chargeId])).toEqual([
      ['refund', '0.001000', chargeId],
      ['refund', '0.000086', chargeId],
      ['usage', '-0.001086', chargeId],
    ]);
    expect(entries[1]).toMatchObject({
      id: first.data.refundCharge.id,
      metadata: { reason: 'Answer was cut short' },
    });
    expect(ledger.user.balance).toBe(before.payer.toString());
    await expectLedgerProven(t.db);
  });

  it('over-refund is refused and changes nothing; bad input and other paywalls’ charges are refused', async () => {
    await deposit(t, dflt, 'olga', '1');
    const chargeId = await manualCharge(dflt, 'olga', '0.5');
    const before = await snapshot(dflt, 'olga');
    const over = await refund(dflt, { chargeId, amount: '0.500001' });
    expect(over.errors![0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      errorCode: 'refund_exceeds_charge',
    });
    expect(over.errors![0].message).toContain('At most 0.5 USDC');
    expect(await refundCode(dflt, { chargeId, amount: '0' })).toBe('invalid_amount');
    expect(await refundCode(dflt, { chargeId, amount: '0.0000001' })).toBe('invalid_amount');
    expect(await refundCode(dflt, { chargeId, reason: 'x'.repeat(501) })).toBe('invalid_request');
    expect(await refundCode(dflt, { chargeId: randomUUID() })).toBe('not_found');
    expect(await refundCode(dflt, { chargeId: 'nope' })).toBe('not_found');
    // Another paywall's charge is not found through this key; the owner names the paywall.
    expect(await refundCode(shared, { chargeId })).toBe('not_found');
    const failed = await gqlOk(
      dflt.apiKey,
      `mutation { charge(input: {user: "olga", amount: "9"}) { success chargeId } }`,
    );
    expect(await refundCode(dflt, { chargeId: failed.charge.chargeId })).toBe('charge_not_refundable');
    expect(await snapshot(dflt, 'olga')).toEqual(before);
    expect(await t.db.query(`select 1 from refund where charge_id = $1`, [chargeId])).toEqual([]);

    // The owner token, naming the paywall, may refund too.
    const byOwner = await refund(dflt, { paywallId: dflt.id, chargeId, amount: '0.5' }, t.ownerToken);
    expect(byOwner.data.refundCharge.amount).toBe('0.500000');
    await expectLedgerProven(t.db);
  });

  it('the same request twice (one idempotencyKey) refunds once; without a key, a whole refund cannot repeat', async () => {
    await deposit(t, dflt, 'ida', '1');
    const chargeId = await manualCharge(dflt, 'ida', '0.4');
    const before = await snapshot(dflt, 'ida');
    const input = { chargeId, amount: '0.1', reason: 'duplicate', idempotencyKey: 'refund-ida-1' };
    const a = await refund(dflt, input);
    const b = await refund(dflt, input);
    expect(b.data.refundCharge).toEqual(a.data.refundCharge);
    expect((await snapshot(dflt, 'ida')).payer).toBe(before.payer + 100_000n);
    expect(await t.db.query(`select 1 from refund where charge_id = $1`, [chargeId])).toHaveLength(1);
    expect(
      (await eventsOf(t, dflt, 'paywall.balance.refund.created')).filter((e) => e.data.chargeId === chargeId),
    ).toHaveLength(1);
    // The same key with another body: 422, nothing applied.
    const reused = await refund(dflt, { ...input, amount: '0.2' });
    expect(reused.errors![0].extensions).toMatchObject({ errorCode: 'idempotency_key_reused' });
    // No key: "the whole rest" twice gives back the rest once; the repeat answers the same refund.
    const whole = await refund(dflt, { chargeId });
    expect(whole.data.refundCharge.amount).toBe('0.300000');
    expect((await refund(dflt, { chargeId })).data.refundCharge).toEqual(whole.data.refundCharge);
    expect(await snapshot(dflt, 'ida')).toMatchObject({ payer: before.payer + 400_000n });
    // With another reason it is another request, and nothing is left.
    expect(await refundCode(dflt, { chargeId, reason: 'again' })).toBe('charge_already_refunded');
    await expectLedgerProven(t.db);
  });

  it('without a key, the same refund again (charge, amount, reason; a double click, a retry) refunds once and answers the first; another reason or its own key is a second refund', async () => {
    await deposit(t, dflt, 'ivo', '1');
    const chargeId = await manualCharge(dflt, 'ivo', '0.5');
    const before = await snapshot(dflt, 'ivo');
    const same = { chargeId, amount: '0.1', reason: 'Slow answer' };
    const answers = await Promise.all([1, 2, 3].map(() => refund(dflt, same)));
    const again = await refund(dflt, same);
    for (const r of [...answers, again]) expect(r.data.refundCharge).toEqual(answers[0].data.refundCharge);
    expect(await t.db.query(`select 1 from refund where charge_id = $1`, [chargeId])).toHaveLength(1);
    expect((await snapshot(dflt, 'ivo')).payer).toBe(before.payer + 100_000n);
    // A legitimate second partial refund of the same amount: a reason of its own, or a key of its own.
    const second = await refund(dflt, { ...same, reason: 'Slow answer, second time' });
    const third = await refund(dflt, { ...same, idempotencyKey: 'ivo-third' });
    const ids = new Set([answers[0], second, third].map((r) => r.data.refundCharge.id));
    expect(ids.size).toBe(3);
    expect((await snapshot(dflt, 'ivo')).payer).toBe(before.payer + 300_000n);
    expect(
      (await eventsOf(t, dflt, 'paywall.balance.refund.created')).filter((e) => e.data.chargeId === chargeId),
    ).toHaveLength(3);
    await expectLedgerProven(t.db);
  });

  it('20 concurrent refunds of one charge never give back more than it took', async () => {
    await deposit(t, dflt, 'cora', '2');
    const chargeId = await manualCharge(dflt, 'cora', '1');
    const before = await snapshot(dflt, 'cora');
    // Each its own refund (its own key): the same amount without one would be one refund repeated.
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        refundCode(dflt, { chargeId, amount: '0.15', idempotencyKey: `cora-${i}` }),
      ),
    );
    // 6 x 0.15 = 0.9 fit; the 7th would be 1.05.
    expect(results.filter((r) => r === 'ok')).toHaveLength(6);
    expect(new Set(results.filter((r) => r !== 'ok'))).toEqual(new Set(['refund_exceeds_charge']));
    const after = await snapshot(dflt, 'cora');
    expect(after.payer).toBe(before.payer + 900_000n);
    expect(after.earnings).toBe(before.earnings - 900_000n);
    const [c] = await chargesView(dflt, 'cora');
    expect(c).toMatchObject({ refundedAmount: '0.900000', refundable: '0.100000' });
    await expectLedgerProven(t.db);
  });

  it('uncollected usage is not refundable beyond what was collected; refunding the whole rest forgives what the charge still owes', async () => {
    await deposit(t, dflt, 'uma', '0.01');
    const hold = testHold(dflt.id, 'uma');
    const [held] = await reserveHolds(t.db, [hold]);
    expect(held).toMatchObject({ held: true, holdRaw: 1000n });
    // Settled at 1000 captured, and 500 more the balance did not pay (uncollected).
    expect(await settleHolds(t.db, [testSettlement(hold, 1000n, { uncollectedRaw: 500n })])).toEqual([true]);
    const chargeId = hold.chargeId;
    const owed = async () => {
      const [row] = await t.db.query(
        `select c.uncollected_raw::text as uncollected, c.recovered_raw::text as recovered,
                c.metadata->>'writtenOff' as written_off, a.debt_raw::text as debt
           from charge c join ledger_account a on a.id = c.account_id where c.id = $1`,
        [chargeId],
      );
      return row;
    };
    expect(await owed()).toEqual({ uncollected: '500', recovered: '0', written_off: null, debt: '500' });
    expect(await refundCode(dflt, { chargeId, amount: '0.001001' })).toBe('refund_exceeds_charge');
    // A partial refund gives money back and leaves what the charge still owes.
    expect((await refund(dflt, { chargeId, amount: '0.0004' })).data.refundCharge.amount).toBe('0.000400');
    expect(await owed()).toEqual({ uncollected: '500', recovered: '0', written_off: null, debt: '500' });
    // The whole rest: the money back, and the 500 still owed forgiven with it (kept as writtenOff).
    const whole = await refund(dflt, { chargeId });
    expect(whole.data.refundCharge.amount).toBe('0.000600');
    expect(await owed()).toEqual({ uncollected: '0', recovered: '0', written_off: '500', debt: '0' });
    expect(await balance(await userAccount(dflt, 'uma'))).toBe(10_000n);
    await expectLedgerProven(t.db);
  });
});

describe('SHARED: the earnings and the platform fee give back in proportion, to the wallet that paid', () => {
  it('partial refunds then the rest: wallet, earnings, fee account and Paywall.earnings.fees exactly as before', async () => {
    await t.rest('GET', '/v1/user/connect?user=sam', { token: shared.apiKey });
    const wallet = await connectShared(t, shared, 'sam', 3_000_000n);
    const before = await snapshot(shared, 'sam');
    const chargeId = await manualCharge(shared, 'sam', '1');
    const charged = await snapshot(shared, 'sam');
    const fee = (1_000_000n * FEE_BPS) / 10_000n; // 25000
    expect(charged.payer).toBe(before.payer - 1_000_000n);
    expect(charged.fees).toBe(before.fees + fee);
    expect(charged.earnings).toBe(before.earnings + 1_000_000n - fee);

    // 0.333333: fee part floor(333333 x 25000 / 1000000) = 8333, the earnings the rest (325000).
    const a = await refund(shared, { chargeId, amount: '0.333333', reason: 'Partly unusable' });
    expect(a.data.refundCharge).toMatchObject({
      amount: '0.333333',
      fromFee: '0.008333',
      fromEarnings: '0.325000',
    });
    const b = await refund(shared, { chargeId, amount: '0.333333' });
    // Cumulative: floor(666666 x 25000 / 1000000) = 16666, so 8333 again.
    expect(b.data.refundCharge).toMatchObject({ fromFee: '0.008333', fromEarnings: '0.325000' });
    const c = await refund(shared, { chargeId });
    expect(c.data.refundCharge).toMatchObject({
      amount: '0.333334',
      fromFee: '0.008334',
      fromEarnings: '0.325000',
    });
    const after = await snapshot(shared, 'sam');
    expect(after).toEqual(before);
    expect(after.payer).toBe(await balance(wallet.accountId));

    const event = (await eventsOf(t, shared, 'paywall.balance.refund.created')).find(
      (e) => e.data.activityId === a.data.refundCharge.id,
    );
    expect(event.data).toEqual({
      paywallId: shared.id,
      ownerUserId: expect.any(String),
      activityId: a.data.refundCharge.id,
      chargeId,
      amount: '0.333333',
      walletUserId: wallet.walletUserId,
      externalUserId: 'sam',
      reason: 'Partly unusable',
    });
    // Earnings history shows each refund leaving (and the fee parts coming back in).
    const hist = await gqlOk(
      shared.apiKey,
      `{ paywall { earningsHistory(first: 10) { edges { node { kind amount chargeId } } } } }`,
    );
    const kinds = hist.paywall.earningsHistory.edges.map((e: any) => [e.node.kind, e.node.amount]);
    expect(kinds.slice(0, 2)).toEqual([
      ['refund', '-0.333334'],
      ['fee_refund', '0.008334'],
    ]);
    await expectLedgerProven(t.db);
  });

  it('insufficient_earnings once the earnings were withdrawn; it works again when the withdrawal is canceled', async () => {
    await t.rest('GET', '/v1/user/connect?user=wes', { token: shared.apiKey });
    await connectShared(t, shared, 'wes', 1_000_000n);
    const chargeId = await manualCharge(shared, 'wes', '0.5');
    const available = (await snapshot(shared, 'wes')).earningsView.available;
    const w = await gqlOk(
      shared.apiKey,
      `mutation($a: String!) { requestWithdrawal(input: {amount: $a, destination: "IBAN X"}) { id } }`,
      { a: available },
    );
    const before = await snapshot(shared, 'wes');
    expect(before.earnings).toBe(0n);
    const r = await refund(shared, { chargeId, amount: '0.1' });
    expect(r.errors![0].extensions).toMatchObject({
      errorCode: 'insufficient_earnings',
      code: 'BAD_USER_INPUT',
    });
    expect(r.errors![0].message).toContain('Insufficient earnings');
    expect(await snapshot(shared, 'wes')).toEqual(before);
    await gqlOk(shared.apiKey, `mutation($id: ID!) { cancelWithdrawal(id: $id) { status } }`, {
      id: w.requestWithdrawal.id,
    });
    expect(await refundCode(shared, { chargeId, amount: '0.1' })).toBe('ok');
    await expectLedgerProven(t.db);
  });

  it('built-in provider: the platform keeps the provider cost; the developer’s earnings give it back with their part', async () => {
    const pw = await t.createPaywall('SHARED');
    await gqlOk(pw.apiKey, `mutation { updatePaywall(input: {markup: "2"}) { id } }`);
    const chat = () =>
      t.rest('POST', '/v1/chat/completions', {
        token: pw.apiKey,
        headers: { 'X-Paywall-User': 'bea' },
        body: { model: 'builtin-small', messages: [{ role: 'user', content: 'Hello' }] },
      });
    await chat(); // sees the user (the connect link)
    await connectShared(t, pw, 'bea', 1_000_000n);
    const before = await snapshot(pw, 'bea');
    const r = await chat();
    expect(r.status).toBe(200);
    const chargeId = r.headers.get('x-paywall-charge-id')!;
    const legs = await t.db.query(
      `select kind, amount_raw::text as a from transfer where charge_id = $1 order by kind`,
      [chargeId],
    );
    const leg = (k: string) => BigInt(legs.find((l: any) => l.kind === k)?.a ?? 0);
    const [E, F, P] = [leg('usage'), leg('fee'), leg('provider_cost')];
    const A = E + F + P;
    expect(P).toBeGreaterThan(0n);
    expect(F).toBeGreaterThan(0n);
    expect(await snapshot(pw, 'bea')).toMatchObject({
      payer: before.payer - A,
      earnings: before.earnings + E,
    });
    // The earnings hold only E, the refund needs E + P from them: refused, nothing changes.
    const charged = await snapshot(pw, 'bea');
    expect(await refundCode(pw, { chargeId })).toBe('insufficient_earnings');
    expect(await snapshot(pw, 'bea')).toEqual(charged);
    // More earnings (another user's charge) make room; the whole refund gives back A exactly.
    await t.rest('GET', '/v1/user/connect?user=ben', { token: pw.apiKey });
    await connectShared(t, pw, 'ben', 1_000_000n);
    const other = await manualCharge(pw, 'ben', '0.1');
    expect(other).toBeTruthy();
    const mid = await snapshot(pw, 'bea');
    const whole = await refund(pw, { chargeId, reason: 'Test' });
    expect(whole.errors).toBeUndefined();
    expect(whole.data.refundCharge).toMatchObject({
      amount: usdc(A),
      fromFee: usdc(F),
      fromEarnings: usdc(E + P),
    });
    const after = await snapshot(pw, 'bea');
    expect(after.payer).toBe(before.payer);
    expect(after.fees).toBe(mid.fees - F);
    expect(after.provider).toBe(mid.provider);
    expect(after.earnings).toBe(mid.earnings - E - P);
    await expectLedgerProven(t.db);
  });
});

function usdc(raw: bigint): string {
  const s = raw.toString().padStart(7, '0');
  return `${s.slice(0, -6)}.${s.slice(-6)}`;
}
