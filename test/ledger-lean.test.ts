import { randomUUID } from 'node:crypto';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, testHold, testSettlement } from './helpers/ledger.js';
import { connectEndUser, createWallet } from './helpers/wallet-fixtures.js';
import { holdOutcome } from '../src/modules/proxy/ledger-batch.js';
import {
  ledgerTick,
  type ReserveInput,
  type ReserveResult,
  type SettleInput,
} from '../src/modules/ledger/holds.js';
import { buildEvent } from '../src/modules/events/event-payloads.js';
import { FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID } from '../src/modules/accounts/accounts.js';
import { ALLOWANCE_PERIODS, dateOnly, periodStart } from '../src/modules/wallet/allowance.js';

/**
 * The ledger's rule tests. The hold and settlement rules have one implementation, `ledger_tick` in the
 * database (migrations/sql/ledger-functions-v5.ts; docs/ledger.md, "Where the rules live"). Every case
 * below runs through both instances of its rules, on twin end users of one paywall: one item per statement
 * (a request alone: the instance on plain variables) and, with every other case, the same operation of all
 * cases in one statement (a batch of the group commit: the instance on arrays of rows). The answers and every row written (accounts, counters, allowances, keys, charges,
 * transfers, events) must be equal, to the raw unit, and each case's outcomes must be what it claims
 * (CLAIMS: what each hold held or why it was refused, each settlement, the account at the end).
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

interface Runner {
  pw: { id: string; ownerId: string };
  c: Case;
  user: string;
  userKeyId: string | undefined;
  holds: ReserveInput[];
  answers: unknown[];
}

async function runner(pw: { id: string; ownerId: string }, c: Case, user: string): Promise<Runner> {
  return { pw, c, user, userKeyId: await keyOf(pw.id, user), holds: [], answers: [] };
}

/** The operation `op` of a case as ledger_tick's input: a hold or a settlement. */
function input(x: Runner, op: Op): { hold: ReserveInput } | { settle: SettleInput } {
  const { pw, c, user, userKeyId } = x;
  const trigger = { source: 'proxy' as const, actorType: 'api_key' as const, actorId: pw.id };
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
    x.holds.push(h);
    return { hold: h };
  }
  const h = x.holds[op.settle];
  // Response ids are per twin (they share the paywall, and with it the relayed_response keys).
  const relayed = op.over?.relayedResponse;
  return {
    settle: testSettlement(h, op.captured, {
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
    }),
  };
}

/** A hold's answer without its ids (they differ between twins). */
const holdAnswer = (x: ReserveResult | null) =>
  x && {
    ...x,
    userId: !!x.userId,
    walletUserId: !!x.walletUserId,
    accountId: !!x.accountId,
    allowance: x.allowance && { ...x.allowance, connectionId: !!x.allowance.connectionId },
  };

/** Runs the case's operations for `user`, one ledger_tick call (one statement) each: the lone instance. */
async function run(pw: { id: string; ownerId: string }, c: Case, user: string) {
  const x = await runner(pw, c, user);
  // The twins share a paywall, and with it the API rate limit's minute: each run starts it afresh.
  await t.db.query(`delete from rate_window where paywall_id = $1`, [pw.id]);
  for (const op of c.ops) {
    const it = input(x, op);
    if ('hold' in it) x.answers.push((await ledgerTick(t.db, [it.hold], [])).holds.map(holdAnswer));
    else x.answers.push(await ledgerTick(t.db, [], [it.settle]));
  }
  return { answers: x.answers, state: await state(pw.id, user, x.holds) };
}

/**
 * Runs the cases' operations together, the batch path: the k-th operation of every case (each of its own
 * end user) in ONE ledger_tick call, holds and settlements alike, as the group commit batches concurrent
 * requests. Each case's answers are what the single-item path gives it alone.
 */
async function runBatched(xs: Runner[]) {
  for (const x of xs) await t.db.query(`delete from rate_window where paywall_id = $1`, [x.pw.id]);
  const steps = Math.max(...xs.map((x) => x.c.ops.length));
  for (let k = 0; k < steps; k++) {
    const items = xs.flatMap((x) => (k < x.c.ops.length ? [{ x, it: input(x, x.c.ops[k]) }] : []));
    const holds = items.flatMap(({ it }) => ('hold' in it ? [it.hold] : []));
    const settlements = items.flatMap(({ it }) => ('settle' in it ? [it.settle] : []));
    const r = await ledgerTick(t.db, holds, settlements);
    for (const { x, it } of items) {
      if ('hold' in it) x.answers.push([holdAnswer(r.holds[holds.indexOf(it.hold)])]);
      else {
        const i = settlements.indexOf(it.settle);
        x.answers.push({
          holds: [],
          settlements: [r.settlements[i]],
          freeAfter: [r.freeAfter[i]],
          alerts: [r.alerts[i]],
        });
      }
    }
  }
  return Promise.all(
    xs.map(async (x) => ({ answers: x.answers, state: await state(x.pw.id, x.user, x.holds) })),
  );
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

/**
 * What each operation of a case came to, in the terms the case's name claims: a hold placed (and what it
 * holds, to the raw unit) or the reason it was refused; a settlement applied or refused (already settled).
 */
function outcomes(answers: unknown[], c: Case): string[] {
  return c.ops.map((op, n) => {
    if (!('hold' in op))
      return (answers[n] as { settlements: boolean[] }).settlements[0] ? 'settled' : 'not settled';
    const h = (answers[n] as (ReturnType<typeof holdAnswer> | null)[])[0];
    if (!h) return 'no such user';
    if (h.held) return `held ${h.holdRaw} (cap ${h.cap})`;
    const why = h.limit
      ? h.limit
      : h.indebted
        ? `indebted (${h.debtRaw})`
        : // The key's limit before the allowance, as holdOutcome decides (both flag when the key's rest is smaller).
          h.keyLimitExceeded
          ? `key limit (${h.keyLimit?.spentRaw} of ${h.keyLimit?.amountRaw} spent)`
          : h.allowanceExceeded
            ? `allowance (${h.allowance?.spentRaw} of ${h.allowance?.amountRaw} spent)`
            : !h.connected
              ? 'not connected'
              : h.ratePosition !== null && (op.hold.rateLimit ?? 0) < h.ratePosition
                ? `rate limit (position ${h.ratePosition})`
                : `balance (${h.freeRaw} free)`;
    return `refused: ${why}`;
  });
}

/** What each case claims, operation by operation, and the spending account at its end (raw units). */
const CLAIMS: Record<string, { outcomes: string[]; account: unknown }> = {
  'holds at the full cap and settles below it': {
    outcomes: ['held 1000 (cap 10)', 'settled', 'not settled'],
    account: { balance_raw: '999600', held_raw: '0', debt_raw: '0' },
  },
  'lowers the cap to what the balance affords (per-token price)': {
    outcomes: ['held 4100 (cap 4)', 'settled'],
    account: { balance_raw: '900', held_raw: '0', debt_raw: '0' },
  },
  'refuses what the balance cannot afford, and a user it does not know': {
    outcomes: ['refused: balance (500 free)', 'no such user'],
    account: { balance_raw: '500', held_raw: '0', debt_raw: '0' },
  },
  'a settlement beyond the hold records what it could not collect as debt': {
    outcomes: ['held 1000 (cap 10)', 'settled', 'refused: indebted (700)', 'held 1000 (cap 10)'],
    account: { balance_raw: '2000', held_raw: '1000', debt_raw: '700' },
  },
  'daily request, model and spend limits (today counted; another day starts over)': {
    outcomes: [
      'held 1000 (cap 10)',
      'refused: dailyRequestLimit',
      'refused: modelDailyRequestLimit',
      'held 1000 (cap 10)',
      'refused: dailySpendLimit',
      'held 1000 (cap 10)',
      'settled',
      'settled',
      'held 1000 (cap 10)',
      'held 1000 (cap 10)',
    ],
    account: { balance_raw: '999990', held_raw: '3000', debt_raw: '0' },
  },
  'the API rate limit counts every request of its minute': {
    outcomes: [
      'held 1000 (cap 10)',
      'held 1000 (cap 10)',
      'refused: rate limit (position 3)',
      'held 1000 (cap 10)',
    ],
    account: { balance_raw: '1000000', held_raw: '3000', debt_raw: '0' },
  },
  'SHARED: fee and provider legs; not connected is refused': {
    outcomes: ['held 1000 (cap 10)', 'settled'],
    account: { balance_raw: '999100', held_raw: '0', debt_raw: '0' },
  },
  'SHARED: an end user not connected': {
    outcomes: ['refused: not connected'],
    account: undefined,
  },
  'SHARED: an allowance counts holds, gives back what settlements did not capture, and refuses': {
    outcomes: [
      'held 1000 (cap 10)',
      'held 1000 (cap 10)',
      'settled',
      'held 1000 (cap 10)',
      'refused: allowance (2300 of 2500 spent)',
      'settled',
    ],
    account: { balance_raw: '998700', held_raw: '1000', debt_raw: '0' },
  },
  'SHARED: an allowance used up in an earlier period starts over': {
    outcomes: ['held 1000 (cap 10)', 'refused: allowance (1000 of 1500 spent)', 'settled'],
    account: { balance_raw: '999000', held_raw: '0', debt_raw: '0' },
  },
  "an end-user key's limit counts holds, gives back what settlements did not capture, and refuses": {
    outcomes: [
      'held 1000 (cap 10)',
      'held 1000 (cap 10)',
      'settled',
      'held 1000 (cap 10)',
      'refused: key limit (2300 of 2500 spent)',
      'settled',
    ],
    account: { balance_raw: '998700', held_raw: '1000', debt_raw: '0' },
  },
  "an end-user key's limit used up in an earlier period starts over": {
    outcomes: ['held 1000 (cap 10)', 'refused: key limit (1000 of 1500 spent)', 'settled'],
    account: { balance_raw: '999000', held_raw: '0', debt_raw: '0' },
  },
  "SHARED: the key's limit below the allowance is the bound that refuses; both count": {
    outcomes: [
      'held 1000 (cap 10)',
      'refused: key limit (1000 of 1500 spent)',
      'settled',
      'held 1000 (cap 10)',
    ],
    account: { balance_raw: '999800', held_raw: '1000', debt_raw: '0' },
  },
  'a key without a limit is written on the charge and counts nothing of its own': {
    outcomes: ['held 1000 (cap 10)', 'settled'],
    account: { balance_raw: '999500', held_raw: '0', debt_raw: '0' },
  },
};

describe('every case through both paths of the one implementation', () => {
  type Result = { answers: unknown[]; state: Awaited<ReturnType<typeof state>> };
  const single = new Map<string, Result>();
  const batched = new Map<string, Result>();
  beforeAll(async () => {
    const xs: Runner[] = [];
    for (const c of CASES) {
      const pw = await t.createPaywall(c.shared ? 'SHARED' : 'DEFAULT');
      const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
        pw.id,
      ]);
      await setUp(pw, c, 'single');
      await setUp(pw, c, 'batch');
      single.set(c.name, await run({ id: pw.id, ownerId }, c, 'single'));
      xs.push(await runner({ id: pw.id, ownerId }, c, 'batch'));
    }
    (await runBatched(xs)).forEach((r, n) => batched.set(CASES[n].name, r));
  });

  it.each(CASES.map((c) => [c.name, c] as const))(
    'one item per statement and all cases in one statement agree: %s',
    async (_, c) => {
      const one = single.get(c.name)!;
      expect(one).toEqual(batched.get(c.name));
      // The case did something: every operation answered.
      expect(one.answers.length).toBe(c.ops.length);
      if (c.name.startsWith('holds at the full cap'))
        expect(one.state.relayed).toEqual([{ id: 'resp-1', tokens: '50' }]);
    },
  );

  it.each(CASES.map((c) => [c.name, c] as const))('each case does what it claims: %s', async (_, c) => {
    const one = single.get(c.name)!;
    expect({ outcomes: outcomes(one.answers, c), account: one.state.account[0] }).toEqual(CLAIMS[c.name]);
  });

  it('the ledger proof holds after both paths', async () => {
    await expectLedgerProven(t.db);
  });
});

it('each case exercises what it says (the answers of a lone operation)', async () => {
  const pw = await t.createPaywall();
  const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
    pw.id,
  ]);
  const limits = CASES.find((c) => c.name.startsWith('daily'))!;
  await setUp(pw, limits, 'check');
  const { answers, state } = await run({ id: pw.id, ownerId }, limits, 'check');
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

it("a batch of one account's settlements records on each transfer the balance after its own settlement, as lone settlements do", async () => {
  const pw = await t.createPaywall();
  await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'run', amount: '1' } });
  const holds = [testHold(pw.id, 'run'), testHold(pw.id, 'run'), testHold(pw.id, 'run')];
  await ledgerTick(t.db, holds, []);
  const r = await ledgerTick(
    t.db,
    [],
    holds.map((h, i) => testSettlement(h, BigInt(10 * (i + 1)))),
  );
  expect(r.settlements).toEqual([true, true, true]);
  const rows = await t.db.query<{ amount: string; after: string }>(
    `select x.amount_raw::text as amount, x.balance_after_raw::text as after
       from transfer x join end_user e on e.account_id = x.debit_account_id
      where e.paywall_id = $1 and e.external_id = 'run' and x.kind = 'usage' order by x.seq`,
    [pw.id],
  );
  // 1 USDC, then 10, 20 and 30 raw units taken in the batch's order: the running balance.
  expect(rows).toEqual([
    { amount: '10', after: '999990' },
    { amount: '20', after: '999970' },
    { amount: '30', after: '999940' },
  ]);
  await expectLedgerProven(t.db);
});

it("the key cases exercise what they say: the key's limit refuses (key_limit), counts to the raw unit, and names the key on the charge", async () => {
  const pw = await t.createPaywall();
  const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
    pw.id,
  ]);
  const c = CASES.find((x) => x.name.startsWith("an end-user key's limit counts"))!;
  await setUp(pw, c, 'keycheck');
  const { answers, state } = await run({ id: pw.id, ownerId }, c, 'keycheck');
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

it('concurrent holds of one key in one statement never reserve past its limit (a batch)', async () => {
  const pw = await t.createPaywall();
  await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'kb', amount: '1' } });
  const [{ id: keyId }] = await t.db.query<any>(
    `insert into user_key (id, paywall_id, end_user_id, name, key_hash, last_four, limit_raw, limit_period)
     select gen_random_uuid(), $1, e.id, 'k', md5(random()::text) || md5(random()::text), 'abcd', 3500, 'day'
       from end_user e where e.paywall_id = $1 and e.external_id = 'kb' returning id`,
    [pw.id],
  );
  const holds = Array.from({ length: 8 }, () => testHold(pw.id, 'kb', { userKeyId: keyId }));
  // One statement decides all eight, one after the other: none is left open for a later one.
  const r = await ledgerTick(t.db, holds, []);
  expect(r.holds.every((h) => h !== null)).toBe(true);
  const placed = r.holds.filter((h) => h!.held).map((h) => h!.holdRaw);
  expect(placed).toEqual([1_000n, 1_000n, 1_000n]);
  const [k] = await t.db.query<any>(`select limit_spent_raw::text as s from user_key where id = $1`, [keyId]);
  expect(k.s).toBe('3000');
  await expectLedgerProven(t.db);
});

it("the period's first day is one rule: ledger_period_start in SQL, and periodStart (display) agrees with it", async () => {
  const instants = [
    '2026-11-24T10:00:00Z', // a Tuesday
    '2026-11-23T00:00:00Z', // a Monday, at midnight UTC
    '2026-11-22T23:59:59.999Z', // a Sunday, the last instant of its week
    '2026-03-01T00:30:00+01:00', // still February in UTC
    '2024-02-29T12:00:00Z',
    '2027-01-01T00:00:00Z',
  ];
  for (const at of instants)
    for (const period of ALLOWANCE_PERIODS) {
      const [{ d }] = await t.db.query<any>(`select ledger_period_start($1, $2::timestamptz)::text as d`, [
        period,
        at,
      ]);
      expect({ period, at, d }).toEqual({ period, at, d: dateOnly(periodStart(period, new Date(at))) });
    }
  // Spot checks of the rule itself.
  const start = async (period: string, at: string) =>
    (await t.db.query<any>(`select ledger_period_start($1, $2::timestamptz)::text as d`, [period, at]))[0].d;
  expect(await start('week', '2026-11-22T23:59:59.999Z')).toBe('2026-11-16');
  expect(await start('month', '2026-03-01T00:30:00+01:00')).toBe('2026-02-01');
  expect(await start('total', '2026-11-24T10:00:00Z')).toBe('1970-01-01');
});
