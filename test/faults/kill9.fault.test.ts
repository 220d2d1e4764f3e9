import { FakeUpstream } from '../helpers/fake-upstream.js';
import { createSubscription, WebhookReceiver } from '../helpers/webhook-receiver.js';
import { LoadGenerator, type MoneyOp } from './helpers/load.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  adminLedgerVerify,
  Api,
  CHAT_COST_RAW,
  createPaywall,
  freePort,
  killAllServices,
  moneyInvariants,
  seededRandom,
  sleep,
  sqlOf,
  startService,
  type ServiceProcess,
} from './helpers/service.js';

/**
 * kill -9 under load (issue 10): the real service (`node dist/src/main.js`) on a private PostgreSQL, with
 * loopback clients sending REST deposits and manual charges with idempotency keys, GraphQL deposit and
 * charge mutations, JSON chats and SSE streams against a fake upstream, while a receiver takes the webhook
 * deliveries. The service is SIGKILLed at seeded random moments (KILLS times, FAULT_SEED to repeat a run)
 * and restarted on the same port. After every restart: the ledger proof, no negative balance, every
 * acknowledged operation in the ledger exactly once (a GraphQL deposit under the ledger id it answered),
 * nothing applied twice, replays of acknowledged keys answer the original with `Idempotent-Replayed`, and
 * lost requests retried with their key apply at most once. At the end: the holds of killed chats are
 * released by the sweeper, every event is delivered, and no 2xx-acknowledged delivery was sent again
 * unless a kill fell between its acknowledgement and the repeat.
 */

const KILLS = Number(process.env.KILLS ?? 22);
const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const WORKERS = 4;
const SERVICE_ENV = {
  WEBHOOK_BACKOFF_BASE_MS: '200',
  WEBHOOK_MAX_ATTEMPTS: '30',
  // The lease of a delivery cut by a kill is 2 x this + 5 s: it comes back after about 11 s.
  WEBHOOK_TIMEOUT_MS: '3000',
  UPSTREAM_TIMEOUT_MS: '10000',
  SHUTDOWN_GRACE_MS: '2000',
};

let pp: PrivatePostgres;
let fake: FakeUpstream;
let receiver: WebhookReceiver;
let service: ServiceProcess | undefined;

beforeAll(async () => {
  pp = await startPrivatePostgres();
  fake = await FakeUpstream.start({ record: false });
  // Slow enough that kills land inside chats and streams.
  fake.behavior = { delayMs: 20, chunkDelayMs: 15 };
  receiver = await WebhookReceiver.start();
}, 60_000);

afterAll(async () => {
  killAllServices();
  await receiver?.close();
  await fake?.close();
  pp?.destroy();
});

test(`kill -9 ${KILLS} times under mixed load: money exact, nothing applied twice, every event delivered`, async () => {
  const started = Date.now();
  console.log(`kill9: seed ${SEED} (FAULT_SEED=${SEED} KILLS=${KILLS} to repeat)`);
  const rnd = seededRandom(SEED);
  const dbUrl = await pp.createDatabase('kill9');
  const sql = sqlOf(dbUrl);
  const port = await freePort();
  service = await startService(dbUrl, SERVICE_ENV, port);
  const api = new Api(service.url);
  const pw = await createPaywall(api, fake.baseUrl, { name: 'Kill9' });
  const sub = await createSubscription(api, pw.apiKey, {
    url: receiver.url(),
    events: ['paywall.balance.*', 'paywall.usage.*'],
  });
  const users = ['alice', 'bob', 'carol', 'dave', 'erin'];
  const load = new LoadGenerator(rnd, pw, users, `k9-${SEED}`);
  for (const u of users) {
    await load.runMoney(api, load.newMoneyOp('deposit-rest', u, '0.500000'));
  }

  const killTimes: number[] = [];
  let heldBound = 0;
  let replays = 0;
  let retries = 0;
  const check = async (when: string) => {
    const inv = await moneyInvariants(sql);
    if (!inv.ok) throw new Error(`${when}: money invariants broken: ${inv.detail}`);
    const problems = await load.verifyLedger(sql, pw.id, CHAT_COST_RAW);
    if (problems.length) throw new Error(`${when}: ${problems.slice(0, 20).join('\n')}`);
  };

  for (let k = 1; k <= KILLS; k++) {
    let stop = false;
    const running = load.run([api], WORKERS, () => stop);
    await sleep(150 + Math.floor(rnd() * 600));
    const chatsInFlight = load.inFlightChats;
    await service.kill9();
    killTimes.push(Date.now());
    heldBound += chatsInFlight;
    stop = true;
    await running;
    await check(`after kill ${k}`);

    service = await startService(dbUrl, SERVICE_ENV, port);
    // A client retries what got no answer, with the same key: at most one movement (409 while the dead
    // request's claim is younger than its TTL).
    const lost = [...load.money.values()].filter((o) => o.outcome !== 'acked');
    for (const op of lost.slice(0, 6)) {
      retries++;
      load.record(op, await load.sendMoney(api, op));
    }
    // Acknowledged keys replay the original answer and move nothing.
    const acked = [...load.money.values()].filter((o) => o.outcome === 'acked');
    for (let i = 0; i < 3 && acked.length; i++) {
      await expectReplay(load, api, acked[Math.floor(rnd() * acked.length)]);
      replays++;
    }
    await check(`after restart ${k}`);
  }

  // A normal period: no kill from here on.
  const normalFrom = Date.now();
  let stop = false;
  await Promise.race([load.run([api], WORKERS, () => stop, 60), sleep(3000)]).finally(() => (stop = true));
  await sleep(200);
  await check('after the normal period');

  // Every acknowledged key replays its first answer, once more, after all those restarts.
  const acked = [...load.money.values()].filter((o) => o.outcome === 'acked');
  for (let i = 0; i < acked.length; i += 8)
    await Promise.all(acked.slice(i, i + 8).map((op) => expectReplay(load, api, op)));
  replays += acked.length;
  await check('after replaying every acknowledged key');

  // Holds of killed chats: still held (the sweeper waits UPSTREAM_MAX_DURATION_MS + 5 min, and no variable
  // shortens the margin), never more than the chats that were in flight at the kills.
  const held = await sql.query<{ id: string }>(
    `select id from charge where paywall_id = $1 and status = 'held'`,
    [pw.id],
  );
  expect(held.length).toBeLessThanOrEqual(heldBound);
  // Age them past the sweeper's threshold (instead of waiting 5 minutes) and restart cleanly: the sweep
  // at start releases every one, nothing charged, and the proof still holds.
  await sql.query(
    `update charge set created_at = created_at - interval '1 hour' where paywall_id = $1 and status = 'held'`,
    [pw.id],
  );
  expect(await service.stop()).toBe(0);
  service = await startService(dbUrl, SERVICE_ENV, port);
  const after = await sql.query<{ status: string; error_code: string | null; n: number }>(
    `select status, error_code, count(*)::int as n from charge where id = any($1::uuid[]) group by 1, 2`,
    [held.map((h) => h.id)],
  );
  expect(after).toEqual(held.length ? [{ status: 'released', error_code: 'abandoned', n: held.length }] : []);
  const stillHeld = await sql.query(`select 1 from ledger_account where held_raw <> 0`);
  expect(stillHeld).toHaveLength(0);
  await check('after the sweep');
  const admin = await adminLedgerVerify(dbUrl);
  expect({ code: admin.code, out: admin.out.slice(0, 500) }).toMatchObject({ code: 0 });

  // Every delivery ends delivered: deliveries cut by a kill come back after their lease.
  const deliveries = async () =>
    sql.query<{ id: string; status: string; event_id: string }>(
      `select id, status, event_id from webhook_delivery where subscription_id = $1`,
      [sub.id],
    );
  for (const deadline = Date.now() + 60_000; ;) {
    const d = await deliveries();
    if (d.every((x) => x.status === 'success')) break;
    if (Date.now() > deadline)
      throw new Error(
        `not delivered: ${JSON.stringify(d.filter((x) => x.status !== 'success')).slice(0, 800)}`,
      );
    await sleep(250);
  }
  const all = await deliveries();
  const byDelivery = new Map<string, number[]>();
  for (const r of receiver.requests) {
    const id = String(r.headers['x-service-delivery-id']);
    byDelivery.set(id, [...(byDelivery.get(id) ?? []), r.at]);
  }
  const events = await sql.query<{ n: number }>(
    `select count(*)::int as n from event where paywall_id = $1 and (type like 'paywall.balance.%' or type like 'paywall.usage.%')`,
    [pw.id],
  );
  expect(all).toHaveLength(events[0].n);
  for (const d of all) expect(byDelivery.get(d.id)?.length ?? 0).toBeGreaterThanOrEqual(1);
  // A repeat of an acknowledged delivery needs a kill between the 2xx and the repeat (the service died
  // before it recorded the answer); none in the normal period.
  let repeats = 0;
  let repeatsInNormalPeriod = 0;
  for (const [id, times] of byDelivery) {
    for (let i = 1; i < times.length; i++) {
      repeats++;
      if (times[i] >= normalFrom) repeatsInNormalPeriod++;
      const excused = killTimes.some((k) => k >= times[i - 1] - 50 && k <= times[i]);
      if (!excused)
        throw new Error(
          `delivery ${id} sent again at ${times[i]} without a kill since its 2xx at ${times[i - 1]}`,
        );
    }
  }

  await service.stop();
  await sql.end();
  const c = load.counts();
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `kill9 summary: seed ${SEED}, ${KILLS} kills survived; ${c.sent} requests sent (${c.moneyOps} money ops, ${c.moneyAcked} acknowledged; ` +
      `${c.chats} chats: ${c.chatsCharged} charged, ${c.chatsBlocked} blocked, ${c.chatsLost} cut by kills); ` +
      `${retries} lost ops retried, ${replays} replays; ${held.length} abandoned holds swept (bound ${heldBound}); ` +
      `${all.length} deliveries, ${receiver.requests.length} requests received, ${repeats} repeats after kills (${repeatsInNormalPeriod} of them arriving after the last kill, its lease expired); ${secs} s`,
  );
  expect(load.anomalies).toEqual([]);
}, 300_000); // ~70 s alone on 2 cores; up to ~150 s measured on a machine shared with 5 other test runs

/** The same key and body again: the first answer, byte for byte, marked replayed; no new movement. */
async function expectReplay(load: LoadGenerator, api: Api, op: MoneyOp): Promise<void> {
  const r = await load.sendMoney(api, op);
  expect({ key: op.key, status: r.status }).toEqual({ key: op.key, status: op.answer!.status });
  if (op.kind.endsWith('-rest')) {
    expect(r.headers.get('idempotent-replayed')).toBe('true');
    expect(r.body).toEqual(op.answer!.body);
  } else {
    const now = r.body.data.deposit ?? r.body.data.charge;
    const first = op.answer!.body.data.deposit ?? op.answer!.body.data.charge;
    expect({ ...now, replayed: undefined }).toEqual({ ...first, replayed: undefined });
    expect(now.replayed).toBe(true);
  }
}
