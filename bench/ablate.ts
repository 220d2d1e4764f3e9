/**
 * What the ledger statement costs without each thing around it (issue 11): the statement micro-bench
 * (bench/tick.ts) run on copies of a kept bench database, each copy with one more part taken away.
 *
 *   BENCH_KEEP_DB=1 BENCH_SCENARIOS=chat-json BENCH_CONCURRENCY=1 BENCH_SECONDS=1 npm run bench
 *   TICK_DB=<the URL it printed> [TICK_BATCH=1,16] node dist/bench/ablate.js
 *
 * The steps are cumulative, and every one breaks a rule the service keeps, so they only ever run on
 * throwaway copies (`CREATE DATABASE … TEMPLATE`), dropped afterwards:
 *   1. as shipped;
 *   2. without the `event_fanout` trigger: no webhook delivery rows, no NOTIFY;
 *   3. without any trigger: foreign-key checks off too (session_replication_role = replica);
 *   4. without the secondary indexes of charge, event and transfer (primary keys and unique ids kept);
 *   5. with synchronous_commit off: the commit no longer flushes the WAL (not durable).
 * What is left at step 5 is the statement itself: its reads, locks, updates and primary-key inserts.
 * Steps 3 and 5 set database parameters that need a superuser (the bench's `postgres` role is one).
 *
 *   TICK_DB       the kept bench database (its URL; required; not modified)
 *   TICK_BATCH    operations per statement, comma-separated (1,16)
 *   TICK_PAIRS    hold + settlement pairs per measured round (2000)
 *   TICK_ROUNDS   measured rounds per step (2); the table shows their mean
 */
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { env } from 'node:process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Database } from '../src/db/database.js';

const url = env.TICK_DB;
if (!url) throw new Error('TICK_DB: the URL of a database kept by BENCH_KEEP_DB=1 npm run bench');
const BATCHES = (env.TICK_BATCH ?? '1,16').split(',').map(Number);
const tickScript = join(dirname(fileURLToPath(import.meta.url)), 'tick.js');

const STEPS: { name: string; sql: (db: string) => string[] }[] = [
  { name: 'as shipped', sql: () => [] },
  {
    name: 'without the event_fanout trigger (no delivery rows, no NOTIFY)',
    sql: () => ['alter table event disable trigger event_fanout'],
  },
  {
    name: 'without foreign-key checks (no trigger at all)',
    sql: (db) => [`alter database ${ident(db)} set session_replication_role = replica`],
  },
  {
    name: 'without secondary indexes (charge, event, transfer)',
    sql: () => [
      `drop index charge_user_id_created_at_index, charge_open_holds_index, charge_usage_index,
         event_paywall_id_seq_index, transfer_debit_account_id_seq_index, transfer_paywall_id_kind_index,
         transfer_end_user_id_seq_index, transfer_credit_account_id_seq_index`,
    ],
  },
  {
    name: 'with synchronous_commit off (no WAL flush at commit)',
    sql: (db) => [`alter database ${ident(db)} set synchronous_commit = off`],
  },
];

const source = new URL(url);
const sourceName = decodeURIComponent(source.pathname.slice(1));
/** Database names as SQL identifiers (a kept database's name may need quoting). */
const ident = (name: string) => pg.escapeIdentifier(name);
const admin = await Database.open({ url, poolMax: 1 });
const results: { batch: number; step: string; perStatement: number; perRequest: number }[] = [];
try {
  for (const batch of BATCHES) {
    const copy = `${sourceName}_ablate`;
    await admin.query(`drop database if exists ${ident(copy)}`);
    await admin.query(`create database ${ident(copy)} template ${ident(sourceName)}`);
    const copyUrl = new URL(url);
    copyUrl.pathname = `/${encodeURIComponent(copy)}`;
    try {
      const db = await Database.open({ url: copyUrl.toString(), poolMax: 1 });
      try {
        for (const step of STEPS) {
          for (const s of step.sql(copy)) await db.query(s);
          await db.query('vacuum analyze');
          const out = execFileSync(process.execPath, [tickScript], {
            env: {
              ...env,
              TICK_DB: copyUrl.toString(),
              TICK_BATCH: String(batch),
              TICK_ROUNDS: env.TICK_ROUNDS ?? '2',
            },
            encoding: 'utf8',
          });
          const rounds = [...out.matchAll(/CPU ([\d.]+) ms per statement, ([\d.]+) ms per request/g)];
          const mean = (k: 1 | 2) => rounds.reduce((a, m) => a + Number(m[k]), 0) / rounds.length;
          results.push({ batch, step: step.name, perStatement: mean(1), perRequest: mean(2) });
          const r = results.at(-1)!;
          console.log(
            `batch ${batch}, ${step.name}: ${r.perStatement.toFixed(3)} ms per statement, ${r.perRequest.toFixed(3)} ms per request`,
          );
        }
      } finally {
        await db.close();
      }
    } finally {
      await admin.query(`drop database if exists ${ident(copy)}`);
    }
  }
} finally {
  await admin.close();
}

console.log(
  '\n| operations per statement | step | backend CPU ms per statement | per request | vs as shipped |',
);
console.log('| --: | --- | --: | --: | --: |');
for (const r of results) {
  const base = results.find((x) => x.batch === r.batch)!;
  console.log(
    `| ${r.batch} | ${r.step} | ${r.perStatement.toFixed(3)} | ${r.perRequest.toFixed(3)} | ${(100 * (r.perRequest / base.perRequest - 1)).toFixed(0)} % |`,
  );
}
