import Anthropic, { PermissionDeniedError } from '@anthropic-ai/sdk';
import OpenAI, { PermissionDeniedError as OpenAIPermissionDenied } from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  connectShared,
  createProxyPaywall,
  deposit,
  eventsOf,
  eventually,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * End-user keys (docs/reference.md §19): created, listed and revoked over REST and GraphQL; used alone by
 * the official OpenAI and Anthropic SDKs (no user header), charged to the key's user; refused for another
 * user (403), when revoked or expired (401), on GraphQL and the other user routes (401); the key's own
 * spending limit exact under concurrency.
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

/** 11 prompt + 7 completion tokens of MODEL (createProxyPaywall's prices, markup 1.5). */
const CHAT_RAW = 1086n;
const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hello' }] };

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await createProxyPaywall(t, fake);
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

async function createKey(body: Record<string, unknown>, p: ProxyPaywall = pw) {
  const r = await t.rest('POST', '/v1/user/keys', { token: p.apiKey, body });
  if (r.status !== 201) throw new Error(`${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; key: string };
}

const openai = (key: string, baseURL = `${t.url}/v1`) => new OpenAI({ apiKey: key, baseURL, maxRetries: 0 });

describe('create, list, revoke', () => {
  it('REST: 201 with the key once, a list without it, DELETE sets revoked_at; events never carry the key', async () => {
    const created = await t.rest('POST', '/v1/user/keys', {
      token: pw.apiKey,
      body: { user: 'rest-u', name: 'laptop', limit: '2.5', limit_period: 'week' },
    });
    expect(created.status).toBe(201);
    const k = created.body;
    expect(k).toMatchObject({
      name: 'laptop',
      user: 'rest-u',
      expires_at: null,
      limit: { amount: '2.500000', period: 'week', spent: '0.000000' },
    });
    expect(k.key).toMatch(/^uk_[0-9A-Za-z]{32,}$/);
    expect(k.last_four).toBe(k.key.slice(-4));
    expect(Object.keys(k).sort()).toEqual(
      ['object', 'id', 'key', 'name', 'user', 'last_four', 'created_at', 'expires_at', 'limit'].sort(),
    );

    const list = await t.rest('GET', '/v1/user/keys?user=rest-u', { token: pw.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0]).toMatchObject({ id: k.id, last_four: k.last_four, revoked_at: null });
    expect(JSON.stringify(list.body)).not.toContain(k.key);

    const del = await t.rest('DELETE', `/v1/user/keys/${k.id}`, { token: pw.apiKey });
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id: k.id, user: 'rest-u' });
    expect(typeof del.body.revoked_at).toBe('string');
    expect(del.body.key).toBeUndefined();

    const events = (await eventsOf(t, pw, 'paywall.user_key.')).filter((e) => e.data.id === k.id);
    expect(events.map((e) => e.type)).toEqual(['paywall.user_key.created', 'paywall.user_key.revoked']);
    const [{ id: endUserId }] = await t.db.query<any>(
      `select id from end_user where paywall_id = $1 and external_id = 'rest-u'`,
      [pw.id],
    );
    for (const e of events) {
      expect(e.data).toMatchObject({
        id: k.id,
        externalUserId: 'rest-u',
        walletUserId: endUserId,
        name: 'laptop',
        lastFour: k.last_four,
      });
      expect(JSON.stringify(e)).not.toContain(k.key);
    }
    // Only the hash is stored.
    const [row] = await t.db.query<any>(`select * from user_key where id = $1`, [k.id]);
    expect(JSON.stringify(row)).not.toContain(k.key);
  });

  it('REST: bad input is a 400 naming the field, and creates nothing', async () => {
    for (const [body, param] of [
      [{ user: 'bad-u', limit: '-1' }, 'limit'],
      [{ user: 'bad-u', limit: '1', limit_period: 'year' }, 'limit_period'],
      [{ user: 'bad-u', limit_period: 'day' }, 'limit_period'],
      [{ user: 'bad-u', expires_at: '2000-01-01T00:00:00Z' }, 'expires_at'],
      [{ user: 'bad-u', expires_at: 'soon' }, 'expires_at'],
    ] as const) {
      // The field under the name the REST client sent (snake case), never GraphQL's input name.
      const r = await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body });
      expect([r.status, r.body.error.type, r.body.error.param]).toEqual([
        400,
        'invalid_request_error',
        param,
      ]);
      expect(r.body.error.message).not.toMatch(/limitPeriod|expiresAt/);
    }
    const none = await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body: {} });
    expect([none.status, none.body.error.code]).toEqual([400, 'missing_user']);
    const [{ n }] = await t.db.query<any>(
      `select count(*)::int as n from user_key k join end_user e on e.id = k.end_user_id where e.external_id = 'bad-u'`,
    );
    expect(n).toBe(0);
  });

  it('REST list: `limit` takes the newest keys (has_more says more exist); above 100, 0 or not a number is a 400', async () => {
    const made = [];
    for (const name of ['one', 'two', 'three']) made.push(await createKey({ user: 'lim-u', name }));
    const two = await t.rest('GET', '/v1/user/keys?user=lim-u&limit=2', { token: pw.apiKey });
    expect(two.status).toBe(200);
    expect(two.body.data.map((k: any) => k.name)).toEqual(['three', 'two']);
    expect(two.body.has_more).toBe(true);
    const all = await t.rest('GET', '/v1/user/keys?user=lim-u', { token: pw.apiKey });
    expect([all.body.data.length, all.body.has_more]).toEqual([3, false]);
    for (const bad of ['101', '0', '-1', 'abc', '1.5']) {
      const r = await t.rest('GET', `/v1/user/keys?user=lim-u&limit=${bad}`, { token: pw.apiKey });
      expect([r.status, r.body.error.type, r.body.error.param]).toEqual([
        400,
        'invalid_request_error',
        'limit',
      ]);
    }
  });

  it('GraphQL with the owner token: createUserKey, Paywall.userKeys(externalUserId), revokeUserKey', async () => {
    const c = await t.gql(
      t.ownerToken,
      `mutation($i: CreateUserKeyInput!) { createUserKey(input: $i) { key userKey { id name externalUserId lastFour
         revokedAt limit { amount period spent resetsAt } } } }`,
      { i: { paywallId: pw.id, externalUserId: 'gql-u', name: 'ci', limit: '1', limitPeriod: 'DAY' } },
    );
    expect(c.errors).toBeUndefined();
    const { key, userKey } = c.data.createUserKey;
    expect(key).toMatch(/^uk_[0-9A-Za-z]{32,}$/);
    expect(userKey).toMatchObject({
      name: 'ci',
      externalUserId: 'gql-u',
      lastFour: key.slice(-4),
      revokedAt: null,
      limit: { amount: '1.000000', period: 'DAY', spent: '0.000000' },
    });
    const list = await t.gql(
      t.ownerToken,
      `query($id: ID) { paywall(id: $id) { userKeys(externalUserId: "gql-u") { id lastFour } } }`,
      { id: pw.id },
    );
    expect(list.data.paywall.userKeys).toEqual([{ id: userKey.id, lastFour: userKey.lastFour }]);
    const r = await t.gql(
      t.ownerToken,
      `mutation($i: RevokeUserKeyInput!) { revokeUserKey(input: $i) { id revokedAt } }`,
      { i: { paywallId: pw.id, id: userKey.id } },
    );
    expect(r.data.revokeUserKey.id).toBe(userKey.id);
    expect(r.data.revokeUserKey.revokedAt).not.toBeNull();
  });
});

describe('using a key', () => {
  it("the OpenAI SDK with only a user key: charged to the key's user (a body `user` is ignored), userKeyId on the charge and its event", async () => {
    await deposit(t, pw, 'oa-alice', '1');
    const { id, key } = await createKey({ user: 'oa-alice' });
    const out = await openai(key).chat.completions.create({ ...ask, user: 'mallory' });
    expect(out.choices[0].message.content).toBeTruthy();
    expect((await money(t, pw, 'oa-alice')).balance).toBe(1_000_000n - CHAT_RAW);
    expect(
      await t.db.query(`select 1 from end_user where paywall_id = $1 and external_id = 'mallory'`, [pw.id]),
    ).toEqual([]);
    // Nothing of the user reached the provider.
    expect(fake.requests.at(-1)!.body.user).toBeUndefined();
    const [charge] = await chargesOf(t, pw, 'oa-alice');
    const [row] = await t.db.query<any>(`select user_key_id from charge where id = $1`, [charge.id]);
    expect(row.user_key_id).toBe(id);
    const created = (await eventsOf(t, pw, 'paywall.usage.charge.created')).find(
      (e) => e.data.activityId === charge.id,
    );
    expect(created.data).toMatchObject({ userKeyId: id, cost: '0.001086' });
    // lastUsedAt is written (in the background, once a minute at most).
    await eventually(
      () => t.db.query<any>(`select last_used_at from user_key where id = $1`, [id]),
      (r) => r[0].last_used_at !== null,
    );
    // The Responses API and embeddings too, the same user.
    const r = await openai(key).responses.create({ model: MODEL, input: 'Hello', user: 'mallory' } as any);
    expect(r.status).toBe('completed');
    const emb = await openai(key).embeddings.create({ model: MODEL, input: 'hello' });
    expect(emb.data.length).toBeGreaterThan(0);
    const all = await chargesOf(t, pw, 'oa-alice');
    expect(all.map((c) => c.status)).toEqual(['completed', 'completed', 'completed']);
    const keyed = await t.db.query<any>(
      `select count(*)::int as n from charge where user_key_id = $1 and status = 'completed'`,
      [id],
    );
    expect(keyed[0].n).toBe(3);
    const spentAll = all.reduce((s, c) => s + BigInt(c.amount), 0n);
    // Its own balance, no `user` needed.
    const bal = await t.rest('GET', '/v1/user/balance', { token: key });
    expect(bal.body.balance).toBe(String(1_000_000n - spentAll));
  });

  it('another user in the header, the path or the query: 403 permission_error (Messages in Anthropic’s shape)', async () => {
    await deposit(t, pw, 'p-alice', '1');
    const { key } = await createKey({ user: 'p-alice' });
    const other = await openai(key)
      .chat.completions.create(ask, { headers: { 'X-Paywall-User': 'bob' } })
      .catch((e) => e);
    expect(other).toBeInstanceOf(OpenAIPermissionDenied);
    expect(other.error).toMatchObject({ type: 'permission_error', code: 'user_key_user_mismatch' });
    const viaPath = await openai(key, `${t.url}/v1/u/bob`)
      .chat.completions.create(ask)
      .catch((e) => e);
    expect(viaPath.status).toBe(403);
    const query = await t.rest('GET', '/v1/user/balance?user=bob', { token: key });
    expect([query.status, query.body.error.type]).toEqual([403, 'permission_error']);
    // GET /v1/models is a proxy route too: another user named there is refused the same way.
    for (const path of ['/v1/models?user=bob', '/v1/u/bob/models', `/u/bob/v1/models/${MODEL}`]) {
      const models = await t.rest('GET', path, { token: key });
      expect([path, models.status, models.body.error?.code]).toEqual([path, 403, 'user_key_user_mismatch']);
    }
    const bobHeader = await openai(key)
      .models.list({ headers: { 'X-Paywall-User': 'bob' } })
      .catch((e) => e);
    expect(bobHeader.status).toBe(403);
    const ownModels = await openai(key, `${t.url}/v1/u/p-alice`).models.list();
    expect(ownModels.data.map((m) => m.id)).toContain(MODEL);
    const msg = await new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0 }).messages
      .create(
        { model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] },
        {
          headers: { 'x-paywall-user': 'bob' },
        },
      )
      .catch((e) => e);
    expect(msg).toBeInstanceOf(PermissionDeniedError);
    expect(msg.error).toEqual({
      type: 'error',
      error: { type: 'permission_error', message: expect.any(String) },
    });
    // The same user named again is fine.
    const same = await openai(key, `${t.url}/v1/u/p-alice`).chat.completions.create(ask);
    expect(same.choices[0].message.content).toBeTruthy();
    expect(fake.requests).toHaveLength(1);
  });

  it("an empty X-Paywall-User, `user` query or /u// path names nobody: the key's own user, not a 403", async () => {
    await deposit(t, pw, 'e-alice', '1');
    const { key } = await createKey({ user: 'e-alice' });
    // A tool that fills the header from an unset variable sends it empty; it names no other user.
    const viaHeader = await openai(key).chat.completions.create(ask, { headers: { 'X-Paywall-User': '' } });
    expect(viaHeader.choices[0].message.content).toBeTruthy();
    for (const path of ['/v1/chat/completions?user=', '/v1/u//chat/completions', '/u//v1/chat/completions']) {
      const r = await t.rest('POST', path, { token: key, body: ask });
      expect([path, r.status]).toEqual([path, 200]);
    }
    const bal = await t.rest('GET', '/v1/user/balance?user=', { token: key });
    expect(bal.status).toBe(200);
    expect(bal.body.balance).toBe(String(1_000_000n - 4n * CHAT_RAW));
    // Messages (the raw metered path) alike.
    const m = await new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0 }).messages.create(
      { model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-paywall-user': '' } },
    );
    expect(m.type).toBe('message');
    expect((await chargesOf(t, pw, 'e-alice')).map((c) => c.status)).toEqual(Array(5).fill('completed'));
  });

  it("Anthropic's SDK with base URL …/u/{user} and only the key: metadata.user_id (Claude Code's JSON) ignored, charged to the key's user", async () => {
    await deposit(t, pw, 'an-alice', '1');
    const { key } = await createKey({ user: 'an-alice' });
    for (const baseURL of [`${t.url}/u/an-alice`, t.url]) {
      const m = await new Anthropic({ apiKey: key, baseURL, maxRetries: 0 }).messages.create({
        model: MODEL,
        max_tokens: 50,
        messages: [{ role: 'user', content: 'Hello' }],
        metadata: { user_id: JSON.stringify({ device_id: 'x', session_id: 'y' }) },
      });
      expect(m.type).toBe('message');
    }
    const charges = await chargesOf(t, pw, 'an-alice');
    expect(charges.map((c) => c.status)).toEqual(['completed', 'completed']);
    const spent = charges.reduce((s, c) => s + BigInt(c.amount), 0n);
    expect((await money(t, pw, 'an-alice')).balance).toBe(1_000_000n - spent);
    for (const r of fake.requests) expect(JSON.stringify(r.body)).not.toContain('session_id');
    const [{ n }] = await t.db.query<any>(
      `select count(*)::int as n from end_user where paywall_id = $1 and external_id like '{%'`,
      [pw.id],
    );
    expect(n).toBe(0);
  });

  it('401 authentication_error: revoked, expired, on GraphQL and on the other /v1/user routes', async () => {
    await deposit(t, pw, 'x-alice', '1');
    const revoked = await createKey({ user: 'x-alice' });
    expect((await openai(revoked.key).chat.completions.create(ask)).choices).toHaveLength(1);
    await t.rest('DELETE', `/v1/user/keys/${revoked.id}`, { token: pw.apiKey });
    const after = await openai(revoked.key)
      .chat.completions.create(ask)
      .catch((e) => e);
    expect([after.status, after.error?.type]).toEqual([401, 'authentication_error']);
    // The 401 says what became of the key (its holder knows it existed); an unknown key stays generic.
    expect(after.error?.message).toMatch(/^This user key was revoked on \d{4}-\d{2}-\d{2}T/);
    const unknown = await openai(`uk_${'x'.repeat(40)}`)
      .chat.completions.create(ask)
      .catch((x) => x);
    expect([unknown.status, unknown.error?.message]).toEqual([401, 'Invalid API key.']);
    // The same on an Express route (the models list).
    const models = await t.rest('GET', '/v1/models', { token: revoked.key });
    expect([models.status, models.body.error.message]).toEqual([
      401,
      expect.stringMatching(/^This user key was revoked on /),
    ]);

    const expired = await createKey({
      user: 'x-alice',
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    await t.db.query(`update user_key set expires_at = now() - interval '1 second' where id = $1`, [
      expired.id,
    ]);
    const e = await openai(expired.key)
      .chat.completions.create(ask)
      .catch((x) => x);
    expect([e.status, e.error?.type]).toEqual([401, 'authentication_error']);
    expect(e.error?.message).toMatch(/^This user key expired on \d{4}-\d{2}-\d{2}T/);

    const { key } = await createKey({ user: 'x-alice' });
    const g = await t.gql(key, `{ paywall { id } }`);
    expect(g.status).toBe(401);
    for (const [method, path, body] of [
      ['POST', '/v1/user/balance/deposit', { amount: '1' }],
      ['POST', '/v1/user/charge', { amount: '0.1' }],
      ['GET', '/v1/user/connect', undefined],
      ['GET', '/v1/user/keys', undefined],
      ['POST', '/v1/user/keys', { user: 'x-alice' }],
    ] as const) {
      const r = await t.rest(method, path, { token: key, body });
      expect([path, r.status, r.body.error.type, r.body.error.code]).toEqual([
        path,
        401,
        'authentication_error',
        'user_key_not_allowed',
      ]);
    }
    expect((await money(t, pw, 'x-alice')).balance).toBe(1_000_000n - CHAT_RAW);
    // Still accepted on the proxy's reads.
    expect((await t.rest('GET', '/v1/models', { token: key })).status).toBe(200);
  });

  it('a key revoked by another instance (its row and NOTIFY user_key_changed) stops here at once, cache or not', async () => {
    await deposit(t, pw, 'n-alice', '1');
    const { id, key } = await createKey({ user: 'n-alice' });
    expect((await openai(key).chat.completions.create(ask)).choices).toHaveLength(1);
    // What another instance's revokeUserKey does, written directly: this instance's cache still holds the key.
    await t.db.query(`update user_key set revoked_at = now() where id = $1`, [id]);
    await t.db.query(`select pg_notify('user_key_changed', $1)`, [id]);
    await eventually(
      () => t.app.services.userKeys.authenticate(key),
      (a) => a === null,
    );
    const r = await openai(key)
      .chat.completions.create(ask)
      .catch((e) => e);
    expect(r.status).toBe(401);
  });

  it('SHARED: a key of an end user not connected gets the not_connected reply', async () => {
    const spw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const { key } = await createKey({ user: 's-alice' }, spw);
    const out: any = await openai(key).chat.completions.create(ask);
    expect(out.paywall.reason).toBe('not_connected');
    expect(fake.requests).toHaveLength(0);
    await connectShared(t, spw, 's-alice', 1_000_000n);
    const ok: any = await openai(key).chat.completions.create(ask);
    expect(ok.paywall).toBeUndefined();
    expect(fake.requests).toHaveLength(1);
  });

  it("SHARED: over the key's limit, the reply links the wallet page, where the key is listed", async () => {
    const spw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    const { key } = await createKey({ user: 's-bob', limit: '0.000001', limit_period: 'total' }, spw);
    await connectShared(t, spw, 's-bob', 1_000_000n);
    const out: any = await openai(key).chat.completions.create(ask);
    expect(out.paywall).toMatchObject({ reason: 'key_limit_exceeded', url: `${t.url}/wallet` });
    expect(out.choices[0].message.content).toContain('This key has reached its spending limit');
    expect(fake.requests).toHaveLength(0);
  });
});

describe("the key's spending limit", () => {
  it("a limit that cannot afford the client's cap lowers it, says so in x-paywall-cap (JSON and stream), and a cap it affords goes unchanged", async () => {
    await deposit(t, pw, 'capk-alice', '5');
    const { key } = await createKey({ user: 'capk-alice', limit: '0.005', limit_period: 'total' });
    for (const stream of [false, true]) {
      const { data, response } = await openai(key)
        .chat.completions.create({ ...ask, max_tokens: 900, stream } as any)
        .withResponse();
      if (stream) for await (const _ of data as any);
      const sent = fake.requests.at(-1)!.body.max_tokens;
      // The balance affords 900 tokens; the key's rest (5,000 raw units, less the request's 1,500) does not.
      expect(sent).toBeLessThan(900);
      expect(sent).toBeGreaterThan(0);
      expect(response.headers.get('x-paywall-cap')).toBe(String(sent));
    }
    const { response } = await openai(key)
      .chat.completions.create({ ...ask, max_tokens: 50 })
      .withResponse();
    expect(fake.requests.at(-1)!.body.max_tokens).toBe(50);
    expect(response.headers.get('x-paywall-cap')).toBeNull();
  });

  it('a 0.01 USDC daily limit: 20 concurrent requests never spend past it, exact to the raw unit', async () => {
    await deposit(t, pw, 'lim-alice', '5');
    const { id, key } = await createKey({ user: 'lim-alice', limit: '0.01', limit_period: 'day' });
    fake.behavior = { delayMs: 30 };
    const client = openai(key);
    const answers: any[] = await Promise.all(
      Array.from({ length: 20 }, () => client.chat.completions.create({ ...ask, max_tokens: 100 })),
    );
    const blocked = answers.filter((a) => a.paywall);
    expect(blocked.length).toBeGreaterThan(0);
    for (const b of blocked) {
      expect(b.paywall.reason).toBe('key_limit_exceeded');
      expect(b.choices[0].message.content).toContain('0.01 USDC per day');
    }
    const charges = await chargesOf(t, pw, 'lim-alice');
    const spent = charges.reduce((s, c) => s + BigInt(c.amount), 0n);
    expect(spent).toBeLessThanOrEqual(10_000n);
    expect(charges.every((c) => c.status === 'completed')).toBe(true);
    expect(BigInt(charges.length) * CHAT_RAW).toBe(spent);
    // The key's count is what its charges took (settlements corrected the holds), and the balance agrees.
    const [k] = await t.db.query<any>(`select limit_spent_raw::text as s from user_key where id = $1`, [id]);
    expect(BigInt(k.s)).toBe(spent);
    expect((await money(t, pw, 'lim-alice')).balance).toBe(5_000_000n - spent);
    const list = await t.rest('GET', '/v1/user/keys?user=lim-alice', { token: pw.apiKey });
    expect(list.body.data[0].limit).toMatchObject({ amount: '0.010000', period: 'day' });
    expect(BigInt(Math.round(Number(list.body.data[0].limit.spent) * 1e6))).toBe(spent);

    // Messages over the limit: Anthropic's blocked message (200, end_turn), nothing forwarded.
    await t.db.query(`update user_key set limit_spent_raw = limit_raw where id = $1`, [id]);
    const before = fake.requests.length;
    const blockedMsg: any = await new Anthropic({
      apiKey: key,
      baseURL: `${t.url}/u/lim-alice`,
      maxRetries: 0,
    }).messages.create({
      model: MODEL,
      max_tokens: 50,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(blockedMsg).toMatchObject({
      type: 'message',
      role: 'assistant',
      stop_reason: 'end_turn',
      paywall: { reason: 'key_limit_exceeded', url: null },
    });
    expect(blockedMsg.content[0].text).toContain(
      'This key has reached its spending limit of 0.01 USDC per day.',
    );
    expect(fake.requests.length).toBe(before);

    // Embeddings over the limit: 402 key_limit_exceeded.
    const emb = await t.rest('POST', '/v1/embeddings', {
      token: key,
      body: { model: MODEL, input: 'hello' },
    });
    expect([emb.status, emb.body.error?.code, emb.body.paywall?.reason]).toEqual([
      402,
      'key_limit_exceeded',
      'key_limit_exceeded',
    ]);
    await expectLedgerProven(t.db);
  });
});
