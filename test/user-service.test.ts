import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, userTransfers } from './helpers/ledger.js';
import type { PaywallInfo } from '../src/modules/paywalls/paywall-info.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const trigger = { source: 'api', actorType: 'api_key', actorId: 'x' } as const;

async function paywall(mode: 'DEFAULT' | 'SHARED', settings = ''): Promise<PaywallInfo> {
  const pw = await t.createPaywall(mode);
  if (settings) {
    const r = await t.gql(pw.apiKey, `mutation { updatePaywall(input: {${settings}}) { id } }`);
    expect(r.errors).toBeUndefined();
  }
  return (await t.app.services.paywalls.authenticateKey(pw.apiKey))!;
}

describe('UserService (used by the proxy and the user routes)', () => {
  it('ensureUser creates once, grants trial credits with a trial transfer from world and an event, then finds', async () => {
    const p = await paywall('DEFAULT', 'trialCredits: "0.25"');
    const users = t.app.services.users;
    const first = await users.ensureUser(t.db, p, 'alice', trigger);
    expect(first).toMatchObject({ created: true, balanceRaw: 250000n, heldRaw: 0n, connected: true });
    const again = await users.ensureUser(t.db, p, 'alice', trigger);
    expect(again).toMatchObject({ id: first.id, created: false, balanceRaw: 250000n });
    const ledger = await userTransfers(t.db, first.id);
    expect(ledger).toEqual([
      {
        id: expect.any(String),
        kind: 'trial',
        amount: '250000',
        after: '250000',
        chargeId: null,
        metadata: {},
      },
    ]);
    const acct = await t.db.query<any>(
      `select kind, balance_raw::text as b from ledger_account where id = (select account_id from end_user where id = $1)`,
      [first.id],
    );
    expect(acct).toEqual([{ kind: 'user', b: '250000' }]);
    await expectLedgerProven(t.db);
    const ev = await t.db.query<any>(`select type, data, subject from event where paywall_id = $1`, [p.id]);
    expect(ev.filter((e) => e.type === 'paywall.balance.trial.granted')).toEqual([
      {
        type: 'paywall.balance.trial.granted',
        subject: { type: 'end_user', id: first.id, externalId: 'alice' },
        data: {
          paywallId: p.id,
          ownerUserId: p.ownerId,
          walletUserId: first.id,
          credits: '0.25',
          activityId: ledger[0].id,
        },
      },
    ]);
  });

  it('ensureUser inside a transaction, and concurrent first sightings make one user', async () => {
    const p = await paywall('DEFAULT', 'trialCredits: "1"');
    const users = t.app.services.users;
    const inTx = await t.db.transaction((tx) => users.ensureUser(tx, p, 'bob', trigger));
    expect(inTx.created).toBe(true);
    const all = await Promise.all(
      Array.from({ length: 10 }, () => users.ensureUser(t.db, p, 'carol', trigger)),
    );
    expect(all.filter((u) => u.created)).toHaveLength(1);
    expect(new Set(all.map((u) => u.id)).size).toBe(1);
    const n = await t.db.query<any>(
      `select count(*)::int as n, sum(t.amount_raw)::text as s from transfer t join end_user u on u.id = t.end_user_id
        where u.paywall_id = $1 and u.external_id = 'carol'`,
      [p.id],
    );
    expect(n[0]).toEqual({ n: 1, s: '1000000' });
    // The losers of the race created no account and moved no money.
    const accounts = await t.db.query<any>(
      `select count(*)::int as n from ledger_account where paywall_id = $1 and kind = 'user'`,
      [p.id],
    );
    expect(accounts[0].n).toBe(2);
    await expectLedgerProven(t.db);
  });

  it('no trial by default; SHARED users start unconnected; findUser never creates', async () => {
    const shared = await paywall('SHARED');
    const users = t.app.services.users;
    expect(await users.findUser(shared.id, 'dave')).toBeNull();
    const u = await users.ensureUser(t.db, shared, 'dave', trigger);
    expect(u).toMatchObject({ created: true, balanceRaw: 0n, connected: false });
    expect((await users.findUser(shared.id, 'dave'))?.id).toBe(u.id);
    expect(u.accountId).toBeNull();
    expect(await userTransfers(t.db, u.id)).toHaveLength(0);
  });

  it('topupLink: paywall topupUrl with user=, hosted page otherwise, wallet top-up in SHARED; records the event', async () => {
    const users = t.app.services.users;
    const own = await paywall('DEFAULT', 'topupUrl: "https://pay.example/top?ref=1"');
    expect(await users.topupLink(own, 'a b&c', trigger)).toBe('https://pay.example/top?ref=1&user=a+b%26c');
    const hosted = await paywall('DEFAULT');
    expect(await users.topupLink(hosted, 'eve', trigger)).toBe(`${t.url}/topup/${hosted.id}?user=eve`);
    const shared = await paywall('SHARED');
    expect(await users.topupLink(shared, 'eve', trigger)).toBe(
      `${t.url}/wallet/topup?paywall=${shared.id}&user=eve`,
    );
    const ev = await t.db.query<any>(`select data from event where paywall_id = $1`, [hosted.id]);
    const eve = await users.findUser(hosted.id, 'eve');
    expect(ev.map((e) => e.data)).toEqual([
      {
        paywallId: hosted.id,
        ownerUserId: hosted.ownerId,
        walletUserId: eve!.id,
        redirectUrl: `${t.url}/topup/${hosted.id}?user=eve`,
        checkoutSessionId: null,
      },
    ]);
  });

  it('connectLink: hosted connect page with a request id that the event carries', async () => {
    const shared = await paywall('SHARED');
    const url = await t.app.services.users.connectLink(shared, 'frank', trigger);
    const m = new RegExp(`^${t.url}/connect/${shared.id}\\?request=([0-9a-f-]{36})$`).exec(url);
    expect(m).not.toBeNull();
    const ev = await t.db.query<any>(`select type, data from event where paywall_id = $1`, [shared.id]);
    expect(ev).toEqual([
      {
        type: 'paywall.authorization.requested',
        data: {
          paywallId: shared.id,
          ownerUserId: shared.ownerId,
          externalUserId: 'frank',
          walletUserId: null,
          requestId: m![1],
          approvalUrl: url,
          mode: 'shared',
        },
      },
    ]);
    // The request is stored for the consent page: this paywall, this user, 24 hours.
    const req = await t.db.query<any>(
      `select r.paywall_id, e.external_id, r.status, round(extract(epoch from r.expires_at - r.created_at))::int as ttl
         from connect_request r join end_user e on e.id = r.end_user_id where r.id = $1`,
      [m![1]],
    );
    expect(req).toEqual([{ paywall_id: shared.id, external_id: 'frank', status: 'pending', ttl: 86400 }]);
  });
});
