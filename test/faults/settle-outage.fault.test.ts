import { FakeUpstream } from '../helpers/fake-upstream.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  adminLedgerVerify,
  Api,
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
 * PostgreSQL goes away AFTER the provider was called and comes back only after the provider answered:
 * the charge of those answers cannot be written. A 200 is an answer that was charged, so none of them
 * may reach the client as one: a whole answer is a 503 `database_unavailable`, a stream ends with a
 * `database_unavailable` error event instead of its usage and `[DONE]`. Their holds stay for the
 * sweeper, which releases them (nothing charged), and the ledger proof holds throughout.
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

test('an answer whose charge cannot be written (database down) is never a 200: 503 or a cut stream, nothing charged', async () => {
  const dbUrl = await pp.createDatabase('settle_outage');
  const sql = sqlOf(dbUrl);
  service = await startService(dbUrl, { LOG_LEVEL: 'fatal' });
  const api = new Api(service.url);
  const pw = await createPaywall(api, fake.baseUrl, { name: 'Settle outage' });
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
  const before = await balances();

  // Holds written, provider called; the database stops before the provider answers.
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
    const held = await sql.query<{ n: number }>(
      `select count(*)::int as n from charge where paywall_id = $1 and status = 'held'`,
      [pw.id],
    );
    if (held[0].n === CHATS) break;
    if (Date.now() > deadline) throw new Error(`only ${held[0].n} holds written`);
    await sleep(20);
  }
  pp.stop('fast');
  // The provider answers meanwhile; the settlement's retries give up while the database is still down.
  await sleep(UPSTREAM_MS + 2500);
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
  const charges = await sql.query<{ status: string; n: number }>(
    `select status, count(*)::int as n from charge where paywall_id = $1 and kind = 'usage' group by 1`,
    [pw.id],
  );
  expect(charges).toEqual([{ status: 'held', n: CHATS }]);
  await sql.query(
    `update charge set created_at = created_at - interval '1 hour' where paywall_id = $1 and status = 'held'`,
    [pw.id],
  );
  expect(await service.stop()).toBe(0);
  service = await startService(dbUrl, { LOG_LEVEL: 'fatal' });
  const swept = await sql.query<{ status: string; n: number }>(
    `select status, count(*)::int as n from charge where paywall_id = $1 and kind = 'usage' group by 1`,
    [pw.id],
  );
  expect(swept).toEqual([{ status: 'released', n: CHATS }]);
  expect(await balances()).toEqual(before);
  const inv = await moneyInvariants(sql);
  expect(inv).toMatchObject({ ok: true });
  expect((await adminLedgerVerify(dbUrl)).code).toBe(0);
  expect(await service.stop()).toBe(0);
  await sql.end();
}, 120_000);
