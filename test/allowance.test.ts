import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { connectEndUser, createWallet } from './helpers/wallet-fixtures.js';
import type { AllowancePeriod } from '../src/modules/wallet/allowance.js';
import { periodEnd, periodStart } from '../src/modules/wallet/allowance.js';
import { holdOutcome } from '../src/modules/proxy/ledger-batch.js';
import { usdcDecimal } from '../src/shared/money.js';

/**
 * Per-app allowances (docs/reference.md §16 "Allowance (SHARED)"): the wallet user's spending limit for an
 * app, per UTC day, week (from Monday), month or in total, checked and counted inside the hold's statement
 * and the manual charge's, corrected at settlement to what was captured. The clock is moved, never slept.
 */
const EMBED = 'text-embedding-3-small';
const CHAT_COST = 1086n; // 11 prompt + 7 completion tokens at the proxy-setup prices, markup 1.5

let t: TestApp;
let fake: FakeUpstream;

const setClock = (iso: string) => {
  t.app.services.clock.now = () => new Date(iso);
};

beforeAll(async () => {
  fake = await FakeUpstream.start();
  t = await startTestApp();
  setClock('2026-11-25T12:00:00.000Z'); // a Wednesday
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

interface Conn {
  pw: ProxyPaywall;
  user: string;
  wallet: { walletUserId: string; accountId: string };
  connectionId: string;
  endUserId: string;
}

let n = 0;
/** A SHARED user of `pw` connected to `wallet` (a new one funded with 10 USDC when not given). */
async function connected(
  pw: ProxyPaywall,
  wallet?: { walletUserId: string; accountId: string },
): Promise<Conn> {
  const user = `u${++n}`;
  await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey });
  const w = wallet ?? (await createWallet(t.db, { fundRaw: 10_000_000n }));
  await connectEndUser(t.db, pw.id, user, w);
  const [c] = await t.db.query(
    `select c.id, c.end_user_id from wallet_connection c join end_user e on e.id = c.end_user_id
      where e.paywall_id = $1 and e.external_id = $2`,
    [pw.id, user],
  );
  return { pw, user, wallet: w, connectionId: c.id, endUserId: c.end_user_id };
}

/** "Save limit" as the wallet page does it (the wallet user's own connection). */
const setLimit = (c: Conn, amountRaw: bigint | null, period: AllowancePeriod = 'day') =>
  t.app.services.authorizations.setConnectionAllowance(
    c.wallet.walletUserId,
    c.connectionId,
    amountRaw === null ? null : { amountRaw, period },
  );

const chat = (c: Conn, extra: Record<string, unknown> = {}) =>
  t.rest('POST', '/v1/chat/completions', {
    token: c.pw.apiKey,
    body: { model: MODEL, messages: [{ role: 'user', content: 'hello' }], user: c.user, ...extra },
  });

const charge = (c: Conn, amount: string) =>
  t.rest('POST', '/v1/user/charge', { token: c.pw.apiKey, body: { user: c.user, amount } });

/** What the end user's completed charges took, and how many are still held. */
async function charged(c: Conn): Promise<{ sum: bigint; count: number; held: number }> {
  const [r] = await t.db.query(
    `select coalesce(sum(amount_raw) filter (where status = 'completed'), 0)::text as sum,
            count(*) filter (where status = 'completed' and amount_raw > 0)::int as count,
            count(*) filter (where status = 'held')::int as held
       from charge where user_id = $1`,
    [c.endUserId],
  );
  return { sum: BigInt(r.sum), count: r.count, held: r.held };
}

/** The connection's stored count (what the statements keep). */
async function stored(c: Conn): Promise<{ spent: bigint; start: string | null }> {
  const [r] = await t.db.query(
    `select allowance_spent_raw::text as spent, allowance_period_start::text as start from wallet_connection where id = $1`,
    [c.connectionId],
  );
  return { spent: BigInt(r.spent), start: r.start };
}

/** The owner's view: `Connection.allowance` (the type name docs/reference.md §16 gives, so a fragment on it works). */
async function ownerView(c: Conn): Promise<any> {
  const r = await t.gql(
    c.pw.apiKey,
    `{ paywall { connections(first: 5) { edges { node { __typename id ...Limit } } } } }
     fragment Limit on Connection { allowance { amount period spent resetsAt } }`,
  );
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  const node = r.data.paywall.connections.edges.find((e: any) => e.node.id === c.connectionId).node;
  expect(node.__typename).toBe('Connection');
  return node.allowance;
}

const eventsOf = async (pw: ProxyPaywall, type: string) =>
  (
    await t.db.query(`select data from event where paywall_id = $1 and type = $2 order by created_at`, [
      pw.id,
      type,
    ])
  ).map((r) => r.data);

describe('periods (UTC; weeks from Monday)', () => {
  it('period starts and ends', () => {
    const at = new Date('2026-11-29T23:59:59.999Z'); // a Sunday
    expect(periodStart('day', at).toISOString()).toBe('2026-11-29T00:00:00.000Z');
    expect(periodStart('week', at).toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(periodStart('week', new Date('2026-11-30T00:00:00.000Z')).toISOString()).toBe(
      '2026-11-30T00:00:00.000Z',
    );
    expect(periodStart('month', at).toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(periodEnd('day', periodStart('day', at))!.toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(periodEnd('week', periodStart('week', at))!.toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(periodEnd('month', new Date('2026-12-01T00:00:00.000Z'))!.toISOString()).toBe(
      '2027-01-01T00:00:00.000Z',
    );
    expect(periodEnd('total', periodStart('total', at))).toBeNull();
  });

  it('holdOutcome: a hold the allowance refused is blocked with allowance_exceeded', () => {
    const r = {
      limit: null,
      ratePosition: null,
      userId: 'u',
      walletUserId: 'w',
      connected: true,
      freeRaw: 5n,
      cap: -1,
      holdRaw: 0n,
      held: false,
      indebted: false,
      accountId: 'a',
      debtRaw: 0n,
      allowanceExceeded: true,
      allowance: null,
    };
    expect(holdOutcome(r)).toEqual({ kind: 'blocked', reason: 'allowance_exceeded', hold: r });
    expect(holdOutcome({ ...r, limit: 'dailySpendLimit' })).toMatchObject({ reason: 'rate_limited' });
  });

  it('day: chats until the limit, then the allowance_exceeded reply with the wallet link; the next UTC day serves again', async () => {
    setClock('2026-11-25T12:00:00.000Z');
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await connected(pw);
    expect(await ownerView(c)).toBeNull();
    await setLimit(c, 10_000n, 'day');
    let served = 0;
    let blocked: any = null;
    for (let i = 0; i < 20 && !blocked; i++) {
      const r = await chat(c);
      expect(r.status).toBe(200);
      if (r.body.paywall) blocked = r.body;
      else served++;
    }
    // Each chat holds ~8,500 raw units (1000 completion tokens at most) and captures 1,086: the count is
    // corrected at settlement, so nine chats fit in 0.01 USDC (the ninth with a smaller cap).
    expect(served).toBe(9);
    expect(blocked.paywall).toEqual({
      reason: 'allowance_exceeded',
      url: `${t.url}/wallet`,
      resetsAt: '2026-11-26T00:00:00.000Z',
    });
    expect(blocked.choices[0].message.content).toContain('spending limit of 0.01 USDC per day');
    expect(blocked.choices[0].message.content).toContain(`${t.url}/wallet`);
    const money = await charged(c);
    expect(money).toEqual({ sum: CHAT_COST * 9n, count: 9, held: 0 });
    expect(await stored(c)).toEqual({ spent: money.sum, start: '2026-11-25' });
    expect(await ownerView(c)).toEqual({
      amount: '0.010000',
      period: 'day',
      spent: '0.009774',
      resetsAt: '2026-11-26T00:00:00.000Z',
    });
    // Refused again: the event was recorded once for the period.
    expect((await chat(c)).body.paywall.reason).toBe('allowance_exceeded');
    const reached = await eventsOf(pw, 'paywall.allowance.reached');
    expect(reached).toEqual([
      {
        paywallId: pw.id,
        ownerUserId: expect.any(String),
        walletUserId: c.wallet.walletUserId,
        externalUserId: c.user,
        connectionId: c.connectionId,
        amount: '0.01',
        period: 'day',
        spent: '0.009774',
        resetsAt: '2026-11-26T00:00:00.000Z',
      },
    ]);
    const blockedEvents = await eventsOf(pw, 'paywall.proxy.request.blocked');
    expect(blockedEvents.map((e) => e.reason)).toEqual(['allowance_exceeded', 'allowance_exceeded']);

    // A new UTC day: the count starts again.
    setClock('2026-11-26T00:00:00.000Z');
    expect(await ownerView(c)).toMatchObject({ spent: '0.000000', resetsAt: '2026-11-27T00:00:00.000Z' });
    const next = await chat(c);
    expect(next.body.paywall).toBeUndefined();
    expect(await stored(c)).toEqual({ spent: CHAT_COST, start: '2026-11-26' });
    // The new period may be reached (and announced) again.
    for (let i = 0; i < 12; i++) await chat(c);
    expect(await eventsOf(pw, 'paywall.allowance.reached')).toHaveLength(2);
    await expectLedgerProven(t.db);
  });

  it('week and month by manual charges: a later period resets, an earlier clock never does', async () => {
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await connected(pw);
    setClock('2026-11-29T18:00:00.000Z'); // Sunday
    await setLimit(c, 1_000_000n, 'week');
    expect((await charge(c, '0.6')).body.success).toBe(true);
    const refused = await charge(c, '0.5');
    expect(refused.body).toMatchObject({
      success: false,
      errorCode: 'allowance_exceeded',
      url: `${t.url}/wallet`,
    });
    expect(refused.body.message).toContain('spending limit of 1 USDC per week');
    expect(refused.body.message).toContain('0.6 USDC spent, 0.5 USDC requested. Nothing was charged.');
    expect(await ownerView(c)).toEqual({
      amount: '1.000000',
      period: 'week',
      spent: '0.600000',
      resetsAt: '2026-11-30T00:00:00.000Z',
    });
    const failed = await eventsOf(pw, 'paywall.balance.charge.failed');
    expect(failed.map((e) => e.errorCode)).toEqual(['allowance_exceeded']);
    // Monday: a new week.
    setClock('2026-11-30T00:00:01.000Z');
    expect((await charge(c, '0.5')).body.success).toBe(true);
    expect(await stored(c)).toEqual({ spent: 500_000n, start: '2026-11-30' });
    // Another instance whose clock is behind counts in the stored week: no reset back.
    setClock('2026-11-29T23:59:59.000Z');
    expect((await charge(c, '0.5')).body.success).toBe(true);
    expect((await charge(c, '0.000001')).body.errorCode).toBe('allowance_exceeded');
    expect(await stored(c)).toEqual({ spent: 1_000_000n, start: '2026-11-30' });

    // Month: the count of a new kind of period is what the app spent since it began (its charges).
    setClock('2026-11-30T12:00:00.000Z');
    await setLimit(c, 1_600_000n, 'month');
    expect(await stored(c)).toEqual({ spent: 1_600_000n, start: '2026-11-01' });
    expect((await charge(c, '0.000001')).body.errorCode).toBe('allowance_exceeded');
    setClock('2026-12-01T00:00:00.000Z');
    expect(await ownerView(c)).toMatchObject({ spent: '0.000000', resetsAt: '2027-01-01T00:00:00.000Z' });
    expect((await charge(c, '1.6')).body.success).toBe(true);
    expect((await charge(c, '0.000001')).body.success).toBe(false);
    await expectLedgerProven(t.db);
  });

  it('total never resets; removing the limit (empty) serves again; a limit of 0 refuses everything', async () => {
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await connected(pw);
    setClock('2026-11-25T12:00:00.000Z');
    await setLimit(c, 300_000n, 'total');
    expect((await charge(c, '0.3')).body.success).toBe(true);
    setClock('2027-06-01T00:00:00.000Z');
    expect((await charge(c, '0.000001')).body.errorCode).toBe('allowance_exceeded');
    expect(await ownerView(c)).toEqual({
      amount: '0.300000',
      period: 'total',
      spent: '0.300000',
      resetsAt: null,
    });
    await setLimit(c, null);
    expect(await ownerView(c)).toBeNull();
    expect((await charge(c, '0.000001')).body.success).toBe(true);
    await setLimit(c, 0n, 'day');
    expect((await charge(c, '0.000001')).body.errorCode).toBe('allowance_exceeded');
    const r = await chat(c);
    expect(r.body.paywall.reason).toBe('allowance_exceeded');
    await expectLedgerProven(t.db);
  });
});

describe('a request whose cost goes beyond its hold', () => {
  it("an app's own provider is never paid beyond the hold: the rest is the app's loss, not the wallet's debt", async () => {
    setClock('2026-11-25T12:00:00.000Z');
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await connected(pw);
    await setLimit(c, 10_000n, 'day');
    // A long prompt the provider bills at 3,600 input tokens (the estimate counted about 460; still within
    // what its 3,600 bytes can make): 1000 + 3,600 x 3 + 7 x 7.5 = 11,853 raw units, above the hold
    // (about 9,900) and above the allowance. Before docs/reference.md §5.7 the rest came from the wallet's
    // free balance up to the allowance, and what it could not pay became the wallet's debt.
    fake.next({ usage: { prompt_tokens: 3600, completion_tokens: 7 } });
    const r = await chat(c, { messages: [{ role: 'user', content: 'a'.repeat(3600) }] });
    expect(r.body.paywall).toBeUndefined();
    const [ch] = await t.db.query(
      `select amount_raw::text as amount, uncollected_raw::text as uncollected, hold_raw::text as hold, metadata
         from charge where user_id = $1`,
      [c.endUserId],
    );
    const hold = BigInt(ch.hold);
    expect(hold).toBeLessThan(10_000n);
    expect({ amount: ch.amount, uncollected: ch.uncollected, appLoss: ch.metadata.appLoss }).toEqual({
      amount: hold.toString(),
      uncollected: '0',
      appLoss: (11_853n - hold).toString(),
    });
    expect(r.headers.get('x-paywall-cost')).toBe(usdcDecimal(hold));
    const [acct] = await t.db.query(
      `select balance_raw::text as balance, debt_raw::text as debt from ledger_account where id = $1`,
      [c.wallet.accountId],
    );
    expect(acct).toEqual({ balance: (10_000_000n - hold).toString(), debt: '0' });
    expect(await stored(c)).toEqual({ spent: hold, start: '2026-11-25' });
    await expectLedgerProven(t.db);
  });
});

describe('every metered API counts against it', () => {
  it('stream, Responses, Messages: the blocked reply of each format; embeddings: 402 allowance_exceeded', async () => {
    setClock('2026-11-25T12:00:00.000Z');
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const r0 = await t.gql(
      pw.apiKey,
      `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`,
      { i: { modelId: EMBED, prompt: '0.00000002', request: '0.0001' } },
    );
    expect(r0.errors).toBeUndefined();
    const c = await connected(pw);
    await setLimit(c, 20_000n, 'day');
    // Each API spends from the one allowance.
    const ok = [
      await chat(c),
      await t.rest('POST', '/v1/responses', {
        token: pw.apiKey,
        body: { model: MODEL, input: 'hello', user: c.user },
      }),
      await t.rest('POST', '/v1/messages', {
        headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': c.user },
        body: { model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] },
      }),
      await t.rest('POST', '/v1/embeddings', {
        token: pw.apiKey,
        body: { model: EMBED, input: 'hi', user: c.user },
      }),
    ];
    for (const r of ok) {
      expect(r.status).toBe(200);
      expect(r.body.paywall).toBeUndefined();
    }
    const money = await charged(c);
    expect(money.count).toBe(4);
    expect(await stored(c)).toEqual({ spent: money.sum, start: '2026-11-25' });

    await setLimit(c, 0n, 'day');
    const stream = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${pw.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        stream: true,
        messages: [{ role: 'user', content: 'hi' }],
        user: c.user,
      }),
    });
    const text = await stream.text();
    expect(stream.status).toBe(200);
    expect(text).toContain('"reason":"allowance_exceeded"');
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    const resp = await t.rest('POST', '/v1/responses', {
      token: pw.apiKey,
      body: { model: MODEL, input: 'hello', user: c.user },
    });
    expect(resp.body.paywall).toMatchObject({ reason: 'allowance_exceeded', url: `${t.url}/wallet` });
    const msg = await t.rest('POST', '/v1/messages', {
      headers: { 'x-api-key': pw.apiKey, 'x-paywall-user': c.user },
      body: { model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] },
    });
    expect(msg.status).toBe(200);
    expect(msg.body).toMatchObject({ type: 'message', paywall: { reason: 'allowance_exceeded' } });
    const emb = await t.rest('POST', '/v1/embeddings', {
      token: pw.apiKey,
      body: { model: EMBED, input: 'hi', user: c.user },
    });
    expect(emb.status).toBe(402);
    expect(emb.body).toMatchObject({
      error: { type: 'payment_required', code: 'allowance_exceeded' },
      paywall: { reason: 'allowance_exceeded', url: `${t.url}/wallet` },
    });
    expect(emb.headers.get('x-should-retry')).toBe('false');
    expect(await charged(c)).toEqual(money);
    await expectLedgerProven(t.db);
  });
});

describe('exact under concurrency, per app', () => {
  it('100 concurrent chats against a small allowance never exceed it, to the raw unit', async () => {
    setClock('2026-11-25T12:00:00.000Z');
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await connected(pw);
    const limit = 20_000n;
    await setLimit(c, limit, 'day');
    fake.behavior = { delayMs: 20 };
    try {
      const replies = await Promise.all(Array.from({ length: 100 }, () => chat(c)));
      const served = replies.filter((r) => r.status === 200 && !r.body.paywall);
      const refused = replies.filter((r) => r.body.paywall);
      expect(served.length + refused.length).toBe(100);
      expect(refused.every((r) => r.body.paywall.reason === 'allowance_exceeded')).toBe(true);
      const money = await charged(c);
      expect(money.held).toBe(0);
      expect(money.count).toBe(served.length);
      expect(money.sum).toBe(
        served.reduce((s, r) => s + BigInt(Math.round(Number(r.body.usage.cost) * 1e6)), 0n),
      );
      expect(money.sum).toBeLessThanOrEqual(limit);
      expect(served.length).toBeGreaterThan(0);
      // The stored count is exactly what was captured.
      expect(await stored(c)).toEqual({ spent: money.sum, start: '2026-11-25' });
      expect(await eventsOf(pw, 'paywall.allowance.reached')).toHaveLength(1);
    } finally {
      fake.behavior = {};
    }
    await expectLedgerProven(t.db);
  });

  it('50 concurrent manual charges of 0.001 against 0.02: exactly 20 succeed', async () => {
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const c = await connected(pw);
    await setLimit(c, 20_000n, 'day');
    const replies = await Promise.all(Array.from({ length: 50 }, () => charge(c, '0.001')));
    expect(replies.filter((r) => r.body.success)).toHaveLength(20);
    expect(replies.filter((r) => r.body.errorCode === 'allowance_exceeded')).toHaveLength(30);
    expect((await charged(c)).sum).toBe(20_000n);
    expect((await stored(c)).spent).toBe(20_000n);
    expect(await eventsOf(pw, 'paywall.allowance.reached')).toHaveLength(1);
    await expectLedgerProven(t.db);
  });

  it('two apps on one wallet: each within its own limit, neither counts on the other', async () => {
    setClock('2026-11-25T12:00:00.000Z');
    const a = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const b = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const ca = await connected(a);
    const cb = await connected(b, ca.wallet);
    await setLimit(ca, 5_000n, 'day');
    await setLimit(cb, 12_000n, 'day');
    const run = async (c: Conn) => {
      const out = await Promise.all(Array.from({ length: 30 }, () => chat(c)));
      return out.filter((r) => !r.body.paywall).length;
    };
    const [servedA, servedB] = await Promise.all([run(ca), run(cb)]);
    const [ma, mb] = [await charged(ca), await charged(cb)];
    expect(ma.sum).toBe(CHAT_COST * BigInt(servedA));
    expect(mb.sum).toBe(CHAT_COST * BigInt(servedB));
    expect(ma.sum).toBeLessThanOrEqual(5_000n);
    expect(mb.sum).toBeLessThanOrEqual(12_000n);
    // How many are served depends on timing (a hold in flight reserves its amount of the limit); none
    // may go over, and both apps are served.
    expect(servedA).toBeGreaterThan(0);
    expect(servedB).toBeGreaterThan(0);
    expect((await stored(ca)).spent).toBe(ma.sum);
    expect((await stored(cb)).spent).toBe(mb.sum);
    // One wallet paid both.
    const [acct] = await t.db.query(`select balance_raw::text as b from ledger_account where id = $1`, [
      ca.wallet.accountId,
    ]);
    expect(BigInt(acct.b)).toBe(10_000_000n - ma.sum - mb.sum);
    // The event names only its own app.
    expect((await eventsOf(a, 'paywall.allowance.reached')).map((e) => e.connectionId)).toEqual([
      ca.connectionId,
    ]);
    expect((await eventsOf(b, 'paywall.allowance.reached')).map((e) => e.connectionId)).toEqual([
      cb.connectionId,
    ]);
    // Raising A's limit serves A again.
    await setLimit(ca, 50_000n, 'day');
    expect((await chat(ca)).body.paywall).toBeUndefined();
    await expectLedgerProven(t.db);
  });
});
