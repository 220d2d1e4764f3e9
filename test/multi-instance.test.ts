import type { Client } from 'graphql-ws';
import { startInstances, OWNER_TOKEN, type Instance } from './helpers/instances.js';
import { eventually, LiveSubscription, liveClient } from './helpers/live-client.js';
import { createSubscription, WebhookReceiver } from './helpers/webhook-receiver.js';
import { LiveEventHub } from '../src/modules/live-events/live-event-hub.js';

const EVENTS = 200;

let cluster: Awaited<ReturnType<typeof startInstances>>;
let a: Instance;
let b: Instance;
let rcv: WebhookReceiver;
const clients: Client[] = [];

beforeAll(async () => {
  cluster = await startInstances(2, { WEBHOOK_POLL_MS: '50', WEBHOOK_BACKOFF_BASE_MS: '100' });
  [a, b] = cluster.instances;
  rcv = await WebhookReceiver.start();
}, 120_000);
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await cluster?.close();
  await rcv?.close();
});

async function createPaywall(via: Instance) {
  const r = await via.gql(
    OWNER_TOKEN,
    `mutation { createPaywall(input: {name: "Shared", mode: DEFAULT}) { apiKey paywall { id } } }`,
  );
  expect(r.errors).toBeUndefined();
  return { id: r.data.createPaywall.paywall.id as string, apiKey: r.data.createPaywall.apiKey as string };
}

async function rename(via: Instance, apiKey: string, name: string) {
  const r = await via.gql(apiKey, `mutation($n: String!) { updatePaywall(input: {name: $n}) { id } }`, {
    n: name,
  });
  expect(r.errors).toBeUndefined();
}

describe('two instances on one database', () => {
  it(`sends each of ${EVENTS * 2} delivery rows exactly once while both workers claim`, async () => {
    const pw = await createPaywall(a);
    // A receiver that takes a moment per request keeps both workers busy at once.
    rcv.respond(() => ({ status: 200, delayMs: 10 }));
    await createSubscription(a, pw.apiKey, { url: rcv.url('/one'), events: ['paywall.updated'] });
    await createSubscription(b, pw.apiKey, { url: rcv.url('/two'), events: ['*'] });

    // Half the events through each instance, ten at a time.
    for (let i = 0; i < EVENTS; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, j) => rename((i + j) % 2 ? b : a, pw.apiKey, `Name ${i + j}`)),
      );
    }
    await rcv.waitForCount(EVENTS * 2, 60_000);
    // Once every row is recorded as delivered, none can be claimed again: the count below is final.
    let rows: Array<{ id: string; status: string; attempts: number }> = [];
    for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
      rows = await cluster.db.query(
        'select id, status, attempts from webhook_delivery where paywall_id = $1',
        [pw.id],
      );
      if (rows.every((r) => r.status === 'success')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(rows).toHaveLength(EVENTS * 2);
    expect(rows.filter((r) => r.status !== 'success')).toEqual([]);
    expect(rcv.requests).toHaveLength(EVENTS * 2);
    const perDelivery = new Map<string, number>();
    for (const r of rcv.requests) {
      const id = r.headers['x-service-delivery-id'] as string;
      perDelivery.set(id, (perDelivery.get(id) ?? 0) + 1);
    }
    expect(perDelivery.size).toBe(EVENTS * 2);
    expect([...perDelivery.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(perDelivery.keys()));
    // Every event reached both subscriptions, once each.
    const events = await cluster.db.query<{ id: string }>('select id from event where paywall_id = $1', [
      pw.id,
    ]);
    for (const path of ['/one', '/two']) {
      const ids = rcv.requests.filter((r) => r.path === path).map((r) => r.headers['x-service-event-id']);
      expect(new Set(ids)).toEqual(new Set(events.map((e) => e.id)));
      expect(ids).toHaveLength(EVENTS);
    }
    // Both workers took part (`sent` counts attempts; a failed first attempt would add one, never a hit).
    const sentA = a.app.services.webhooks.worker!.sent;
    const sentB = b.app.services.webhooks.worker!.sent;
    expect(sentA + sentB).toBeGreaterThanOrEqual(EVENTS * 2);
    expect(sentA).toBeGreaterThan(0);
    expect(sentB).toBeGreaterThan(0);
  }, 120_000);

  it('a graphql-ws subscriber on instance B receives an event caused through instance A', async () => {
    const pw = await createPaywall(a);
    const c = liveClient(b.url, pw.apiKey);
    clients.push(c);
    const hubB = LiveEventHub.for(b.db);
    const before = hubB.size;
    const s = new LiveSubscription(c, { types: ['paywall.updated'] });
    await eventually(() => hubB.size, before + 1);
    await rename(a, pw.apiKey, 'Changed on A');
    await s.untilEvents(1);
    const [row] = await cluster.db.query('select id from event where paywall_id = $1', [pw.id]);
    expect(s.events[0]).toMatchObject({ id: row.id, type: 'paywall.updated', paywallId: pw.id });
    expect(s.events[0].data.changedFields).toEqual(['name']);
    if (!cluster.shared) expect(LiveEventHub.for(a.db)).not.toBe(hubB); // separate LISTEN connections
    s.unsubscribe();
  });
});
