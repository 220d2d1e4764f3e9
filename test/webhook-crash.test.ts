import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Database } from '../src/db/database.js';
import { createTestDatabase } from './helpers/database.js';
import { createSubscription, WebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * The real service as a child process, killed with SIGKILL while 100 deliveries wait for a receiver that is
 * down, then started again on the same database (PostgreSQL, or the embedded database's DATA_DIR): every
 * event still reaches the receiver, at least once, with the ids it was recorded under.
 */

const EVENTS = 100;
const OWNER_TOKEN = 'ot_crash_test_owner_token_0123';
const ROOT = process.cwd();
const BUILD_DIR = path.join(ROOT, 'dist', `crash-test-${process.pid}`);

let dataDir: string | undefined;
let pg: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
let port: number;
let receiver: WebhookReceiver;
let child: ChildProcess | undefined;
let output = '';

beforeAll(async () => {
  // Build the service as `npm start` does, into a private directory (others may be building dist/ too).
  const tsc = spawnSync(
    process.execPath,
    [
      path.join(ROOT, 'node_modules/typescript/bin/tsc'),
      ...['-p', 'tsconfig.build.json', '--outDir', BUILD_DIR],
      // Its own incremental state: sharing dist/.tsbuildinfo would make the next `npm run build` stale.
      ...['--tsBuildInfoFile', path.join(BUILD_DIR, '.tsbuildinfo')],
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (!existsSync(path.join(BUILD_DIR, 'src/main.js')))
    throw new Error(`build failed:\n${tsc.stdout}${tsc.stderr}`);
  if (process.env.DATABASE_URL) pg = await createTestDatabase();
  else dataDir = mkdtempSync(path.join(tmpdir(), 'pp-crash-'));
  port = await WebhookReceiver.freePort();
  receiver = WebhookReceiver.notStarted(await WebhookReceiver.freePort());
}, 300_000);

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  await receiver?.close();
  await pg?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  rmSync(BUILD_DIR, { recursive: true, force: true });
});

/** `src/main.js` is `npm start`, `src/worker.js` is `npm run worker`. */
function startService(extraEnv: Record<string, string> = {}, entry = 'src/main.js'): ChildProcess {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    NODE_ENV: 'test',
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    BOOTSTRAP_OWNER_TOKEN: OWNER_TOKEN,
    ENCRYPTION_KEY: 'crash-test-encryption-key-0123456789',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    // Retries every 1, 2, 4, 8… s: the deliveries are mid-retry when the process dies, none exhausted.
    WEBHOOK_BACKOFF_BASE_MS: '1000',
    WEBHOOK_MAX_ATTEMPTS: '10',
    WEBHOOK_TIMEOUT_MS: '5000',
    WEBHOOK_POLL_MS: '100',
    ...(pg ? { DATABASE_URL: pg.url! } : { DATA_DIR: dataDir! }),
    ...extraEnv,
  };
  const p = spawn(process.execPath, [path.join(BUILD_DIR, entry)], { cwd: ROOT, env });
  p.stdout!.on('data', (d) => (output += d));
  p.stderr!.on('data', (d) => (output += d));
  return p;
}

async function ready(p: ChildProcess, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (p.exitCode !== null) throw new Error(`service exited with ${p.exitCode}:\n${output}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (r.status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`service not ready:\n${output}`);
}

const exited = (p: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) resolve(p.exitCode);
    else p.once('exit', (code) => resolve(code));
  });

const client = {
  async rest(method: string, urlPath: string, opts: { token?: string | null; body?: unknown } = {}) {
    const res = await fetch(`http://127.0.0.1:${port}${urlPath}`, {
      method,
      headers: {
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    });
    return { status: res.status, body: (await res.json()) as any };
  },
  async gql(token: string, query: string, variables?: Record<string, unknown>) {
    const r = await this.rest('POST', '/graphql', { token, body: { query, variables } });
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
    return r.body.data;
  },
};

it('delivers all 100 events, with their recorded ids, after the service is killed with SIGKILL while the receiver was down', async () => {
  child = startService();
  await ready(child);
  const created = await client.gql(
    OWNER_TOKEN,
    `mutation { createPaywall(input: {name: "Crash", mode: DEFAULT}) { apiKey paywall { id } } }`,
  );
  const { apiKey } = created.createPaywall;
  const paywallId = created.createPaywall.paywall.id;
  const sub = await createSubscription(client, apiKey, { url: receiver.url(), events: ['paywall.updated'] });

  // The receiver is down: every delivery fails (connection refused) and is scheduled for a retry.
  for (let i = 0; i < EVENTS; i += 10) {
    await Promise.all(
      Array.from({ length: 10 }, (_, j) =>
        client.gql(apiKey, `mutation($n: String!) { updatePaywall(input: {name: $n}) { id } }`, {
          n: `Crash ${i + j}`,
        }),
      ),
    );
  }
  child.kill('SIGKILL');
  await exited(child);
  expect(child.signalCode).toBe('SIGKILL');
  expect(receiver.requests).toHaveLength(0);

  // Both come back: the receiver, then the service on the same database.
  await receiver.up();
  child = startService();
  await ready(child);
  const distinct = () => new Set(receiver.requests.map((r) => r.headers['x-service-event-id']));
  await receiver.waitFor(() => distinct().size >= EVENTS, 120_000, `${EVENTS} distinct events`);
  // An answer that was received but not recorded in time (a timeout under load) is sent again: wait
  // until the delivery logs say every delivery succeeded.
  for (const deadline = Date.now() + 120_000; ;) {
    const logs = await client.rest(
      'GET',
      `/v1/webhooks/logs?subscriptionId=${sub.id}&status=success&limit=100`,
      {
        token: apiKey,
      },
    );
    if (logs.body.data?.length === EVENTS) break;
    if (Date.now() > deadline)
      throw new Error(`not all delivered: ${JSON.stringify(logs.body).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 200));
  }

  // A clean stop (SIGTERM) lets the test open the embedded database after the service.
  child.kill('SIGTERM');
  expect(await exited(child)).toBe(0);

  const db = pg ? pg.db : await Database.open({ dataDir });
  try {
    const events = await db.query<{ id: string }>(
      `select id from event where paywall_id = $1 and type = 'paywall.updated'`,
      [paywallId],
    );
    expect(events).toHaveLength(EVENTS);
    expect(distinct()).toEqual(new Set(events.map((e) => e.id)));
    const deliveries = await db.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from webhook_delivery where subscription_id = $1 group by status`,
      [sub.id],
    );
    expect(deliveries).toEqual([{ status: 'success', n: EVENTS }]);
  } finally {
    if (!pg) await db.close();
  }
  // Every event reached the receiver at least once (repeats after the crash allowed).
  expect(new Set(receiver.requests.map((r) => r.body.event.id)).size).toBe(EVENTS);
  for (const r of receiver.requests) {
    // Same id in the header and the body, and a valid signature, on every (possibly repeated) request.
    expect(r.body.event.id).toBe(r.headers['x-service-event-id']);
    const expected = createHmac('sha256', sub.secret).update(r.rawBody).digest();
    const given = Buffer.from(String(r.headers['x-service-signature']), 'hex');
    expect(given.length === expected.length && timingSafeEqual(given, expected)).toBe(true);
  }
}, 600_000);

it('npm run worker: a separate worker process delivers what the API recorded with WEBHOOK_WORKER=false', async () => {
  await receiver.up();
  const api = (child = startService({ WEBHOOK_WORKER: 'false' }));
  await ready(api);
  const created = await client.gql(
    OWNER_TOKEN,
    `mutation { createPaywall(input: {name: "Worker", mode: DEFAULT}) { apiKey paywall { id } } }`,
  );
  const { apiKey } = created.createPaywall;
  const sub = await createSubscription(client, apiKey, { url: receiver.url('/worker'), events: ['*'] });
  for (let i = 0; i < 5; i++) {
    await client.gql(apiKey, `mutation($n: String!) { updatePaywall(input: {name: $n}) { id } }`, {
      n: `W${i}`,
    });
  }
  // The API sends nothing itself.
  const pending = await client.rest('GET', `/v1/webhooks/logs?subscriptionId=${sub.id}&status=pending`, {
    token: apiKey,
  });
  expect(pending.body.data).toHaveLength(5);
  if (!pg) {
    // The embedded database belongs to one process: hand it over. PostgreSQL serves both at once.
    api.kill('SIGTERM');
    expect(await exited(api)).toBe(0);
  }

  const worker = startService({}, 'src/worker.js');
  try {
    const mine = () => receiver.requests.filter((r) => r.path === '/worker');
    await receiver.waitFor(
      () => new Set(mine().map((r) => r.body.event.id)).size >= 5,
      120_000,
      '5 deliveries',
    );
    expect(mine().every((r) => r.body.delivery.subscriptionId === sub.id)).toBe(true);
  } finally {
    worker.kill('SIGTERM');
    expect(await exited(worker)).toBe(0);
    if (api.exitCode === null) {
      api.kill('SIGTERM');
      expect(await exited(api)).toBe(0);
    }
  }
}, 600_000);
