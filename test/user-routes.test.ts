import { requestHash } from '../src/modules/ledger/idempotency.service.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, setHeld, userAccount, userTransfers } from './helpers/ledger.js';
import { connectEndUser, createWallet } from './helpers/wallet-fixtures.js';

/** The REST user routes (`/v1/user/*`, `/v1/u/{user}/user/*`) against the real service. */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

type Pw = { id: string; apiKey: string };

/** What a user's money looks like in the database: balance, its ledger, and the events of the paywall. */
async function snapshot(pw: Pw, user: string) {
  const u = await userAccount(t.db, pw.id, user);
  const ledger = u
    ? (await userTransfers(t.db, u.id)).map(({ kind, amount, after }) => ({ kind, amount, after }))
    : [];
  const events = await t.db.query<any>(`select type from event where paywall_id = $1 order by seq`, [pw.id]);
  const charges = await t.db.query<any>(`select status from charge where paywall_id = $1`, [pw.id]);
  return {
    user: (u ? { id: u.id, balance: u.balance, held: u.held } : null) as any,
    ledger,
    events: events.map((e) => e.type),
    charges: charges.length,
  };
}

const eventsOf = (pw: Pw, type: string) =>
  t.db.query<any>(
    `select data, subject, trigger, metadata from event where paywall_id = $1 and type = $2 order by seq`,
    [pw.id, type],
  );

const deposit = (pw: Pw, body: unknown, headers?: Record<string, string>) =>
  t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body, headers });
const charge = (pw: Pw, body: unknown, headers?: Record<string, string>) =>
  t.rest('POST', '/v1/user/charge', { token: pw.apiKey, body, headers });

const BAD_AMOUNTS: unknown[] = [
  '-1',
  '0',
  '1e3',
  'abc',
  '0.0000001',
  5,
  undefined,
  null,
  '',
  ' 1',
  '1.',
  '.5',
  '01',
  '1000000000.000001',
  '0x10',
  true,
];

describe('POST /v1/user/balance/deposit', () => {
  it('credits exact raw units and records one ledger entry and one deposit.created event', async () => {
    const pw = await t.createPaywall();
    const r = await deposit(pw, { user: 'alice', amount: '1.5', metadata: { order: 'o-1' } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ balance: '1500000', balanceFormatted: '1.500000' });
    const s = await snapshot(pw, 'alice');
    expect(s.user.balance).toBe('1500000');
    expect(s.ledger).toEqual([{ kind: 'deposit', amount: '1500000', after: '1500000' }]);
    expect(s.events).toEqual(['paywall.balance.deposit.created']);
    const entry = await userTransfers(t.db, s.user.id);
    expect(entry[0].metadata).toEqual({ order: 'o-1' });
    await expectLedgerProven(t.db);
    const [ev] = await eventsOf(pw, 'paywall.balance.deposit.created');
    const owner = await t.db.query<any>(`select owner_id from paywall where id = $1`, [pw.id]);
    expect(ev.data).toEqual({
      paywallId: pw.id,
      ownerUserId: owner[0].owner_id,
      walletUserId: s.user.id,
      externalUserId: 'alice',
      amount: '1.5',
      currency: 'USDC',
      source: 'api',
      activityId: entry[0].id,
    });
    expect(ev.subject).toEqual({ type: 'end_user', id: s.user.id, externalId: 'alice' });
    expect(ev.trigger).toEqual({ source: 'api', actorType: 'api_key', actorId: pw.id });
    expect(ev.metadata).toEqual({ order: 'o-1' });

    const more = await deposit(pw, { user: 'alice', amount: '0.000001' });
    expect(more.body).toEqual({ balance: '1500001', balanceFormatted: '1.500001' });
    const max = await deposit(pw, { user: 'bob', amount: '1000000000' });
    expect(max.body).toEqual({ balance: '1000000000000000', balanceFormatted: '1000000000.000000' });
  });

  it('refuses every malformed amount with a 400 naming `amount`, and changes nothing', async () => {
    const pw = await t.createPaywall();
    await deposit(pw, { user: 'alice', amount: '1' });
    const before = await snapshot(pw, 'alice');
    for (const amount of BAD_AMOUNTS) {
      const r = await deposit(pw, { user: 'alice', amount });
      expect({ amount, status: r.status }).toEqual({ amount, status: 400 });
      expect(r.body.error).toMatchObject({
        type: 'invalid_request_error',
        param: 'amount',
        code: 'invalid_amount',
      });
      expect(r.body.error.message).not.toMatch(/\bat\s+\S+\.(ts|js):\d+/);
    }
    expect(await snapshot(pw, 'alice')).toEqual(before);
    // Nor does a refused first deposit create the user.
    expect((await deposit(pw, { user: 'newbie', amount: '-1' })).status).toBe(400);
    expect((await snapshot(pw, 'newbie')).user).toBeNull();
    await expectLedgerProven(t.db);
  });

  it('validates metadata: an object of at most 50 keys and 8 KiB', async () => {
    const pw = await t.createPaywall();
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i]));
    for (const metadata of [[1, 2], 'x', 3, many, { big: 'x'.repeat(9000) }]) {
      const r = await deposit(pw, { user: 'm', amount: '1', metadata });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'metadata' });
    }
    expect((await snapshot(pw, 'm')).user).toBeNull();
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]));
    expect((await deposit(pw, { user: 'm', amount: '1', metadata: fifty })).status).toBe(200);
    await expectLedgerProven(t.db);
  });

  it('refuses a user given twice in the query (?user=a&user=b) with a 400 saying so, on every route', async () => {
    const pw = await t.createPaywall();
    for (const [method, path] of [
      ['GET', '/v1/user/balance?user=a&user=b'],
      ['POST', '/v1/chat/completions?user=a&user=b'],
      ['POST', '/v1/responses?user=a&user=b'],
      ['POST', '/v1/images/generations?user=a&user=b'],
    ] as const) {
      const r = await t.rest(method, path, {
        token: pw.apiKey,
        body: method === 'POST' ? { model: 'gpt-4o-mini', messages: [], input: 'x', prompt: 'x' } : undefined,
      });
      expect({ path, status: r.status, error: r.body.error }).toEqual({
        path,
        status: 400,
        error: expect.objectContaining({
          type: 'invalid_request_error',
          param: 'user',
          message: 'user is given more than once in the query.',
        }),
      });
    }
    expect((await snapshot(pw, 'a')).user).toBeNull();
  });

  it("says what is wrong with a field in the REST client's words, not GraphQL's", async () => {
    const pw = await t.createPaywall();
    const cases: [string, unknown, string][] = [
      ['/v1/user/charge', { user: 'ann' }, 'amount is required.'],
      ['/v1/user/charge', { user: 'ann', amount: 1 }, 'amount must be a string.'],
      ['/v1/user/balance/deposit', { user: 'ann', amount: true }, 'amount must be a string.'],
      ['/v1/webhooks/subscriptions', { events: ['*'] }, 'url is required.'],
      [
        '/v1/user/balance/deposit',
        { user: 'ann', amount: '1', metadata: 'x' },
        'metadata must be a JSON object.',
      ],
      ['/v1/user/charge', { user: 'ann', amount: '1', metadata: [1, 2] }, 'metadata must be a JSON object.'],
    ];
    for (const [path, body, message] of cases) {
      const r = await t.rest('POST', path, { token: pw.apiKey, body });
      expect({ path, status: r.status, message: r.body.error.message }).toEqual({
        path,
        status: 400,
        message,
      });
      expect(r.body.error.message).not.toMatch(/Variable|input\.|String!|JSONObject/);
    }
  });

  it('needs a user: none given is 400 missing_user; the header wins over the body', async () => {
    const pw = await t.createPaywall();
    for (const body of [{ amount: '1' }, { amount: '1', user: '' }, { amount: '1', user: '   ' }]) {
      const r = await deposit(pw, body);
      expect(r.status).toBe(400);
      expect(r.body.error).toEqual({
        message: expect.any(String),
        type: 'invalid_request_error',
        param: 'user',
        code: 'missing_user',
      });
    }
    const bad = await deposit(pw, { amount: '1', user: 42 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('user');
    const long = await deposit(pw, { amount: '1', user: 'x'.repeat(257) });
    expect(long.status).toBe(400);
    expect(long.body.error.param).toBe('user');

    const r = await deposit(pw, { user: 'body-user', amount: '2' }, { 'X-Paywall-User': 'header-user' });
    expect(r.status).toBe(200);
    expect((await snapshot(pw, 'header-user')).user.balance).toBe('2000000');
    expect((await snapshot(pw, 'body-user')).user).toBeNull();
    const events = await t.db.query(`select 1 from event where paywall_id = $1`, [pw.id]);
    expect(events).toHaveLength(1);
    await expectLedgerProven(t.db);
  });

  it('is refused on a SHARED paywall (400 unsupported_in_mode), nothing changed', async () => {
    const pw = await t.createPaywall('SHARED');
    const r = await deposit(pw, { user: 'sam', amount: '1' });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_in_mode' });
    const s = await snapshot(pw, 'sam');
    expect(s.user).toBeNull();
    expect(s.events).toEqual([]);
  });

  it('a body that is not a JSON object is a 400', async () => {
    const pw = await t.createPaywall();
    for (const body of ['[1,2]', '"x"', '{bad json']) {
      const r = await deposit(pw, body);
      expect(r.status).toBe(400);
      expect(r.body.error.type).toBe('invalid_request_error');
    }
  });
});

describe('a body the service cannot read says why', () => {
  it('JSON sent without `Content-Type: application/json` (curl -d alone): a 400 naming the header; nothing changed', async () => {
    const pw = await t.createPaywall();
    const before = await snapshot(pw, 'ct-u');
    for (const path of [
      '/v1/user/balance/deposit',
      '/v1/user/charge',
      '/v1/chat/completions',
      '/v1/embeddings',
    ]) {
      for (const contentType of [undefined, 'application/x-www-form-urlencoded', 'text/plain']) {
        const res = await fetch(t.url + path, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${pw.apiKey}`,
            ...(contentType ? { 'content-type': contentType } : {}),
          },
          body: JSON.stringify({ user: 'ct-u', amount: '1', model: 'm', input: 'x', messages: [] }),
        });
        const body = (await res.json()) as any;
        expect([path, res.status, body.error.type]).toEqual([path, 400, 'invalid_request_error']);
        expect(body.error.message).toMatch(/Content-Type: application\/json/);
      }
    }
    expect(await snapshot(pw, 'ct-u')).toEqual(before);
  });

  it('valid JSON that is not an object ("x", null, 1) is "must be a JSON object", not "not valid JSON"', async () => {
    const pw = await t.createPaywall();
    for (const body of ['"x"', 'null', '1', 'true']) {
      const r = await deposit(pw, body);
      expect([r.status, r.body.error.type]).toEqual([400, 'invalid_request_error']);
      expect(r.body.error.message).toBe('request body must be a JSON object');
    }
    const bad = await deposit(pw, '{bad json');
    expect(bad.body.error).toMatchObject({ message: 'request body is not valid JSON', code: 'invalid_json' });
  });
});

describe('POST /v1/user/charge', () => {
  it('debits the free balance: charge row, negative ledger entry, charge.created + charge.completed', async () => {
    const pw = await t.createPaywall();
    await deposit(pw, { user: 'carl', amount: '1' });
    const r = await charge(pw, { user: 'carl', amount: '0.25', metadata: { run: 'r1' } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      success: true,
      message: 'Charged 0.25 USDC.',
      chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    const s = await snapshot(pw, 'carl');
    expect(s.user.balance).toBe('750000');
    expect(s.ledger).toEqual([
      { kind: 'deposit', amount: '1000000', after: '1000000' },
      { kind: 'charge', amount: '-250000', after: '750000' },
    ]);
    expect(s.events).toEqual([
      'paywall.balance.deposit.created',
      'paywall.balance.charge.created',
      'paywall.balance.charge.completed',
    ]);
    const [c] = await t.db.query<any>(
      `select id, kind, status, amount_raw::text as amount, metadata, error_code from charge where paywall_id = $1`,
      [pw.id],
    );
    expect(c).toMatchObject({
      kind: 'manual',
      status: 'completed',
      amount: '250000',
      metadata: { run: 'r1' },
      error_code: null,
    });
    const [le] = (await userTransfers(t.db, s.user.id)).filter((x) => x.kind === 'charge');
    expect(le.chargeId).toBe(c.id);
    await expectLedgerProven(t.db);
    const owner = (await t.db.query<any>(`select owner_id from paywall where id = $1`, [pw.id]))[0].owner_id;
    const [created] = await eventsOf(pw, 'paywall.balance.charge.created');
    expect(created.data).toEqual({
      paywallId: pw.id,
      ownerUserId: owner,
      walletUserId: s.user.id,
      activityId: c.id,
      amount: '0.25',
      processingFeeAmount: '0',
    });
    expect(created.subject).toEqual({ type: 'charge', id: c.id, externalId: 'carl' });
    const [completed] = await eventsOf(pw, 'paywall.balance.charge.completed');
    expect(completed.data).toEqual({
      paywallId: pw.id,
      ownerUserId: owner,
      activityId: c.id,
      settlementReference: le.id,
    });
    // Exactly the whole free balance may be charged.
    expect((await charge(pw, { user: 'carl', amount: '0.75' })).body.success).toBe(true);
    expect((await snapshot(pw, 'carl')).user.balance).toBe('0');
  });

  it('short balance: success false, a top-up link, a failed charge with charge.failed + depleted; balance untouched', async () => {
    const pw = await t.createPaywall();
    await deposit(pw, { user: 'dora', amount: '0.5' });
    const r = await charge(pw, { user: 'dora', amount: '0.500001' });
    expect(r.status).toBe(200);
    const url = `${t.url}/topup/${pw.id}?user=dora`;
    expect(r.body).toEqual({
      success: false,
      message: `Insufficient balance: 0.5 USDC available, 0.500001 USDC requested. Top up here: ${url}`,
      url,
      errorCode: 'insufficient_balance',
      chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    const s = await snapshot(pw, 'dora');
    expect(s.user.balance).toBe('500000');
    expect(s.ledger).toHaveLength(1);
    const [c] = await t.db.query<any>(
      `select id, status, error_code, amount_raw::text as amount from charge where paywall_id = $1`,
      [pw.id],
    );
    expect(c).toMatchObject({ status: 'failed', error_code: 'insufficient_balance', amount: '500001' });
    const owner = (await t.db.query<any>(`select owner_id from paywall where id = $1`, [pw.id]))[0].owner_id;
    expect((await eventsOf(pw, 'paywall.balance.charge.failed')).map((e) => e.data)).toEqual([
      {
        paywallId: pw.id,
        ownerUserId: owner,
        walletUserId: s.user.id,
        activityId: c.id,
        amount: '0.500001',
        errorCode: 'insufficient_balance',
      },
    ]);
    expect((await eventsOf(pw, 'paywall.balance.depleted')).map((e) => e.data)).toEqual([
      {
        paywallId: pw.id,
        ownerUserId: owner,
        walletUserId: s.user.id,
        requestedAmount: '0.500001',
        availableBalance: '0.5',
      },
    ]);
    expect(await eventsOf(pw, 'paywall.balance.charge.created')).toHaveLength(0);
    // Holds count against the free balance: with 0.4 held only 0.1 can be charged.
    // (A hold set by hand, without its charge row: the ledger proof is not run while it is in place.)
    await setHeld(t.db, s.user.id, 400000);
    const held = await charge(pw, { user: 'dora', amount: '0.2' });
    expect(held.body.success).toBe(false);
    expect(held.body.message).toMatch(/^Insufficient balance: 0\.1 USDC available, 0\.2 USDC requested/);
    expect((await charge(pw, { user: 'dora', amount: '0.1' })).body.success).toBe(true);
    await setHeld(t.db, s.user.id, 0);
    await expectLedgerProven(t.db);
  });

  it('uses the paywall top-up URL when set; a brand-new user is refused, not an error', async () => {
    const pw = await t.createPaywall();
    await t.gql(
      pw.apiKey,
      `mutation { updatePaywall(input: {topupUrl: "https://shop.example/credits"}) { id } }`,
    );
    const r = await charge(pw, { user: 'new one', amount: '1' });
    expect(r.body).toMatchObject({ success: false, url: 'https://shop.example/credits?user=new+one' });
    await expectLedgerProven(t.db);
  });

  it('SHARED: an unconnected user gets a connect link (charge.failed not_connected), a connected one is charged', async () => {
    const pw = await t.createPaywall('SHARED');
    const r = await charge(pw, { user: 'sue', amount: '0.1' });
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(false);
    expect(r.body.url).toMatch(new RegExp(`^${t.url}/connect/${pw.id}\\?request=[0-9a-f-]{36}$`));
    expect(r.body.message).toContain('not connected');
    expect(r.body.message).toContain(r.body.url);
    const failed = await eventsOf(pw, 'paywall.balance.charge.failed');
    expect(failed.map((e) => e.data)).toEqual([
      expect.objectContaining({ walletUserId: null, amount: '0.1', errorCode: 'not_connected' }),
    ]);
    expect(await eventsOf(pw, 'paywall.balance.depleted')).toHaveLength(0);
    const requested = await eventsOf(pw, 'paywall.authorization.requested');
    expect(requested.map((e) => e.data.approvalUrl)).toEqual([r.body.url]);

    // Connect the user to a wallet user holding 1 USDC (what the hosted wallet pages do).
    const wallet = await createWallet(t.db, { fundRaw: 1_000_000n });
    await connectEndUser(t.db, pw.id, 'sue', wallet);
    const ok = await charge(pw, { user: 'sue', amount: '0.1' });
    expect(ok.body).toEqual({
      success: true,
      message: 'Charged 0.1 USDC.',
      chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    const [created] = await eventsOf(pw, 'paywall.balance.charge.created');
    expect(created.data.walletUserId).toBe(wallet.walletUserId);
    expect((await snapshot(pw, 'sue')).user.balance).toBe('900000');
    await expectLedgerProven(t.db);
  });

  it('refuses malformed amounts and missing users like deposit, nothing recorded', async () => {
    const pw = await t.createPaywall();
    await deposit(pw, { user: 'eve', amount: '1' });
    const before = await snapshot(pw, 'eve');
    for (const amount of BAD_AMOUNTS) {
      const r = await charge(pw, { user: 'eve', amount });
      expect({ amount, status: r.status }).toEqual({ amount, status: 400 });
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'amount' });
    }
    const none = await charge(pw, { amount: '1' });
    expect(none.body.error).toMatchObject({ param: 'user', code: 'missing_user' });
    expect(await snapshot(pw, 'eve')).toEqual(before);
    await expectLedgerProven(t.db);
  });
});

describe('GET /v1/user/balance, /balance/topup, /connect, /disconnect', () => {
  it('balance with trial credits: the first read is a first sight, granting them once', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, `mutation { updatePaywall(input: {trialCredits: "0.25"}) { id } }`);
    for (let i = 0; i < 2; i++) {
      const r = await t.rest('GET', '/v1/user/balance?user=newbie', { token: pw.apiKey });
      expect(r.body).toEqual({ balance: '250000', balanceFormatted: '0.250000' });
    }
    const granted = await t.db.query<any>(`select data from event where paywall_id = $1 and type = $2`, [
      pw.id,
      'paywall.balance.trial.granted',
    ]);
    expect(granted).toHaveLength(1);
    expect(granted[0].data.credits).toBe('0.25');
    await expectLedgerProven(t.db);
  });

  it('balance: the free balance; an unknown user reads 0 and is not created', async () => {
    const pw = await t.createPaywall();
    const unknown = await t.rest('GET', '/v1/user/balance?user=ghost', { token: pw.apiKey });
    expect(unknown.status).toBe(200);
    expect(unknown.body).toEqual({ balance: '0', balanceFormatted: '0.000000' });
    expect((await snapshot(pw, 'ghost')).user).toBeNull();

    await deposit(pw, { user: 'fay', amount: '3.25' });
    const r = await t.rest('GET', '/v1/user/balance?user=fay', { token: pw.apiKey });
    expect(r.body).toEqual({ balance: '3250000', balanceFormatted: '3.250000' });
    const viaHeader = await t.rest('GET', '/v1/user/balance', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': 'fay' },
    });
    expect(viaHeader.body.balance).toBe('3250000');
    const [u] = await t.db.query<any>(
      `select id from end_user where paywall_id = $1 and external_id = 'fay'`,
      [pw.id],
    );
    await setHeld(t.db, u.id, 250000);
    const held = await t.rest('GET', '/v1/user/balance?user=fay', { token: pw.apiKey });
    expect(held.body).toEqual({ balance: '3000000', balanceFormatted: '3.000000' });
    await setHeld(t.db, u.id, 0);
    // The hand-set hold (no charge row behind it) is gone again: only now can the held amounts be proven.
    await expectLedgerProven(t.db);
  });

  it('topup: a link for the user and a topup.link.created event', async () => {
    const pw = await t.createPaywall();
    const r = await t.rest('GET', '/v1/user/balance/topup?user=gus', { token: pw.apiKey });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ url: `${t.url}/topup/${pw.id}?user=gus` });
    const [u] = await t.db.query<any>(
      `select id from end_user where paywall_id = $1 and external_id = 'gus'`,
      [pw.id],
    );
    expect((await eventsOf(pw, 'paywall.balance.topup.link.created')).map((e) => e.data)).toEqual([
      expect.objectContaining({ walletUserId: u.id, redirectUrl: r.body.url, checkoutSessionId: null }),
    ]);
    const shared = await t.createPaywall('SHARED');
    const s = await t.rest('GET', '/v1/user/balance/topup?user=gus', { token: shared.apiKey });
    expect(s.body).toEqual({ url: `${t.url}/wallet/topup?paywall=${shared.id}&user=gus` });
  });

  it('connect: DEFAULT users are connected; SHARED users get a link until they connect', async () => {
    const pw = await t.createPaywall();
    const r = await t.rest('GET', '/v1/user/connect?user=hal', { token: pw.apiKey });
    expect(r.status).toBe(200);
    const [u] = await t.db.query<any>(
      `select id, created_at from end_user where paywall_id = $1 and external_id = 'hal'`,
      [pw.id],
    );
    expect(r.body).toEqual({
      connected: true,
      connectedUser: {
        paywallKeyId: pw.id,
        userId: u.id,
        externalUserId: 'hal',
        createdAt: new Date(u.created_at).toISOString(),
      },
      message: expect.any(String),
    });

    const shared = await t.createPaywall('SHARED');
    const s = await t.rest('GET', '/v1/user/connect?user=hal', { token: shared.apiKey });
    expect(s.body).toEqual({
      connected: false,
      url: expect.stringMatching(new RegExp(`^${t.url}/connect/${shared.id}\\?request=[0-9a-f-]{36}$`)),
      message: expect.stringContaining(s.body.url),
    });
    const requested = await eventsOf(shared, 'paywall.authorization.requested');
    expect(requested).toHaveLength(1);
    expect(requested[0].data).toMatchObject({
      externalUserId: 'hal',
      approvalUrl: s.body.url,
      mode: 'shared',
    });

    const wallet = await createWallet(t.db);
    await connectEndUser(t.db, shared.id, 'hal', wallet);
    const c = await t.rest('GET', '/v1/user/connect?user=hal', { token: shared.apiKey });
    expect(c.body).toMatchObject({
      connected: true,
      connectedUser: { paywallKeyId: shared.id, userId: wallet.walletUserId, externalUserId: 'hal' },
    });
  });

  it('connect: one pending link per user, handed out again (one row; each hand-out announced with the same requestId) until decided or expired', async () => {
    const shared = await t.createPaywall('SHARED');
    const rows = () =>
      t.db.query<any>(
        `select r.id, r.status, r.expires_at from connect_request r join end_user e on e.id = r.end_user_id
          where r.paywall_id = $1 and e.external_id = 'rey' order by r.created_at`,
        [shared.id],
      );
    const first = await t.rest('GET', '/v1/user/connect?user=rey', { token: shared.apiKey });
    const [before] = await rows();
    const second = await t.rest('GET', '/v1/user/connect?user=rey', { token: shared.apiKey });
    expect(second.body.url).toBe(first.body.url);
    // A refused charge hands out the same link too.
    const refused = await charge(shared, { user: 'rey', amount: '0.1' });
    expect(refused.body).toMatchObject({ success: false, errorCode: 'not_connected', url: first.body.url });
    const stored = await rows();
    expect(stored).toHaveLength(1);
    expect(new URL(first.body.url).searchParams.get('request')).toBe(stored[0].id);
    // Handing it out again starts its 24 hours anew.
    expect(new Date(stored[0].expires_at).getTime()).toBeGreaterThanOrEqual(
      new Date(before.expires_at).getTime(),
    );
    const requested = await eventsOf(shared, 'paywall.authorization.requested');
    // connect, connect, refused charge: three hand-outs of one request.
    expect(requested.map((e) => e.data.requestId)).toEqual([stored[0].id, stored[0].id, stored[0].id]);

    // Once it expired (or was decided), the next call makes a new request and says so again.
    await t.db.query(`update connect_request set expires_at = now() - interval '1 second' where id = $1`, [
      stored[0].id,
    ]);
    const third = await t.rest('GET', '/v1/user/connect?user=rey', { token: shared.apiKey });
    expect(third.body.url).not.toBe(first.body.url);
    expect(await rows()).toHaveLength(2);
    const after = await eventsOf(shared, 'paywall.authorization.requested');
    expect(after).toHaveLength(4);
    expect(after[3].data.requestId).not.toBe(stored[0].id);
    // Concurrent first calls of another user converge on one request.
    const urls = await Promise.all(
      Array.from({ length: 5 }, () => t.rest('GET', '/v1/user/connect?user=rin', { token: shared.apiKey })),
    );
    expect(new Set(urls.map((u) => u.body.url)).size).toBe(1);
  });

  it('disconnect: DEFAULT changes nothing (success false); SHARED revokes and says whether it did', async () => {
    const pw = await t.createPaywall();
    await deposit(pw, { user: 'ida', amount: '1' });
    const before = await snapshot(pw, 'ida');
    const d = await t.rest('GET', '/v1/user/disconnect?user=ida', { token: pw.apiKey });
    expect(d.status).toBe(200);
    expect(d.body).toEqual({
      success: false,
      message: expect.stringMatching(/^DEFAULT mode has no end-user authorization to revoke/),
    });
    expect(await snapshot(pw, 'ida')).toEqual(before);

    const shared = await t.createPaywall('SHARED');
    const never = await t.rest('GET', '/v1/user/disconnect?user=ida', { token: shared.apiKey });
    expect(never.body).toEqual({ success: true, message: expect.stringMatching(/not connected/) });
    await t.rest('GET', '/v1/user/connect?user=ida', { token: shared.apiKey });
    const { walletUserId: wallet, ...account } = await createWallet(t.db);
    await connectEndUser(t.db, shared.id, 'ida', { walletUserId: wallet, ...account });
    const r = await t.rest('GET', '/v1/user/disconnect?user=ida', { token: shared.apiKey });
    expect(r.body).toEqual({ success: true, message: expect.stringMatching(/was disconnected/) });
    const [u] = await t.db.query<any>(
      `select id, wallet_user_id, account_id, connected_at from end_user where paywall_id = $1 and external_id = 'ida'`,
      [shared.id],
    );
    expect(u).toMatchObject({ wallet_user_id: null, account_id: null, connected_at: null });
    const revoked = await eventsOf(shared, 'paywall.authorization.revoked');
    expect(revoked.map((e) => e.data)).toEqual([
      { paywallId: shared.id, ownerUserId: expect.any(String), externalUserId: 'ida', walletUserId: wallet },
    ]);
    // After the disconnect a charge gets a connect link again.
    const c = await charge(shared, { user: 'ida', amount: '0.1' });
    expect(c.body).toMatchObject({ success: false, url: expect.stringContaining('/connect/') });
    const again = await t.rest('GET', '/v1/user/disconnect?user=ida', { token: shared.apiKey });
    expect(again.body.message).toMatch(/not connected/);
    expect(await eventsOf(shared, 'paywall.authorization.revoked')).toHaveLength(1);
  });

  it('every GET route needs a user', async () => {
    const pw = await t.createPaywall();
    for (const path of [
      '/v1/user/balance',
      '/v1/user/balance/topup',
      '/v1/user/connect',
      '/v1/user/disconnect',
    ]) {
      const r = await t.rest('GET', path, { token: pw.apiKey });
      expect({ path, status: r.status, error: r.body.error }).toEqual({
        path,
        status: 400,
        error: {
          message: expect.any(String),
          type: 'invalid_request_error',
          param: 'user',
          code: 'missing_user',
        },
      });
    }
  });
});

describe('the user in the path: /v1/u/{user}/user/*', () => {
  it('an empty path user (/v1/u//…) is 400 missing_user on every route, chat included, and changes nothing', async () => {
    const pw = await t.createPaywall();
    for (const [method, path, body] of [
      ['GET', '/v1/u//user/balance', undefined],
      ['POST', '/v1/u//user/balance/deposit', { amount: '1' }],
      ['POST', '/v1/u//user/charge', { amount: '1' }],
      ['POST', '/v1/u//chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }],
      ['POST', '/v1/u//responses', { model: 'm', input: 'hi', user: 'bob' }],
    ] as const) {
      const r = await t.rest(method, path, { token: pw.apiKey, body });
      expect({ path, status: r.status, code: r.body.error?.code, param: r.body.error?.param }).toEqual({
        path,
        status: 400,
        code: 'missing_user',
        param: 'user',
      });
    }
    expect(await t.db.query('select 1 from end_user where paywall_id = $1', [pw.id])).toEqual([]);
  });

  it('names the user; a header or body user that disagrees is a 400', async () => {
    const pw = await t.createPaywall();
    const d = await t.rest('POST', '/v1/u/alice/user/balance/deposit', {
      token: pw.apiKey,
      body: { amount: '1' },
    });
    expect(d.body).toEqual({ balance: '1000000', balanceFormatted: '1.000000' });
    const b = await t.rest('GET', '/v1/u/alice/user/balance', { token: pw.apiKey });
    expect(b.body).toEqual({ balance: '1000000', balanceFormatted: '1.000000' });
    const same = await t.rest('GET', '/v1/u/alice/user/balance', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': 'alice' },
    });
    expect(same.status).toBe(200);
    const c = await t.rest('POST', '/v1/u/alice/user/charge', {
      token: pw.apiKey,
      body: { user: 'alice', amount: '0.5' },
    });
    expect(c.body.success).toBe(true);

    const before = await snapshot(pw, 'alice');
    const header = await t.rest('GET', '/v1/u/alice/user/balance', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': 'bob' },
    });
    expect(header.status).toBe(400);
    expect(header.body.error).toMatchObject({ type: 'invalid_request_error', param: 'user' });
    const body = await t.rest('POST', '/v1/u/alice/user/charge', {
      token: pw.apiKey,
      body: { user: 'bob', amount: '0.1' },
    });
    expect(body.status).toBe(400);
    const query = await t.rest('GET', '/v1/u/alice/user/balance?user=bob', { token: pw.apiKey });
    expect(query.status).toBe(400);
    expect(await snapshot(pw, 'alice')).toEqual(before);
    expect((await snapshot(pw, 'bob')).user).toBeNull();
    await expectLedgerProven(t.db);
  });
});

describe('authentication and isolation', () => {
  const routes: [string, string, unknown?][] = [
    ['POST', '/v1/user/balance/deposit', { user: 'a', amount: '1' }],
    ['POST', '/v1/user/charge', { user: 'a', amount: '1' }],
    ['GET', '/v1/user/balance?user=a'],
    ['GET', '/v1/user/balance/topup?user=a'],
    ['GET', '/v1/user/connect?user=a'],
    ['GET', '/v1/user/disconnect?user=a'],
    ['GET', '/v1/u/a/user/balance'],
  ];

  it('no key, an unknown key, an owner token or a rotated key: 401 on every route, nothing created', async () => {
    const pw = await t.createPaywall();
    const rot = await t.gql(pw.apiKey, `mutation { rotatePaywallSecret { apiKey } }`);
    const fresh = rot.data.rotatePaywallSecret.apiKey;
    for (const token of [null, 'pk_live_not-a-real-key', t.ownerToken, pw.apiKey]) {
      for (const [method, path, body] of routes) {
        const r = await t.rest(method, path, { token, body });
        expect({ token, path, status: r.status, type: r.body.error?.type }).toEqual({
          token,
          path,
          status: 401,
          type: 'authentication_error',
        });
      }
    }
    expect((await snapshot(pw, 'a')).user).toBeNull();
    expect((await t.rest('GET', '/v1/user/balance?user=a', { token: fresh })).status).toBe(200);
  });

  it("one paywall's key never reads or touches another paywall's user of the same name", async () => {
    const a = await t.createPaywall();
    const b = await t.createPaywall();
    await deposit(b, { user: 'same', amount: '5' });
    const bBefore = await snapshot(b, 'same');
    expect((await t.rest('GET', '/v1/user/balance?user=same', { token: a.apiKey })).body.balance).toBe('0');
    await deposit(a, { user: 'same', amount: '1' });
    const c = await charge(a, { user: 'same', amount: '2' });
    expect(c.body.success).toBe(false);
    expect(await snapshot(b, 'same')).toEqual(bBefore);
    expect((await snapshot(a, 'same')).user.balance).toBe('1000000');
    expect((await t.rest('GET', '/v1/user/balance?user=same', { token: b.apiKey })).body.balance).toBe(
      '5000000',
    );
    await expectLedgerProven(t.db);
  });
});

describe('Idempotency-Key (docs/reference.md §4)', () => {
  it('replays the first answer with Idempotent-Replayed: true; a different body is 422', async () => {
    const pw = await t.createPaywall();
    const h = { 'Idempotency-Key': 'order-1' };
    const first = await deposit(pw, { user: 'kim', amount: '1', metadata: { a: 1, b: { c: 2, d: 3 } } }, h);
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    await deposit(pw, { user: 'kim', amount: '0.5' });
    // Same JSON, other key order: the same request.
    const again = await deposit(pw, { metadata: { b: { d: 3, c: 2 }, a: 1 }, amount: '1', user: 'kim' }, h);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await snapshot(pw, 'kim')).ledger).toHaveLength(2);

    for (const body of [
      { user: 'kim', amount: '2', metadata: { a: 1, b: { c: 2, d: 3 } } },
      { user: 'kim', amount: '1.0', metadata: { a: 1, b: { c: 2, d: 3 } } },
      { user: 'kim', amount: '1' },
      { user: 'other', amount: '1', metadata: { a: 1, b: { c: 2, d: 3 } } },
    ]) {
      const r = await deposit(pw, body, h);
      expect(r.status).toBe(422);
      expect(r.body.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_reused' });
    }
    expect((await snapshot(pw, 'kim')).ledger).toHaveLength(2);
    // Keys are scoped per endpoint and per paywall.
    const asCharge = await charge(pw, { user: 'kim', amount: '0.1' }, h);
    expect(asCharge.body.success).toBe(true);
    expect(asCharge.headers.get('idempotent-replayed')).toBeNull();
    const other = await t.createPaywall();
    const elsewhere = await deposit(
      other,
      { user: 'kim', amount: '1', metadata: { a: 1, b: { c: 2, d: 3 } } },
      h,
    );
    expect(elsewhere.headers.get('idempotent-replayed')).toBeNull();
    expect((await snapshot(pw, 'kim')).user.balance).toBe('1400000');
    await expectLedgerProven(t.db);
  });

  it('a refused charge is an answer too: replayed, never retried against a later balance', async () => {
    const pw = await t.createPaywall();
    const h = { 'Idempotency-Key': 'charge-1' };
    const first = await charge(pw, { user: 'lou', amount: '1' }, h);
    expect(first.body.success).toBe(false);
    await deposit(pw, { user: 'lou', amount: '5' });
    const again = await charge(pw, { user: 'lou', amount: '1' }, h);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await snapshot(pw, 'lou')).user.balance).toBe('5000000');
    expect(await t.db.query(`select 1 from charge where paywall_id = $1`, [pw.id])).toHaveLength(1);
    await expectLedgerProven(t.db);
  });

  it('a stored refusal (unsupported_in_mode) is replayed with its status', async () => {
    const pw = await t.createPaywall('SHARED');
    const h = { 'Idempotency-Key': 'dep-1' };
    const first = await deposit(pw, { user: 'max', amount: '1' }, h);
    expect(first.status).toBe(400);
    const again = await deposit(pw, { user: 'max', amount: '1' }, h);
    expect(again.status).toBe(400);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it('in flight: 409; an abandoned claim (over 60 s, no answer) is taken over', async () => {
    const pw = await t.createPaywall();
    const body = { user: 'ned', amount: '1' };
    const hash = requestHash({ user: 'ned', amount: '1', metadata: null });
    await t.db.query(
      `insert into idempotency_key (paywall_id, endpoint, key, request_hash, created_at) values ($1, 'deposit', 'busy', $2, now())`,
      [pw.id, hash],
    );
    const busy = await deposit(pw, body, { 'Idempotency-Key': 'busy' });
    expect(busy.status).toBe(409);
    expect(busy.body.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_in_flight' });
    expect((await snapshot(pw, 'ned')).user).toBeNull();

    await t.db.query(
      `insert into idempotency_key (paywall_id, endpoint, key, request_hash, created_at)
       values ($1, 'deposit', 'stale', $2, now() - interval '61 seconds')`,
      [pw.id, hash],
    );
    const taken = await deposit(pw, body, { 'Idempotency-Key': 'stale' });
    expect(taken.status).toBe(200);
    expect(taken.headers.get('idempotent-replayed')).toBeNull();
    const replay = await deposit(pw, body, { 'Idempotency-Key': 'stale' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((await snapshot(pw, 'ned')).user.balance).toBe('1000000');
    const [row] = await t.db.query<any>(
      `select response_status, completed_at from idempotency_key where paywall_id = $1 and key = 'stale'`,
      [pw.id],
    );
    expect(row.response_status).toBe(200);
    expect(row.completed_at).not.toBeNull();
    await expectLedgerProven(t.db);
  });

  it('a malformed key is a 400 naming Idempotency-Key; a bad body stores nothing under the key', async () => {
    const pw = await t.createPaywall();
    for (const key of ['x'.repeat(256), 'tab\tkey', 'é']) {
      const r = await deposit(pw, { user: 'ola', amount: '1' }, { 'Idempotency-Key': key });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'Idempotency-Key' });
    }
    const okKey = 'k'.repeat(255);
    const bad = await deposit(pw, { user: 'ola', amount: 'abc' }, { 'Idempotency-Key': okKey });
    expect(bad.status).toBe(400);
    const good = await deposit(pw, { user: 'ola', amount: '1' }, { 'Idempotency-Key': okKey });
    expect(good.status).toBe(200);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
    expect((await snapshot(pw, 'ola')).ledger).toEqual([
      { kind: 'deposit', amount: '1000000', after: '1000000' },
    ]);
    await expectLedgerProven(t.db);
  });
});
