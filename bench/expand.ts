/**
 * Delivery expansion micro-bench (issue 34): PostgreSQL's CPU per paid request with the webhook delivery
 * rows written by the event's own statement (old schema: the `event_fanout` trigger before migration
 * 20261201200000) against none there and the delivery worker's expansion (`webhook_expand()`) of the same
 * events (new schema), on one kept bench database.
 *
 *   BENCH_KEEP_DB=1 BENCH_SCENARIOS=chat-json BENCH_CONCURRENCY=1 BENCH_SECONDS=1 BENCH_PORTKEY=0 npm run bench
 *   EXPAND_DB=<the URL it printed> EXPAND_SCHEMA=old node dist/bench/expand.js
 *   EXPAND_DB=<the URL it printed> EXPAND_SCHEMA=new node dist/bench/expand.js
 *
 * It first migrates the database to the schema asked for (down to migration 20261130210000 for `old`, up
 * to the latest for `new`; the down migration expands every event first), then places and settles holds
 * shaped like the proxy's (the statements and events of bench/tick.ts: one `paywall.proxy.request.started`
 * per hold, a completion and a charge event per settlement) through `ledgerTick` on connection A, one
 * statement at a time. With the new schema, connection B runs `select webhook_expand()` after every
 * EXPAND_EVERY ledger statements, as the delivery worker does on the wake-up each statement's NOTIFY sends
 * (at most one expansion per statement; the worker coalesces wake-ups that arrive during one). Each
 * backend's CPU time comes from /proc/<pid>/schedstat; with EXPAND_PERF=1, `perf stat -e instructions
 * --per-thread` counts each backend's instructions too. Delivery rows written per request are counted, so
 * both schemas are seen to write the same deliveries.
 *
 *   EXPAND_DB       the database (required)
 *   EXPAND_SCHEMA   old | new (required)
 *   EXPAND_PAIRS    hold + settlement pairs per measured round (2000)
 *   EXPAND_BATCH    operations per ledger statement (1)
 *   EXPAND_ROUNDS   measured rounds, after one warm-up round (3)
 *   EXPAND_EVERY    ledger statements between two expansions (1)
 *   EXPAND_PERF     1: also count instructions with perf (0)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { env } from 'node:process';
import { Database } from '../src/db/database.js';
import { buildEvent } from '../src/modules/events/event-payloads.js';
import { ledgerTick, type ReserveInput, type SettleInput } from '../src/modules/ledger/holds.js';
import { usdcDecimal } from '../src/shared/money.js';

const url = env.EXPAND_DB;
const SCHEMA = env.EXPAND_SCHEMA;
if (!url) throw new Error('EXPAND_DB: the URL of a database kept by BENCH_KEEP_DB=1 npm run bench');
if (SCHEMA !== 'old' && SCHEMA !== 'new') throw new Error('EXPAND_SCHEMA: old or new');
const PAIRS = Number(env.EXPAND_PAIRS ?? 2000);
const BATCH = Number(env.EXPAND_BATCH ?? 1);
const ROUNDS = Number(env.EXPAND_ROUNDS ?? 3);
const EVERY = Math.max(1, Number(env.EXPAND_EVERY ?? 1));
const PERF = env.EXPAND_PERF === '1';
const BEFORE = 'Migration20261130210000_fanout_one_paywall';

const db = await Database.open({ url, poolMax: 1 });
const expander = await Database.open({ url, poolMax: 1 });
const applied = (await db.query<{ name: string }>('select name from mikro_orm_migrations')).map(
  (r) => r.name,
);
const isNew = applied.includes('Migration20261201200000_deliveries_off_request_path');
if (SCHEMA === 'old' && isNew) await db.orm.migrator.down({ to: BEFORE });
if (SCHEMA === 'new' && !isNew) await db.orm.migrator.up();
await db.query('vacuum analyze event');
await db.query('vacuum analyze webhook_delivery');

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
const [{ pid: xpid }] = await expander.query(`select pg_backend_pid() as pid`);
console.log(`backends: statements ${pid}, expansion ${xpid}`);
const cpuNs = (p: number) => Number(readFileSync(`/proc/${p}/schedstat`, 'utf8').split(' ')[0]);
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

/** Instructions of each backend while `perf stat --per-thread` ran (null without EXPAND_PERF). */
function startPerf(): { stop(): Promise<Map<number, number> | null> } {
  if (!PERF) return { stop: async () => null };
  const child: ChildProcess = spawn(
    'perf',
    ['stat', '-x', ',', '--per-thread', '-e', 'instructions', '-p', `${pid},${xpid}`],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return {
    stop: () =>
      new Promise((resolve) => {
        child.on('exit', () => {
          const out = new Map<number, number>();
          for (const line of err.split('\n')) {
            // postgres-12345,<count>,,instructions,...
            const m = /^[^,]*?-(\d+),(\d+),/.exec(line);
            if (m) out.set(Number(m[1]), Number(m[2]));
          }
          resolve(out);
        });
        child.kill('SIGINT');
      }),
  };
}

const deliveries = async () => Number((await db.query(`select count(*) as n from webhook_delivery`))[0].n);
const expand = async () => {
  if (SCHEMA === 'new') await expander.query('select webhook_expand()', [], 'webhook_expand');
};

let next = 0;
async function round(pairs: number) {
  const d0 = await deliveries();
  const perf = startPerf();
  if (PERF) await new Promise((r) => setTimeout(r, 300)); // perf attaches
  const a0 = cpuNs(pid);
  const b0 = cpuNs(xpid);
  let statements = 0;
  const statement = async (fn: () => Promise<void>) => {
    await fn();
    if (++statements % EVERY === 0) await expand();
  };
  for (let done = 0; done < pairs; done += BATCH) {
    const holds = Array.from({ length: BATCH }, () => hold(users[next++ % users.length]));
    let placed!: Awaited<ReturnType<typeof ledgerTick>>;
    await statement(async () => {
      placed = await ledgerTick(db, holds, [], { lean: true });
    });
    const settle = holds.map((h, i) => {
      const r = placed.holds[i];
      if (!r?.held) throw new Error(`hold not placed: ${JSON.stringify(r)}`);
      return settlement(h, r.walletUserId);
    });
    await statement(async () => {
      const settled = await ledgerTick(db, [], settle, { lean: true });
      if (!settled.settlements.every(Boolean)) throw new Error('settlement refused');
    });
  }
  await expand(); // the last statements' events
  const a = cpuNs(pid) - a0;
  const b = cpuNs(xpid) - b0;
  const instructions = await perf.stop();
  const rows = (await deliveries()) - d0;
  return { a, b, statements, rows, instructions };
}

await round(Math.min(PAIRS, 300));
const ms = (ns: number) => (ns / 1e6 / PAIRS).toFixed(3);
for (let r = 1; r <= ROUNDS; r++) {
  const { a, b, statements, rows, instructions } = await round(PAIRS);
  const ins = instructions
    ? `; instructions per request: statements ${Math.round((instructions.get(pid) ?? 0) / PAIRS)}, ` +
      `expansion ${Math.round((instructions.get(xpid) ?? 0) / PAIRS)}, total ` +
      `${Math.round(((instructions.get(pid) ?? 0) + (instructions.get(xpid) ?? 0)) / PAIRS)}`
    : '';
  console.log(
    `${SCHEMA} round ${r}: ${statements} statements of ${BATCH}, expansion every ${EVERY}: PostgreSQL CPU per request ` +
      `statements ${ms(a)} ms + expansion ${ms(b)} ms = ${ms(a + b)} ms; ${(rows / PAIRS).toFixed(2)} delivery rows per request${ins}`,
  );
}
await db.close();
await expander.close();
