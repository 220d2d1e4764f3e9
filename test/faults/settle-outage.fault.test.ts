import { FakeUpstream } from '../helpers/fake-upstream.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  adminLedgerVerify,
  Api,
  CHAT_COST_RAW,
  chatBody,
  createPaywall,
  killAllServices,
  moneyInvariants,
  sleep,
  sqlOf,
  startService,
  streamChat,
  type ServiceProcess,
} from './helpers/service.js';

/**
 * PostgreSQL goes away AFTER the provider was called, so the charges of the answers meet a database
 * that is down. A 200 is an answer that was charged:
 * - back within the settlement's retry window (a restart): every answer is a 200, charged exactly once;
 * - down for longer: none may reach the client as a 200. A whole answer is a 503 `database_unavailable`,
 *   a stream ends with a `database_unavailable` error event instead of its usage and `[DONE]`. Their
 *   holds stay for the sweeper, which releases them (nothing charged).
 * The ledger proof holds throughout.
 */

const CHATS = 6;
const UPSTREAM_MS = 1500;

let pp: PrivatePostgres;
let fake: FakeUpstream;
let service: ServiceProcess | undefined;

beforeAll(async () => {
  pp = await startPrivatePostgres();
  fake = await FakeUpstream.start({ record: false });
}, 60_000);

afterAll(async () => {
  killAllServices();
  await fake?.close();
  pp?.destroy();
});

/** A paywall with CHATS funded users whose chats (half of them streams) are at the provider, holds written. */
async function chatsAtTheProvider(name: string) {
  const dbUrl = await pp.createDatabase(name);
  const sql = sqlOf(dbUrl);
  service = await startService(dbUrl, { LOG_LEVEL: 'fatal' });
  const api = new Api(service.url);
  const pw = await createPaywall(api, fake.baseUrl, { name });
  const users = Array.from({ length: CHATS }, (_, i) => `so${i}`);
  for (const user of users) {
    const r = await api.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user, amount: '0.100000' },
    });
    expect(r.status).toBeLessThan(300);
  }
  const balances = () =>
    sql.query<{ u: string; balance: string }>(
      `select e.external_id as u, a.balance_raw::text as balance
         from end_user e join ledger_account a on a.id = e.account_id where e.paywall_id = $1 order by 1`,
      [pw.id],
    );
  const charges = () =>
    sql.query<{ status: string; n: number }>(
      `select status, count(*)::int as n from charge where paywall_id = $1 and kind = 'usage' group by 1`,
      [pw.id],
    );
  const before = await balances();
  fake.behavior = { delayMs: UPSTREAM_MS, content: 'one two three four five' };
  const answers = users.map((user, i) =>
    i % 2
      ? streamChat(api, pw, user).then((r) => ({ stream: true, ...r }))
      : api
          .rest('POST', '/v1/chat/completions', {
            token: pw.apiKey,
            body: chatBody(),
            headers: { 'x-paywall-user': user },
          })
          .then((r) => ({ stream: false, status: r.status, text: r.text })),
  );
  for (const deadline = Date.now() + 10_000; ;) {
    const held = await charges();
    if (held.length === 1 && held[0].status === 'held' && held[0].n === CHATS) break;
    if (Date.now() > deadline) throw new Error(`holds not written: ${JSON.stringify(held)}`);
    await sleep(20);
  }
  return { dbUrl, sql, pw, answers, balances, charges, before };
}

test('a restart within the settlement retries: every answer a 200, charged exactly once', async () => {
  const { dbUrl, sql, answers, charges, balances, before } = await chatsAtTheProvider('settle_bridged');
  pp.stop('fast');
  // The provider answers while the database is down; it is back before the retries give up.
  await sleep(UPSTREAM_MS + 300);
  await pp.start();
  const got = await Promise.all(answers);
  for (const a of got) {
    expect(a.status).toBe(200);
    if (a.stream) expect(a.text).toContain('[DONE]');
    else expect(JSON.parse(a.text).usage.cost).toBe('0.001086');
  }
  expect(await charges()).toEqual([{ status: 'completed', n: CHATS }]);
  const after = await balances();
  expect(after.map((b) => BigInt(b.balance))).toEqual(before.map((b) => BigInt(b.balance) - CHAT_COST_RAW));
  expect(await moneyInvariants(sql)).toMatchObject({ ok: true });
  expect((await adminLedgerVerify(dbUrl)).code).toBe(0);
  expect(await service!.stop()).toBe(0);
  await sql.end();
}, 120_000);

test('an answer whose charge cannot be written (database down) is never a 200: 503 or a cut stream, nothing charged', async () => {
  const { dbUrl, sql, pw, answers, charges, balances, before } = await chatsAtTheProvider('settle_outage');
  pp.stop('fast');
  // The provider answers meanwhile; the settlement's retries (3 s) give up while the database is still down.
  await sleep(UPSTREAM_MS + 4500);
  await pp.start();
  const got = await Promise.all(answers);

  for (const a of got) {
    if (a.stream) {
      // The stream had started (200): it ends with the error event, never with a charged end.
      expect({ status: a.status, cut: a.text.includes('database_unavailable') }).toEqual({
        status: 200,
        cut: true,
      });
      expect(a.text).not.toContain('[DONE]');
      expect(a.text).not.toContain('"cost"');
    } else {
      expect({ status: a.status, body: JSON.parse(a.text) }).toEqual({
        status: 503,
        body: {
          error: expect.objectContaining({ type: 'api_error', code: 'database_unavailable' }),
        },
      });
    }
  }

  // Nothing was charged; the holds stay for the sweeper. Aged past its threshold, a restart sweeps
  // them: released, every balance as before, the proof holds.
  expect(await charges()).toEqual([{ status: 'held', n: CHATS }]);
  await sql.query(
    `update charge set created_at = created_at - interval '1 hour' where paywall_id = $1 and status = 'held'`,
    [pw.id],
  );
  expect(await service!.stop()).toBe(0);
  service = await startService(dbUrl, { LOG_LEVEL: 'fatal' });
  expect(await charges()).toEqual([{ status: 'released', n: CHATS }]);
  expect(await balances()).toEqual(before);
  const inv = await moneyInvariants(sql);
  expect(inv).toMatchObject({ ok: true });
  expect((await adminLedgerVerify(dbUrl)).code).toBe(0);
  expect(await service.stop()).toBe(0);
  await sql.end();
}, 120_000);
