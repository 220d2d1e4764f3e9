import { startTestApp, type TestApp } from './helpers/app.js';
import { webhookSecretContext } from '../src/modules/webhooks/webhook-secrets.js';
import { loadSecretBox } from '../src/shared/crypto.js';

let t: TestApp;
beforeAll(async () => {
  // No worker: these tests look at subscriptions and outbox rows, not at sending.
  t = await startTestApp({ WEBHOOK_WORKER: 'false' });
});
afterAll(async () => {
  await t.close();
});

/** The signing secret as stored: the raw row never holds it in plaintext; decrypted with the service's key. */
async function storedSecret(id: string): Promise<string> {
  const [row] = await t.db.query<{ secret_ciphertext: string; whole: string }>(
    'select secret_ciphertext, w::text as whole from webhook_subscription w where id = $1',
    [id],
  );
  const secret = loadSecretBox(t.config).box.decrypt(row.secret_ciphertext, webhookSecretContext(id));
  expect(row.whole).not.toContain(secret);
  return secret;
}

const SUB_KEYS = [
  'id',
  'paywallId',
  'url',
  'events',
  'isActive',
  'description',
  'customHeaders',
  'createdAt',
  'updatedAt',
  'secretSuffix',
  'createdBy',
  'consecutiveFailures',
  'lastDeliveredAt',
].sort();
const GQL_SUB =
  'id paywallId url events isActive description customHeaders secret secretSuffix createdBy consecutiveFailures lastDeliveredAt createdAt updatedAt';

const HOOK = 'https://hooks.example.test/paywall';

async function create(apiKey: string, body: Record<string, unknown>) {
  return t.rest('POST', '/v1/webhooks/subscriptions', { token: apiKey, body });
}

async function subscriptionCount(paywallId: string): Promise<number> {
  const rows = await t.db.query<{ n: number }>(
    'select count(*)::int as n from webhook_subscription where paywall_id = $1',
    [paywallId],
  );
  return rows[0].n;
}

describe('creating a subscription (POST /v1/webhooks/subscriptions)', () => {
  it('answers 201 with the record and a generated secret, shown only here', async () => {
    const pw = await t.createPaywall();
    const r = await create(pw.apiKey, {
      url: HOOK,
      events: ['paywall.updated', 'paywall.balance.*'],
      description: '  Billing sync  ',
      customHeaders: { Authorization: 'Bearer receiver-token', 'X-Tenant': 'acme' },
    });
    expect(r.status).toBe(201);
    const sub = r.body.subscription;
    expect(Object.keys(sub).sort()).toEqual([...SUB_KEYS, 'secret'].sort());
    expect(sub).toMatchObject({
      paywallId: pw.id,
      url: HOOK,
      events: ['paywall.updated', 'paywall.balance.*'],
      isActive: true,
      description: 'Billing sync',
      customHeaders: { Authorization: 'Bearer receiver-token', 'X-Tenant': 'acme' },
      createdBy: `api_key:${pw.id}`,
      consecutiveFailures: 0,
      lastDeliveredAt: null,
    });
    expect(sub.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(sub.secretSuffix).toBe(sub.secret.slice(-4));
    expect(new Date(sub.createdAt).toISOString()).toBe(sub.createdAt);
    expect(sub.updatedAt).toBe(sub.createdAt);
    // Stored encrypted (issue 10): the row holds no plaintext; the worker decrypts it to sign.
    expect(await storedSecret(sub.id)).toBe(sub.secret);
  });

  it('accepts a pre-shared secret, "*" alone, and 10 custom headers', async () => {
    const pw = await t.createPaywall();
    const headers = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`X-Custom-${i}`, `v${i}`]));
    const r = await create(pw.apiKey, {
      url: HOOK,
      events: ['*'],
      customHeaders: headers,
      secret: 'my-pre-shared-secret-0123',
    });
    expect(r.status).toBe(201);
    expect(r.body.subscription).toMatchObject({
      events: ['*'],
      customHeaders: headers,
      secret: 'my-pre-shared-secret-0123',
      secretSuffix: '0123',
      description: null,
    });
  });

  it('trims the description to 512 characters instead of refusing it', async () => {
    const pw = await t.createPaywall();
    const r = await create(pw.apiKey, { url: HOOK, events: ['*'], description: 'd'.repeat(600) });
    expect(r.status).toBe(201);
    expect(r.body.subscription.description).toBe('d'.repeat(512));
    // Counted in characters: 600 emoji become 512 whole emoji, none cut in half.
    const emoji = await create(pw.apiKey, { url: HOOK, events: ['*'], description: '🔔'.repeat(600) });
    expect(emoji.status).toBe(201);
    expect(emoji.body.subscription.description).toBe('🔔'.repeat(512));
  });

  it('refuses every invalid field with a 400 naming it, and creates nothing', async () => {
    const pw = await t.createPaywall();
    const ok = { url: HOOK, events: ['paywall.updated'] };
    const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, 'v']));
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['url missing', { events: ok.events }, 'url'],
      ['url not a string', { ...ok, url: 42 }, 'url'],
      ['url empty', { ...ok, url: '' }, 'url'],
      ['url not absolute', { ...ok, url: 'hooks.example.test/x' }, 'url'],
      ['url scheme', { ...ok, url: 'ftp://hooks.example.test/x' }, 'url'],
      ['url with credentials', { ...ok, url: 'https://user:pass@hooks.example.test/x' }, 'url'],
      ['url too long', { ...ok, url: `https://hooks.example.test/${'a'.repeat(2100)}` }, 'url'],
      ['events missing', { url: HOOK }, 'events'],
      ['events empty', { ...ok, events: [] }, 'events'],
      ['events a string', { ...ok, events: 'paywall.updated' }, 'events'],
      ['events not strings', { ...ok, events: [1] }, 'events'],
      ['unknown event name', { ...ok, events: ['paywall.updated', 'paywall.exploded'] }, 'events'],
      ['unknown family', { ...ok, events: ['billing.*'] }, 'events'],
      ['"*" mixed with names', { ...ok, events: ['*', 'paywall.updated'] }, 'events'],
      ['"*" twice', { ...ok, events: ['*', '*'] }, 'events'],
      ['description not a string', { ...ok, description: 42 }, 'description'],
      ['customHeaders not an object', { ...ok, customHeaders: 'X-A: b' }, 'customHeaders'],
      ['customHeaders an array', { ...ok, customHeaders: [['X-A', 'b']] }, 'customHeaders'],
      ['11 custom headers', { ...ok, customHeaders: eleven }, 'customHeaders'],
      ['Content-Type', { ...ok, customHeaders: { 'Content-Type': 'text/plain' } }, 'customHeaders'],
      ['content-length', { ...ok, customHeaders: { 'content-length': '1' } }, 'customHeaders'],
      ['Host', { ...ok, customHeaders: { HOST: 'evil.example' } }, 'customHeaders'],
      ['Transfer-Encoding', { ...ok, customHeaders: { 'Transfer-Encoding': 'chunked' } }, 'customHeaders'],
      ['X-Service-Signature', { ...ok, customHeaders: { 'X-Service-Signature': 'forged' } }, 'customHeaders'],
      ['x-service-anything', { ...ok, customHeaders: { 'x-service-foo': 'bar' } }, 'customHeaders'],
      ['bad header name', { ...ok, customHeaders: { 'X Bad': 'v' } }, 'customHeaders'],
      ['header value with CRLF', { ...ok, customHeaders: { 'X-A': 'a\r\nX-Injected: 1' } }, 'customHeaders'],
      ['header value not a string', { ...ok, customHeaders: { 'X-A': 5 } }, 'customHeaders'],
      ['header value too long', { ...ok, customHeaders: { 'X-A': 'v'.repeat(1025) } }, 'customHeaders'],
      ['same header twice', { ...ok, customHeaders: { 'X-A': '1', 'x-a': '2' } }, 'customHeaders'],
      ['secret too short', { ...ok, secret: 'short' }, 'secret'],
      ['secret with whitespace', { ...ok, secret: 'has a space in it 0123' }, 'secret'],
      ['secret too long', { ...ok, secret: 's'.repeat(257) }, 'secret'],
      ['secret not a string', { ...ok, secret: 1234567890123456 }, 'secret'],
      ['unknown parameter', { ...ok, enabled: true }, 'enabled'],
    ];
    for (const [name, body, param] of cases) {
      const r = await create(pw.apiKey, body);
      expect({ name, status: r.status, type: r.body.error?.type, param: r.body.error?.param }).toEqual({
        name,
        status: 400,
        type: 'invalid_request_error',
        param,
      });
      expect(r.body.error.message).toEqual(expect.any(String));
    }
    const notObject = await create(pw.apiKey, [ok] as any);
    expect(notObject.status).toBe(400);
    expect(await subscriptionCount(pw.id)).toBe(0);
  });

  it('caps a paywall at 100 active subscriptions', async () => {
    const pw = await t.createPaywall();
    await t.db.query(
      `insert into webhook_subscription (id, paywall_id, url, events, secret_ciphertext, secret_suffix, created_by)
       select gen_random_uuid(), $1, $2, '{*}', 'v1.unused', '0000', 'test' from generate_series(1, 99)`,
      [pw.id, HOOK],
    );
    const last = await create(pw.apiKey, { url: HOOK, events: ['*'] });
    expect(last.status).toBe(201);
    const over = await create(pw.apiKey, { url: HOOK, events: ['*'] });
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({ type: 'invalid_request_error', code: 'too_many_subscriptions' });
    expect(await subscriptionCount(pw.id)).toBe(100);
    // Inactive ones do not count.
    await t.rest('DELETE', `/v1/webhooks/subscriptions/${last.body.subscription.id}`, { token: pw.apiKey });
    expect((await create(pw.apiKey, { url: HOOK, events: ['*'] })).status).toBe(201);
  });

  it('names the reason when the URL is refused', async () => {
    const pw = await t.createPaywall();
    const r = await create(pw.apiKey, { url: 'ftp://hooks.example.test/x', events: ['*'] });
    expect(r.body.error.message).toMatch(/https/);
    expect(r.body.error.code).toBe('invalid_webhook_url');
  });
});

describe('reading and deactivating subscriptions', () => {
  it('lists, fetches and deactivates with secretSuffix and never the secret', async () => {
    const pw = await t.createPaywall();
    const a = (await create(pw.apiKey, { url: `${HOOK}/a`, events: ['*'] })).body.subscription;
    const b = (await create(pw.apiKey, { url: `${HOOK}/b`, events: ['paywall.updated'] })).body.subscription;

    const list = await t.rest('GET', '/v1/webhooks/subscriptions', { token: pw.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.object).toBe('list');
    expect(list.body.data.map((s: any) => s.id)).toEqual([b.id, a.id]); // newest first
    for (const s of list.body.data) {
      expect(Object.keys(s).sort()).toEqual(SUB_KEYS);
      expect(JSON.stringify(s)).not.toContain(a.secret);
      expect(JSON.stringify(s)).not.toContain(b.secret);
    }
    expect(list.body.data[1].secretSuffix).toBe(a.secret.slice(-4));

    const one = await t.rest('GET', `/v1/webhooks/subscriptions/${a.id}`, { token: pw.apiKey });
    expect(one.status).toBe(200);
    expect(Object.keys(one.body)).toEqual(['subscription']);
    const { secret: _secret, ...withoutSecret } = a;
    expect(one.body.subscription).toEqual(withoutSecret);

    const del = await t.rest('DELETE', `/v1/webhooks/subscriptions/${a.id}`, { token: pw.apiKey });
    expect(del.status).toBe(200);
    expect(Object.keys(del.body.subscription).sort()).toEqual(SUB_KEYS);
    expect(del.body.subscription).toMatchObject({ id: a.id, isActive: false, url: `${HOOK}/a` });
    expect(Date.parse(del.body.subscription.updatedAt)).toBeGreaterThanOrEqual(Date.parse(a.updatedAt));

    // Soft: the record is still there, and deleting again changes nothing.
    const after = await t.rest('GET', `/v1/webhooks/subscriptions/${a.id}`, { token: pw.apiKey });
    expect(after.status).toBe(200);
    expect(after.body.subscription.isActive).toBe(false);
    const again = await t.rest('DELETE', `/v1/webhooks/subscriptions/${a.id}`, { token: pw.apiKey });
    expect(again.status).toBe(200);
    expect(again.body.subscription).toEqual(after.body.subscription);

    const active = await t.rest('GET', '/v1/webhooks/subscriptions?status=active', { token: pw.apiKey });
    expect(active.body.data.map((s: any) => s.id)).toEqual([b.id]);
    const inactive = await t.rest('GET', '/v1/webhooks/subscriptions?status=inactive', { token: pw.apiKey });
    expect(inactive.body.data.map((s: any) => s.id)).toEqual([a.id]);
    const both = await t.rest('GET', '/v1/webhooks/subscriptions', { token: pw.apiKey });
    expect(both.body.data).toHaveLength(2);
    expect(both.body.has_more).toBe(false);
    const first = await t.rest('GET', '/v1/webhooks/subscriptions?limit=1', { token: pw.apiKey });
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((s: any) => s.id)).toEqual([both.body.data[0].id]);
    for (const bad of ['101', '0', 'x']) {
      const r = await t.rest('GET', `/v1/webhooks/subscriptions?limit=${bad}`, { token: pw.apiKey });
      expect({ bad, status: r.status, param: r.body.error?.param }).toEqual({
        bad,
        status: 400,
        param: 'limit',
      });
    }

    for (const bad of ['bogus', 'ACTIVE', '']) {
      const r = await t.rest('GET', `/v1/webhooks/subscriptions?status=${bad}`, { token: pw.apiKey });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'status' });
    }
    const twice = await t.rest('GET', '/v1/webhooks/subscriptions?status=active&status=inactive', {
      token: pw.apiKey,
    });
    expect(twice.status).toBe(400);
    expect(twice.body.error.param).toBe('status');
  });

  it('writes no deliveries for a deactivated subscription', async () => {
    const pw = await t.createPaywall();
    const on = (await create(pw.apiKey, { url: `${HOOK}/on`, events: ['paywall.updated'] })).body
      .subscription;
    const off = (await create(pw.apiKey, { url: `${HOOK}/off`, events: ['paywall.*'] })).body.subscription;
    await t.rest('DELETE', `/v1/webhooks/subscriptions/${off.id}`, { token: pw.apiKey });
    const u = await t.gql(pw.apiKey, `mutation { updatePaywall(input: {name: "Renamed"}) { id } }`);
    expect(u.errors).toBeUndefined();
    const rows = await t.db.query<{ subscription_id: string }>(
      'select subscription_id from webhook_delivery where paywall_id = $1',
      [pw.id],
    );
    expect(rows.map((r) => r.subscription_id)).toEqual([on.id]);
  });

  it('answers 404 for an unknown id', async () => {
    const pw = await t.createPaywall();
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      for (const method of ['GET', 'DELETE']) {
        const r = await t.rest(method, `/v1/webhooks/subscriptions/${id}`, { token: pw.apiKey });
        expect(r.status).toBe(404);
        expect(r.body.error.type).toBe('not_found_error');
      }
    }
  });
});

describe('GraphQL-only management: re-enable and rotate', () => {
  it('re-enables a deactivated subscription and clears its failure streak', async () => {
    const pw = await t.createPaywall();
    const sub = (await create(pw.apiKey, { url: HOOK, events: ['*'] })).body.subscription;
    await t.rest('DELETE', `/v1/webhooks/subscriptions/${sub.id}`, { token: pw.apiKey });
    await t.db.query('update webhook_subscription set consecutive_failures = 5 where id = $1', [sub.id]);
    const r = await t.gql(
      pw.apiKey,
      `mutation($id: ID!) { reactivateWebhookSubscription(id: $id) { ${GQL_SUB} } }`,
      { id: sub.id },
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.reactivateWebhookSubscription).toMatchObject({
      id: sub.id,
      isActive: true,
      consecutiveFailures: 0,
      secret: null,
      secretSuffix: sub.secretSuffix,
    });
    const rest = await t.rest('GET', `/v1/webhooks/subscriptions/${sub.id}`, { token: pw.apiKey });
    expect(rest.body.subscription).toMatchObject({ isActive: true, consecutiveFailures: 0 });
    // Active again: events are written for it.
    await t.gql(pw.apiKey, `mutation { updatePaywall(input: {name: "Again"}) { id } }`);
    const rows = await t.db.query('select 1 from webhook_delivery where subscription_id = $1', [sub.id]);
    expect(rows).toHaveLength(1);
  });

  it('rotates the secret: the new one is returned once, reads show its suffix', async () => {
    const pw = await t.createPaywall();
    const sub = (await create(pw.apiKey, { url: HOOK, events: ['*'] })).body.subscription;
    const r = await t.gql(
      pw.apiKey,
      `mutation($id: ID!) { rotateWebhookSecret(id: $id) { id secret secretSuffix } }`,
      {
        id: sub.id,
      },
    );
    expect(r.errors).toBeUndefined();
    const rotated = r.data.rotateWebhookSecret;
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotated.secret).not.toBe(sub.secret);
    expect(rotated.secretSuffix).toBe(rotated.secret.slice(-4));
    expect(await storedSecret(sub.id)).toBe(rotated.secret);
    const read = await t.gql(
      pw.apiKey,
      `query($id: ID!) { webhookSubscription(id: $id) { secret secretSuffix } }`,
      {
        id: sub.id,
      },
    );
    expect(read.data.webhookSubscription).toEqual({ secret: null, secretSuffix: rotated.secret.slice(-4) });

    const preshared = await t.gql(
      pw.apiKey,
      `mutation($id: ID!, $s: String) { rotateWebhookSecret(id: $id, secret: $s) { secret secretSuffix } }`,
      { id: sub.id, s: 'another-shared-secret-9876' },
    );
    expect(preshared.data.rotateWebhookSecret).toEqual({
      secret: 'another-shared-secret-9876',
      secretSuffix: '9876',
    });
    const bad = await t.gql(
      pw.apiKey,
      `mutation($id: ID!) { rotateWebhookSecret(id: $id, secret: "tiny") { id } }`,
      {
        id: sub.id,
      },
    );
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'secret' });
    expect(await storedSecret(sub.id)).toBe('another-shared-secret-9876');
  });

  it('lets an owner manage a paywall by id, recording who created it', async () => {
    const pw = await t.createPaywall();
    const [owner] = await t.db.query<{ owner_id: string }>('select owner_id from paywall where id = $1', [
      pw.id,
    ]);
    const noPaywall = await t.gql(
      t.ownerToken,
      `mutation { createWebhookSubscription(input: {url: "${HOOK}", events: ["*"]}) { id } }`,
    );
    expect(noPaywall.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'paywallId' });
    const r = await t.gql(
      t.ownerToken,
      `mutation($input: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $input) { ${GQL_SUB} } }`,
      { input: { paywallId: pw.id, url: HOOK, events: ['paywall.*'], customHeaders: { 'X-A': 'b' } } },
    );
    expect(r.errors).toBeUndefined();
    const sub = r.data.createWebhookSubscription;
    expect(sub).toMatchObject({
      paywallId: pw.id,
      createdBy: `owner:${owner.owner_id}`,
      customHeaders: { 'X-A': 'b' },
    });
    expect(sub.secret).toMatch(/^whsec_/);
    const list = await t.gql(
      t.ownerToken,
      `query($p: ID) { webhookSubscriptions(paywallId: $p) { id secret } }`,
      {
        p: pw.id,
      },
    );
    expect(list.data.webhookSubscriptions).toEqual([{ id: sub.id, secret: null }]);
    const off = await t.gql(
      t.ownerToken,
      `mutation($id: ID!) { deactivateWebhookSubscription(id: $id) { isActive } }`,
      {
        id: sub.id,
      },
    );
    expect(off.data.deactivateWebhookSubscription.isActive).toBe(false);
    // The API key of the same paywall sees it too.
    const viaKey = await t.rest('GET', `/v1/webhooks/subscriptions/${sub.id}`, { token: pw.apiKey });
    expect(viaKey.body.subscription.createdBy).toBe(`owner:${owner.owner_id}`);
  });
});

describe('isolation and authentication', () => {
  it("never shows or changes another paywall's subscriptions", async () => {
    const mine = await t.createPaywall();
    const theirs = await t.createPaywall();
    const their = (await create(theirs.apiKey, { url: HOOK, events: ['*'] })).body.subscription;
    const own = (await create(mine.apiKey, { url: HOOK, events: ['*'] })).body.subscription;

    for (const method of ['GET', 'DELETE']) {
      const r = await t.rest(method, `/v1/webhooks/subscriptions/${their.id}`, { token: mine.apiKey });
      expect(r.status).toBe(404);
      expect(r.body.error.type).toBe('not_found_error');
    }
    const list = await t.rest('GET', '/v1/webhooks/subscriptions', { token: mine.apiKey });
    expect(list.body.data.map((s: any) => s.id)).toEqual([own.id]);
    for (const op of [
      'reactivateWebhookSubscription(id: $id) { id }',
      'deactivateWebhookSubscription(id: $id) { id }',
      'rotateWebhookSecret(id: $id) { id }',
    ]) {
      const r = await t.gql(mine.apiKey, `mutation($id: ID!) { ${op} }`, { id: their.id });
      expect(r.errors?.[0].extensions.code).toBe('NOT_FOUND');
    }
    const q = await t.gql(mine.apiKey, `query($id: ID!) { webhookSubscription(id: $id) { id } }`, {
      id: their.id,
    });
    expect(q.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const other = await t.gql(mine.apiKey, `query($p: ID) { webhookSubscriptions(paywallId: $p) { id } }`, {
      p: theirs.id,
    });
    expect(other.errors?.[0].extensions.code).toBe('NOT_FOUND');
    // Nothing changed on their side.
    const [row] = await t.db.query<{ is_active: boolean }>(
      'select is_active from webhook_subscription where id = $1',
      [their.id],
    );
    expect(row).toEqual({ is_active: true });
    expect(await storedSecret(their.id)).toBe(their.secret);
  });

  it('answers 401 on every webhook route without a valid API key', async () => {
    const pw = await t.createPaywall();
    const sub = (await create(pw.apiKey, { url: HOOK, events: ['*'] })).body.subscription;
    const routes: Array<[string, string, unknown?]> = [
      ['POST', '/v1/webhooks/subscriptions', { url: HOOK, events: ['*'] }],
      ['GET', '/v1/webhooks/subscriptions'],
      ['GET', `/v1/webhooks/subscriptions/${sub.id}`],
      ['DELETE', `/v1/webhooks/subscriptions/${sub.id}`],
      ['GET', '/v1/webhooks/logs'],
    ];
    for (const [method, path, body] of routes) {
      for (const token of [null, 'pk_live_not_a_real_key_000000000000000000000', t.ownerToken]) {
        const r = await t.rest(method, path, { token, body });
        expect({ method, path, status: r.status, type: r.body.error?.type }).toEqual({
          method,
          path,
          status: 401,
          type: 'authentication_error',
        });
      }
    }
    // A rotated key stops working at once.
    const rotated = await t.gql(pw.apiKey, `mutation { rotatePaywallSecret { apiKey } }`);
    const old = await t.rest('GET', '/v1/webhooks/subscriptions', { token: pw.apiKey });
    expect(old.status).toBe(401);
    const fresh = await t.rest('GET', '/v1/webhooks/subscriptions', {
      token: rotated.data.rotatePaywallSecret.apiKey,
    });
    expect(fresh.status).toBe(200);
    // Nothing was changed by the refused calls.
    const [row] = await t.db.query<{ is_active: boolean }>(
      'select is_active from webhook_subscription where id = $1',
      [sub.id],
    );
    expect(row.is_active).toBe(true);
    expect(await subscriptionCount(pw.id)).toBe(1);
    const anon = await t.gql(null, `{ webhookSubscriptions { id } }`);
    expect(anon.status).toBe(401);
  });
});

describe('the URL guard when private networks are not allowed', () => {
  let strict: TestApp;
  beforeAll(async () => {
    strict = await startTestApp({ WEBHOOK_WORKER: 'false', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' });
  });
  afterAll(async () => {
    await strict.close();
  });

  it('requires https and a public address, with a clear 400 naming url', async () => {
    const pw = await strict.createPaywall();
    for (const url of [
      'http://93.184.216.34/hook',
      'https://127.0.0.1/hook',
      'https://localhost/hook',
      'https://api.localhost/hook',
      'https://metadata.google.internal/hook',
      'https://10.1.2.3/hook',
      'https://192.168.1.10/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://2130706433/hook',
    ]) {
      const r = await strict.rest('POST', '/v1/webhooks/subscriptions', {
        token: pw.apiKey,
        body: { url, events: ['*'] },
      });
      expect({ url, status: r.status, param: r.body.error?.param }).toEqual({
        url,
        status: 400,
        param: 'url',
      });
    }
    expect(await strict.db.query('select 1 from webhook_subscription')).toHaveLength(0);
    const ok = await strict.rest('POST', '/v1/webhooks/subscriptions', {
      token: pw.apiKey,
      body: { url: 'https://93.184.216.34/hook', events: ['*'] },
    });
    expect(ok.status).toBe(201);
  });

  it('a local receiver is refused with the way to allow it (WEBHOOK_ALLOW_PRIVATE_NETWORKS); a host that does not resolve is refused as such, not blamed on private networks', async () => {
    const pw = await strict.createPaywall();
    const refusal = async (url: string) => {
      const r = await strict.rest('POST', '/v1/webhooks/subscriptions', {
        token: pw.apiKey,
        body: { url, events: ['*'] },
      });
      expect([r.status, r.body.error.param, r.body.error.code]).toEqual([400, 'url', 'invalid_webhook_url']);
      return r.body.error.message as string;
    };
    for (const url of [
      'http://localhost:3000/hooks',
      'https://127.0.0.1:8443/hooks',
      'https://10.1.2.3/hook',
    ])
      expect(await refusal(url)).toContain('start the service with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true');
    const dns = await refusal('https://no-such-host.invalid/hook');
    expect(dns).toBe('Webhook URL host no-such-host.invalid could not be resolved.');
    expect(await refusal('ftp://example.com/hook')).not.toContain('WEBHOOK_ALLOW_PRIVATE_NETWORKS');
  });

  it('allows http and loopback only with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true', async () => {
    const pw = await t.createPaywall();
    const r = await create(pw.apiKey, { url: 'http://127.0.0.1:9/hook', events: ['*'] });
    expect(r.status).toBe(201);
    expect(r.body.subscription.url).toBe('http://127.0.0.1:9/hook');
  });
});
