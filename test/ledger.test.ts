import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, setHeld, userAccount } from './helpers/ledger.js';

/** The GraphQL money operations, the ledger's invariants and atomicity, against the real service. */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

type Pw = { id: string; apiKey: string };

const USER_FIELDS = 'id externalId balance balanceFormatted held heldRaw connected connectedAt createdAt';
const DEPOSIT = `mutation($input: DepositInput!) {
  deposit(input: $input) { balance balanceFormatted ledgerEntryId replayed user { ${USER_FIELDS} } }
}`;
const CHARGE = `mutation($input: ChargeInput!) {
  charge(input: $input) {
    success message url errorCode balance balanceFormatted replayed
    charge { id kind status amount hold uncollected errorCode metadata createdAt settledAt }
    user { id balance }
  }
}`;

async function userRow(pw: Pw, externalId: string): Promise<any> {
  const u = await userAccount(t.db, pw.id, externalId);
  return u ? { id: u.id, balance: u.balance } : null;
}

const countRows = async (sql: string, params: unknown[]) => (await t.db.query(sql, params)).length;

describe('deposit (GraphQL)', () => {
  it('credits, returns the payload with the user, and records the event with a GraphQL trigger', async () => {
    const pw = await t.createPaywall();
    const r = await t.gql(pw.apiKey, DEPOSIT, {
      input: { user: 'ann', amount: '1.5', metadata: { src: 'gql' } },
    });
    expect(r.errors).toBeUndefined();
    const u = await userRow(pw, 'ann');
    expect(r.data.deposit).toEqual({
      balance: '1500000',
      balanceFormatted: '1.500000',
      ledgerEntryId: expect.any(String),
      replayed: false,
      user: {
        id: u.id,
        externalId: 'ann',
        balance: '1500000',
        balanceFormatted: '1.500000',
        held: '0.000000',
        heldRaw: '0',
        connected: true,
        connectedAt: null,
        createdAt: expect.any(String),
      },
    });
    const ev = await t.db.query<any>(`select data, trigger from event where paywall_id = $1`, [pw.id]);
    expect(ev).toHaveLength(1);
    expect(ev[0].data).toMatchObject({
      amount: '1.5',
      activityId: r.data.deposit.ledgerEntryId,
      source: 'api',
    });
    expect(ev[0].trigger).toEqual({ source: 'graphql', actorType: 'api_key', actorId: pw.id });
    await expectLedgerProven(t.db);
  });

  it('an owner names the paywall; without one it is a 400; another paywall id is not found', async () => {
    const pw = await t.createPaywall();
    const other = await t.createPaywall();
    const owned = await t.gql(t.ownerToken, DEPOSIT, {
      input: { paywallId: pw.id, user: 'own', amount: '2' },
    });
    expect(owned.data.deposit.balance).toBe('2000000');
    const ev = await t.db.query<any>(`select trigger from event where paywall_id = $1`, [pw.id]);
    expect(ev[0].trigger).toMatchObject({ source: 'graphql', actorType: 'owner' });
    const none = await t.gql(t.ownerToken, DEPOSIT, { input: { user: 'own', amount: '2' } });
    expect(none.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'paywallId' });
    const foreign = await t.gql(pw.apiKey, DEPOSIT, {
      input: { paywallId: other.id, user: 'own', amount: '2' },
    });
    expect(foreign.errors?.[0].extensions.code).toBe('NOT_FOUND');
    expect(await userRow(other, 'own')).toBeNull();
    const anon = await t.gql(null, DEPOSIT, { input: { user: 'own', amount: '2' } });
    expect(anon.status).toBe(401);
    expect(anon.errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
    expect((await userRow(pw, 'own')).balance).toBe('2000000');
    await expectLedgerProven(t.db);
  });

  it('bad amounts, metadata and modes are BAD_USER_INPUT naming the field; nothing changes', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'bea', amount: '1' } });
    for (const amount of ['-1', '0', '1e3', 'abc', '0.0000001', '1000000001']) {
      const r = await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'bea', amount } });
      expect(r.errors?.[0].extensions).toMatchObject({
        code: 'BAD_USER_INPUT',
        errorCode: 'invalid_amount',
        param: 'amount',
      });
    }
    const num = await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'bea', amount: 5 } });
    expect(num.errors?.[0].message).toMatch(/amount/);
    const meta = await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'bea', amount: '1', metadata: [1] } });
    expect(meta.errors?.[0].message).toMatch(/metadata/);
    const empty = await t.gql(pw.apiKey, DEPOSIT, { input: { user: '', amount: '1' } });
    expect(empty.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'user' });
    expect((await userRow(pw, 'bea')).balance).toBe('1000000');
    expect(await countRows(`select 1 from transfer where paywall_id = $1`, [pw.id])).toBe(1);

    const shared = await t.createPaywall('SHARED');
    const r = await t.gql(shared.apiKey, DEPOSIT, { input: { user: 'bea', amount: '1' } });
    expect(r.errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      errorCode: 'unsupported_in_mode',
    });
    expect(await userRow(shared, 'bea')).toBeNull();
    await expectLedgerProven(t.db);
  });

  it('idempotencyKey replays like the REST header, through the same keys', async () => {
    const pw = await t.createPaywall();
    const input = { user: 'cy', amount: '0.75', idempotencyKey: 'gql-1' };
    const first = await t.gql(pw.apiKey, DEPOSIT, { input });
    const again = await t.gql(pw.apiKey, DEPOSIT, { input });
    expect(first.data.deposit.replayed).toBe(false);
    expect(again.data.deposit).toMatchObject({
      replayed: true,
      ledgerEntryId: first.data.deposit.ledgerEntryId,
      balance: '750000',
    });
    const rest = await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'cy', amount: '0.75' },
      headers: { 'Idempotency-Key': 'gql-1' },
    });
    expect(rest.headers.get('idempotent-replayed')).toBe('true');
    expect(rest.body).toEqual({ balance: '750000', balanceFormatted: '0.750000' });
    const mismatch = await t.gql(pw.apiKey, DEPOSIT, { input: { ...input, amount: '1' } });
    expect(mismatch.errors?.[0].extensions).toMatchObject({
      code: 'UNPROCESSABLE',
      errorCode: 'idempotency_key_reused',
    });
    expect(await countRows(`select 1 from transfer where paywall_id = $1`, [pw.id])).toBe(1);
    await expectLedgerProven(t.db);
  });
});

describe('charge (GraphQL)', () => {
  it('success and refusal payloads', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'dan', amount: '1' } });
    const ok = await t.gql(pw.apiKey, CHARGE, {
      input: { user: 'dan', amount: '0.4', metadata: { job: 7 } },
    });
    expect(ok.errors).toBeUndefined();
    const u = await userRow(pw, 'dan');
    expect(ok.data.charge).toEqual({
      success: true,
      message: 'Charged 0.4 USDC.',
      url: null,
      errorCode: null,
      balance: '600000',
      balanceFormatted: '0.600000',
      replayed: false,
      charge: {
        id: expect.any(String),
        kind: 'manual',
        status: 'completed',
        amount: '0.400000',
        hold: '0.000000',
        uncollected: '0.000000',
        errorCode: null,
        metadata: { job: 7 },
        createdAt: expect.any(String),
        settledAt: expect.any(String),
      },
      user: { id: u.id, balance: '600000' },
    });
    const no = await t.gql(pw.apiKey, CHARGE, { input: { user: 'dan', amount: '0.6000001' } });
    expect(no.errors?.[0].extensions.param).toBe('amount');
    const short = await t.gql(pw.apiKey, CHARGE, { input: { user: 'dan', amount: '0.7' } });
    expect(short.data.charge).toMatchObject({
      success: false,
      url: `${t.url}/topup/${pw.id}?user=dan`,
      errorCode: 'insufficient_balance',
      balance: '600000',
      charge: { status: 'failed', amount: '0.700000', errorCode: 'insufficient_balance' },
    });
    expect(short.data.charge.message).toMatch(
      /^Insufficient balance: 0\.6 USDC available, 0\.7 USDC requested/,
    );
    expect((await userRow(pw, 'dan')).balance).toBe('600000');
    await expectLedgerProven(t.db);
  });
});

describe('queries: user, users, ledgerEntries, charges', () => {
  it('user: null when unknown or on another paywall; the free balance and the held amount', async () => {
    const a = await t.createPaywall();
    const b = await t.createPaywall();
    await t.gql(b.apiKey, DEPOSIT, { input: { user: 'eli', amount: '1' } });
    const q = `query($id: String!) { user(externalId: $id) { ${USER_FIELDS} } }`;
    expect((await t.gql(a.apiKey, q, { id: 'eli' })).data.user).toBeNull();
    expect(await userRow(a, 'eli')).toBeNull();
    const mine = await t.gql(b.apiKey, q, { id: 'eli' });
    expect(mine.data.user).toMatchObject({ externalId: 'eli', balance: '1000000', held: '0.000000' });
    // (A hold set by hand, without its charge row, to read it back.)
    await setHeld(t.db, (await userRow(b, 'eli'))!.id, 300000);
    const held = await t.gql(b.apiKey, q, { id: 'eli' });
    expect(held.data.user).toMatchObject({
      balance: '700000',
      balanceFormatted: '0.700000',
      held: '0.300000',
      heldRaw: '300000',
    });
    const owner = await t.gql(t.ownerToken, `{ user(paywallId: "${b.id}", externalId: "eli") { balance } }`);
    expect(owner.data.user.balance).toBe('700000');
    const cross = await t.gql(a.apiKey, `{ user(paywallId: "${b.id}", externalId: "eli") { balance } }`);
    expect(cross.errors?.[0].extensions.code).toBe('NOT_FOUND');
    await setHeld(t.db, (await userRow(b, 'eli'))!.id, 0);
    // The hand-set hold is gone again: only now can the held amounts be proven.
    await expectLedgerProven(t.db);
  });

  it('ledgerEntries: newest first, cursor pagination, exact amounts; bad first/after are refused', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, `mutation { updatePaywall(input: {trialCredits: "0.1"}) { id } }`);
    await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'fin', amount: '1', metadata: { n: 1 } } });
    const c = await t.gql(pw.apiKey, CHARGE, { input: { user: 'fin', amount: '0.3' } });
    await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'fin', amount: '2' } });
    await t.gql(pw.apiKey, CHARGE, { input: { user: 'fin', amount: '0.05' } });
    const q = `query($after: String, $first: Int) { user(externalId: "fin") { balance ledgerEntries(first: $first, after: $after) {
      edges { cursor node { id kind amount amountRaw balanceAfter chargeId metadata createdAt } } pageInfo { hasNextPage endCursor } } } }`;
    const p1 = await t.gql(pw.apiKey, q, { first: 2 });
    expect(p1.errors).toBeUndefined();
    expect(p1.data.user.balance).toBe('2750000');
    const conn1 = p1.data.user.ledgerEntries;
    expect(
      conn1.edges.map((e: any) => [e.node.kind, e.node.amount, e.node.amountRaw, e.node.balanceAfter]),
    ).toEqual([
      ['charge', '-0.050000', '-50000', '2.750000'],
      ['deposit', '2.000000', '2000000', '2.800000'],
    ]);
    expect(conn1.pageInfo).toEqual({ hasNextPage: true, endCursor: conn1.edges[1].cursor });
    const p2 = await t.gql(pw.apiKey, q, { first: 2, after: conn1.pageInfo.endCursor });
    const conn2 = p2.data.user.ledgerEntries;
    expect(conn2.edges.map((e: any) => [e.node.kind, e.node.amountRaw, e.node.chargeId])).toEqual([
      ['charge', '-300000', c.data.charge.charge.id],
      ['deposit', '1000000', null],
    ]);
    expect(conn2.edges[1].node.metadata).toEqual({ n: 1 });
    const p3 = await t.gql(pw.apiKey, q, { first: 2, after: conn2.pageInfo.endCursor });
    expect(p3.data.user.ledgerEntries.edges.map((e: any) => [e.node.kind, e.node.amountRaw])).toEqual([
      ['trial', '100000'],
    ]);
    expect(p3.data.user.ledgerEntries.pageInfo.hasNextPage).toBe(false);

    for (const vars of [{ first: 0 }, { first: 101 }, { first: -1 }, { after: 'not-a-cursor' }]) {
      const r = await t.gql(pw.apiKey, q, vars);
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT' });
    }
    expect((await t.gql(pw.apiKey, q, { first: 100 })).data.user.ledgerEntries.edges).toHaveLength(5);
    await expectLedgerProven(t.db);
  });

  it('charges: manual charges, completed and failed, newest first, paginated', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, DEPOSIT, { input: { user: 'gil', amount: '1' } });
    for (const amount of ['0.1', '5', '0.2'])
      await t.gql(pw.apiKey, CHARGE, { input: { user: 'gil', amount } });
    const q = `query($after: String) { user(externalId: "gil") { charges(first: 2, after: $after) {
      edges { cursor node { kind status amount errorCode model promptTokens completionTokens settledAt } } pageInfo { hasNextPage endCursor } } } }`;
    const p1 = (await t.gql(pw.apiKey, q)).data.user.charges;
    expect(p1.edges.map((e: any) => [e.node.status, e.node.amount, e.node.errorCode])).toEqual([
      ['completed', '0.200000', null],
      ['failed', '5.000000', 'insufficient_balance'],
    ]);
    expect(p1.edges[0].node).toMatchObject({
      kind: 'manual',
      model: null,
      promptTokens: null,
      completionTokens: null,
    });
    expect(p1.pageInfo.hasNextPage).toBe(true);
    const p2 = (await t.gql(pw.apiKey, q, { after: p1.pageInfo.endCursor })).data.user.charges;
    expect(p2.edges.map((e: any) => e.node.amount)).toEqual(['0.100000']);
    expect(p2.pageInfo).toEqual({ hasNextPage: false, endCursor: p2.edges[0].cursor });
    expect((await userRow(pw, 'gil')).balance).toBe('700000');
    await expectLedgerProven(t.db);
  });

  it("users: the paywall's users only, newest first, paginated, each with its own ledger (batched)", async () => {
    const pw = await t.createPaywall();
    const other = await t.createPaywall();
    await t.gql(other.apiKey, DEPOSIT, { input: { user: 'x', amount: '1' } });
    for (const [i, name] of ['u1', 'u2', 'u3', 'u4', 'u5'].entries())
      await t.gql(pw.apiKey, DEPOSIT, { input: { user: name, amount: `${i + 1}` } });
    const q = `query($first: Int, $after: String) { users(first: $first, after: $after) {
      edges { cursor node { externalId balance ledgerEntries(first: 5) { edges { node { amountRaw } } } } }
      pageInfo { hasNextPage endCursor } } }`;
    const p1 = (await t.gql(pw.apiKey, q, { first: 3 })).data.users;
    expect(p1.edges.map((e: any) => e.node.externalId)).toEqual(['u5', 'u4', 'u3']);
    for (const e of p1.edges)
      expect(e.node.ledgerEntries.edges.map((l: any) => l.node.amountRaw)).toEqual([e.node.balance]);
    const p2 = (await t.gql(pw.apiKey, q, { first: 3, after: p1.pageInfo.endCursor })).data.users;
    expect(p2.edges.map((e: any) => e.node.externalId)).toEqual(['u2', 'u1']);
    expect(p2.pageInfo.hasNextPage).toBe(false);
    await expectLedgerProven(t.db);

    const empty = await t.createPaywall();
    const none = (await t.gql(empty.apiKey, q, { first: 10 })).data.users;
    expect(none).toEqual({ edges: [], pageInfo: { hasNextPage: false, endCursor: null } });
    expect((await t.gql(pw.apiKey, q, { first: 101 })).errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      param: 'first',
    });
  });
});

describe('connection operations (GraphQL)', () => {
  it('connectUser, disconnectUser and topUpLink follow the paywall mode', async () => {
    const pw = await t.createPaywall();
    const shared = await t.createPaywall('SHARED');
    const ops = `mutation($u: String!) {
      connectUser(user: $u) { connected connectedUser { paywallKeyId userId externalUserId createdAt } message url }
      topUpLink(user: $u) { url }
    }`;
    const d = (await t.gql(pw.apiKey, ops, { u: 'hana' })).data;
    const u = await userRow(pw, 'hana');
    expect(d.connectUser).toMatchObject({
      connected: true,
      url: null,
      connectedUser: { paywallKeyId: pw.id, userId: u.id, externalUserId: 'hana' },
    });
    expect(d.topUpLink.url).toBe(`${t.url}/topup/${pw.id}?user=hana`);
    const s = (await t.gql(shared.apiKey, ops, { u: 'hana' })).data;
    expect(s.connectUser).toMatchObject({ connected: false, connectedUser: null });
    expect(s.connectUser.url).toMatch(new RegExp(`^${t.url}/connect/${shared.id}\\?request=[0-9a-f-]{36}$`));
    // The link names a stored request for this paywall and end user (the consent page decides exactly it).
    const requestId = new URL(s.connectUser.url).searchParams.get('request');
    const stored = await t.db.query<any>(
      `select r.status, e.external_id from connect_request r join end_user e on e.id = r.end_user_id
        where r.id = $1 and r.paywall_id = $2`,
      [requestId, shared.id],
    );
    expect(stored).toEqual([{ status: 'pending', external_id: 'hana' }]);
    expect(s.topUpLink.url).toBe(`${t.url}/wallet/topup?paywall=${shared.id}&user=hana`);

    const disc = `mutation($u: String!) { disconnectUser(user: $u) { success message } }`;
    expect((await t.gql(pw.apiKey, disc, { u: 'hana' })).data.disconnectUser.success).toBe(false);
    expect((await t.gql(shared.apiKey, disc, { u: 'hana' })).data.disconnectUser.success).toBe(true);
    const types = await t.db.query<any>(`select type from event where paywall_id = $1 order by seq`, [
      shared.id,
    ]);
    expect(types.map((e) => e.type)).toEqual([
      'paywall.authorization.requested',
      'paywall.balance.topup.link.created',
    ]);
  });
});

describe('ledger invariants and atomicity', () => {
  it('a failure after the debit rolls back balance, ledger, charge and events together', async () => {
    const pw = await t.createPaywall();
    await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'ivy', amount: '1' },
    });
    const state = async () => ({
      user: await userRow(pw, 'ivy'),
      ledger: await countRows(`select 1 from transfer where paywall_id = $1`, [pw.id]),
      charges: await countRows(`select 1 from charge where paywall_id = $1`, [pw.id]),
      events: await countRows(`select 1 from event where paywall_id = $1`, [pw.id]),
      keys: await countRows(`select 1 from idempotency_key where paywall_id = $1`, [pw.id]),
    });
    const before = await state();
    // The event insert is the last part of each money statement: make it fail for this paywall only.
    await t.db.query(`create or replace function test_fail_events() returns trigger language plpgsql as $$
      begin
        if new.paywall_id = '${pw.id}' then raise exception 'injected failure'; end if;
        return new;
      end $$`);
    await t.db.query(
      `create trigger test_fail_events before insert on event for each row execute function test_fail_events()`,
    );
    try {
      for (const [path, body] of [
        ['/v1/user/balance/deposit', { user: 'ivy', amount: '1' }],
        ['/v1/user/charge', { user: 'ivy', amount: '0.5' }],
        ['/v1/user/charge', { user: 'ivy', amount: '50' }],
      ] as const) {
        const r = await t.rest('POST', path, {
          token: pw.apiKey,
          body,
          headers: { 'Idempotency-Key': `atomic-${path}-${body.amount}` },
        });
        expect(r.status).toBe(500);
        expect(r.body).toEqual({
          error: { message: 'Internal server error', type: 'api_error', param: null, code: null },
        });
        const plain = await t.rest('POST', path, { token: pw.apiKey, body });
        expect(plain.status).toBe(500);
        const g = await t.gql(pw.apiKey, path.endsWith('charge') ? CHARGE : DEPOSIT, { input: body });
        expect(g.errors?.[0]).toMatchObject({
          message: 'Internal server error',
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        });
      }
      expect(await state()).toEqual(before);
    } finally {
      await t.db.query(`drop trigger test_fail_events on event`);
      await t.db.query(`drop function test_fail_events()`);
    }
    // The failed attempts released their keys: a retry with the same key applies, once.
    const retry = await t.rest('POST', '/v1/user/charge', {
      token: pw.apiKey,
      body: { user: 'ivy', amount: '0.5' },
      headers: { 'Idempotency-Key': 'atomic-/v1/user/charge-0.5' },
    });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(retry.body.success).toBe(true);
    expect((await userRow(pw, 'ivy')).balance).toBe('500000');
    await expectLedgerProven(t.db);
  });

  it('every account equals the sum of its transfers, all balances sum to 0; every transfer has its event', async () => {
    await expectLedgerProven(t.db);
    const kinds = await t.db.query<any>(
      `select kind, count(*)::int as n from transfer group by kind order by kind`,
    );
    const eventFor: Record<string, string> = {
      charge: 'paywall.balance.charge.completed',
      deposit: 'paywall.balance.deposit.created',
      trial: 'paywall.balance.trial.granted',
    };
    for (const { kind, n } of kinds) {
      if (!eventFor[kind]) continue;
      const ev = await t.db.query<any>(`select count(*)::int as n from event where type = $1`, [
        eventFor[kind],
      ]);
      expect({ kind, events: ev[0].n }).toEqual({ kind, events: n });
    }
    const orphans = await t.db.query<any>(
      `select x.id from transfer x where not exists (
         select 1 from event e where e.paywall_id = x.paywall_id
           and (e.data->>'activityId' = x.id::text or e.data->>'settlementReference' = x.id::text))`,
    );
    expect(orphans).toEqual([]);
  });

  it('counts ledger entries in /metrics', async () => {
    const r = await fetch(`${t.url}/metrics`);
    const text = await r.text();
    expect(text).toMatch(/ledger_entries_total\{kind="deposit"\} \d+/);
    expect(text).toMatch(/ledger_entries_total\{kind="charge"\} \d+/);
    expect(text).toMatch(/charges_failed_total\{reason="insufficient_balance"\} \d+/);
  });

  it('idempotency keys are kept at least 24 h and cleaned up after 48 h', async () => {
    const pw = await t.createPaywall();
    for (const [key, age] of [
      ['young', '25 hours'],
      ['old', '49 hours'],
    ])
      await t.db.query(
        `insert into idempotency_key (paywall_id, endpoint, key, request_hash, created_at, completed_at)
         values ($1, 'deposit', $2, 'h', now() - $3::interval, now() - $3::interval)`,
        [pw.id, key, age],
      );
    await t.app.services.ledger.idempotency.cleanup();
    const left = await t.db.query<any>(`select key from idempotency_key where paywall_id = $1`, [pw.id]);
    expect(left.map((r) => r.key)).toEqual(['young']);
  });
});
