/**
 * Statement micro-bench (issue 11): PostgreSQL's CPU per ledger statement, without the service around it.
 *
 *   BENCH_KEEP_DB=1 BENCH_SCENARIOS=chat-json BENCH_CONCURRENCY=1 BENCH_SECONDS=1 npm run bench
 *   TICK_DB=<the URL it printed> node dist/bench/tick.js
 *
 * On the kept bench database (1,000 funded users, one paywall, one webhook subscription to every event) it
 * places and settles holds shaped like the proxy's (the same events, per-token prices, one transfer each)
 * through `ledgerTick`, on one connection, one statement at a time, and reads that backend's CPU time
 * from /proc/<pid>/schedstat (nanoseconds on the CPU). Batches of TICK_BATCH holds then their settlements
 * stand for higher concurrency (the group commit puts that many operations in one statement).
 *
 *   TICK_DB       the database (required)
 *   TICK_PAIRS    hold + settlement pairs per measured round (2000)
 *   TICK_BATCH    operations per statement (1)
 *   TICK_ROUNDS   measured rounds, after one warm-up round (3)
 *   TICK_LEAN     0: one operation runs the batch statement, not the lean functions (1)
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { env } from 'node:process';
import { Database } from '../src/db/database.js';
import { buildEvent } from '../src/modules/events/event-payloads.js';
import { ledgerTick, type ReserveInput, type SettleInput } from '../src/modules/ledger/holds.js';
import { usdcDecimal } from '../src/shared/money.js';

const url = env.TICK_DB;
if (!url) throw new Error('TICK_DB: the URL of a database kept by BENCH_KEEP_DB=1 npm run bench');
const PAIRS = Number(env.TICK_PAIRS ?? 2000);
const BATCH = Number(env.TICK_BATCH ?? 1);
const ROUNDS = Number(env.TICK_ROUNDS ?? 3);
const LEAN = env.TICK_LEAN !== '0';

const db = await Database.open({ url, poolMax: 1 });
const [pw] = await db.query(
  `select p.id, p.owner_id from paywall p where exists (select 1 from end_user e where e.paywall_id = p.id)
    order by p.created_at limit 1`,
);
const users = (
  await db.query(`select external_id from end_user where paywall_id = $1 order by external_id limit 1000`, [
    pw.id,
  ])
).map((r) => r.external_id as string);
const [{ pid }] = await db.query(`select pg_backend_pid() as pid`);
const cpuNs = () => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
const paywall = { id: pw.id as string, ownerId: pw.owner_id as string };
const trigger = { source: 'proxy' as const, actorType: 'api_key' as const, actorId: paywall.id };
const day = new Date().toISOString().slice(0, 10);

function hold(externalUserId: string): ReserveInput {
  const chargeId = randomUUID();
  const ctx = {
    paywall,
    trigger,
    subject: { type: 'request' as const, id: chargeId, externalId: externalUserId },
  };
  return {
    chargeId,
    paywallId: paywall.id,
    externalUserId,
    requireConnected: false,
    // 15 prompt tokens at 1 pico x 1.5 markup, 2 pico per completion token (the bench's prices' order).
    fixedScaled: 1_500_000n * 15n * 1_000_000n,
    perTokenScaled: 1_500_000n * 2_000_000n,
    maxCap: 256,
    minCap: 16,
    model: 'gpt-4o-mini',
    stream: false,
    metadata: { promptEstimate: 15 },
    events: [
      buildEvent('paywall.proxy.request.started', ctx, {
        requestId: chargeId,
        model: 'gpt-4o-mini',
        stream: false,
      }),
    ],
    day,
    requestLimit: null,
    spendLimitRaw: null,
    modelRequestLimit: null,
    rateLimit: null,
    rateWindow: new Date(),
  };
}

function settlement(h: ReserveInput, walletUserId: string | null): SettleInput {
  const ctx = {
    paywall,
    trigger,
    subject: { type: 'request' as const, id: h.chargeId, externalId: h.externalUserId },
  };
  const captured = 38n;
  const data = { requestId: h.chargeId, walletUserId, model: h.model };
  return {
    chargeId: h.chargeId,
    paywallId: paywall.id,
    status: 'completed',
    capturedRaw: captured,
    earningsRaw: captured,
    feeRaw: 0n,
    providerRaw: 0n,
    uncollectedRaw: 0n,
    promptTokens: 9,
    completionTokens: 4,
    errorCode: null,
    ledgerEntryId: randomUUID(),
    metadata: { model: h.model, outcome: 'completed' },
    events: [
      buildEvent('paywall.proxy.request.completed', ctx, { ...data, provider: 'default' }),
      buildEvent(
        'paywall.usage.charge.created',
        { ...ctx, subject: { type: 'charge', id: h.chargeId, externalId: h.externalUserId } },
        {
          walletUserId,
          activityId: h.chargeId,
          model: h.model,
          promptTokens: 9,
          completionTokens: 4,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          audioPromptTokens: 0,
          reasoningTokens: 0,
          audioCompletionTokens: 0,
          costDetails: {},
          cost: usdcDecimal(captured),
        },
      ),
    ],
  };
}

let next = 0;
async function round(pairs: number): Promise<{ ns: number; statements: number; wallMs: number }> {
  const t0 = performance.now();
  const c0 = cpuNs();
  let statements = 0;
  for (let done = 0; done < pairs; done += BATCH) {
    const holds = Array.from({ length: BATCH }, () => hold(users[next++ % users.length]));
    const placed = await ledgerTick(db, holds, [], { lean: LEAN });
    statements++;
    const settle = holds.map((h, i) => {
      const r = placed.holds[i];
      if (!r?.held) throw new Error(`hold not placed: ${JSON.stringify(r)}`);
      return settlement(h, r.walletUserId);
    });
    const settled = await ledgerTick(db, [], settle, { lean: LEAN });
    if (!settled.settlements.every(Boolean)) throw new Error('settlement refused');
    statements++;
  }
  return { ns: cpuNs() - c0, statements, wallMs: performance.now() - t0 };
}

await round(Math.min(PAIRS, 300));
const rows: string[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  const { ns, statements, wallMs } = await round(PAIRS);
  rows.push(
    `round ${r}: ${statements} statements of ${BATCH} operation(s): backend CPU ${(ns / 1e6 / statements).toFixed(3)} ms per statement, ` +
      `${(ns / 1e6 / PAIRS).toFixed(3)} ms per request (hold + settlement); wall ${(wallMs / statements).toFixed(3)} ms per statement`,
  );
  console.log(rows.at(-1));
}
await db.close();
