import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { startTestApp, type TestApp } from './helpers/app.js';
import { createSubscription } from './helpers/webhook-receiver.js';
import type { Database } from '../src/db/database.js';
import { expandDeliveries } from '../src/modules/webhooks/delivery-expansion.js';
import { DeliveryWorker } from '../src/modules/webhooks/delivery-worker.js';
import { loadSecretBox } from '../src/shared/crypto.js';
import { createLogger } from '../src/shared/logger.js';

/**
 * Delivery rows are expanded from committed events (migration 20261201200000, delivery-expansion.ts), not
 * written by the event's own statement. The expansion must skip no event when transactions commit out of
 * their xid order, write each delivery once, and lose nothing when it dies half-way.
 */
let t: TestApp;
const clients: pg.Client[] = [];
beforeAll(async () => {
  // No in-process worker: only the test expands.
  t = await startTestApp({ WEBHOOK_WORKER: 'false' });
});
afterAll(async () => {
  for (const c of clients) await c.end().catch(() => undefined);
  await t.close();
});

async function client(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: t.config.DATABASE_URL });
  c.on('error', () => undefined); // the terminated one
  await c.connect();
  clients.push(c);
  return c;
}

/** A paywall with one subscription to every event; its owner (for raw event rows). */
async function setup() {
  const pw = await t.createPaywall();
  const sub = await createSubscription(t, pw.apiKey, { url: 'http://127.0.0.1:9/hook', events: ['*'] });
  const [{ owner_id }] = await t.db.query<{ owner_id: string }>(
    'select owner_id from paywall where id = $1',
    [pw.id],
  );
  return { pw, sub, owner: owner_id };
}

/** Writes one event on `c` (a raw connection, or the app's pool) and returns its id. */
async function insertEvent(
  c: { query(text: string, params: unknown[]): Promise<unknown> },
  paywallId: string,
  owner: string,
): Promise<string> {
  const id = randomUUID();
  await c.query(
    `insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
     values ($1, $2, $3, 'paywall.updated', '1.0', '{}', '{}', '{"changedFields":["name"]}', '{}')`,
    [id, paywallId, owner],
  );
  return id;
}

async function deliveries(eventIds: string[]): Promise<Record<string, number>> {
  const rows = await t.db.query<{ event_id: string; n: number }>(
    `select event_id, count(*)::int as n from webhook_delivery where event_id = any($1::uuid[]) group by event_id`,
    [eventIds],
  );
  return Object.fromEntries(eventIds.map((id) => [id, rows.find((r) => r.event_id === id)?.n ?? 0]));
}

describe('delivery expansion', () => {
  it('writes no delivery in the event statement; skips nothing when transactions commit out of order', async () => {
    const { pw, owner } = await setup();
    await expandDeliveries(t.db); // the setup's own events
    const a = await client();
    const b = await client();

    // A takes its transaction id first, writes its event, and stays open.
    await a.query('begin');
    await a.query('select pg_current_xact_id()');
    const eventA = await insertEvent(a, pw.id, owner);
    // B, with a later transaction id, writes and commits.
    await b.query('begin');
    const eventB = await insertEvent(b, pw.id, owner);
    await b.query('commit');
    expect(await deliveries([eventB])).toEqual({ [eventB]: 0 }); // none written by the statement

    expect(await expandDeliveries(t.db)).toBe(1);
    expect(await deliveries([eventA, eventB])).toEqual({ [eventA]: 0, [eventB]: 1 });

    // A commits after the expansion that saw B: its lower xid is not behind a cursor.
    await a.query('commit');
    const [{ ordered }] = await t.db.query<{ ordered: boolean }>(
      `select (select xid from event where id = $1) < (select xid from event where id = $2) as ordered`,
      [eventA, eventB],
    );
    expect(ordered).toBe(true); // the out-of-order case really happened
    expect(await expandDeliveries(t.db)).toBe(1);
    expect(await deliveries([eventA, eventB])).toEqual({ [eventA]: 1, [eventB]: 1 });
    expect(await expandDeliveries(t.db)).toBe(0);
    expect(await deliveries([eventA, eventB])).toEqual({ [eventA]: 1, [eventB]: 1 });
  });

  it('loses nothing when an expansion dies before its commit, and writes each delivery once', async () => {
    const { pw, sub, owner } = await setup();
    await expandDeliveries(t.db);
    const eventD = await insertEvent(t.db, pw.id, owner);

    // An expansion that wrote its rows and moved its cursor, then its connection died before commit.
    const c = await client();
    const [{ pid }] = (await c.query<{ pid: number }>('select pg_backend_pid() as pid')).rows;
    await c.query('begin');
    expect(Number((await c.query('select webhook_expand() as n')).rows[0].n)).toBe(1);
    await t.db.query('select pg_terminate_backend($1)', [pid]);
    await expect(c.query('select 1')).rejects.toThrow();
    expect(await deliveries([eventD])).toEqual({ [eventD]: 0 });

    // The next expansion finds the event again, once.
    expect(await expandDeliveries(t.db)).toBe(1);
    expect(await expandDeliveries(t.db)).toBe(0);
    expect(await deliveries([eventD])).toEqual({ [eventD]: 1 });
    const [row] = await t.db.query<any>(
      'select subscription_id, status, attempts from webhook_delivery where event_id = $1',
      [eventD],
    );
    expect(row).toEqual({ subscription_id: sub.id, status: 'pending', attempts: 0 });
  });

  it('gives a subscription only the events written at or after its creation, while it is active', async () => {
    const { pw, owner } = await setup();
    await expandDeliveries(t.db);
    const before = await insertEvent(t.db, pw.id, owner);
    const late = await createSubscription(t, pw.apiKey, { url: 'http://127.0.0.1:9/late', events: ['*'] });
    const inactive = await createSubscription(t, pw.apiKey, { url: 'http://127.0.0.1:9/off', events: ['*'] });
    await t.db.query('update webhook_subscription set is_active = false where id = $1', [inactive.id]);
    const after = await insertEvent(t.db, pw.id, owner);
    await expandDeliveries(t.db);
    const subsOf = async (eventId: string) =>
      (
        await t.db.query<{ subscription_id: string }>(
          'select subscription_id from webhook_delivery where event_id = $1',
          [eventId],
        )
      ).map((r) => r.subscription_id);
    expect(await subsOf(before)).not.toContain(late.id);
    expect(await subsOf(before)).toHaveLength(1);
    expect(await subsOf(after)).toContain(late.id);
    expect(await subsOf(after)).not.toContain(inactive.id);
    expect(await subsOf(after)).toHaveLength(2);
  });

  it('the worker coalesces a burst of wake-ups into one expansion or a few, not one each', async () => {
    let expansions = 0;
    let notified = 0;
    const db = t.db;
    // The worker's database, counting its expansions and the notifications it receives.
    const counting = {
      query: (text: string, params?: unknown[], name?: string) => {
        if (text.includes('webhook_expand')) expansions++;
        return db.query(text, params, name);
      },
      listen: (channel: string, fn: (...args: any[]) => void) =>
        db.listen(channel, (...args: any[]) => {
          notified++;
          fn(...args);
        }),
      onReconnect: (fn: () => void) => db.onReconnect(fn),
    } as unknown as Database;
    const w = new DeliveryWorker({
      db: counting,
      log: createLogger('silent'),
      maxAttempts: 1,
      backoffBaseMs: 100,
      timeoutMs: 1000,
      pollMs: 600_000,
      allowPrivate: true,
      secretBox: loadSecretBox(t.config).box,
    });
    const idle = async (ready: () => boolean) => {
      for (const deadline = Date.now() + 10_000; !(ready() && !(w as any).claiming);) {
        if (Date.now() > deadline) throw new Error('worker still busy');
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await w.start();
    try {
      await idle(() => expansions > 0);
      const before = expansions;
      expect(before).toBe(1); // the start's
      await t.db.query(`select pg_notify('webhook_deliveries', i::text) from generate_series(1, 50) i`);
      // Received, and the burst's expansion made (the worker waits for the end of EXPAND_INTERVAL_MS).
      await idle(() => notified >= 50 && expansions > before && !(w as any).expandTimer);
      expect(expansions - before).toBeLessThanOrEqual(2);
    } finally {
      await w.stop();
    }
  });
});
