/**
 * `npm run bench`: the paid proxy against a bare Node pass-through proxy, same machine, same fake
 * upstream, one table.
 *
 * Processes (each its own event loop, all on 127.0.0.1):
 *   upstream  the fake OpenAI-compatible server of the tests (JSON and SSE)
 *   bare      node:http + undici Pool: reads the body, forwards it, relays the answer (no auth, no DB)
 *   service   this service (embedded PGlite, or a fresh database on DATABASE_URL), one paywall, many
 *             funded users, payment on: every request is a hold and a settlement
 *   driver    this process: N keep-alive connections per target, a closed loop for a bounded time
 *
 * Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (50), BENCH_USERS (1000), BENCH_SCENARIOS
 * ("json,stream"), BENCH_LIMITS (1: also the service with every daily and rate limit on), BENCH_LOG_LEVEL (silent), DATABASE_URL (unset = embedded PGlite), BENCH_PROFILE
 * (service | bare | upstream: a V8 CPU profile of that process, written under the temp directory).
 *
 * Besides req/s and latency, each line shows the CPU milliseconds each process spent per request:
 * on a small machine every process shares the same cores, so CPU per request is what decides.
 */
import 'reflect-metadata';
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Math.min(2, SECONDS);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const USERS = Number(process.env.BENCH_USERS ?? 1000);
const SCENARIOS = (process.env.BENCH_SCENARIOS ?? 'json,stream').split(',').map((s) => s.trim());
/** Also measure the service with every limit of CONTRACT §10 on (BENCH_LIMITS=0 skips it). */
const LIMITS = process.env.BENCH_LIMITS !== '0';
const MODEL = 'gpt-bench';
const PROVIDER_KEY = 'sk-bench-provider-key';
const OWNER_TOKEN = 'ot_bench_owner_token_0123456789';

interface Ready {
  ready: true;
  port: number;
  apiKey?: string;
}
type Msg = Ready;

// ---------------------------------------------------------------- child roles

/** Every child answers `{ id, cmd }` messages; `cpu` is common, roles add their own commands. */
function serve(handlers: Record<string, () => Promise<unknown> | unknown> = {}): void {
  const all: Record<string, () => Promise<unknown> | unknown> = {
    cpu: () => process.cpuUsage(),
    ...handlers,
  };
  process.on('message', async (m: any) => {
    const h = m && all[m.cmd];
    if (h) process.send!({ id: m.id, result: await h() });
  });
}

async function runUpstream(): Promise<void> {
  const { FakeUpstream } = await import('../test/helpers/fake-upstream.js');
  const fake = await FakeUpstream.start({ record: false });
  serve();
  process.send!({ ready: true, port: Number(new URL(fake.baseUrl).port) } satisfies Msg);
}

async function runBare(upstreamPort: number): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 256, keepAliveTimeout: 30_000 });
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      pool
        .request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${PROVIDER_KEY}` },
          body: Buffer.concat(parts),
        })
        .then(({ statusCode, headers, body }) => {
          res.writeHead(statusCode, {
            'content-type': String(headers['content-type'] ?? 'application/json'),
          });
          body.on('data', (c: Buffer) => res.write(c));
          body.on('end', () => res.end());
          body.on('error', () => res.destroy());
        })
        .catch(() => {
          res.writeHead(502);
          res.end();
        });
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serve();
  process.send!({ ready: true, port: (server.address() as AddressInfo).port } satisfies Msg);
}

/** A fresh, migrated database: a new one on DATABASE_URL's server (dropped after), else in-memory PGlite. */
async function openDatabase() {
  const { Database } = await import('../src/db/database.js');
  const base = process.env.DATABASE_URL;
  if (!base) {
    const db = await Database.open({ dataDir: 'memory://' });
    await db.migrate();
    return { db, url: undefined, drop: () => db.close() };
  }
  const { createScratchPostgres } = await import('../src/db/scratch-database.js');
  return createScratchPostgres(base, 'pp_bench');
}

/**
 * The service, one paywall, USERS funded users. `withLimits`: every limit of CONTRACT §10 is on (set
 * far above what the run reaches), so the run compares the cost of checking and counting them.
 */
async function runService(upstreamPort: number, withLimits: boolean): Promise<void> {
  const { createApp } = await import('../src/app.js');
  const { loadConfig } = await import('../src/config.js');
  const { createLogger } = await import('../src/shared/logger.js');
  const { proveLedger } = await import('../src/modules/ledger/accounts.js');
  const { db, url, drop } = await openDatabase();
  const config = loadConfig({
    PORT: '0',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'silent',
    BOOTSTRAP_OWNER_TOKEN: OWNER_TOKEN,
    ENCRYPTION_KEY: 'bench-encryption-key-0123456789',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    PROVIDER_ALLOW_PRIVATE_NETWORKS: 'true',
    ...(url ? { DATABASE_URL: url } : {}),
    ...(withLimits ? { RATE_LIMIT_PER_MINUTE: '1000000000' } : {}),
  });
  const app = await createApp({ config, db, log: createLogger(config.LOG_LEVEL) });
  await app.services.owners.bootstrap(OWNER_TOKEN);
  await app.start();
  await new Promise<void>((r) => app.server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  const call = async (token: string, path: string, body: unknown) => {
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json: any = await res.json();
    if (res.status !== 200 || json.errors) throw new Error(`${path}: ${JSON.stringify(json)}`);
    return json;
  };
  const gql = (token: string, query: string, variables: Record<string, unknown> = {}) =>
    call(token, '/graphql', { query, variables }).then((r) => r.data);

  const created = await gql(
    OWNER_TOKEN,
    `mutation { createPaywall(input: {name: "bench", mode: DEFAULT}) { apiKey paywall { id } } }`,
  );
  const apiKey: string = created.createPaywall.apiKey;
  await gql(apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl: `http://127.0.0.1:${upstreamPort}/v1`, apiKey: PROVIDER_KEY },
  });
  await gql(apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: {
      modelId: MODEL,
      prompt: '0.000002',
      completion: '0.000005',
      request: '0.0001',
      maxCompletionTokens: 256,
    },
  });
  await gql(apiKey, `mutation { updatePaywall(input: {markup: "1.5"}) { id } }`);
  if (withLimits) {
    await gql(
      apiKey,
      `mutation { updatePaywall(input: {dailyRequestLimit: 1000000000, dailySpendLimit: "1000000"}) { id } }`,
    );
    await gql(
      apiKey,
      `mutation { setModelPricing(input: {modelId: "${MODEL}", dailyRequestLimit: 1000000000}) { id } }`,
    );
  }
  // Fund every user through the deposit endpoint (20 at a time).
  for (let i = 0; i < USERS; i += 20)
    await Promise.all(
      Array.from({ length: Math.min(20, USERS - i) }, (_, k) =>
        call(apiKey, '/v1/user/balance/deposit', { user: `user${i + k}`, amount: '1000' }),
      ),
    );

  serve({
    stats: async () => {
      const rows = await db.query(
        `select status, count(*)::int as n, coalesce(sum(amount_raw), 0)::text as amount from charge where kind = 'usage' group by status`,
      );
      const money = await db.query(
        `select coalesce(sum(balance_raw), 0)::text as balance, coalesce(sum(held_raw), 0)::text as held
           from ledger_account where kind = 'user'`,
      );
      const proof = await proveLedger(db);
      return { charges: rows, ...money[0], proof: proof.ok, batches: app.services.proxy.batchStats };
    },
  });
  process.on('SIGTERM', async () => {
    await app.stop(2000).catch(() => undefined);
    await drop().catch(() => undefined);
    process.exit(0);
  });
  process.send!({ ready: true, port: (app.server.address() as AddressInfo).port, apiKey } satisfies Msg);
}

// ---------------------------------------------------------------- driver

interface Result {
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;

/** A closed loop: `connections` workers, each sending its next request when the previous answer ended. */
async function load(
  port: number,
  path: string,
  headersOf: (i: number) => Record<string, string>,
  body: string,
  seconds: number,
  stream: boolean,
): Promise<Result> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONNECTIONS, keepAliveTimeout: 30_000 });
  const latencies: number[] = [];
  let errors = 0;
  let seq = 0;
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < end) {
        const t0 = process.hrtime.bigint();
        try {
          const res = await pool.request({ path, method: 'POST', headers: headersOf(seq++), body });
          const text = await res.body.text();
          const ok =
            res.statusCode === 200 &&
            !text.includes('"paywall":{') &&
            (stream ? text.endsWith('data: [DONE]\n\n') : text.includes('"choices"'));
          if (ok) latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          else errors++;
        } catch {
          errors++;
        }
      }
    }),
  );
  await pool.close();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

function start(role: string, args: string[] = []): Promise<{ child: ChildProcess; msg: Ready }> {
  // BENCH_PROFILE=service (or bare, upstream) writes a V8 CPU profile of that process to the temp
  // directory (open it in Chrome DevTools).
  const execArgv =
    process.env.BENCH_PROFILE === role
      ? ['--cpu-prof', `--cpu-prof-dir=${join(tmpdir(), 'paywall-proxy-bench')}`]
      : [];
  const child = fork(fileURLToPath(import.meta.url), [role, ...args], {
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (msg: any) => resolve({ child, msg }));
    child.once('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
  });
}

let rpcSeq = 0;
function rpc<T = any>(child: ChildProcess, cmd: string): Promise<T> {
  const id = ++rpcSeq;
  return new Promise((resolve) => {
    const on = (m: any) => {
      if (m?.id !== id) return;
      child.off('message', on);
      resolve(m.result as T);
    };
    child.on('message', on);
    child.send({ id, cmd });
  });
}

/** CPU time (ms) of PostgreSQL's processes on this machine (Linux /proc), or null. */
function postgresCpuMs(): number | null {
  try {
    let ticks = 0;
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        continue;
      }
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== 'postgres') continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime
    }
    return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** CPU ms spent by each process while `fn` ran. */
async function measured<T>(
  procs: Record<string, ChildProcess>,
  fn: () => Promise<T>,
): Promise<{ result: T; cpu: Record<string, number> }> {
  const cpuNow = async () => {
    const out: Record<string, number> = {};
    for (const [name, child] of Object.entries(procs)) {
      const u = await rpc<NodeJS.CpuUsage>(child, 'cpu');
      out[name] = (u.user + u.system) / 1000;
    }
    const d = process.cpuUsage();
    out.driver = (d.user + d.system) / 1000;
    const pg = postgresCpuMs();
    if (pg !== null) out.postgres = pg;
    return out;
  };
  const before = await cpuNow();
  const result = await fn();
  const after = await cpuNow();
  return { result, cpu: Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)])) };
}

const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');

async function driver(): Promise<void> {
  const database = process.env.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : 'embedded PGlite (in memory)';
  console.log(
    `bench: ${SECONDS}s per target, ${CONNECTIONS} keep-alive connections, ${USERS} funded users, database: ${database}`,
  );
  const children: ChildProcess[] = [];
  try {
    const upstream = await start('upstream');
    children.push(upstream.child);
    const bare = await start('bare', [String(upstream.msg.port)]);
    children.push(bare.child);
    console.log('setting up the service (migrations, paywall, users, deposits)…');
    const service = await start('service', [String(upstream.msg.port)]);
    children.push(service.child);
    const apiKey = service.msg.apiKey!;
    // The same service with every limit on (daily requests, spend, per model, API rate limit).
    const limited = LIMITS ? await start('service', [String(upstream.msg.port), 'limits']) : null;
    if (limited) children.push(limited.child);

    const rows: string[][] = [];
    for (const scenario of SCENARIOS) {
      const stream = scenario === 'stream';
      const body = JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'Hello! How are you today?' }],
        max_tokens: 64,
        ...(stream ? { stream: true } : {}),
      });
      const json = { 'content-type': 'application/json' };
      const targets: [string, number, (i: number) => Record<string, string>, ChildProcess][] = [
        ['bare pass-through', bare.msg.port, () => json, bare.child],
        [
          'paywall proxy',
          service.msg.port,
          (i) => ({ ...json, authorization: `Bearer ${apiKey}`, 'x-paywall-user': `user${i % USERS}` }),
          service.child,
        ],
        ...(limited
          ? ([
              [
                'proxy + all limits',
                limited.msg.port,
                (i: number) => ({
                  ...json,
                  authorization: `Bearer ${limited.msg.apiKey}`,
                  'x-paywall-user': `user${i % USERS}`,
                }),
                limited.child,
              ],
            ] as typeof targets)
          : []),
      ];
      const results: Result[] = [];
      for (const [name, port, headers, proc] of targets) {
        process.stdout.write(`  ${scenario}: ${name}… `);
        await load(port, '/v1/chat/completions', headers, body, WARMUP_SECONDS, stream);
        const { result: r, cpu } = await measured({ proxy: proc, upstream: upstream.child }, () =>
          load(port, '/v1/chat/completions', headers, body, SECONDS, stream),
        );
        results.push(r);
        // CPU per request shows where the time goes when the machine's cores are the limit.
        // PostgreSQL's share is read from /proc for every postgres process on the machine (so other
        // databases' work counts too, and exited backends make it jump): shown for the service only.
        const perReq = Object.entries(cpu)
          .filter(([k]) => k !== 'postgres' || (process.env.DATABASE_URL && proc !== bare.child))
          .map(([k, ms]) => `${k} ${r.requests ? Math.max(0, ms / r.requests).toFixed(3) : '-'}`)
          .join(', ');
        console.log(`${fmt(r.rps)} req/s (CPU ms per request: ${perReq})`);
        rows.push([
          scenario,
          name,
          String(r.requests),
          String(r.errors),
          fmt(r.rps),
          fmt(r.p50, 2),
          fmt(r.p99, 2),
          name === 'bare pass-through' ? '1.00x' : `${fmt(r.rps / results[0].rps, 2)}x`,
        ]);
      }
    }

    const header = ['scenario', 'target', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'vs bare'];
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (r: string[]) =>
      r.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
    console.log('\n' + line(header));
    console.log(widths.map((w) => '-'.repeat(w)).join('  '));
    for (const r of rows) console.log(line(r));

    // Payment really was on: every served request is a settled usage charge, no hold left open.
    for (const [label, proc] of [
      ['service', service.child],
      ...(limited ? [['service with limits', limited.child] as const] : []),
    ] as const) {
      const stats = await rpc<any>(proc, 'stats');
      const byStatus = Object.fromEntries(stats.charges.map((c: any) => [c.status, c.n]));
      console.log(
        `\n${label} ledger: charges ${JSON.stringify(byStatus)}, charged ${(Number(stats.charges.find((c: any) => c.status === 'completed')?.amount ?? 0) / 1e6).toFixed(6)} USDC, ` +
          `held now ${stats.held} raw, users' balances ${stats.balance} raw; ledger proof (balances sum to 0, each = its transfers, held = open holds): ${stats.proof ? 'ok' : 'FAILED'}`,
      );
      const b = stats.batches;
      console.log(
        `group commit: ${b.batches} ledger statements, avg ${(b.batches ? b.items / b.batches : 0).toFixed(1)} ` +
          `holds + settlements each, ${(b.batches ? b.ms / b.batches : 0).toFixed(1)} ms each`,
      );
    }
  } finally {
    for (const c of children.reverse()) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
  }
}

const [role, arg] = process.argv.slice(2);
if (role === 'upstream') await runUpstream();
else if (role === 'bare') await runBare(Number(arg));
else if (role === 'service') await runService(Number(arg), process.argv[4] === 'limits');
else await driver();
