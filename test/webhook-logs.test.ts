import { startTestApp, type TestApp } from './helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  // No worker: entries stay `pending` until a test moves them, so what the logs show is deterministic.
  t = await startTestApp({ WEBHOOK_WORKER: 'false' });
});
afterAll(async () => {
  await t.close();
});

const ENTRY_KEYS = [
  'id',
  'subscriptionId',
  'eventId',
  'eventType',
  'status',
  'attempts',
  'nextAttemptAt',
  'responseStatus',
  'responseLatencyMs',
  'responseBody',
  'lastError',
  'createdAt',
  'updatedAt',
  'event',
];
/** The spec's delivery payload `event` fields, in its order. */
const EVENT_KEYS = [
  'id',
  'paywallId',
  'ownerUserId',
  'type',
  'version',
  'status',
  'createdAt',
  'trigger',
  'subject',
  'data',
  'metadata',
];
const GQL_ENTRY =
  'id subscriptionId eventId eventType status attempts nextAttemptAt responseStatus responseLatencyMs responseBody lastError createdAt updatedAt event';

interface Paywall {
  id: string;
  apiKey: string;
}

async function subscribe(pw: Paywall, events: string[], url = 'https://hooks.example.test/in') {
  const r = await t.rest('POST', '/v1/webhooks/subscriptions', { token: pw.apiKey, body: { url, events } });
  expect(r.status).toBe(201);
  return r.body.subscription as { id: string };
}

async function rename(pw: Paywall, name: string) {
  const r = await t.gql(pw.apiKey, `mutation($n: String) { updatePaywall(input: {name: $n}) { id } }`, {
    n: name,
  });
  expect(r.errors).toBeUndefined();
}

async function logs(pw: Paywall, query = '') {
  return t.rest('GET', `/v1/webhooks/logs${query}`, { token: pw.apiKey });
}

/**
 * One paywall with two subscriptions and a known history:
 *   everything (paywall.*) ← 3 x paywall.updated, then paywall.secret.rotated
 *   rotations (paywall.secret.rotated) ← paywall.secret.rotated
 * and a second paywall with its own subscription and event.
 */
describe('delivery logs (GET /v1/webhooks/logs)', () => {
  let pw: Paywall;
  let other: Paywall;
  let everything: { id: string };
  let rotations: { id: string };
  let otherSub: { id: string };

  beforeAll(async () => {
    pw = await t.createPaywall();
    other = await t.createPaywall();
    everything = await subscribe(pw, ['paywall.*']);
    rotations = await subscribe(pw, ['paywall.secret.rotated']);
    otherSub = await subscribe(other, ['*']);
    await rename(pw, 'one');
    await rename(pw, 'two');
    await rename(pw, 'three');
    const r = await t.gql(pw.apiKey, `mutation { rotatePaywallSecret { apiKey } }`);
    pw = { ...pw, apiKey: r.data.rotatePaywallSecret.apiKey };
    await rename(other, 'theirs');
  });

  it('lists one entry per delivery, newest first, with the contract fields and the payload sent', async () => {
    const r = await logs(pw);
    expect(r.status).toBe(200);
    expect(r.body.object).toBe('list');
    const data = r.body.data;
    expect(data).toHaveLength(5);
    for (const e of data) expect(Object.keys(e)).toEqual(ENTRY_KEYS);
    // Newest first: the rotation (two deliveries), then the three renames from last to first.
    expect(data.map((e: any) => e.eventType)).toEqual([
      'paywall.secret.rotated',
      'paywall.secret.rotated',
      'paywall.updated',
      'paywall.updated',
      'paywall.updated',
    ]);
    expect(data.slice(2).map((e: any) => e.event.data.changedFields)).toEqual([['name'], ['name'], ['name']]);
    const events = await t.db.query<any>(
      `select * from event where paywall_id = $1 and type = 'paywall.updated' order by seq desc`,
      [pw.id],
    );
    expect(data.slice(2).map((e: any) => e.eventId)).toEqual(events.map((e) => e.id));
    expect(new Set(data.slice(0, 2).map((e: any) => e.subscriptionId))).toEqual(
      new Set([everything.id, rotations.id]),
    );
    expect(data.slice(2).every((e: any) => e.subscriptionId === everything.id)).toBe(true);

    const latestRename = data[2];
    const [row] = await t.db.query<any>('select * from webhook_delivery where id = $1', [latestRename.id]);
    expect(latestRename).toMatchObject({
      subscriptionId: everything.id,
      eventId: events[0].id,
      eventType: 'paywall.updated',
      status: 'pending',
      attempts: 0,
      responseStatus: null,
      responseLatencyMs: null,
      responseBody: null,
      lastError: null,
      createdAt: new Date(row.created_at).toISOString(),
      updatedAt: new Date(row.updated_at).toISOString(),
      nextAttemptAt: new Date(row.next_attempt_at).toISOString(),
    });
    // `event` is the delivery payload's event object, field for field from the recorded event.
    const ev = events[0];
    expect(Object.keys(latestRename.event)).toEqual(EVENT_KEYS);
    expect(latestRename.event).toEqual({
      id: ev.id,
      paywallId: pw.id,
      ownerUserId: ev.owner_user_id,
      type: 'paywall.updated',
      version: '1.0',
      status: 'pending',
      createdAt: new Date(ev.created_at).toISOString(),
      trigger: { source: 'api', actorType: 'api_key', actorId: pw.id },
      subject: { type: 'paywall', id: pw.id, externalId: null },
      data: {
        paywallId: pw.id,
        ownerUserId: ev.owner_user_id,
        changedFields: ['name'],
        summarySections: ['general'],
      },
      metadata: {},
    });
    expect(latestRename.event.trigger).toEqual(ev.trigger);
  });

  it('filters by subscription, event type and status', async () => {
    const bySub = await logs(pw, `?subscriptionId=${rotations.id}`);
    expect(bySub.status).toBe(200);
    expect(bySub.body.data.map((e: any) => [e.subscriptionId, e.eventType])).toEqual([
      [rotations.id, 'paywall.secret.rotated'],
    ]);
    const byType = await logs(pw, '?eventType=paywall.updated');
    expect(byType.body.data).toHaveLength(3);
    expect(byType.body.data.every((e: any) => e.eventType === 'paywall.updated')).toBe(true);
    const both = await logs(pw, `?eventType=paywall.updated&subscriptionId=${rotations.id}`);
    expect(both.body.data).toEqual([]);
    const pending = await logs(pw, '?status=pending');
    expect(pending.body.data).toHaveLength(5);
    expect((await logs(pw, '?status=success')).body.data).toEqual([]);
    expect((await logs(pw, '?status=error')).body.data).toEqual([]);
  });

  it('shows the outcome of a finished delivery, its response body cut to 4 KiB', async () => {
    const target = (await logs(pw, `?subscriptionId=${rotations.id}`)).body.data[0];
    // What the worker writes after a successful attempt (a 5000-byte answer, multi-byte characters at the cut).
    const body = 'a'.repeat(4095) + 'é'.repeat(500);
    await t.db.query(
      `update webhook_delivery set status = 'success', attempts = 2, response_status = 200, response_latency_ms = 87,
              response_body = $2, next_attempt_at = now(), updated_at = now() where id = $1`,
      [target.id, body],
    );
    const success = await logs(pw, '?status=success');
    expect(success.body.data).toHaveLength(1);
    const e = success.body.data[0];
    expect(e).toMatchObject({
      id: target.id,
      status: 'success',
      attempts: 2,
      responseStatus: 200,
      responseLatencyMs: 87,
      nextAttemptAt: null, // finished: nothing is due
    });
    expect(Buffer.byteLength(e.responseBody)).toBeLessThanOrEqual(4096);
    expect(e.responseBody).toBe('a'.repeat(4095)); // the 2-byte "é" that would cross 4096 is left out whole
    expect(e.event).toEqual(target.event);
    // Why an attempt got no answer (a refused address, say) is in lastError: responseStatus says nothing then.
    await t.db.query(`update webhook_delivery set status = 'error', last_error = $2 where id = $1`, [
      target.id,
      'refused: 127.0.0.1 is not a public address',
    ]);
    expect((await logs(pw, '?status=error')).body.data[0]).toMatchObject({
      id: target.id,
      lastError: 'refused: 127.0.0.1 is not a public address',
    });
    await t.db.query(`update webhook_delivery set status = 'success', last_error = null where id = $1`, [
      target.id,
    ]);
    const stillPending = await logs(pw, '?status=pending');
    expect(stillPending.body.data.map((x: any) => x.id)).not.toContain(target.id);
    expect(stillPending.body.data).toHaveLength(4);
  });

  it('applies limit: default 20, at most 100', async () => {
    const two = await logs(pw, '?limit=2');
    const all = await logs(pw, '?limit=100');
    expect(two.body.data.map((e: any) => e.id)).toEqual(all.body.data.slice(0, 2).map((e: any) => e.id));

    const busy = await t.createPaywall();
    await subscribe(busy, ['paywall.updated']);
    for (let i = 0; i < 22; i++) await rename(busy, `name ${i}`);
    const dflt = await logs(busy);
    expect(dflt.body.data).toHaveLength(20);
    expect(dflt.body.data[0].event.data.changedFields).toEqual(['name']);
    const events = await t.db.query<{ id: string }>(
      `select id from event where paywall_id = $1 order by seq desc limit 20`,
      [busy.id],
    );
    expect(dflt.body.data.map((e: any) => e.eventId)).toEqual(events.map((e) => e.id));
    expect((await logs(busy, '?limit=100')).body.data).toHaveLength(22);
    expect((await logs(busy, '?limit=100')).body).toMatchObject({ has_more: false, next_cursor: null });

    // Older entries over REST: `after` = the previous page's `next_cursor`, newest first, no repeats.
    expect(dflt.body.has_more).toBe(true);
    const rest = await logs(busy, `?after=${encodeURIComponent(dflt.body.next_cursor)}`);
    expect(rest.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect([...dflt.body.data, ...rest.body.data].map((e: any) => e.id)).toEqual(
      (await logs(busy, '?limit=100')).body.data.map((e: any) => e.id),
    );
    const badCursor = await logs(busy, '?after=not-a-cursor');
    expect({ status: badCursor.status, param: badCursor.body.error?.param }).toEqual({
      status: 400,
      param: 'after',
    });

    for (const bad of ['101', '0', '-1', '1.5', 'abc', '', '1e2']) {
      const r = await logs(busy, `?limit=${bad}`);
      expect({ bad, status: r.status, param: r.body.error?.param }).toEqual({
        bad,
        status: 400,
        param: 'limit',
      });
    }
  });

  it('refuses bad filters with a 400 naming them', async () => {
    for (const [query, param] of [
      ['?status=failed', 'status'],
      ['?status=PENDING', 'status'],
      ['?eventType=paywall.exploded', 'eventType'],
      ['?eventType=paywall.*', 'eventType'],
      ['?eventType=*', 'eventType'],
    ]) {
      const r = await logs(pw, query);
      expect({ query, status: r.status, type: r.body.error?.type, param: r.body.error?.param }).toEqual({
        query,
        status: 400,
        type: 'invalid_request_error',
        param,
      });
    }
  });

  it("never shows another paywall's deliveries", async () => {
    const mine = (await logs(pw, '?limit=100')).body.data;
    expect(mine.some((e: any) => e.subscriptionId === otherSub.id)).toBe(false);
    const theirs = (await logs(other, '?limit=100')).body.data;
    expect(theirs.map((e: any) => [e.subscriptionId, e.eventType])).toEqual([
      [otherSub.id, 'paywall.updated'],
    ]);
    for (const id of [otherSub.id, '00000000-0000-4000-8000-000000000000', 'nope']) {
      const r = await logs(pw, `?subscriptionId=${id}`);
      expect(r.status).toBe(404);
      expect(r.body.error).toMatchObject({ type: 'not_found_error', param: 'subscriptionId' });
    }
    const gql = await t.gql(
      pw.apiKey,
      `query($p: ID) { webhookDeliveries(paywallId: $p) { nodes { id } } }`,
      { p: other.id },
    );
    expect(gql.errors?.[0].extensions.code).toBe('NOT_FOUND');
  });

  it('answers 401 without a valid key', async () => {
    expect((await t.rest('GET', '/v1/webhooks/logs')).status).toBe(401);
    const bad = await t.rest('GET', '/v1/webhooks/logs', { token: 'pk_live_nope' });
    expect(bad.status).toBe(401);
    expect(bad.body.error.type).toBe('authentication_error');
  });

  describe('in GraphQL (webhookDeliveries)', () => {
    it('pages with cursors through every entry, newest first, with no repeats', async () => {
      const all = (await logs(pw, '?limit=100')).body.data.map((e: any) => e.id);
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const r: any = await t.gql(
          pw.apiKey,
          `query($after: String) { webhookDeliveries(first: 2, after: $after) {
             edges { cursor node { id } } nodes { ${GQL_ENTRY} } pageInfo { hasNextPage endCursor } } }`,
          { after },
        );
        expect(r.errors).toBeUndefined();
        const page = r.data.webhookDeliveries;
        expect(page.nodes.length).toBeLessThanOrEqual(2);
        expect(page.edges.map((e: any) => e.node.id)).toEqual(page.nodes.map((n: any) => n.id));
        seen.push(...page.nodes.map((n: any) => n.id));
        expect(page.pageInfo.endCursor).toBe(page.edges.at(-1)?.cursor ?? null);
        if (!page.pageInfo.hasNextPage) break;
        after = page.pageInfo.endCursor;
      }
      expect(seen).toEqual(all);
      expect(seen).toHaveLength(5);
    });

    it('filters like REST, and validates first and after', async () => {
      const r = await t.gql(
        pw.apiKey,
        `query($s: ID) { webhookDeliveries(subscriptionId: $s, status: "pending", eventType: "paywall.updated") {
           nodes { eventType status subscriptionId event } } }`,
        { s: everything.id },
      );
      expect(r.data.webhookDeliveries.nodes).toHaveLength(3);
      expect(r.data.webhookDeliveries.nodes[0].event.type).toBe('paywall.updated');
      for (const [args, param] of [
        ['first: 0', 'first'],
        ['first: 101', 'first'],
        ['after: "garbage"', 'after'],
        ['status: "done"', 'status'],
        ['eventType: "nope"', 'eventType'],
      ]) {
        const bad = await t.gql(pw.apiKey, `{ webhookDeliveries(${args}) { nodes { id } } }`);
        expect({ args, ext: bad.errors?.[0].extensions }).toMatchObject({
          args,
          ext: { code: 'BAD_USER_INPUT', param },
        });
      }
    });

    it('lets an owner read a paywall it owns (paywallId required)', async () => {
      const r = await t.gql(
        t.ownerToken,
        `query($p: ID) { webhookDeliveries(paywallId: $p, first: 100) { nodes { id } } }`,
        {
          p: pw.id,
        },
      );
      expect(r.data.webhookDeliveries.nodes).toHaveLength(5);
      const none = await t.gql(t.ownerToken, `{ webhookDeliveries { nodes { id } } }`);
      expect(none.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'paywallId' });
    });
  });
});

describe('manual resend (redeliverWebhookEvent)', () => {
  const REDELIVER = `mutation($e: ID!, $s: ID) { redeliverWebhookEvent(eventId: $e, subscriptionId: $s) { ${GQL_ENTRY} } }`;

  it('puts a finished delivery back to pending, due now, keeping its attempt count', async () => {
    const pw = await t.createPaywall();
    const sub = await subscribe(pw, ['paywall.updated']);
    await rename(pw, 'x');
    const [d] = await t.db.query<any>('select * from webhook_delivery where subscription_id = $1', [sub.id]);
    await t.db.query(
      `update webhook_delivery set status = 'error', attempts = 8, response_status = 500, response_body = 'down',
              next_attempt_at = null, lease_until = now() - interval '1 minute' where id = $1`,
      [d.id],
    );
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const unlisten = await t.db.listen('webhook_deliveries', () => wake());
    const before = Date.now();
    const r = await t.gql(pw.apiKey, REDELIVER, { e: d.event_id, s: sub.id });
    expect(r.errors).toBeUndefined();
    expect(r.data.redeliverWebhookEvent).toHaveLength(1);
    const entry = r.data.redeliverWebhookEvent[0];
    expect(entry).toMatchObject({ id: d.id, status: 'pending', attempts: 8, eventId: d.event_id });
    expect(Date.parse(entry.nextAttemptAt)).toBeLessThanOrEqual(Date.now() + 1000);
    expect(Date.parse(entry.nextAttemptAt)).toBeGreaterThanOrEqual(before - 5000);
    const [row] = await t.db.query<any>('select * from webhook_delivery where id = $1', [d.id]);
    expect(row).toMatchObject({ status: 'pending', attempts: 8, lease_until: null });
    await woken; // workers are told at once
    unlisten();
    const rest = await logs(pw, '?status=pending');
    expect(rest.body.data.map((e: any) => e.id)).toEqual([d.id]);
  });

  it('creates the delivery for a subscription made after the event, and resends to every match by default', async () => {
    const pw = await t.createPaywall();
    const early = await subscribe(pw, ['*']);
    await rename(pw, 'before the late subscription');
    const late = await subscribe(pw, ['paywall.updated']);
    const unrelated = await subscribe(pw, ['paywall.archived']);
    const [ev] = await t.db.query<any>(`select id from event where paywall_id = $1`, [pw.id]);
    expect(await t.db.query('select 1 from webhook_delivery where event_id = $1', [ev.id])).toHaveLength(1);

    const one = await t.gql(pw.apiKey, REDELIVER, { e: ev.id, s: late.id });
    expect(one.data.redeliverWebhookEvent.map((e: any) => [e.subscriptionId, e.status, e.attempts])).toEqual([
      [late.id, 'pending', 0],
    ]);
    const all = await t.gql(pw.apiKey, REDELIVER, { e: ev.id });
    expect(new Set(all.data.redeliverWebhookEvent.map((e: any) => e.subscriptionId))).toEqual(
      new Set([early.id, late.id]),
    );
    const rows = await t.db.query<any>('select subscription_id from webhook_delivery where event_id = $1', [
      ev.id,
    ]);
    expect(rows).toHaveLength(2); // upserted, never duplicated
    expect(rows.map((r) => r.subscription_id)).not.toContain(unrelated.id);

    const notMatching = await t.gql(pw.apiKey, REDELIVER, { e: ev.id, s: unrelated.id });
    expect(notMatching.errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      param: 'subscriptionId',
    });
    await t.rest('DELETE', `/v1/webhooks/subscriptions/${late.id}`, { token: pw.apiKey });
    const inactive = await t.gql(pw.apiKey, REDELIVER, { e: ev.id, s: late.id });
    expect(inactive.errors?.[0].extensions.code).toBe('CONFLICT');
  });

  it("refuses another paywall's event and subscription", async () => {
    const mine = await t.createPaywall();
    const theirs = await t.createPaywall();
    const mySub = await subscribe(mine, ['*']);
    const theirSub = await subscribe(theirs, ['*']);
    await rename(mine, 'mine');
    await rename(theirs, 'theirs');
    const [theirEvent] = await t.db.query<any>('select id from event where paywall_id = $1', [theirs.id]);
    const [myEvent] = await t.db.query<any>('select id from event where paywall_id = $1', [mine.id]);
    const r = await t.gql(mine.apiKey, REDELIVER, { e: theirEvent.id });
    expect(r.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const cross = await t.gql(mine.apiKey, REDELIVER, { e: myEvent.id, s: theirSub.id });
    expect(cross.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const garbage = await t.gql(mine.apiKey, REDELIVER, { e: 'not-an-id' });
    expect(garbage.errors?.[0].extensions.code).toBe('NOT_FOUND');
    expect(
      await t.db.query('select 1 from webhook_delivery where event_id = $1', [theirEvent.id]),
    ).toHaveLength(1);
    // The owner of both may resend either.
    const owner = await t.gql(t.ownerToken, REDELIVER, { e: myEvent.id });
    expect(owner.data.redeliverWebhookEvent.map((e: any) => e.subscriptionId)).toEqual([mySub.id]);
  });
});
