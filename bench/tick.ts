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
 */
import { readFileSync } from 'node:fs';
import { env } from 'node:process';
import { ledgerTick } from '../src/modules/ledger/holds.js';
import { hold, openTickDb, settlement } from './tick-items.js';

const PAIRS = Number(env.TICK_PAIRS ?? 2000);
const BATCH = Number(env.TICK_BATCH ?? 1);
const ROUNDS = Number(env.TICK_ROUNDS ?? 3);

const { db, users, pid } = await openTickDb(env.TICK_DB);
const cpuNs = () => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);

let next = 0;
async function round(pairs: number): Promise<{ ns: number; statements: number; wallMs: number }> {
  const t0 = performance.now();
  const c0 = cpuNs();
  let statements = 0;
  for (let done = 0; done < pairs; done += BATCH) {
    const holds = Array.from({ length: BATCH }, () => hold(users[next++ % users.length]));
    const placed = await ledgerTick(db, holds, []);
    statements++;
    const settle = holds.map((h, i) => {
      const r = placed.holds[i];
      if (!r?.held) throw new Error(`hold not placed: ${JSON.stringify(r)}`);
      return settlement(h, r.walletUserId);
    });
    const settled = await ledgerTick(db, [], settle);
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
