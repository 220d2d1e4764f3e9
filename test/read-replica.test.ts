import { loadConfig } from '../src/config.js';
import { Database } from '../src/db/database.js';
import { createLogger } from '../src/shared/logger.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { client, createProxyPaywall, eventually, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { startStreamingReplica, type StreamingReplica } from './helpers/streaming-replica.js';

/**
 * DATABASE_READ_URL (docs/operations.md "Read replica") on a real streaming replica: this file starts its
 * own primary (127.0.0.1:5498) and hot standby (127.0.0.1:5499, `pg_basebackup -R`), whatever
 * DATABASE_URL says, and runs the service on them. With the standby's replay paused, what the dashboard
 * lists is what the replica has; money, and whatever a mutation answers, is the primary's.
 */
const PRIMARY_PORT = 5498;
const REPLICA_PORT = 5499;
const DB = 'pp_replica';

let rs: StreamingReplica;
let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;
const logs: { level: number; msg: string }[] = [];

const today = new Date().toISOString().slice(0, 10);
const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);

/** The dashboard's Users page: the list, newest first, with balances. */
async function usersList(): Promise<Record<string, string>> {
  const r = await t.gql(
    t.ownerToken,
    `query($id: ID) { users(paywallId: $id, first: 50) { edges { node { externalId balance } } } }`,
    { id: pw.id },
  );
  expect(r.status).toBe(200);
  expect(r.errors).toBeUndefined();
  return Object.fromEntries(
    r.data.users.edges.map((e: any) => [e.node.externalId, e.node.balance] as [string, string]),
  );
}

/** The dashboard's user detail: the balance (money, the primary's) and the ledger (a log, the replica's). */
async function userDetail(externalId: string): Promise<{ balance: string; ledger: string[] }> {
  const r = await t.gql(
    t.ownerToken,
    `query($id: ID, $u: String!) {
       user(paywallId: $id, externalId: $u) { balance ledgerEntries(first: 20) { edges { node { kind amountRaw } } } }
     }`,
    { id: pw.id, u: externalId },
  );
  expect(r.errors).toBeUndefined();
  return {
    balance: r.data.user.balance,
    ledger: r.data.user.ledgerEntries.edges.map((e: any) => `${e.node.kind} ${e.node.amountRaw}`),
  };
}

/** The dashboard's overview: requests and revenue of the paywall's completed charges, yesterday and today. */
async function usageTotals(): Promise<{ requests: number; revenue: string }> {
  const r = await t.gql(
    t.ownerToken,
    `query($id: ID, $from: String!, $to: String!) {
       paywall(id: $id) { usage(from: $from, to: $to, groupBy: DAY) { totals { requests revenue } } }
     }`,
    { id: pw.id, from: yesterday, to: today },
  );
  expect(r.errors).toBeUndefined();
  return r.data.paywall.usage.totals;
}

async function depositMutation(user: string, amount: string) {
  const r = await t.gql(
    pw.apiKey,
    `mutation($u: String!, $a: String!) {
       deposit(input: { user: $u, amount: $a }) {
         balance user { balance ledgerEntries(first: 20) { edges { node { kind amountRaw } } } }
       }
     }`,
    { u: user, a: amount },
  );
  expect(r.errors).toBeUndefined();
  return r.data.deposit;
}

async function chat(user: string): Promise<string | undefined> {
  const c = await client(t, pw, user).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello' }],
  });
  return (c.usage as unknown as { cost?: string }).cost;
}

beforeAll(async () => {
  rs = await startStreamingReplica({ primary: PRIMARY_PORT, replica: REPLICA_PORT });
  await rs.createDatabase(DB);
  t = await startTestApp(
    { DATABASE_URL: rs.primaryUrl(DB), DATABASE_READ_URL: rs.replicaUrl(DB), LOG_LEVEL: 'info' },
    { configured: true, logStream: { write: (line: string) => void logs.push(JSON.parse(line)) } },
  );
  fake = await FakeUpstream.start();
  pw = await createProxyPaywall(t, fake);
  // Before the test: ann has 1 USDC and one paid request (1086 raw units, proxy-setup's prices).
  await depositMutation('ann', '1');
  expect(await chat('ann')).toBe('0.001086');
  // The first usage read writes the paywall's roll-up mark (on the primary); the replica gets it here.
  expect(await usageTotals()).toEqual({ requests: 1, revenue: '0.001086' });
  await rs.caughtUp();
}, 180_000);

afterAll(async () => {
  await t?.close().catch(() => undefined);
  await fake?.close().catch(() => undefined);
  rs?.destroy();
}, 60_000);

test('with replay paused, the dashboard lists what the replica has while money and mutation answers are the primary’s', async () => {
  expect(await usersList()).toEqual({ ann: '998914' });
  await rs.pauseReplay();

  // Writes through the service: a deposit for a new user and a paid request. The mutation's own answer,
  // its nested ledger included, reads the primary: the deposit is there.
  const dep = await depositMutation('bob', '2');
  expect(dep.balance).toBe('2000000');
  expect(dep.user.balance).toBe('2000000');
  expect(dep.user.ledgerEntries.edges.map((e: any) => `${e.node.kind} ${e.node.amountRaw}`)).toEqual([
    'deposit 2000000',
  ]);
  expect(await chat('ann')).toBe('0.001086');

  // The lists, the ledger and usage come from the paused replica: neither write is there yet.
  expect(await usersList()).toEqual({ ann: '998914' });
  const ann = await userDetail('ann');
  expect(ann.ledger).toEqual(['usage -1086', 'deposit 1000000']);
  expect(await usageTotals()).toEqual({ requests: 1, revenue: '0.001086' });
  // …while the balance, in the same query, is the primary's: the second charge is already paid.
  expect(ann.balance).toBe('997828');
  expect((await userDetail('bob')).balance).toBe('2000000');
  // REST reads the primary too.
  const rest = await t.rest('GET', '/v1/user/balance?user=bob', { token: pw.apiKey });
  expect(rest.body).toEqual({ balance: '2000000', balanceFormatted: '2.000000' });

  // Replay resumes: the replica catches up and the dashboard shows both writes.
  await rs.resumeReplay();
  const users = await eventually(usersList, (u) => 'bob' in u && u.ann === '997828');
  expect(users).toEqual({ ann: '997828', bob: '2000000' });
  expect((await userDetail('ann')).ledger).toEqual(['usage -1086', 'usage -1086', 'deposit 1000000']);
  // Usage is rolled up by its own transaction after the charge: wait for it as for the list.
  expect(await eventually(usageTotals, (u) => u.requests === 2)).toEqual({
    requests: 2,
    revenue: '0.002172',
  });
  // Nothing fell back to the primary in this test.
  expect(logs.filter((l) => /read replica/.test(l.msg))).toEqual([]);
});

test('with the replica stopped, the dashboard still answers (from the primary), and goes back to the replica when it returns', async () => {
  rs.stopReplica();
  await depositMutation('cid', '3');
  // Read from the primary: cid is there at once. Three reads, one warning for the burst.
  for (let i = 0; i < 3; i++) expect((await usersList()).cid).toBe('3000000');
  expect((await userDetail('cid')).ledger).toEqual(['deposit 3000000']);
  const warned = logs.filter((l) => l.msg.startsWith('read replica unavailable'));
  expect(warned).toHaveLength(1);
  expect(warned[0].level).toBe(40);

  await rs.startReplica();
  await rs.caughtUp();
  // After the retry pause a read tries the replica again and stays there.
  await eventually(
    async () => {
      await usersList();
      return logs.some((l) => l.msg.startsWith('read replica answers again'));
    },
    (back) => back,
    30_000,
  );
  await rs.pauseReplay();
  await depositMutation('dee', '4');
  expect(await usersList()).toEqual({ ann: '997828', bob: '2000000', cid: '3000000' });
  await rs.resumeReplay();
  await eventually(usersList, (u) => u.dee === '4000000');
  expect(logs.filter((l) => l.msg.startsWith('read replica unavailable'))).toHaveLength(1);
});

test('without DATABASE_URL, DATABASE_READ_URL is ignored with a warning: the embedded database has no replica', async () => {
  const lines: { level: number; msg: string }[] = [];
  const config = loadConfig({ DATABASE_READ_URL: rs.replicaUrl(DB), DATA_DIR: 'memory://' });
  const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const db = await Database.openForService(config, log);
  try {
    expect(db.kind).toBe('pglite');
    expect(db.hasReplica).toBe(false);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [
        40,
        'DATABASE_READ_URL is ignored without DATABASE_URL: the embedded database has no replica; every read goes to it',
      ],
    ]);
  } finally {
    await db.close();
  }
});
