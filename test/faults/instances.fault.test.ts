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
 * Two and three service processes (`node dist/src/main.js`) on ONE private PostgreSQL database, like
 * replicas behind a load balancer, each with its own delivery worker, under mixed load spread over them
 * (REST and GraphQL deposits and charges with keys, JSON chats, SSE streams, webhook deliveries), plus the
 * same idempotency keys sent to every instance at once. No faults: every request must be answered, each
 * user's balance must equal, to the raw unit, what the acknowledged operations add up to, and the receiver
 * must get every delivery exactly once (counted by X-Service-Delivery-Id).
 */

const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const STEPS = 90;
const ENV = { WEBHOOK_BACKOFF_BASE_MS: '200', WEBHOOK_MAX_ATTEMPTS: '10', WEBHOOK_TIMEOUT_MS: '5000' };

let pp: PrivatePostgres;
let fake: FakeUpstream;
let receiver: WebhookReceiver;
const services: ServiceProcess[] = [];

beforeAll(async () => {
  pp = await startPrivatePostgres();
  fake = await FakeUpstream.start({ record: false });
  fake.behavior = { delayMs: 5, chunkDelayMs: 5 };
  receiver = await WebhookReceiver.start();
}, 60_000);

afterAll(async () => {
  killAllServices();
  await receiver?.close();
  await fake?.close();
  pp?.destroy();
});

const summaries: string[] = [];
afterAll(() => console.log(`instances summary (seed ${SEED}): ${summaries.join('; ')}`));

test.each([2, 3])(
  '%i instances on one database: balances exact, every delivery exactly once',
  async (count) => {
    const started = Date.now();
    const rnd = seededRandom(SEED + count);
    const dbUrl = await pp.createDatabase(`instances_${count}`);
    const sql = sqlOf(dbUrl);
    // The first applies the migrations; the others start together on the migrated database.
    const mine: ServiceProcess[] = [await startService(dbUrl, ENV)];
    mine.push(...(await Promise.all(Array.from({ length: count - 1 }, () => startService(dbUrl, ENV)))));
    services.push(...mine);
    const apis = mine.map((s) => new Api(s.url));
    const pw = await createPaywall(apis[0], fake.baseUrl, { name: `Instances ${count}` });
    const path = `/hook-${count}`;
    const sub = await createSubscription(apis[1], pw.apiKey, { url: receiver.url(path), events: ['*'] });
    const users = ['u1', 'u2', 'u3', 'u4'];
    const load = new LoadGenerator(rnd, pw, users, `inst${count}-${SEED}`);
    for (const [i, u] of users.entries())
      await load.runMoney(apis[i % count], load.newMoneyOp('deposit-rest', u, '0.300000'));

    // Mixed load over all instances, and the same keys raced on every instance at once.
    const race = async () => {
      for (let i = 0; i < 6; i++) {
        const op = load.newMoneyOp(
          i % 2 ? 'charge-rest' : 'deposit-rest',
          users[i % users.length],
          '0.010000',
        );
        await Promise.all(apis.map((api) => load.runMoney(api, op)));
      }
    };
    await Promise.all([load.run(apis, 6, () => false, STEPS), race()]);

    const c = load.counts();
    expect(load.anomalies).toEqual([]);
    expect([...load.money.values()].filter((o) => o.outcome !== 'acked').map((o) => o.key)).toEqual([]);
    expect(c.chatsLost).toBe(0);
    const inv = await moneyInvariants(sql);
    if (!inv.ok) throw new Error(inv.detail);
    expect(await load.verifyLedger(sql, pw.id, CHAT_COST_RAW)).toEqual([]);

    // Each user's balance is what the acknowledged operations add up to, exactly; nothing held.
    const expected = new Map<string, bigint>(users.map((u) => [u, 0n]));
    for (const op of load.money.values()) {
      if (!op.applied) continue;
      const sign = op.kind.startsWith('deposit') ? 1n : -1n;
      expected.set(op.user, expected.get(op.user)! + sign * op.amountRaw);
    }
    for (const chat of load.chats)
      if (chat.outcome === 'charged') expected.set(chat.user, expected.get(chat.user)! - CHAT_COST_RAW);
    const rows = await sql.query<{ external_id: string; balance: string; held: string }>(
      `select e.external_id, a.balance_raw::text as balance, a.held_raw::text as held
       from end_user e join ledger_account a on a.id = e.account_id where e.paywall_id = $1`,
      [pw.id],
    );
    expect(
      Object.fromEntries(rows.map((r) => [r.external_id, { balance: r.balance, held: r.held }])),
    ).toEqual(Object.fromEntries(users.map((u) => [u, { balance: expected.get(u)!.toString(), held: '0' }])));

    // Every delivery reaches the receiver exactly once.
    const deliveries = () =>
      sql.query<{ id: string; status: string }>(
        `select id, status from webhook_delivery where subscription_id = $1`,
        [sub.id],
      );
    for (const deadline = Date.now() + 60_000; ;) {
      const d = await deliveries();
      if (d.length && d.every((x) => x.status === 'success')) break;
      if (Date.now() > deadline)
        throw new Error(`not delivered: ${JSON.stringify(d.filter((x) => x.status !== 'success'))}`);
      await sleep(200);
    }
    await sleep(300); // a duplicate, if any, would be on its way
    const all = await deliveries();
    const received = receiver.requests.filter((r) => r.path === path);
    const perDelivery = new Map<string, number>();
    for (const r of received) {
      const id = String(r.headers['x-service-delivery-id']);
      perDelivery.set(id, (perDelivery.get(id) ?? 0) + 1);
    }
    expect([...perDelivery.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(new Set(perDelivery.keys())).toEqual(new Set(all.map((d) => d.id)));
    const events = await sql.query<{ n: number }>(
      `select count(*)::int as n from event where paywall_id = $1`,
      [pw.id],
    );
    // `*` takes every event recorded after the subscription (the paywall set-up came before it).
    expect(all.length).toBeLessThanOrEqual(events[0].n);

    const admin = await adminLedgerVerify(dbUrl);
    expect(admin.code).toBe(0);
    for (const s of mine) expect(await s.stop()).toBe(0);
    await sql.end();
    summaries.push(
      `${count} instances: ${c.sent} requests (${c.moneyOps} money ops all acknowledged; 6 keys sent to every instance at once; ` +
        `${c.chats} chats, ${c.chatsCharged} charged, ${c.chatsBlocked} blocked), ${all.length} deliveries each received once, ` +
        `${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
  },
);
