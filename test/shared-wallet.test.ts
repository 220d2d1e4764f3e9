import { spawnSync } from 'node:child_process';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { client, createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { connectEndUser, createWallet } from './helpers/wallet-fixtures.js';

/**
 * One wallet, many apps (docs/reference.md §8): a wallet connected to two SHARED paywalls has one balance that
 * both spend; each charge moves the amount to the paywall's earnings less the platform fee; withdrawals
 * take from the earnings. Money is checked to the raw unit, and the ledger proof after each test.
 */
const FEE_BPS = 250n;
const fee = (amount: bigint) => (amount * FEE_BPS) / 10_000n;
const CHAT_COST = 1086n; // 11 prompt + 7 completion tokens at the proxy-setup prices, markup 1.5

let t: TestApp;
let fake: FakeUpstream;
let a: ProxyPaywall;
let b: ProxyPaywall;

beforeAll(async () => {
  fake = await FakeUpstream.start();
  t = await startTestApp({ PLATFORM_FEE_BPS: String(FEE_BPS) });
  a = await createProxyPaywall(t, fake, { mode: 'SHARED' });
  b = await createProxyPaywall(t, fake, { mode: 'SHARED' });
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

/** Sees the user on the paywall (GET /v1/user/connect: not connected yet) and connects it to the wallet. */
async function connect(pw: ProxyPaywall, user: string, wallet: { walletUserId: string; accountId: string }) {
  const r = await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey });
  expect(r.body).toMatchObject({ connected: false });
  await connectEndUser(t.db, pw.id, user, wallet);
}

const balanceOf = async (pw: ProxyPaywall, user: string) =>
  BigInt((await t.rest('GET', `/v1/user/balance?user=${user}`, { token: pw.apiKey })).body.balance);

async function earnings(pw: ProxyPaywall) {
  const r = await t.gql(
    pw.apiKey,
    `{ paywall { earnings { available pending withdrawn fees } earningsHistory(first: 100) { edges { node { kind amount chargeId } } } } }`,
  );
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.paywall;
}

const usdc = (raw: bigint) => {
  const s = raw.toString().padStart(7, '0');
  return `${s.slice(0, -6)}.${s.slice(-6)}`;
};

describe('one wallet, two apps', () => {
  const fund = 1_000_000n;
  let wallet: { walletUserId: string; accountId: string };

  it('a wallet connected to two SHARED paywalls has one balance both read', async () => {
    wallet = await createWallet(t.db, { fundRaw: fund });
    await connect(a, 'ann', wallet);
    await connect(b, 'ben', wallet);
    expect(await balanceOf(a, 'ann')).toBe(fund);
    expect(await balanceOf(b, 'ben')).toBe(fund);
    const c = await t.rest('GET', '/v1/user/connect?user=ann', { token: a.apiKey });
    expect(c.body).toMatchObject({
      connected: true,
      connectedUser: { paywallKeyId: a.id, userId: wallet.walletUserId, externalUserId: 'ann' },
    });
    // An unconnected user of the same paywall reads 0.
    expect(await balanceOf(a, 'stranger')).toBe(0n);
    await expectLedgerProven(t.db);
  });

  it('after chats, streams and manual charges on both, each paywall earns its charges less fees, to the raw unit', async () => {
    const charged = new Map<string, bigint[]>([
      [a.id, []],
      [b.id, []],
    ]);
    const chat = async (pw: ProxyPaywall, user: string) => {
      const r = await client(t, pw, user).chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
      });
      const cost = BigInt(Math.round(Number((r.usage as any).cost) * 1e6));
      expect(cost).toBe(CHAT_COST);
      charged.get(pw.id)!.push(cost);
    };
    const stream = async (pw: ProxyPaywall, user: string) => {
      const s = await client(t, pw, user).chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let cost: bigint | null = null;
      for await (const chunk of s)
        if ((chunk.usage as any)?.cost) cost = BigInt(Math.round(Number((chunk.usage as any).cost) * 1e6));
      expect(cost).toBe(CHAT_COST);
      charged.get(pw.id)!.push(cost!);
    };
    const manual = async (pw: ProxyPaywall, user: string, raw: bigint) => {
      const r = await t.rest('POST', '/v1/user/charge', {
        token: pw.apiKey,
        body: { user, amount: usdc(raw) },
      });
      expect(r.body).toMatchObject({ success: true });
      charged.get(pw.id)!.push(raw);
    };
    await chat(a, 'ann');
    await stream(a, 'ann');
    await chat(b, 'ben');
    await manual(a, 'ann', 50_000n);
    await stream(b, 'ben');
    await manual(b, 'ben', 12_345n);
    await Promise.all([chat(a, 'ann'), chat(b, 'ben'), stream(a, 'ann')]);

    const all = [...charged.get(a.id)!, ...charged.get(b.id)!];
    const spent = all.reduce((s, x) => s + x, 0n);
    expect(await balanceOf(a, 'ann')).toBe(fund - spent);
    expect(await balanceOf(b, 'ben')).toBe(fund - spent);

    for (const pw of [a, b]) {
      const mine = charged.get(pw.id)!;
      const fees = mine.reduce((s, x) => s + fee(x), 0n);
      const gross = mine.reduce((s, x) => s + x, 0n);
      const e = await earnings(pw);
      expect(e.earnings).toEqual({
        available: usdc(gross - fees),
        pending: '0.000000',
        withdrawn: '0.000000',
        fees: usdc(fees),
      });
      // The earnings history: one entry per charge, of the charge less its fee.
      const credits = e.earningsHistory.edges.map((x: any) => x.node.amount).sort();
      expect(credits).toEqual(mine.map((x) => usdc(x - fee(x))).sort());
    }
    // The fee account holds every fee; the wallet, the two earnings and the fees add up with world to 0.
    await expectLedgerProven(t.db);
  });

  it('a revoked user reads 0 and is refused; the wallet keeps its balance for the other app', async () => {
    const before = await balanceOf(b, 'ben');
    const r = await t.rest('GET', '/v1/user/disconnect?user=ann', { token: a.apiKey });
    expect(r.body).toMatchObject({ success: true });
    expect(await balanceOf(a, 'ann')).toBe(0n);
    const c = await t.rest('POST', '/v1/user/charge', {
      token: a.apiKey,
      body: { user: 'ann', amount: '0.01' },
    });
    expect(c.body).toMatchObject({ success: false });
    expect(c.body.url).toMatch(new RegExp(`^${t.url}/connect/${a.id}\\?request=[0-9a-f-]{36}$`));
    expect(await balanceOf(b, 'ben')).toBe(before);
    const conns = await t.gql(
      a.apiKey,
      `{ paywall { connections { edges { node { externalUserId walletUserId status revokedAt } } } } }`,
    );
    expect(conns.data.paywall.connections.edges).toEqual([
      {
        node: {
          externalUserId: 'ann',
          walletUserId: wallet.walletUserId,
          status: 'REVOKED',
          revokedAt: expect.any(String),
        },
      },
    ]);
    await expectLedgerProven(t.db);
  });
});

describe('what a SHARED app may do and see', () => {
  it('one manual charge is capped (SHARED_MAX_MANUAL_CHARGE, default 5 USDC): over it, success false and nothing moves', async () => {
    expect(t.config.SHARED_MAX_MANUAL_CHARGE).toBe(5_000_000n);
    const wallet = await createWallet(t.db, { fundRaw: 20_000_000n });
    await connect(a, 'cap', wallet);
    const charge = (amount: string) =>
      t.rest('POST', '/v1/user/charge', { token: a.apiKey, body: { user: 'cap', amount } });
    const over = await charge('5.000001');
    expect(over.status).toBe(200);
    expect(over.body).toEqual({
      success: false,
      message:
        'A single manual charge of a shared-wallet user is limited to 5 USDC; 5.000001 USDC was requested. Nothing was charged.',
      url: null,
      errorCode: 'charge_limit_exceeded',
      chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect(await balanceOf(a, 'cap')).toBe(20_000_000n);
    const failed = await t.db.query(
      `select c.status, c.error_code, c.amount_raw::text as amount from charge c join end_user u on u.id = c.user_id
        where u.external_id = 'cap' and c.paywall_id = $1`,
      [a.id],
    );
    expect(failed).toEqual([{ status: 'failed', error_code: 'charge_limit_exceeded', amount: '5000001' }]);
    const ev = await t.db.query(
      `select type, data from event where paywall_id = $1 and subject->>'externalId' = 'cap' order by seq`,
      [a.id],
    );
    expect(ev.map((e) => e.type)).toEqual([
      'paywall.authorization.requested',
      'paywall.balance.charge.failed',
    ]);
    expect(ev[1].data).toMatchObject({ amount: '5.000001', errorCode: 'charge_limit_exceeded' });
    // GraphQL says the same.
    const g = await t.gql(
      a.apiKey,
      `mutation { charge(input: {user: "cap", amount: "6"}) { success errorCode url balance } }`,
    );
    expect(g.data.charge).toEqual({
      success: false,
      errorCode: 'charge_limit_exceeded',
      url: null,
      balance: '20000000',
    });
    // At the cap it goes through; the operator may raise it.
    expect((await charge('5')).body).toEqual({
      success: true,
      message: 'Charged 5 USDC.',
      chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    const cap = t.config.SHARED_MAX_MANUAL_CHARGE;
    t.config.SHARED_MAX_MANUAL_CHARGE = 6_000_000n;
    try {
      expect((await charge('6')).body).toMatchObject({ success: true });
    } finally {
      t.config.SHARED_MAX_MANUAL_CHARGE = cap;
    }
    expect(await balanceOf(a, 'cap')).toBe(9_000_000n);
    await expectLedgerProven(t.db);
  });

  it('blocked chats of an unconnected user hand out one pending link: one request row, one requested event', async () => {
    const ask = async () => {
      const c = await client(t, a, 'blocked-twice').chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
      });
      return (c as any).paywall as { reason: string; url: string };
    };
    const first = await ask();
    const second = await ask();
    expect(first.reason).toBe('not_connected');
    expect(second.url).toBe(first.url);
    const connect = await t.rest('GET', '/v1/user/connect?user=blocked-twice', { token: a.apiKey });
    expect(connect.body.url).toBe(first.url);
    const rows = await t.db.query(
      `select r.id from connect_request r join end_user e on e.id = r.end_user_id
        where r.paywall_id = $1 and e.external_id = 'blocked-twice'`,
      [a.id],
    );
    expect(rows).toHaveLength(1);
    const types = await t.db.query(
      `select type from event where paywall_id = $1 and subject->>'externalId' = 'blocked-twice' order by seq`,
      [a.id],
    );
    // Every hand-out (two blocked chats, one connect call) is announced, all naming the one request.
    const requested = await t.db.query<any>(
      `select data->>'requestId' as "requestId" from event
        where paywall_id = $1 and type = 'paywall.authorization.requested' and subject->>'externalId' = 'blocked-twice'`,
      [a.id],
    );
    expect(requested.map((e) => e.requestId)).toEqual([rows[0].id, rows[0].id, rows[0].id]);
    expect(types.filter((e) => e.type === 'paywall.request.blocked')).toHaveLength(2);
  });

  it("an app sees the wallet's free balance, never another app's charges, ledger, metadata or events", async () => {
    const wallet = await createWallet(t.db, { fundRaw: 10_000_000n });
    await connect(a, 'vis-a', wallet);
    await connect(b, 'vis-b', wallet);
    const byB = await t.gql(
      b.apiKey,
      `mutation { charge(input: {user: "vis-b", amount: "1", metadata: {note: "only-for-b"}}) { success charge { id } } }`,
    );
    expect(byB.data.charge.success).toBe(true);
    const bChargeId = byB.data.charge.charge.id;
    const chat = await client(t, b, 'vis-b').chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.choices[0].message.content).toBeTruthy();

    // The one number shared by every app of the wallet: its free balance.
    expect(await balanceOf(a, 'vis-a')).toBe(10_000_000n - 1_000_000n - CHAT_COST);
    // A's view of its user lists nothing of B's.
    const seen = await t.gql(
      a.apiKey,
      `{ user(externalId: "vis-a") { balance held ledgerEntries { edges { node { id kind amount chargeId } } }
           charges { edges { node { id kind amount metadata } } } } }`,
    );
    expect(seen.errors).toBeUndefined();
    expect(seen.data.user.ledgerEntries.edges).toEqual([]);
    expect(seen.data.user.charges.edges).toEqual([]);
    expect(seen.data.user.balance).toBe(String(10_000_000n - 1_000_000n - CHAT_COST));
    // A's events (and so its webhooks and live subscriptions) carry nothing of B's activity.
    const aEvents = await t.db.query(
      `select type, data::text as data, metadata::text as meta from event where paywall_id = $1`,
      [a.id],
    );
    for (const e of aEvents) {
      expect(e.data).not.toContain(bChargeId);
      expect(e.data).not.toContain(b.id);
      expect(e.meta ?? '').not.toContain('only-for-b');
    }
    const aUser = aEvents.filter((e) => e.data.includes('vis-a')).map((e) => e.type);
    expect(aUser).toEqual(['paywall.authorization.requested']);
    // B's own view has both of its charges.
    const bSeen = await t.gql(
      b.apiKey,
      `{ user(externalId: "vis-b") { charges { edges { node { id kind } } } } }`,
    );
    expect(bSeen.data.user.charges.edges.map((e: any) => e.node.kind).sort()).toEqual(['manual', 'usage']);
    await expectLedgerProven(t.db);
  });
});

describe('withdrawals', () => {
  const q = `mutation($i: RequestWithdrawalInput!) { requestWithdrawal(input: $i) { id amount destination status } }`;

  it('take from the available earnings at once; cancel returns them; more than available is refused', async () => {
    const start = (await earnings(a)).earnings.available;
    const r = await t.gql(a.apiKey, q, { i: { amount: '0.01', destination: 'IBAN DE00 1234' } });
    expect(r.errors).toBeUndefined();
    expect(r.data.requestWithdrawal).toMatchObject({
      amount: '0.010000',
      destination: 'IBAN DE00 1234',
      status: 'PENDING',
    });
    const after = (await earnings(a)).earnings;
    expect(after.pending).toBe('0.010000');
    expect(BigInt(after.available.replace('.', ''))).toBe(BigInt(start.replace('.', '')) - 10_000n);

    const cancel = await t.gql(a.apiKey, `mutation($id: ID!) { cancelWithdrawal(id: $id) { status } }`, {
      id: r.data.requestWithdrawal.id,
    });
    expect(cancel.data.cancelWithdrawal.status).toBe('CANCELED');
    expect((await earnings(a)).earnings).toMatchObject({ available: start, pending: '0.000000' });
    const again = await t.gql(a.apiKey, `mutation($id: ID!) { cancelWithdrawal(id: $id) { status } }`, {
      id: r.data.requestWithdrawal.id,
    });
    expect(again.errors?.[0].message).toMatch(/is CANCELED; only a PENDING withdrawal can be canceled/);

    const tooMuch = await t.gql(a.apiKey, q, { i: { amount: '1000', destination: 'x' } });
    expect(tooMuch.errors?.[0].message).toMatch(/^Insufficient earnings: /);
    const bad = await t.gql(a.apiKey, q, { i: { amount: '-1', destination: 'x' } });
    expect(bad.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(bad.errors?.[0].message).toMatch(/amount/);
    // Another paywall's key cannot cancel it.
    const w = await t.gql(a.apiKey, q, { i: { amount: '0.001', destination: 'acct-1' } });
    const foreign = await t.gql(b.apiKey, `mutation($id: ID!) { cancelWithdrawal(id: $id) { status } }`, {
      id: w.data.requestWithdrawal.id,
    });
    expect(foreign.errors?.[0].message).toMatch(/not found/);
    expect((await earnings(a)).earnings.pending).toBe('0.001000');
    await expectLedgerProven(t.db);
  });

  it('the operator marks them paid (funds leave) or failed (funds return)', async () => {
    const paid = await t.gql(a.apiKey, q, { i: { amount: '0.002', destination: 'acct-2' } });
    const failed = await t.gql(a.apiKey, q, { i: { amount: '0.003', destination: 'acct-3' } });
    const before = (await earnings(a)).earnings;
    const earningsSvc = t.app.services.earnings;
    const queue = await earningsSvc.list('PENDING');
    expect(queue.map((w) => w.id)).toEqual(
      expect.arrayContaining([paid.data.requestWithdrawal.id, failed.data.requestWithdrawal.id]),
    );
    if (process.env.DATABASE_URL) {
      // The CLI, as the operator runs it, against the same PostgreSQL database.
      const url = new URL(t.config.DATABASE_URL!);
      const run = (...argv: string[]) =>
        spawnSync(process.execPath, ['dist/src/admin.js', ...argv], {
          env: { ...process.env, DATABASE_URL: url.toString(), LOG_LEVEL: 'silent' },
          encoding: 'utf8',
        });
      const list = run('withdrawals', 'list');
      expect(list.status).toBe(0);
      expect(list.stdout).toContain(paid.data.requestWithdrawal.id);
      const out = run('withdrawals', 'mark-paid', paid.data.requestWithdrawal.id);
      expect(out.status).toBe(0);
      expect(JSON.parse(out.stdout)).toMatchObject({ status: 'PAID', amount: '0.002000' });
      const again = run('withdrawals', 'mark-paid', paid.data.requestWithdrawal.id);
      expect(again.status).toBe(1);
      expect(again.stderr).toMatch(/is PAID; only a PENDING withdrawal can be marked PAID/);
      const verify = run('ledger', 'verify');
      expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true, total: '0' });
    } else {
      await earningsSvc.markPaid(paid.data.requestWithdrawal.id);
    }
    await earningsSvc.markFailed(failed.data.requestWithdrawal.id, 'account closed');
    const after = (await earnings(a)).earnings;
    expect(after.withdrawn).toBe('0.002000');
    expect(after.available).toBe(usdc(BigInt(before.available.replace('.', '')) + 3_000n));
    const list = await t.gql(
      a.apiKey,
      `{ paywall { withdrawals { edges { node { amount status failureReason } } } } }`,
    );
    expect(list.data.paywall.withdrawals.edges.slice(0, 2)).toEqual([
      { node: { amount: '0.003000', status: 'FAILED', failureReason: 'account closed' } },
      { node: { amount: '0.002000', status: 'PAID', failureReason: null } },
    ]);
    await expectLedgerProven(t.db);
  });

  it('a DEFAULT paywall has no withdrawals', async () => {
    const d = await t.createPaywall('DEFAULT');
    const r = await t.gql(d.apiKey, q, { i: { amount: '1', destination: 'x' } });
    expect(r.errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      errorCode: 'unsupported_in_mode',
    });
  });
});

describe('concurrency', () => {
  it('100 concurrent chats from two paywalls never overspend one small wallet; each settled request is one set of transfers', async () => {
    const small = 10n * CHAT_COST + 500n;
    const w = await createWallet(t.db, { fundRaw: small });
    await connect(a, 'cat', w);
    await connect(b, 'cal', w);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        client(t, i % 2 ? a : b, i % 2 ? 'cat' : 'cal')
          .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
          .then((r: any) => (r.paywall ? 'blocked' : 'ok')),
      ),
    );
    const ok = results.filter((r) => r === 'ok').length;
    const bal = BigInt(
      (
        await t.db.query(
          `select balance_raw::text as b, held_raw::text as h from ledger_account where id = $1`,
          [w.accountId],
        )
      )[0].b,
    );
    expect(bal).toBe(small - BigInt(ok) * CHAT_COST);
    expect(bal >= 0n).toBe(true);
    expect(ok).toBeGreaterThan(0);
    expect(ok).toBeLessThanOrEqual(10);
    const legs = await t.db.query(
      `select c.id, count(t.*) filter (where t.kind = 'usage')::int as usage, count(t.*) filter (where t.kind = 'fee')::int as fee,
              sum(t.amount_raw)::text as total
         from charge c left join transfer t on t.charge_id = c.id
        where c.account_id = $1 and c.status = 'completed' group by c.id`,
      [w.accountId],
    );
    expect(legs).toHaveLength(ok);
    for (const l of legs) expect(l).toMatchObject({ usage: 1, fee: 1, total: CHAT_COST.toString() });
    const open = await t.db.query(
      `select count(*)::int as n from charge where account_id = $1 and status = 'held'`,
      [w.accountId],
    );
    expect(open[0].n).toBe(0);
    await expectLedgerProven(t.db);
  });
});
