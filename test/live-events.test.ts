import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { startTestApp, type TestApp } from './helpers/app.js';
import { eventually, LiveSubscription, liveClient } from './helpers/live-client.js';
import {
  LiveEventHub,
  MAX_QUEUED_EVENTS,
  type LiveEvent,
} from '../src/modules/live-events/live-event-hub.js';
import { recordEvents, type NewEvent } from '../src/modules/events/event.service.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, deposit, MODEL } from './helpers/proxy-setup.js';

let t: TestApp;
const clients: Client[] = [];
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t.close();
});

const hub = () => LiveEventHub.for(t.db);

function client(token: string, extra?: Record<string, unknown>): Client {
  const c = liveClient(t.url, token, extra);
  clients.push(c);
  return c;
}

/** Subscribes and waits until the server has registered it, so no later event can be missed. */
async function subscribe(token: string, variables: Record<string, unknown> = {}): Promise<LiveSubscription> {
  const before = hub().size;
  const s = new LiveSubscription(client(token), variables);
  await Promise.race([eventually(() => hub().size, before + 1), s.untilError()]);
  return s;
}

async function rename(apiKey: string, name: string) {
  const r = await t.gql(apiKey, `mutation($n: String!) { updatePaywall(input: {name: $n}) { id } }`, {
    n: name,
  });
  expect(r.errors).toBeUndefined();
}

async function lastEvent(paywallId: string) {
  const [e] = await t.db.query('select * from event where paywall_id = $1 order by seq desc limit 1', [
    paywallId,
  ]);
  return e;
}

describe('paywallEvents subscription (graphql-ws)', () => {
  it('streams an API key its paywall’s events as they are recorded, with the recorded id and data', async () => {
    const pw = await t.createPaywall();
    const s = await subscribe(pw.apiKey);
    await rename(pw.apiKey, 'Live one');
    await s.untilEvents(1);
    const row = await lastEvent(pw.id);
    expect(s.events[0]).toEqual({
      id: row.id,
      type: 'paywall.updated',
      version: '1.0',
      createdAt: new Date(row.created_at).toISOString(),
      data: {
        paywallId: pw.id,
        ownerUserId: row.owner_user_id,
        changedFields: ['name'],
        summarySections: ['general'],
      },
      paywallId: pw.id,
      ownerUserId: row.owner_user_id,
      trigger: { source: 'api', actorType: 'api_key', actorId: pw.id },
      subject: { type: 'paywall', id: pw.id, externalId: null },
      metadata: {},
    });
    s.unsubscribe();
    await eventually(() => -hub().size, 0); // the server forgets an ended subscription
  });

  it('filters by the webhook patterns: exact names, families and *', async () => {
    const pw = await t.createPaywall();
    const exact = await subscribe(t.ownerToken, { paywallId: pw.id, types: ['paywall.secret.rotated'] });
    const family = await subscribe(t.ownerToken, { paywallId: pw.id, types: ['paywall.secret.*'] });
    const all = await subscribe(t.ownerToken, { paywallId: pw.id, types: [] });
    await rename(pw.apiKey, 'Filtered');
    const rotated = await t.gql(
      t.ownerToken,
      `mutation($id: ID) { rotatePaywallSecret(paywallId: $id) { apiKey } }`,
      {
        id: pw.id,
      },
    );
    expect(rotated.errors).toBeUndefined();
    await all.untilEvents(2);
    await exact.untilEvents(1);
    await family.untilEvents(1);
    expect(all.events.map((e) => e.type)).toEqual(['paywall.updated', 'paywall.secret.rotated']);
    expect(exact.events.map((e) => e.type)).toEqual(['paywall.secret.rotated']);
    expect(family.events.map((e) => e.type)).toEqual(['paywall.secret.rotated']);
    for (const s of [exact, family, all]) s.unsubscribe();
  });

  it('scopes events: an API key sees only its paywall, an owner all of theirs (or one), never another owner’s', async () => {
    const a = await t.createPaywall('DEFAULT', 'A');
    const b = await t.createPaywall('DEFAULT', 'B');
    const other = await t.app.services.owners.create('someone else');
    const keyA = await subscribe(a.apiKey);
    const ownerAll = await subscribe(t.ownerToken);
    const ownerB = await subscribe(t.ownerToken, { paywallId: b.id });
    const stranger = await subscribe(other.createdToken);
    await rename(a.apiKey, 'A2');
    await rename(b.apiKey, 'B2');
    await ownerAll.untilEvents(2);
    await keyA.untilEvents(1);
    await ownerB.untilEvents(1);
    expect(ownerAll.events.map((e) => e.paywallId)).toEqual([a.id, b.id]);
    expect(keyA.events.map((e) => e.paywallId)).toEqual([a.id]);
    expect(ownerB.events.map((e) => e.paywallId)).toEqual([b.id]);
    // Events are processed in order: had the stranger matched A's or B's, it would have them by now.
    await rename(b.apiKey, 'B3');
    await ownerB.untilEvents(2);
    expect(stranger.events).toHaveLength(0);
    expect(keyA.events).toHaveLength(1);
    for (const s of [keyA, ownerAll, ownerB, stranger]) s.unsubscribe();
  });

  it('rejects bad arguments with the API’s error codes', async () => {
    const pw = await t.createPaywall();
    const other = await t.createPaywall();
    const badType = new LiveSubscription(client(pw.apiKey), { types: ['paywall.nope'] });
    expect(await badType.untilError()).toMatchObject({
      message: expect.stringContaining('paywall.nope'),
      extensions: { code: 'BAD_USER_INPUT', param: 'types' },
    });
    const mixed = new LiveSubscription(client(pw.apiKey), { types: ['*', 'paywall.updated'] });
    expect((await mixed.untilError()).extensions.code).toBe('BAD_USER_INPUT');
    const foreign = new LiveSubscription(client(pw.apiKey), { paywallId: other.id });
    expect((await foreign.untilError()).extensions.code).toBe('NOT_FOUND');
    const unknown = new LiveSubscription(client(t.ownerToken), {
      paywallId: '00000000-0000-4000-8000-000000000000',
    });
    expect((await unknown.untilError()).extensions.code).toBe('NOT_FOUND');
  });

  it('refuses a connection without a valid token in connectionParams', async () => {
    const s = new LiveSubscription(client('pk_live_not-a-real-key'));
    expect(await s.untilError()).toMatchObject({ code: 4403 });
    const none = new LiveSubscription(client(''));
    expect((await none.untilError()).code).toBe(4403);
  });

  it('closes a connection whose message exceeds the size limit', async () => {
    const pw = await t.createPaywall();
    // graphql-ws reports the refused frame on console.error; expected here, so kept out of the output.
    const consoleError = console.error;
    console.error = () => undefined;
    try {
      const s = new LiveSubscription(client(pw.apiKey, { padding: 'x'.repeat(100 * 1024) }));
      expect((await s.untilError()).code).toBe(1009); // message too big
    } finally {
      console.error = consoleError;
    }
  });

  it('ends an API-key subscription when the key is rotated; owner subscriptions go on', async () => {
    const pw = await t.createPaywall();
    // A connection opened with the old key stays open, but can no longer subscribe.
    const open = liveClient(t.url, pw.apiKey, {}, { lazy: false });
    clients.push(open);
    await new Promise<void>((resolve) => open.on('connected', () => resolve()));
    const byKey = await subscribe(pw.apiKey);
    const byOwner = await subscribe(t.ownerToken, { paywallId: pw.id });
    const r = await t.gql(
      t.ownerToken,
      `mutation($id: ID) { rotatePaywallSecret(paywallId: $id) { apiKey } }`,
      {
        id: pw.id,
      },
    );
    const err = await byKey.untilError();
    expect(err.extensions?.code).toBe('UNAUTHENTICATED');
    const late = new LiveSubscription(open);
    expect((await late.untilError()).extensions?.code).toBe('UNAUTHENTICATED');
    await rename(r.data.rotatePaywallSecret.apiKey, 'After rotation');
    await byOwner.untilEvents(2);
    expect(byOwner.events.map((e) => e.type)).toEqual(['paywall.secret.rotated', 'paywall.updated']);
    byOwner.unsubscribe();
  });

  it(`drops a subscriber that falls more than ${MAX_QUEUED_EVENTS} events behind; one that keeps up gets them all`, async () => {
    const pw = await t.createPaywall();
    const [{ owner_id: ownerId }] = await t.db.query('select owner_id from paywall where id = $1', [pw.id]);
    const scope = { kind: 'owner' as const, ownerId, paywallId: pw.id };
    const slow = await hub().subscribe(scope, ['*']);
    const fast = await hub().subscribe(scope, ['*']);
    const received: LiveEvent[] = [];
    const consuming = (async () => {
      for await (const e of fast) {
        received.push(e);
        if (received.length === MAX_QUEUED_EVENTS + 1) break;
      }
    })();
    const events: NewEvent[] = Array.from({ length: MAX_QUEUED_EVENTS + 1 }, (_, i) => ({
      paywallId: pw.id,
      ownerUserId: ownerId,
      type: 'paywall.updated',
      trigger: { source: 'system', actorType: 'system', actorId: 'test' },
      subject: { type: 'paywall', id: pw.id },
      data: { i },
    }));
    await t.db.transaction((tx) => recordEvents(tx, events));
    await consuming;
    expect(received.map((e) => e.data.i)).toEqual(events.map((e) => e.data.i));
    await expect(slow.next()).rejects.toThrow(/fell more than 1000 events behind/);
  });

  it('one statement sends ONE notification for all its events (several paywalls); an owner subscriber gets them all in insertion order', async () => {
    const a = await t.createPaywall();
    const b = await t.createPaywall();
    const [{ owner_id: ownerId }] = await t.db.query('select owner_id from paywall where id = $1', [a.id]);
    const sub = await hub().subscribe({ kind: 'owner', ownerId, paywallId: null }, ['paywall.updated']);
    const notices: string[] = [];
    const unlisten = await t.db.listen('paywall_events', (payload) => notices.push(payload));
    const events: NewEvent[] = Array.from({ length: 40 }, (_, i) => {
      const pw = i % 3 === 0 ? b : a;
      return {
        paywallId: pw.id,
        ownerUserId: ownerId,
        type: i % 4 === 0 ? 'paywall.archived' : 'paywall.updated',
        trigger: { source: 'system', actorType: 'system', actorId: 'test' },
        subject: { type: 'paywall', id: pw.id },
        data: { i },
      };
    });
    await recordEvents(t.db, events);
    const wanted = events.filter((e) => e.type === 'paywall.updated');
    const received: LiveEvent[] = [];
    for await (const e of sub) {
      received.push(e);
      if (received.length === wanted.length) break;
    }
    expect(received.map((e) => [e.paywallId, e.data.i])).toEqual(wanted.map((e) => [e.paywallId, e.data.i]));
    await eventually(() => notices.length, 1);
    unlisten();
    expect(notices).toHaveLength(1);
    expect(JSON.parse(notices[0]).map((g: { p: string }) => g.p)).toEqual([b.id, a.id]);
  });
});

describe('a payment-blocked chat, as a subscriber sees it', () => {
  let fake: FakeUpstream;
  beforeAll(async () => {
    fake = await FakeUpstream.start();
  });
  afterAll(async () => {
    await fake.close();
  });

  /** One blocked chat of `user`; the events of it, in the order the subscription delivered them. */
  async function blockedChat(mode: 'DEFAULT' | 'SHARED', user: string) {
    const pw = await createProxyPaywall(t, fake, { mode });
    const s = await subscribe(pw.apiKey);
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, user, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(200);
    await s.untilEvents(4);
    await new Promise((resolve) => setTimeout(resolve, 300)); // nothing further arrives
    s.unsubscribe();
    return { reply: r.body, events: s.events };
  }

  it('DEFAULT, unfunded: the request starts, is blocked, then the balance is depleted and the top-up link announced', async () => {
    const { reply, events } = await blockedChat('DEFAULT', 'bo');
    expect(events.map((e) => e.type)).toEqual([
      'paywall.proxy.request.started',
      'paywall.request.blocked',
      'paywall.proxy.request.blocked',
      'paywall.balance.depleted',
      'paywall.balance.topup.link.created',
    ]);
    const requestId = events[0].data.requestId;
    expect(events.slice(1, 3).map((e) => e.data.requestId)).toEqual([requestId, requestId]);
    expect(events[4].data.redirectUrl).toBe(reply.paywall.url);
    expect(events[4].data.walletUserId).toBe(events[0].data.walletUserId);
  });

  it('SHARED, not connected: the request starts, is blocked, then the connect link is announced', async () => {
    const { reply, events } = await blockedChat('SHARED', 'cy');
    expect(events.map((e) => e.type)).toEqual([
      'paywall.proxy.request.started',
      'paywall.request.blocked',
      'paywall.proxy.request.blocked',
      'paywall.authorization.requested',
    ]);
    expect(events[3].data).toMatchObject({
      approvalUrl: reply.paywall.url,
      externalUserId: 'cy',
      mode: 'shared',
    });
  });
});

describe('a paid chat, as subscribers see it', () => {
  let fake: FakeUpstream;
  beforeAll(async () => {
    fake = await FakeUpstream.start();
  });
  afterAll(async () => {
    await fake.close();
  });

  it.each([false, true])(
    'stream %s: started, (deferred,) completed, usage.charge.created, live and in order; filters and scope hold',
    async (stream) => {
      const pw = await createProxyPaywall(t, fake);
      const other = await createProxyPaywall(t, fake);
      await deposit(t, pw, 'payer', '1');
      await deposit(t, other, 'payer', '1');
      const all = await subscribe(pw.apiKey);
      const proxy = await subscribe(pw.apiKey, { types: ['paywall.proxy.*'] });
      const usage = await subscribe(pw.apiKey, { types: ['paywall.usage.charge.created'] });
      const owner = await subscribe(t.ownerToken, { types: ['paywall.usage.charge.created'] });
      for (const p of [pw, other]) {
        const r = await t.rest('POST', '/v1/chat/completions', {
          token: p.apiKey,
          body: { model: MODEL, user: 'payer', stream, messages: [{ role: 'user', content: 'hi' }] },
        });
        expect(r.status).toBe(200);
      }
      await all.untilEvents(stream ? 4 : 3);
      await owner.untilEvents(2);
      await new Promise((resolve) => setTimeout(resolve, 300)); // nothing further arrives
      expect(all.events.map((e) => e.type)).toEqual([
        'paywall.proxy.request.started',
        ...(stream ? ['paywall.usage.charge.deferred'] : []),
        'paywall.proxy.request.completed',
        'paywall.usage.charge.created',
      ]);
      // The API key sees its own paywall only; the owner both of its paywalls.
      expect(new Set(all.events.map((e) => e.paywallId))).toEqual(new Set([pw.id]));
      expect(owner.events.map((e) => e.paywallId)).toEqual([pw.id, other.id]);
      const [started] = all.events;
      const charged = all.events.at(-1);
      expect(started.data).toMatchObject({ paywallId: pw.id, model: MODEL, requestId: expect.any(String) });
      expect(charged.data).toMatchObject({
        paywallId: pw.id,
        ownerUserId: started.data.ownerUserId,
        walletUserId: started.data.walletUserId,
        activityId: started.data.requestId,
        model: MODEL,
        promptTokens: expect.any(Number),
        completionTokens: expect.any(Number),
        cost: expect.stringMatching(/^\d+(\.\d{1,6})?$/),
      });
      expect(charged.version).toBe('1.0');
      expect(proxy.events.map((e) => e.type)).toEqual([
        'paywall.proxy.request.started',
        'paywall.proxy.request.completed',
      ]);
      expect(usage.events.map((e) => e.id)).toEqual([charged.id]);
      for (const s of [all, proxy, usage, owner]) s.unsubscribe();
    },
  );
});

describe('reconnect', () => {
  it('a client whose socket drops reconnects, authenticates again and resumes; the server forgets the dead subscription', async () => {
    const pw = await t.createPaywall('DEFAULT', 'reconnect');
    const c = createClient({
      url: `${t.url.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${pw.apiKey}` },
      retryAttempts: 5,
      shouldRetry: () => true,
      retryWait: () => new Promise((resolve) => setTimeout(resolve, 100)),
    });
    clients.push(c);
    let connected = 0;
    c.on('connected', () => connected++);
    const base = hub().size;
    const s = new LiveSubscription(c, { types: ['paywall.updated'] });
    await eventually(() => hub().size, base + 1);
    await rename(pw.apiKey, 'before the drop');
    await s.untilEvents(1);
    c.terminate(); // the network drops: no close handshake
    await eventually(() => connected, 2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(hub().size).toBe(base + 1); // the dead one is gone, the resubscribed one is there
    await rename(pw.apiKey, 'after the drop');
    await s.untilEvents(2);
    expect(s.events.map((e) => e.data.changedFields)).toEqual([['name'], ['name']]);
    expect(s.errors).toEqual([]);
    s.unsubscribe();
  });
});

describe('connection limit', () => {
  it('refuses connections beyond MAX_WS_CONNECTIONS', async () => {
    const small = await startTestApp({ MAX_WS_CONNECTIONS: '1' });
    const pw = await small.createPaywall();
    const first = liveClient(small.url, pw.apiKey);
    const second = liveClient(small.url, pw.apiKey);
    try {
      const ok = new LiveSubscription(first);
      await eventually(() => LiveEventHub.for(small.db).size, 1);
      const refused = new LiveSubscription(second);
      expect((await refused.untilError()).code).toBe(4403);
      expect(ok.errors).toHaveLength(0);
    } finally {
      await first.dispose();
      await second.dispose();
      await small.close();
    }
  });
});
