import { FakeUpstream } from '../helpers/fake-upstream.js';
import { createSubscription, WebhookReceiver } from '../helpers/webhook-receiver.js';
import { LoadGenerator } from './helpers/load.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  adminLedgerVerify,
  Api,
  CHAT_COST_RAW,
  createPaywall,
  killAllServices,
  moneyInvariants,
  seededRandom,
  sleep,
  sqlOf,
  startService,
  type ServiceProcess,
} from './helpers/service.js';

/**
 * Two service processes on ONE database (replicas behind a load balancer) under mixed load over both;
 * one of them is SIGKILLed mid-chat and mid-stream, twice, while the other keeps serving, then started
 * again. The survivor answers every request it gets during the outage of its peer (nothing lost, no
 * anomaly); after each kill the ledger proof holds, every acknowledged operation is in the ledger once,
 * and every chat answered as charged is a completed charge. At the end the dead instance's holds are
 * swept (by the survivor as much as by the restarted one), and every event is delivered.
 */

const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const ENV = {
  WEBHOOK_BACKOFF_BASE_MS: '200',
  WEBHOOK_MAX_ATTEMPTS: '30',
  WEBHOOK_TIMEOUT_MS: '3000',
  LOG_LEVEL: 'fatal',
};

let pp: PrivatePostgres;
let fake: FakeUpstream;
let receiver: WebhookReceiver;

beforeAll(async () => {
  pp = await startPrivatePostgres();
  fake = await FakeUpstream.start({ record: false });
  fake.behavior = { delayMs: 20, chunkDelayMs: 15 };
  receiver = await WebhookReceiver.start();
}, 60_000);

afterAll(async () => {
  killAllServices();
  await receiver?.close();
  await fake?.close();
  pp?.destroy();
});

test('one of two instances killed -9 under load: the other serves on, money exact, holds swept, events delivered', async () => {
  console.log(`instance-kill: seed ${SEED} (FAULT_SEED=${SEED} to repeat)`);
  const rnd = seededRandom(SEED);
  const dbUrl = await pp.createDatabase('instance_kill');
  const sql = sqlOf(dbUrl);
  let a: ServiceProcess = await startService(dbUrl, ENV);
  const b: ServiceProcess = await startService(dbUrl, ENV);
  const apiA = new Api(a.url);
  const apiB = new Api(b.url);
  const pw = await createPaywall(apiB, fake.baseUrl, { name: 'Instance kill' });
  const sub = await createSubscription(apiB, pw.apiKey, {
    url: receiver.url(),
    events: ['paywall.balance.*', 'paywall.usage.*'],
  });
  const users = ['k1', 'k2', 'k3', 'k4'];
  const load = new LoadGenerator(rnd, pw, users, `ik-${SEED}`);
  const survivor = new LoadGenerator(rnd, pw, users, `ik-b-${SEED}`);
  for (const u of users) await load.runMoney(apiB, load.newMoneyOp('deposit-rest', u, '0.500000'));

  const check = async (when: string) => {
    const inv = await moneyInvariants(sql);
    if (!inv.ok) throw new Error(`${when}: money invariants broken: ${inv.detail}`);
    for (const l of [load, survivor]) {
      const problems = await l.verifyLedger(sql, pw.id, CHAT_COST_RAW);
      // Each generator sees the other's transfers as unknown: only its own are judged.
      const own = problems.filter(
        (p) => !p.includes('no client sent') && !/completed chat|usage transfers|chats charged but/.test(p),
      );
      if (own.length) throw new Error(`${when}: ${own.slice(0, 20).join('\n')}`);
    }
  };

  for (let k = 1; k <= 2; k++) {
    let stop = false;
    const running = load.run([apiA, apiB], 4, () => stop);
    await sleep(300 + Math.floor(rnd() * 500));
    await a.kill9();
    // The peer is gone: the survivor alone answers everything it gets, at once.
    let stopB = false;
    const onB = survivor.run([apiB], 3, () => stopB, 30);
    await sleep(1000);
    stopB = true;
    await onB;
    stop = true;
    await running;
    await check(`after kill ${k}`);
    a = await startService(dbUrl, ENV, a.port);
  }
  const s = survivor.counts();
  expect(s.chatsLost).toBe(0);
  expect([...survivor.money.values()].filter((o) => o.outcome !== 'acked').map((o) => o.key)).toEqual([]);
  expect(survivor.anomalies).toEqual([]);
  expect(load.anomalies).toEqual([]);

  // The whole ledger: every completed chat charged the formula's cost once, one usage transfer each.
  const charges = await sql.query<{ status: string; amount: string; transfers: number; n: number }>(
    `select c.status, c.amount_raw::text as amount,
            (select count(*)::int from transfer t where t.charge_id = c.id) as transfers, count(*)::int as n
       from charge c where c.paywall_id = $1 and c.kind = 'usage' group by 1, 2, 3`,
    [pw.id],
  );
  for (const c of charges.filter((x) => x.status === 'completed'))
    expect({ amount: c.amount, transfers: c.transfers }).toEqual({
      amount: String(CHAT_COST_RAW),
      transfers: 1,
    });
  const charged = [load, survivor].reduce((n, l) => n + l.counts().chatsCharged, 0);
  const completed = charges.filter((x) => x.status === 'completed').reduce((n, c) => n + c.n, 0);
  expect(completed).toBeGreaterThanOrEqual(charged);

  // The dead instance's holds, aged past the sweeper's threshold: a clean start sweeps them (nothing
  // charged for a whole answer), no hold is left and the proof holds.
  await sql.query(
    `update charge set created_at = created_at - interval '1 hour' where paywall_id = $1 and status = 'held'`,
    [pw.id],
  );
  expect(await a.stop()).toBe(0);
  expect(await b.stop()).toBe(0);
  const b2 = await startService(dbUrl, ENV, b.port);
  const held = await sql.query(`select 1 from ledger_account where held_raw <> 0`);
  expect(held).toHaveLength(0);
  await check('after the sweep');
  expect((await adminLedgerVerify(dbUrl)).code).toBe(0);

  // Every event is delivered (those cut by the kill after their lease), each under its own webhook-id.
  for (const deadline = Date.now() + 60_000; ;) {
    const d = await sql.query<{ status: string }>(
      `select status from webhook_delivery where subscription_id = $1`,
      [sub.id],
    );
    if (d.every((x) => x.status === 'success')) break;
    if (Date.now() > deadline) throw new Error('not every delivery succeeded');
    await sleep(250);
  }
  const events = await sql.query<{ id: string }>(
    `select e.id from event e join webhook_delivery w on w.event_id = e.id where w.subscription_id = $1`,
    [sub.id],
  );
  const received = new Set(receiver.requests.map((r) => String(r.headers['webhook-id'])));
  expect(events.filter((e) => !received.has(e.id))).toEqual([]);
  expect(await b2.stop()).toBe(0);
  await sql.end();
}, 240_000);
