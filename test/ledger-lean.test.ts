import { randomUUID } from 'node:crypto';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, testHold, testSettlement } from './helpers/ledger.js';
import { connectEndUser, createWallet } from './helpers/wallet-fixtures.js';
import { holdOutcome } from '../src/modules/proxy/ledger-batch.js';
import { ledgerTick, type ReserveInput, type SettleInput } from '../src/modules/ledger/holds.js';
import { buildEvent } from '../src/modules/events/event-payloads.js';
import { FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID } from '../src/modules/accounts/accounts.js';

/**
 * The lean path (ledger_hold_one / ledger_settle_one: one operation with nothing to batch with) and the
 * batch statement must be the same ledger: every case below runs twice, on twin end users of one paywall,
 * once through each, and the answers and every row written (accounts, counters, allowances, charges,
 * transfers, events) must be equal, to the raw unit.
 */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const DAY = '2026-11-24';
const AT = new Date('2026-11-24T10:00:00Z');

type Op =
  | { hold: Partial<ReserveInput> }
  | { settle: number; captured: bigint; over?: Partial<SettleInput>; again?: boolean };

interface Case {
  name: string;
  shared?: boolean;
  /** DEFAULT: deposit (raw); SHARED: the wallet's funds (raw). */
  fund: bigint;
  /** SHARED: connect the end user to a wallet (false: seen but never connected). */
  connect?: boolean;
  allowance?: { raw: bigint; period: 'day' | 'week' | 'month' | 'total'; spent?: bigint; start?: string };
  counter?: { day: string; requests: number; spend: bigint; models: Record<string, number> };
  debt?: bigint;
  /** An end-user key (docs/reference.md §19) the holds come with, with this spending limit (none: null). */
  keyLimit?: {
    raw: bigint;
    period: 'day' | 'week' | 'month' | 'total';
    spent?: bigint;
    start?: string;
  } | null;
  ops: Op[];
}

const per = (raw: bigint) => raw * 10n ** 12n;
const CASES: Case[] = [
  {
    name: 'holds at the full cap and settles below it',
    fund: 1_000_000n,
    ops: [
      { hold: {} },
      { settle: 0, captured: 400n, over: { relayedResponse: { id: 'resp-1', tokens: 42n } } },
      // Settled already: refused, but the relayed answer is remembered all the same (its new size).
      { settle: 0, captured: 400n, again: true, over: { relayedResponse: { id: 'resp-1', tokens: 50n } } },
    ],
  },
  {
    name: 'lowers the cap to what the balance affords (per-token price)',
    fund: 5_000n,
    ops: [
      { hold: { fixedScaled: per(100n), perTokenScaled: per(1_000n), maxCap: 100, minCap: 1 } },
      { settle: 0, captured: 4_100n },
    ],
  },
  {
    name: 'refuses what the balance cannot afford, and a user it does not know',
    fund: 500n,
    ops: [{ hold: {} }, { hold: { externalUserId: 'nobody-here' } }],
  },
  {
    name: 'a settlement beyond the hold records what it could not collect as debt',
    fund: 3_000n,
    ops: [
      { hold: {} },
      { settle: 0, captured: 1_000n, over: { uncollectedRaw: 700n } },
      { hold: { maxDebtRaw: 100n } },
      { hold: { maxDebtRaw: 1_000n } },
    ],
  },
  {
    name: 'daily request, model and spend limits (today counted; another day starts over)',
    fund: 1_000_000n,
    counter: { day: DAY, requests: 2, spend: 1_500n, models: { m: 1, other: 4 } },
    ops: [
      { hold: { requestLimit: 3 } },
      { hold: { requestLimit: 3 } },
      { hold: { modelRequestLimit: 2, model: 'other' } },
      { hold: { modelRequestLimit: 5, model: 'other' } },
      { hold: { spendLimitRaw: 3_000n } },
      { hold: { spendLimitRaw: 5_000n } },
      { settle: 5, captured: 10n },
      { settle: 3, captured: 0n, over: { status: 'released', promptTokens: null, completionTokens: null } },
      { hold: { day: '2026-11-25', requestLimit: 1 } },
      { hold: { spendLimitRaw: 1_500n, fixedScaled: per(1_000n), minCap: 1 } },
    ],
  },
  {
    name: 'the API rate limit counts every request of its minute',
    fund: 1_000_000n,
    ops: [
      { hold: { rateLimit: 2, rateWindow: AT } },
      { hold: { rateLimit: 2, rateWindow: AT } },
      { hold: { rateLimit: 2, rateWindow: AT } },
      { hold: { rateLimit: 2, rateWindow: new Date('2026-11-24T10:01:00Z') } },
    ],
  },
  {
    name: 'SHARED: fee and provider legs; not connected is refused',
    shared: true,
    fund: 1_000_000n,
    ops: [
      { hold: {} },
      { settle: 0, captured: 900n, over: { earningsRaw: 600n, feeRaw: 100n, providerRaw: 200n } },
    ],
  },
  { name: 'SHARED: an end user not connected', shared: true, connect: false, fund: 0n, ops: [{ hold: {} }] },
  {
    name: 'SHARED: an allowance counts holds, gives back what settlements did not capture, and refuses',
    shared: true,
    fund: 1_000_000n,
    allowance: { raw: 2_500n, period: 'day', spent: 0n, start: DAY },
    ops: [
      { hold: {} },
      { hold: {} },
      { settle: 0, captured: 300n },
      { hold: {} },
      { hold: {} },
      { settle: 1, captured: 1_000n },
    ],
  },
  {
    name: 'SHARED: an allowance used up in an earlier period starts over',
    shared: true,
    fund: 1_000_000n,
    allowance: { raw: 1_500n, period: 'week', spent: 1_500n, start: '2026-11-16' },
    ops: [{ hold: {} }, { hold: {} }, { settle: 0, captured: 1_000n }],
  },
  {
    name: "an end-user key's limit counts holds, gives back what settlements did not capture, and refuses",
    fund: 1_000_000n,
    keyLimit: { raw: 2_500n, period: 'day', spent: 0n, start: DAY },
    ops: [
      { hold: {} },
      { hold: {} },
      { settle: 0, captured: 300n },
      { hold: {} },
      { hold: {} },
      { settle: 1, captured: 1_000n },
    ],
  },
  {
    name: "an end-user key's limit used up in an earlier period starts over",
    fund: 1_000_000n,
    keyLimit: { raw: 1_500n, period: 'week', spent: 1_500n, start: '2026-11-16' },
    ops: [{ hold: {} }, { hold: {} }, { settle: 0, captured: 1_000n }],
  },
  {
    name: "SHARED: the key's limit below the allowance is the bound that refuses; both count",
    shared: true,
    fund: 1_000_000n,
    allowance: { raw: 5_000n, period: 'month', spent: 0n, start: '2026-11-01' },
    keyLimit: { raw: 1_500n, period: 'total' },
    ops: [{ hold: {} }, { hold: {} }, { settle: 0, captured: 200n }, { hold: {} }],
  },
  {
    name: 'a key without a limit is written on the charge and counts nothing of its own',
    fund: 1_000_000n,
    keyLimit: null,
    ops: [{ hold: {} }, { settle: 0, captured: 500n }],
  },
];

/** The id of the end-user key of `user` (none: undefined). */
async function keyOf(paywallId: string, user: string): Promise<string | undefined> {
  const [k] = await t.db.query<any>(
    `select k.id from user_key k join end_user e on e.id = k.end_user_id where e.paywall_id = $1 and e.external_id = $2`,
    [paywallId, user],
  );
  return k?.id;
}

async function setUp(pw: { id: string; apiKey: string }, c: Case, user: string): Promise<void> {
  if (!c.shared) {
    await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user, amount: (Number(c.fund) / 1e6).toFixed(6) },
    });
  } else {
    const [{ id }] = await t.db.query<any>(
      `with u as (insert into end_user (id, paywall_id, external_id) values (gen_random_uuid(), $1, $2) returning id),
            k as (insert into usage_counter (end_user_id) select id from u)
       select id from u`,
      [pw.id, user],
    );
    if (c.connect !== false) {
      await connectEndUser(t.db, pw.id, user, await createWallet(t.db, { fundRaw: c.fund }));
      if (c.allowance)
        await t.db.query(
          `update wallet_connection set allowance_raw = $2, allowance_period = $3, allowance_spent_raw = $4,
                  allowance_period_start = $5 where end_user_id = $1`,
          [
            id,
            c.allowance.raw.toString(),
            c.allowance.period,
            (c.allowance.spent ?? 0n).toString(),
            c.allowance.start,
          ],
        );
    }
  }
  if (c.keyLimit !== undefined)
    await t.db.query(
      `insert into user_key (id, paywall_id, end_user_id, name, key_hash, last_four, limit_raw, limit_period,
                             limit_spent_raw, limit_period_start)
       select gen_random_uuid(), $1, e.id, 'k', md5(random()::text) || md5(random()::text), 'abcd', $3, $4, $5, $6
         from end_user e where e.paywall_id = $1 and e.external_id = $2`,
      [
        pw.id,
        user,
        c.keyLimit?.raw.toString() ?? null,
        c.keyLimit?.period ?? null,
        (c.keyLimit?.spent ?? 0n).toString(),
        c.keyLimit?.start ?? null,
      ],
    );
  if (c.counter)
    await t.db.query(
      `update usage_counter set day = $2, requests = $3, spend_raw = $4, model_requests = $5
        where end_user_id = (select id from end_user where paywall_id = $1 and external_id = $6)`,
      [pw.id, c.counter.day, c.counter.requests, c.counter.spend.toString(), c.counter.models, user],
    );
  if (c.debt)
    await t.db.query(
      `update ledger_account set debt_raw = $2 where id = (select account_id from end_user where paywall_id = $1 and external_id = $3)`,
      [pw.id, c.debt.toString(), user],
    );
}

/** Runs the case's operations for `user`, one statement each, through the lean path or the batch statement. */
async function run(pw: { id: string; ownerId: string }, c: Case, user: string, lean: boolean) {
  const holds: ReserveInput[] = [];
  const answers: unknown[] = [];
  // The twins share a paywall, and with it the API rate limit's minute: each run starts it afresh.
  await t.db.query(`delete from rate_window where paywall_id = $1`, [pw.id]);
  const trigger = { source: 'proxy' as const, actorType: 'api_key' as const, actorId: pw.id };
  const userKeyId = await keyOf(pw.id, user);
  for (const op of c.ops) {
    if ('hold' in op) {
      const chargeId = randomUUID();
      const ctx = { paywall: { id: pw.id, ownerId: pw.ownerId }, trigger };
      const h = testHold(pw.id, user, {
        chargeId,
        requireConnected: !!c.shared,
        day: DAY,
        at: AT,
        rateWindow: AT,
        ...(userKeyId ? { userKeyId } : {}),
        events: [
          buildEvent(
            'paywall.proxy.request.started',
            { ...ctx, subject: { type: 'request', id: chargeId, externalId: user } },
            { requestId: chargeId, model: 'm', stream: false },
          ),
        ],
        ...op.hold,
      });
      holds.push(h);
      const r = await ledgerTick(t.db, [h], [], { lean });
      answers.push(
        r.holds.map(
          (x) =>
            x && {
              ...x,
              userId: !!x.userId,
              walletUserId: !!x.walletUserId,
              accountId: !!x.accountId,
              allowance: x.allowance && { ...x.allowance, connectionId: !!x.allowance.connectionId },
            },
        ),
      );
    } else {
      const h = holds[op.settle];
      // Response ids are per twin (they share the paywall, and with it the relayed_response keys).
      const relayed = op.over?.relayedResponse;
      const s = testSettlement(h, op.captured, {
        events: [
          buildEvent(
            'paywall.proxy.request.completed',
            {
              paywall: { id: pw.id, ownerId: pw.ownerId },
              trigger,
              subject: { type: 'request', id: h.chargeId, externalId: user },
            },
            { requestId: h.chargeId, walletUserId: 'w', model: 'm', provider: 'default' },
          ),
        ],
        ...op.over,
        ...(relayed ? { relayedResponse: { ...relayed, id: `${user}-${relayed.id}` } } : {}),
      });
      answers.push(await ledgerTick(t.db, [], [s], { lean }));
    }
  }
  return { answers, state: await state(pw.id, user, holds) };
}

/** Every row the operations of `user` wrote or changed, with its ids replaced by their place. */
async function state(paywallId: string, user: string, holds: ReserveInput[]) {
  const idx = (id: string) => {
    const i = holds.findIndex((h) => h.chargeId === id);
    return i < 0 ? id : `charge#${i}`;
  };
  const [u] = await t.db.query<any>(
    `select e.id, e.account_id from end_user e where e.paywall_id = $1 and e.external_id = $2`,
    [paywallId, user],
  );
  const account = await t.db.query(
    `select balance_raw::text, held_raw::text, debt_raw::text from ledger_account where id = $1`,
    [u.account_id],
  );
  const counter = await t.db.query(
    `select day::text, requests, spend_raw::text, model_requests from usage_counter where end_user_id = $1`,
    [u.id],
  );
  const allowance = await t.db.query(
    `select allowance_spent_raw::text, allowance_period_start::text from wallet_connection where end_user_id = $1`,
    [u.id],
  );
  const charges = (
    await t.db.query<any>(
      `select id, status, hold_raw::text, amount_raw::text, uncollected_raw::text, max_completion_tokens, model,
              prompt_tokens, completion_tokens, error_code, metadata, settled_at is not null as settled,
              user_key_id is not null as with_key
         from charge where user_id = $1 order by created_at, id`,
      [u.id],
    )
  )
    .map((c) => ({
      ...c,
      id: idx(c.id),
      metadata: {
        ...c.metadata,
        ...(c.metadata.allowance ? { allowance: { ...c.metadata.allowance, id: 'x' } } : {}),
      },
    }))
    .sort((a, b) => String(a.id).localeCompare(String(b.id)));
  const transfers = (
    await t.db.query<any>(
      `select kind, charge_id, amount_raw::text, balance_after_raw::text, credit_account_id, metadata
         from transfer where end_user_id = $1 and charge_id is not null order by seq`,
      [u.id],
    )
  ).map((x) => ({
    ...x,
    charge_id: idx(x.charge_id),
    credit_account_id: [FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID].includes(x.credit_account_id)
      ? x.credit_account_id
      : 'earnings',
  }));
  const events = (
    await t.db.query<any>(
      `select type, version, trigger, subject, data, metadata from event
        where paywall_id = $1 and subject->>'externalId' = $2 and type like 'paywall.proxy.%' order by seq`,
      [paywallId, user],
    )
  ).map((e) => ({
    ...e,
    subject: { ...e.subject, id: idx(e.subject.id), externalId: 'u' },
    data: {
      ...e.data,
      requestId: idx(e.data.requestId),
      walletUserId: e.data.walletUserId === u.id ? 'self' : e.data.walletUserId === 'w' ? 'w' : 'wallet',
    },
  }));
  const relayed = await t.db.query(
    `select substr(id, length($2) + 2) as id, tokens::text from relayed_response
      where paywall_id = $1 and id like $2 || '-%' order by id`,
    [paywallId, user],
  );
  const key = await t.db.query(
    `select limit_spent_raw::text, limit_period_start::text from user_key where end_user_id = $1`,
    [u.id],
  );
  return { account, counter, allowance, key, charges, transfers, events, relayed };
}

it.each(CASES.map((c) => [c.name, c] as const))('lean path and batch statement agree: %s', async (_, c) => {
  const pw = await t.createPaywall(c.shared ? 'SHARED' : 'DEFAULT');
  const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
    pw.id,
  ]);
  await setUp(pw, c, 'lean');
  await setUp(pw, c, 'batch');
  const lean = await run({ id: pw.id, ownerId }, c, 'lean', true);
  const batch = await run({ id: pw.id, ownerId }, c, 'batch', false);
  expect(lean).toEqual(batch);
  // The case did something: at least one hold decided (placed or refused) and a row written.
  expect(lean.answers.length).toBe(c.ops.length);
  if (c.name.startsWith('holds at the full cap'))
    expect(lean.state.relayed).toEqual([{ id: 'resp-1', tokens: '50' }]);
  await expectLedgerProven(t.db);
});

it('each case exercises what it says (the answers of the lean path)', async () => {
  const pw = await t.createPaywall();
  const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
    pw.id,
  ]);
  const limits = CASES.find((c) => c.name.startsWith('daily'))!;
  await setUp(pw, limits, 'check');
  const { answers, state } = await run({ id: pw.id, ownerId }, limits, 'check', true);
  const held = (answers.slice(0, 6) as any[]).map((a) => [a[0].held, a[0].limit]);
  expect(held).toEqual([
    [true, null],
    [false, 'dailyRequestLimit'],
    [false, 'modelDailyRequestLimit'],
    [true, null],
    [false, 'dailySpendLimit'],
    [true, null],
  ]);
  // Another day: the request limit counts from 0 again.
  expect((answers[8] as any)[0]).toMatchObject({ held: true, limit: null });
  // Placed (holds numbered in order): 0, 3, 5 today; 6 the next day; 7 today again (the counter moved on).
  expect(state.charges.map((c: any) => [c.id, c.status])).toEqual([
    ['charge#0', 'held'],
    ['charge#3', 'released'],
    ['charge#5', 'completed'],
    ['charge#6', 'held'],
    ['charge#7', 'held'],
  ]);
});

it('a batch remembers each relayed answer once, the last settlement of it winning (no conflict within the statement)', async () => {
  const pw = await t.createPaywall();
  await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'rr', amount: '1' } });
  const [a, b] = [testHold(pw.id, 'rr'), testHold(pw.id, 'rr')];
  await ledgerTick(t.db, [a, b], []);
  const relayedResponse = (tokens: bigint) => ({ id: 'resp-same', tokens });
  const r = await ledgerTick(
    t.db,
    [],
    [
      testSettlement(a, 10n, { relayedResponse: relayedResponse(7n) }),
      testSettlement(b, 20n, { relayedResponse: relayedResponse(9n) }),
    ],
  );
  expect(r.settlements).toEqual([true, true]);
  expect(
    await t.db.query(`select tokens::text from relayed_response where paywall_id = $1 and id = 'resp-same'`, [
      pw.id,
    ]),
  ).toEqual([{ tokens: '9' }]);
  await expectLedgerProven(t.db);
});

it("the key cases exercise what they say: the key's limit refuses (key_limit), counts to the raw unit, and names the key on the charge", async () => {
  const pw = await t.createPaywall();
  const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
    pw.id,
  ]);
  const c = CASES.find((x) => x.name.startsWith("an end-user key's limit counts"))!;
  await setUp(pw, c, 'keycheck');
  const { answers, state } = await run({ id: pw.id, ownerId }, c, 'keycheck', true);
  const holds = [0, 1, 3, 4].map((i) => (answers[i] as any)[0]);
  // 2,500 per day, 1,000 a hold: two placed (2,000), the third refused by the key's rest (500); after the
  // first settled at 300 (700 given back: 1,300 spent) one more fits, then none.
  expect(holds.map((h) => [h.held, h.keyLimitExceeded, h.keyLimit.spentRaw])).toEqual([
    [true, false, 0n],
    [true, false, 1_000n],
    [true, false, 1_300n],
    [false, true, 2_300n],
  ]);
  // The last settlement captured 1,000 of its 1,000 hold: 300 + 1,000 + 1,000 held.
  expect(state.key).toEqual([{ limit_spent_raw: '2300', limit_period_start: DAY }]);
  expect(state.charges.every((x: any) => x.with_key)).toBe(true);

  const shared = CASES.find((x) => x.name.startsWith("SHARED: the key's limit below"))!;
  const spw = await t.createPaywall('SHARED');
  await setUp(spw, shared, 'keyshared');
  const s = await run(
    {
      id: spw.id,
      ownerId: (await t.db.query<any>('select owner_id from paywall where id = $1', [spw.id]))[0].owner_id,
    },
    shared,
    'keyshared',
    true,
  );
  // Total 1,500: the second hold (1,000 of a 500 rest) is refused by the key, not the allowance (5,000);
  // once the first settled at 200, the third fits. Both count 200 + 1,000.
  const second = (s.answers[1] as any)[0];
  expect([second.held, second.keyLimitExceeded]).toEqual([false, true]);
  expect(holdOutcome(second)).toMatchObject({ kind: 'blocked', reason: 'key_limit_exceeded' });
  expect((s.answers[3] as any)[0].held).toBe(true);
  expect(s.state.key).toEqual([{ limit_spent_raw: '1200', limit_period_start: '1970-01-01' }]);
  expect(s.state.allowance).toEqual([{ allowance_spent_raw: '1200', allowance_period_start: '2026-11-01' }]);
});

it('concurrent holds of one key in one statement never reserve past its limit (batch statement)', async () => {
  const pw = await t.createPaywall();
  await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'kb', amount: '1' } });
  const [{ id: keyId }] = await t.db.query<any>(
    `insert into user_key (id, paywall_id, end_user_id, name, key_hash, last_four, limit_raw, limit_period)
     select gen_random_uuid(), $1, e.id, 'k', md5(random()::text) || md5(random()::text), 'abcd', 3500, 'day'
       from end_user e where e.paywall_id = $1 and e.external_id = 'kb' returning id`,
    [pw.id],
  );
  const holds = Array.from({ length: 8 }, () => testHold(pw.id, 'kb', { userKeyId: keyId }));
  let pending = holds;
  const placed: bigint[] = [];
  // Retries come back as they do in the proxy: decided first in a later statement.
  for (let round = 0; pending.length > 0 && round < 10; round++) {
    const r = await ledgerTick(t.db, pending, [], { lean: false });
    const next: typeof holds = [];
    r.holds.forEach((h, i) => {
      if (h!.retry) next.push(pending[i]);
      else if (h!.held) placed.push(h!.holdRaw);
    });
    pending = next;
  }
  expect(pending).toEqual([]);
  expect(placed).toEqual([1_000n, 1_000n, 1_000n]);
  const [k] = await t.db.query<any>(`select limit_spent_raw::text as s from user_key where id = $1`, [keyId]);
  expect(k.s).toBe('3000');
  await expectLedgerProven(t.db);
});
