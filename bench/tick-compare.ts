/**
 * Two builds of the ledger on ONE backend, interleaved (docs/performance.md, round 12): this build's
 * `ledgerTick` and another build's (TICK_OLD: the root of that build's output, e.g. a copy of dist/ made
 * before a change), in blocks of TICK_PAIRS hold + settlement pairs (TICK_BATCH operations per statement),
 * old, new, new, old, … after two warm-up blocks of each. Both run on the same rows of the kept bench
 * database (bench/tick-items.ts), so the database must have both builds' functions.
 *
 * Per block it prints the backend's CPU time (/proc/<pid>/schedstat) and ends the block with
 * `select pg_sleep(0)`: under callgrind (a postmaster started with
 * `valgrind --tool=callgrind --trace-children=yes --vgdb=no --dump-before=pg_sleep
 * --callgrind-out-file=<dir>/cg.%p postgres -D <dir>`), each block is then its own profile part,
 * `cg.<pid>.<n>` (part 1: the connection and the warm-up), whose `totals:` line is the block's instruction
 * count: deterministic to a fraction of a percent where CPU time on a shared machine is not.
 * `--callgrind-parts=<dir>` sums them per build:
 *
 *   TICK_DB=… TICK_OLD=/path/to/old-dist node dist/bench/tick-compare.js
 *   node dist/bench/tick-compare.js --callgrind-parts=<dir> <pid> <pairs> old new new old …
 *
 *   TICK_PAIRS    pairs per block (100)   TICK_BATCH   operations per statement (1)
 *   TICK_BLOCKS   blocks of each build, alternating which goes first (6)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { argv, env } from 'node:process';
import { pathToFileURL } from 'node:url';
import type { Sql } from '../src/db/database.js';
import { ledgerTick } from '../src/modules/ledger/holds.js';
import { hold, openTickDb, settlement } from './tick-items.js';

type Tick = typeof ledgerTick;

const parts = argv.find((a) => a.startsWith('--callgrind-parts='));
if (parts) {
  // The instruction counts of the profile parts, per build: part 1 is the warm-up, then one per block.
  const dir = parts.split('=')[1];
  const [pid, pairs, ...labels] = argv.slice(argv.indexOf(parts) + 1);
  const per: Record<string, number[]> = {};
  labels.forEach((label, k) => {
    const text = readFileSync(join(dir, `cg.${pid}.${k + 2}`), 'utf8');
    const total = Number(/^totals: (\d+)/m.exec(text)![1]);
    (per[label] ??= []).push(total / Number(pairs));
  });
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const [label, xs] of Object.entries(per))
    console.log(
      `${label}: ${xs.map((x) => x.toFixed(0)).join(' ')} instructions per pair, mean ${mean(xs).toFixed(0)}`,
    );
  if (per.old && per.new)
    console.log(`new / old: ${((mean(per.new) / mean(per.old) - 1) * 100).toFixed(2)} %`);
} else {
  if (!env.TICK_OLD) throw new Error('TICK_OLD: the output root (dist/) of the build to compare with');
  const PAIRS = Number(env.TICK_PAIRS ?? 100);
  const BATCH = Number(env.TICK_BATCH ?? 1);
  const BLOCKS = Number(env.TICK_BLOCKS ?? 6);
  const old: Tick = (await import(pathToFileURL(join(env.TICK_OLD, 'src/modules/ledger/holds.js')).href))
    .ledgerTick;
  const { db, users, pid } = await openTickDb(env.TICK_DB);
  const cpuNs = () => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
  let next = 0;
  const run = async (tick: Tick, sql: Sql) => {
    for (let done = 0; done < PAIRS; done += BATCH) {
      const holds = Array.from({ length: BATCH }, () => hold(users[next++ % users.length]));
      const placed = await tick(sql, holds, []);
      const settle = holds.map((h, i) => {
        const r = placed.holds[i];
        if (!r?.held) throw new Error(`hold not placed: ${JSON.stringify(r)}`);
        return settlement(h, r.walletUserId);
      });
      if (!(await tick(sql, [], settle)).settlements.every(Boolean)) throw new Error('settlement refused');
    }
  };
  // A block ends with the marker that makes callgrind write its part (the warm-up is part 1).
  const block = async (tick: Tick, sql: Sql) => {
    const c0 = cpuNs();
    await run(tick, sql);
    const ns = cpuNs() - c0;
    await sql.query('select pg_sleep(0)');
    return ns;
  };
  for (const tick of [old, ledgerTick, old, ledgerTick]) await run(tick, db);
  await db.query('select pg_sleep(0)');
  const labels: string[] = [];
  for (let b = 0; b < BLOCKS; b++) {
    const order: [string, Tick][] =
      b % 2
        ? [
            ['new', ledgerTick],
            ['old', old],
          ]
        : [
            ['old', old],
            ['new', ledgerTick],
          ];
    for (const [label, tick] of order) {
      const ns = await block(tick, db);
      labels.push(label);
      console.log(`${label}: ${(ns / 1e6 / PAIRS).toFixed(3)} ms backend CPU per pair`);
    }
  }
  console.log(
    `parts: node dist/bench/tick-compare.js --callgrind-parts=<dir> ${pid} ${PAIRS} ${labels.join(' ')}`,
  );
  await db.close();
}
