import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  connectShared,
  createProxyPaywall,
  deposit,
  eventually,
  MODEL,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { EventRetention } from '../src/db/retention.js';
import { tableStats } from '../src/db/table-stats.js';

/**
 * Retention (docs/reference.md §18 "Retention"): a month and more of events and their deliveries (spread over
 * 40 days) is removed in batches while paid chat requests run; what is younger than EVENT_RETENTION_DAYS
 * stays, every charge, transfer, refund and withdrawal stays (even those older than the cutoff), every
 * request succeeds and the ledger proof holds. Also `npm run admin -- db stats`.
 */
const DAYS = 30;
const SPAN_DAYS = 40;
const EVENTS = process.env.DATABASE_URL ? 50_000 : 20_000;
const DAY_MS = 86_400_000;

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;
/** A SHARED paywall: its earnings pay a withdrawal. */
let sh: ProxyPaywall;
let seedMs = 0;

beforeAll(async () => {
  fake = await FakeUpstream.start();
  // No webhook worker: the seeded deliveries are rows to remove, not to send.
  t = await startTestApp({ WEBHOOK_WORKER: 'false', EVENT_RETENTION_DAYS: String(DAYS) });
  // The month of earlier traffic comes first (lower seq), as it would have been written.
  const seeding = performance.now();
  await seed(randomUUID(), randomUUID());
  seedMs = performance.now() - seeding;
  pw = await createProxyPaywall(t, fake);
  sh = await createProxyPaywall(t, fake, { mode: 'SHARED' });
}, 120_000);
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

async function chat(user: string, on = pw): Promise<{ status: number; chargeId: string | null }> {
  const r = await t.rest('POST', '/v1/chat/completions', {
    token: on.apiKey,
    headers: { 'x-paywall-user': user },
    body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 },
  });
  return { status: r.status, chargeId: r.headers.get('x-paywall-charge-id') };
}

const count = async (sql: string, params: unknown[] = []): Promise<number> =>
  Number((await t.db.query<{ n: string }>(sql, params))[0].n);

/** Events (and per event two deliveries: one delivered, one pending or failed) over the last SPAN_DAYS days. */
async function seed(paywallId: string, ownerUserId: string): Promise<void> {
  const chunk = 10_000;
  for (let from = 0; from < EVENTS; from += chunk) {
    const to = Math.min(EVENTS, from + chunk) - 1;
    // Oldest first, as the service writes them: seq grows with created_at.
    await t.db.query(
      `insert into event (id, paywall_id, owner_user_id, type, trigger, subject, data, created_at)
       select gen_random_uuid(), $1, $2, 'paywall.charge.succeeded', '{"type":"api"}', '{"type":"user"}',
              jsonb_build_object('i', i, 'filler', repeat('x', 200)),
              now() - ($3::float8 * (1 - i::float8 / $4)) * interval '1 day'
         from generate_series($5::int, $6::int) i`,
      [paywallId, ownerUserId, SPAN_DAYS, EVENTS, from, to],
    );
  }
  // Per seeded event: one delivered delivery, and one still to be retried (next attempt far ahead, so no worker
  // would claim it) or failed.
  await t.db.query(
    `insert into webhook_delivery (id, subscription_id, paywall_id, event_id, event_type, status, attempts,
                                   next_attempt_at, response_status, created_at, updated_at)
     select gen_random_uuid(), s.sub, e.paywall_id, e.id, e.type,
            case when s.n = 1 then 'delivered' when e.seq % 2 = 0 then 'pending' else 'failed' end,
            case when s.n = 1 then 1 else 5 end,
            case when s.n = 2 and e.seq % 2 = 0 then timestamptz '2100-01-01' end,
            case when s.n = 1 then 200 else 500 end, e.created_at, e.created_at
       from event e
       cross join (values (1, gen_random_uuid()), (2, gen_random_uuid())) as s(n, sub)
      where e.paywall_id = $1`,
    [paywallId],
  );
}

const MONEY_TABLES = ['charge', 'transfer', 'refund', 'withdrawal'] as const;

it('removes a month of old events and their deliveries in short batches while paid requests run', async () => {
  // Money first: charges (with their transfers), a refund and a withdrawal, then all dated 45 days back.
  await deposit(t, pw, 'ret-ann', '5');
  const first: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await chat('ret-ann');
    expect(r.status).toBe(200);
    first.push(r.chargeId!);
  }
  const refund = await t.gql(
    pw.apiKey,
    `mutation($i: RefundChargeInput!) { refundCharge(input: $i) { id } }`,
    { i: { chargeId: first[0], amount: '0.000086' } },
  );
  expect(refund.errors).toBeUndefined();
  await t.rest('GET', '/v1/user/connect?user=ret-sam', { token: sh.apiKey });
  await connectShared(t, sh, 'ret-sam', 1_000_000n);
  for (let i = 0; i < 2; i++) expect((await chat('ret-sam', sh)).status).toBe(200);
  const withdrawal = await t.gql(
    sh.apiKey,
    `mutation($i: RequestWithdrawalInput!) { requestWithdrawal(input: $i) { id } }`,
    { i: { amount: '0.001', destination: 'acct-retention' } },
  );
  expect(withdrawal.errors).toBeUndefined();
  // The append-only guards (triggers) are set aside for this test's back-dating only.
  await t.db.transaction(async (tx) => {
    await tx.query(`set local session_replication_role = replica`);
    for (const table of MONEY_TABLES)
      await tx.query(`update "${table}" set created_at = now() - interval '45 days'`);
  });
  const money = async () =>
    Object.fromEntries(
      await Promise.all(MONEY_TABLES.map(async (m) => [m, await count(`select count(*) as n from "${m}"`)])),
    );
  const moneyBefore = await money();
  for (const m of MONEY_TABLES) expect(moneyBefore[m]).toBeGreaterThan(0);

  // One cutoff for the counts and the round (rows do not cross it while the test runs).
  const now = new Date();
  const cutoff = new Date(now.getTime() - DAYS * DAY_MS).toISOString();
  const cutoffSql = `timestamptz '${cutoff}'`;
  const oldEvents = await count(`select count(*) as n from event where created_at < ${cutoffSql}`);
  const youngEvents = await count(
    `select count(*) as n from event where created_at >= ${cutoffSql} and data ? 'filler'`,
  );
  const oldDeliveries = await count(
    `select count(*) as n from webhook_delivery where created_at < ${cutoffSql}`,
  );
  const youngDeliveries = await count(
    `select count(*) as n from webhook_delivery where created_at >= ${cutoffSql}`,
  );
  // About a quarter of 40 days is past 30 days.
  expect(oldEvents).toBeGreaterThan(EVENTS * 0.2);
  expect(youngEvents).toBeGreaterThan(EVENTS * 0.7);
  expect(oldDeliveries).toBe(oldEvents * 2);
  expect(
    await count(
      `select count(*) as n from webhook_delivery where status = 'pending' and created_at < ${cutoffSql}`,
    ),
  ).toBeGreaterThan(0);

  // Paid requests run the whole time the retention round runs (and a little before and after).
  await deposit(t, pw, 'ret-bob', '5');
  let stop = false;
  const results: number[] = [];
  const latencies: number[] = [];
  const spans: [number, number][] = [];
  const load = async (user: string) => {
    while (!stop) {
      const started = performance.now();
      results.push((await chat(user)).status);
      latencies.push(performance.now() - started);
      spans.push([started, performance.now()]);
    }
  };
  const workers = [load('ret-ann'), load('ret-bob'), load('ret-ann'), load('ret-bob')];
  await new Promise((r) => setTimeout(r, 200));
  const retention = new EventRetention(t.db, t.app.services.log, DAYS);
  const started = performance.now();
  // Smaller batches on PGlite (fewer events), so the round still takes several.
  const round = await retention.runOnce({ now, batch: process.env.DATABASE_URL ? 2000 : 1000 });
  const roundMs = performance.now() - started;
  await new Promise((r) => setTimeout(r, 200));
  stop = true;
  await Promise.all(workers);

  // Requests were served while the batches ran: some started and finished inside the round (a round that
  // locked the event table for its whole length would hold every one of them until it ended).
  const overlapping = spans.filter(([s, e]) => s < started + roundMs && e > started).length;
  const servedInside = spans.filter(([s, e]) => s >= started && e <= started + roundMs).length;
  expect(servedInside).toBeGreaterThan(0);
  expect(round.ran).toBe(true);
  expect(round.events).toBe(oldEvents);
  expect(round.deliveries).toBe(oldDeliveries);
  expect(round.batches).toBeGreaterThan(1);
  expect(await count(`select count(*) as n from event where created_at < ${cutoffSql}`)).toBe(0);
  expect(await count(`select count(*) as n from webhook_delivery where created_at < ${cutoffSql}`)).toBe(0);
  // Younger rows all stay (the requests above added events of their own, never deliveries: no subscription).
  expect(
    await count(`select count(*) as n from event where created_at >= ${cutoffSql} and data ? 'filler'`),
  ).toBe(youngEvents);
  expect(await count(`select count(*) as n from webhook_delivery`)).toBe(youngDeliveries);
  expect(
    await count(
      `select count(*) as n from webhook_delivery d where not exists (select 1 from event e where e.id = d.event_id)`,
    ),
  ).toBe(0);
  // Money is never removed, however old; the requests during the round added charges.
  const moneyAfter = await money();
  expect(moneyAfter.refund).toBe(moneyBefore.refund);
  expect(moneyAfter.withdrawal).toBe(moneyBefore.withdrawal);
  expect(moneyAfter.charge).toBe(moneyBefore.charge + results.length);
  expect(moneyAfter.transfer).toBeGreaterThan(moneyBefore.transfer);
  expect(await count(`select count(*) as n from charge where created_at < now() - interval '44 days'`)).toBe(
    moneyBefore.charge,
  );
  expect(results.length).toBeGreaterThan(4);
  expect(results.every((s) => s === 200)).toBe(true);
  await expectLedgerProven(t.db);

  // A second round finds nothing to do, in one batch.
  const again = await retention.runOnce();
  expect(again).toMatchObject({ events: 0, deliveries: 0, batches: 1, ran: true });

  latencies.sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      retention: {
        database: t.db.kind,
        seededEvents: EVENTS,
        seedMs: Math.round(seedMs),
        removedEvents: round.events,
        removedDeliveries: round.deliveries,
        batches: round.batches,
        roundMs: Math.round(roundMs),
        rowsPerSecond: Math.round(((round.events + round.deliveries) / roundMs) * 1000),
        longestBatchMs: Math.round(round.longestBatchMs * 10) / 10,
        requests: results.length,
        requestsOverlappingRound: overlapping,
        requestsServedInsideRound: servedInside,
        requestP50Ms: Math.round(latencies[Math.floor(latencies.length / 2)]),
        requestMaxMs: Math.round(latencies.at(-1)!),
      },
    }),
  );
}, 300_000);

it('one instance at a time (another holding the lock: this one stops its round); the timer; 0 = kept forever', async () => {
  // The first event (in seq order) turns 31 days old.
  await t.db.query(
    `update event set created_at = now() - interval '31 days' where seq = (select min(seq) from event)`,
  );
  const retention = new EventRetention(t.db, t.app.services.log, DAYS);
  if (t.db.kind === 'postgres') {
    // The other instance's batch holds the lock (a transaction of its own on another connection).
    const other = await t.db.transaction(async (tx) => {
      await tx.query(`select pg_advisory_xact_lock(hashtextextended('event_retention', 0))`);
      return retention.runOnce();
    });
    expect(other).toMatchObject({ ran: false, events: 0 });
    expect(await count(`select count(*) as n from event where created_at < now() - interval '30 days'`)).toBe(
      1,
    );
  }
  expect(await retention.runOnce()).toMatchObject({ ran: true, events: 1 });
  // The timer: a round every intervalMs (5 minutes in the service).
  await t.db.query(
    `update event set created_at = now() - interval '31 days' where seq = (select min(seq) from event)`,
  );
  const timed = new EventRetention(t.db, t.app.services.log, DAYS, 20);
  await timed.start();
  await eventually(
    () => count(`select count(*) as n from event where created_at < now() - interval '30 days'`),
    (n) => n === 0,
  );
  await timed.stop();
  // EVENT_RETENTION_DAYS=0: kept forever.
  await t.db.query(
    `insert into event (id, paywall_id, owner_user_id, type, trigger, subject, data, created_at)
     select gen_random_uuid(), $1, owner_id, 'paywall.charge.succeeded', '{}', '{}', '{}', now() - interval '400 days'
       from paywall where id = $1`,
    [pw.id],
  );
  expect(await new EventRetention(t.db, t.app.services.log, 0).runOnce()).toMatchObject({
    events: 0,
    batches: 0,
  });
  expect(await count(`select count(*) as n from event where created_at < now() - interval '399 days'`)).toBe(
    1,
  );
});

it('`npm run admin -- db stats`: each table with its rows, total and index size', async () => {
  const stats = await tableStats(t.db);
  const byName = new Map(stats.map((s) => [s.table, s]));
  for (const name of ['event', 'webhook_delivery', 'charge', 'transfer', 'refund', 'withdrawal'])
    expect(byName.has(name)).toBe(true);
  const events = await count(`select count(*) as n from event`);
  expect(byName.get('event')).toMatchObject({ rows: events, rowsExact: true });
  expect(byName.get('event')!.totalBytes).toBeGreaterThan(byName.get('event')!.indexBytes);
  expect(byName.get('event')!.indexBytes).toBeGreaterThan(0);
  expect(byName.get('event')!.total).toMatch(/^\d+ (bytes|kB|MB|GB)$/);
  // Largest first.
  const sizes = stats.map((s) => s.totalBytes);
  expect(sizes).toEqual([...sizes].sort((a, b) => b - a));

  if (process.env.DATABASE_URL) {
    // The CLI, as the operator runs it, against the same PostgreSQL database (built: npm run build).
    const out = spawnSync(process.execPath, ['dist/src/admin.js', 'db', 'stats'], {
      env: { ...process.env, DATABASE_URL: t.config.DATABASE_URL!, LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    const lines = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.table).sort()).toEqual(stats.map((s) => s.table).sort());
    expect(lines.find((l) => l.table === 'event')).toMatchObject({ rows: events, rowsExact: true });
  }
});
