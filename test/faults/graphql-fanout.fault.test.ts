import type { AddressInfo } from 'node:net';
import { createApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { Database } from '../../src/db/database.js';
import { createLogger } from '../../src/shared/logger.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';

/**
 * GraphQL fan-out against one small pool (issue 9): one owner with 50 paywalls and a year of charges floods
 * the API with heavy-but-allowed usage reads (`paywalls(first: 6) { usage(365 days) }`, 16 clients at
 * once), while another tenant reads balances and gets webhooks. Measured: that tenant's balance-read
 * latency (p50/p99) before and during the flood, every answer's status, and how long a deposit's webhook
 * takes to arrive during it. The original attack (`paywalls { usage(a year) }` over 50 paywalls) is refused
 * with COST_LIMIT_EXCEEDED. The figures are printed (README "Guarantees").
 */

const OWNER = 'ot_fanout_owner_token_0123456789';
const POOL = 8;
const PAYWALLS = 50;
const FLOOD_CLIENTS = 16;
const READS = 300;

let pp: PrivatePostgres;
let db: Database;
let app: App;
let base = '';
let hooks: WebhookReceiver;

async function call(token: string, method: string, path: string, body?: unknown) {
  const started = performance.now();
  const res = await fetch(base + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const json: any = await res.json().catch(() => null);
  return { status: res.status, body: json, ms: performance.now() - started };
}

const gql = (token: string, query: string, variables?: Record<string, unknown>) =>
  call(token, 'POST', '/graphql', { query, variables });

const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

beforeAll(async () => {
  pp = await startPrivatePostgres();
  const url = await pp.createDatabase('fanout');
  db = await Database.open({ url, poolMax: POOL, backgroundPoolMax: 2 });
  await db.migrate();
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    PORT: '0',
    DATABASE_URL: url,
    DATABASE_POOL_MAX: String(POOL),
    DATABASE_BACKGROUND_POOL_MAX: '2',
    BOOTSTRAP_OWNER_TOKEN: OWNER,
    ENCRYPTION_KEY: 'fanout-encryption-key-0123456789',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_POLL_MS: '200',
  });
  app = await createApp({ config, db, log: createLogger('silent') });
  await app.services.owners.bootstrap(OWNER);
  await app.start();
  await new Promise<void>((r) => app.server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  hooks = await WebhookReceiver.start();
}, 180_000);

afterAll(async () => {
  await app?.stop(500).catch(() => undefined);
  await db?.close().catch(() => undefined);
  await hooks?.close();
  pp?.destroy();
});

it('one owner’s usage flood leaves another tenant’s balance reads and webhooks fast; the fan-out attack is refused', async () => {
  // The heavy owner: 50 paywalls, 200 charges each over the last year (roll-ups and today's raw rows).
  const [{ id: ownerId }] = await db.query<{ id: string }>(`select id from owner limit 1`);
  for (let i = 0; i < PAYWALLS; i++) await app.services.paywalls.create(ownerId, `Heavy ${i}`, 'DEFAULT');
  await db.query(
    `insert into end_user (id, paywall_id, external_id)
     select gen_random_uuid(), p.id, 'u' || g from paywall p, generate_series(1, 5) g where p.owner_id = $1`,
    [ownerId],
  );
  await db.query(
    `insert into charge (id, paywall_id, user_id, kind, status, amount_raw, created_at, settled_at)
     select gen_random_uuid(), u.paywall_id, u.id, 'manual', 'completed', 1000 + g, at, at
       from end_user u join paywall p on p.id = u.paywall_id and p.owner_id = $1,
            generate_series(1, 40) g, lateral (select now() - (g * 9) * interval '1 day' as at) t`,
    [ownerId],
  );

  // The other tenant: its own owner and paywall, a funded user, a webhook endpoint.
  const other = await app.services.owners.create('quiet tenant');
  const created = await gql(
    other.createdToken,
    `mutation { createPaywall(input: {name: "Quiet", mode: DEFAULT}) { apiKey } }`,
  );
  const key: string = created.body.data.createPaywall.apiKey;
  expect((await call(key, 'POST', '/v1/user/balance/deposit', { user: 'bob', amount: '2' })).status).toBe(
    200,
  );
  const sub = await call(key, 'POST', '/v1/webhooks/subscriptions', {
    url: hooks.url('/quiet'),
    events: ['paywall.balance.deposit.created'],
  });
  expect(sub.status).toBe(201);

  // The attack itself: refused before it runs.
  const attack = await gql(
    OWNER,
    `{ paywalls { id usage(from: "${day(-364)}", to: "${day(0)}", groupBy: DAY) { buckets { key revenue } } } }`,
  );
  expect(attack.status).toBe(400);
  expect(attack.body.errors[0].extensions.code).toBe('COST_LIMIT_EXCEEDED');

  const balanceReads = async (n: number) => {
    const out: { status: number; ms: number; balance: string }[] = [];
    for (let i = 0; i < n; i++) {
      const r = await call(key, 'GET', '/v1/user/balance?user=bob');
      out.push({ status: r.status, ms: r.ms, balance: r.body?.balance });
    }
    return out;
  };

  const quiet = await balanceReads(READS);

  // The flood: 16 clients, each asking for 6 paywalls' year of usage at a time, for as long as it lasts.
  const heavy = `query($after: String) { paywalls(first: 6, after: $after) { cursor usage(from: "${day(-364)}", to: "${day(0)}", groupBy: DAY) { totals { revenue requests } } } }`;
  let flooding = true;
  const floodStatuses = new Map<number, number>();
  const flood = Array.from({ length: FLOOD_CLIENTS }, async (_, c) => {
    let after: string | null = null;
    let n = 0;
    while (flooding) {
      const r = await gql(OWNER, heavy, { after });
      floodStatuses.set(r.status, (floodStatuses.get(r.status) ?? 0) + 1);
      const page = r.body?.data?.paywalls ?? [];
      after = page.length === 6 ? page[5].cursor : null;
      if (++n === 1 && c === 0) expect(page).toHaveLength(6);
    }
  });
  // Let the flood build up, then measure the other tenant while it runs.
  await new Promise((r) => setTimeout(r, 1000));
  const depositAt = Date.now();
  expect((await call(key, 'POST', '/v1/user/balance/deposit', { user: 'bob', amount: '0.5' })).status).toBe(
    200,
  );
  let during: { status: number; ms: number; balance: string }[];
  let webhookMs: number;
  try {
    during = await balanceReads(READS);
    // The subscription came after the first deposit: the only delivery is this one's.
    const isIt = (r: { body?: any }) => r.body?.event?.type === 'paywall.balance.deposit.created';
    await hooks.waitFor((all) => all.some(isIt), 30_000, 'the webhook of the deposit');
    webhookMs = hooks.requests.find(isIt)!.at - depositAt;
  } finally {
    flooding = false;
    await Promise.all(flood);
  }

  const figures = {
    pool: POOL,
    floodClients: FLOOD_CLIENTS,
    floodAnswers: Object.fromEntries(floodStatuses),
    usageReadsRunningAtMost: 'GRAPHQL_HEAVY_READS_PER_TENANT=2',
    quietP50ms: +pct(
      quiet.map((r) => r.ms),
      50,
    ).toFixed(1),
    quietP99ms: +pct(
      quiet.map((r) => r.ms),
      99,
    ).toFixed(1),
    floodP50ms: +pct(
      during.map((r) => r.ms),
      50,
    ).toFixed(1),
    floodP99ms: +pct(
      during.map((r) => r.ms),
      99,
    ).toFixed(1),
    webhookDuringFloodMs: Math.round(webhookMs),
  };
  console.log(`graphql fan-out: ${JSON.stringify(figures)}`);

  // Every read of the other tenant answered 200 with its balance; the flood got 200s, never a 5xx.
  expect(during.filter((r) => r.status !== 200 || r.balance !== '2500000')).toEqual([]);
  expect([...floodStatuses.keys()]).toEqual([200]);
  // Fast. The flood shares this process's CPU (2 cores here), so some slowdown is expected; what the gate
  // prevents is the wait for a pool connection (with every usage read let through at once: p50 278 ms,
  // p99 890 ms on this machine, against 18–45 ms and 75–300 ms with it).
  expect(figures.floodP50ms).toBeLessThan(150);
  expect(figures.floodP99ms).toBeLessThan(600);
  expect(webhookMs).toBeLessThan(10_000);
}, 600_000);
