import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createSubscription, WebhookReceiver } from '../helpers/webhook-receiver.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  Api,
  createPaywall,
  killAllServices,
  sleep,
  sqlOf,
  startService,
  type ServiceProcess,
} from './helpers/service.js';

/**
 * `npm run worker` (the delivery worker apart from the API, which runs with WEBHOOK_WORKER=false) on a
 * private PostgreSQL: killed -9 mid-delivery and started again, every event is delivered under its own
 * webhook-id (at least once); through a PostgreSQL restart it keeps running (no exit, whatever its code)
 * and delivers what is recorded after it, without being restarted.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ENCRYPTION_KEY = 'faults-encryption-key-0123456789';

let pp: PrivatePostgres;
let receiver: WebhookReceiver;
let api: ServiceProcess | undefined;
const workers = new Set<ChildProcess>();

beforeAll(async () => {
  pp = await startPrivatePostgres();
  receiver = await WebhookReceiver.start();
}, 60_000);

afterAll(async () => {
  for (const w of workers) w.kill('SIGKILL');
  killAllServices();
  await receiver?.close();
  pp?.destroy();
});

function startWorker(dbUrl: string): { proc: ChildProcess; exited: () => number | string | null } {
  const proc = spawn(process.execPath, ['--experimental-async-context-frame', 'dist/src/worker.js'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: dbUrl,
      ENCRYPTION_KEY,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_MS: '100',
      WEBHOOK_TIMEOUT_MS: '2000',
      WEBHOOK_BACKOFF_BASE_MS: '200',
      LOG_LEVEL: 'fatal',
    },
    stdio: 'ignore',
  });
  workers.add(proc);
  let code: number | string | null = null;
  proc.once('exit', (c, signal) => {
    code = c ?? signal;
    workers.delete(proc);
  });
  return { proc, exited: () => code };
}

test('the worker killed -9 mid-delivery, then a PostgreSQL restart: it stays up, every event delivered', async () => {
  const dbUrl = await pp.createDatabase('worker_faults');
  const sql = sqlOf(dbUrl);
  api = await startService(dbUrl, { WEBHOOK_WORKER: 'false', LOG_LEVEL: 'fatal', ENCRYPTION_KEY });
  const client = new Api(api.url);
  const pw = await createPaywall(client, 'http://127.0.0.1:9', { name: 'Worker faults' });
  const sub = await createSubscription(client, pw.apiKey, {
    url: receiver.url('/w'),
    events: ['paywall.balance.*'],
  });
  let slow = true;
  receiver.respond(() => ({ status: 200, delayMs: slow ? 400 : 0 }));
  const deposit = async (user: string) => {
    const r = await client.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user, amount: '0.010000' },
    });
    expect(r.status).toBeLessThan(300);
  };
  const deliveries = () =>
    sql.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from webhook_delivery where subscription_id = $1 group by 1`,
      [sub.id],
    );
  const allDelivered = async (n: number, withinMs: number) => {
    for (const deadline = Date.now() + withinMs; ;) {
      const d = await deliveries();
      if (d.length === 1 && d[0].status === 'success' && d[0].n === n) return;
      if (Date.now() > deadline) throw new Error(`not delivered: ${JSON.stringify(d)}`);
      await sleep(200);
    }
  };
  for (let i = 0; i < 20; i++) await deposit(`w${i % 4}`);

  // Killed -9 while deliveries are at the receiver: the next worker sends them again after their lease.
  let worker = startWorker(dbUrl);
  for (const deadline = Date.now() + 30_000; receiver.requests.length < 3;) {
    if (Date.now() > deadline) throw new Error('the worker delivered nothing');
    await sleep(50);
  }
  worker.proc.kill('SIGKILL');
  slow = false;
  worker = startWorker(dbUrl);
  await allDelivered(20, 30_000); // the lease of a cut delivery: 2 x WEBHOOK_TIMEOUT_MS + 5 s

  // PostgreSQL restarts under the running worker (its LISTEN connection dies): it must not exit.
  await pp.restartImmediate();
  await sleep(1000);
  expect(worker.exited()).toBeNull();
  for (let i = 0; i < 5; i++) await deposit(`w${i % 4}`);
  await allDelivered(25, 20_000);
  expect(worker.exited()).toBeNull();

  // Every event under its own webhook-id, at least once.
  const events = await sql.query<{ id: string }>(
    `select e.id from event e join webhook_delivery w on w.event_id = e.id where w.subscription_id = $1`,
    [sub.id],
  );
  const received = new Set(receiver.requests.map((r) => String(r.headers['webhook-id'])));
  expect(events).toHaveLength(25);
  expect(events.filter((e) => !received.has(e.id))).toEqual([]);

  worker.proc.kill('SIGTERM');
  await new Promise((r) => (worker.exited() === null ? worker.proc.once('exit', r) : r(null)));
  expect(worker.exited()).toBe(0);
  expect(await api.stop()).toBe(0);
  await sql.end();
}, 120_000);
