/**
 * `npm run bench:usage`: the `Paywall.usage` query on a generated year of a busy paywall — 1,000,000
 * completed charges (4 models, 2,000 end users with a skewed spread, one charge every ~31.5 s) written by
 * `generate_series` into a scratch PostgreSQL database — then p50/p95 of each grouping through the service
 * the resolver calls. DATABASE_URL picks the server (default postgres://postgres@127.0.0.1:5432/); the
 * database `bench_usage` on it is recreated. CHARGES=… changes the row count; RUNS=… the samples.
 */
import 'reflect-metadata';
import pg from 'pg';
import { Database } from '../src/db/database.js';
import { UsageService, type UsageGroupBy } from '../src/modules/usage/usage.service.js';

const CHARGES = Number(process.env.CHARGES ?? 1_000_000);
const RUNS = Number(process.env.RUNS ?? 50);
const server = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
const DB_NAME = 'bench_usage';
const PAYWALL = '00000000-0000-4000-8000-00000000b001';
const OWNER = '00000000-0000-4000-8000-00000000b000';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

async function main() {
  const admin = new pg.Client({ connectionString: new URL('/postgres', server).toString() });
  await admin.connect();
  await admin.query(`drop database if exists ${DB_NAME}`);
  await admin.query(`create database ${DB_NAME}`);
  await admin.end();
  const url = new URL(`/${DB_NAME}`, server).toString();
  const db = await Database.open({ url });
  await db.migrate();

  let t0 = Date.now();
  await db.query(`insert into owner (id, name, token_hash) values ($1, 'bench', repeat('0', 64))`, [OWNER]);
  await db.query(
    `insert into paywall (id, owner_id, name, mode, api_key_hash, api_key_last_four)
     values ($1, $2, 'bench', 'DEFAULT', repeat('1', 64), 'b001')`,
    [PAYWALL, OWNER],
  );
  await db.query(
    `insert into model_price (paywall_id, model_id, prompt_pico, completion_pico)
     values ($1, 'gpt-4o-mini', 150000, 600000), ($1, 'gpt-4o', 2500000, 10000000),
            ($1, 'claude-haiku', 800000, 4000000), ($1, 'llama-70b', 600000, 600000)`,
    [PAYWALL],
  );
  await db.query(
    `insert into end_user (id, paywall_id, external_id)
     select ('00000000-0000-4000-9000-' || lpad(g::text, 12, '0'))::uuid, $1, 'user-' || g
       from generate_series(1, 2000) g`,
    [PAYWALL],
  );
  // A year back from now; user n ≈ 2000 * r², so a few users make most of the requests.
  await db.query(
    `insert into charge (id, paywall_id, user_id, kind, status, hold_raw, amount_raw, model, prompt_tokens,
                         completion_tokens, created_at, settled_at)
     select gen_random_uuid(), $1,
            ('00000000-0000-4000-9000-' || lpad((1 + floor(1999 * r * r))::int::text, 12, '0'))::uuid,
            'usage', 'completed', 0, 200 + pt * 3 / 10 + ct * 12 / 10,
            (array['gpt-4o-mini', 'gpt-4o', 'claude-haiku', 'llama-70b'])[1 + g % 4], pt, ct, at, at + interval '2 seconds'
       from (select g, random() as r, (50 + random() * 1950)::int as pt, (10 + random() * 490)::int as ct,
                    now() - interval '2 seconds' - (g * (interval '365 days' / $2::int)) as at
               from generate_series(1, $2::int) g) s`,
    [PAYWALL, CHARGES],
  );
  await db.query(`vacuum analyze charge`);
  console.log(`generated ${CHARGES} charges in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const usage = new UsageService(db);
  const today = new Date().toISOString().slice(0, 10);
  const yearAgo = new Date(Date.now() - 365 * 86_400_000).toISOString().slice(0, 10);
  t0 = performance.now();
  await usage.rollUp(PAYWALL);
  console.log(`first query rolls up the closed days once: ${(performance.now() - t0).toFixed(0)} ms`);

  console.log(`\nusage(from: ${yearAgo}, to: ${today}) — ${RUNS} runs each, after 3 warm-ups`);
  console.log('groupBy   p50 ms   p95 ms   max ms');
  const results: Record<string, { p50: number; p95: number }> = {};
  for (const groupBy of ['DAY', 'MODEL', 'USER'] as UsageGroupBy[]) {
    for (let i = 0; i < 3; i++) await usage.usage(PAYWALL, yearAgo, today, groupBy, 10);
    const ms: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t = performance.now();
      const r = await usage.usage(PAYWALL, yearAgo, today, groupBy, 10);
      ms.push(performance.now() - t);
      if (i === 0 && groupBy === 'DAY' && r.totals.requests !== CHARGES)
        throw new Error(`totals.requests ${r.totals.requests} != ${CHARGES}`);
    }
    results[groupBy] = { p50: pct(ms, 50), p95: pct(ms, 95) };
    console.log(
      `${groupBy.padEnd(8)}  ${pct(ms, 50).toFixed(1).padStart(6)}   ${pct(ms, 95).toFixed(1).padStart(6)}   ${Math.max(
        ...ms,
      )
        .toFixed(1)
        .padStart(6)}`,
    );
  }
  await db.close();
  const worst = Math.max(...Object.values(results).map((r) => r.p95));
  console.log(`\nworst p95 ${worst.toFixed(1)} ms (target ≤ 200 ms)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
