import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, testHold, testSettlement } from './helpers/ledger.js';
import { ledgerTick } from '../src/modules/ledger/holds.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

/**
 * Lock order: a manual charge and a chat settlement of the same account at the same time must never
 * deadlock (both lock every account they touch in id order). Found by review: the charge used to lock
 * the user's account before the paywall's earnings, the settlement in id order.
 */
it('a manual charge racing a chat settlement of the same account never deadlocks', async () => {
  const pw = await t.createPaywall();
  const info = (await t.app.services.paywalls.authenticateKey(pw.apiKey))!;
  const [{ id: earnings }] = await t.db.query<any>(
    `select id from ledger_account where kind = 'earnings' and paywall_id = $1`,
    [pw.id],
  );
  // An end user whose account id sorts after the earnings account (the tick locks earnings first).
  let user: string;
  for (let i = 0; ; i++) {
    const name = `u${i}`;
    await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: name, amount: '100' },
    });
    const [u] = await t.db.query<any>(`select id from end_user where paywall_id = $1 and external_id = $2`, [
      pw.id,
      name,
    ]);
    if (u.id > earnings) {
      user = name;
      break;
    }
  }
  const errors: string[] = [];
  for (let round = 0; round < 100; round++) {
    const input = testHold(pw.id, user);
    const hold = await ledgerTick(t.db, [input], []);
    expect(hold.holds[0]?.held).toBe(true);
    const settle = ledgerTick(t.db, [], [testSettlement(input, 500n)]).catch((e) =>
      errors.push(`tick: ${e.code} ${e.message}`),
    );
    const charge = t.app.services.ledger
      .charge({ kind: 'apiKey', paywall: info }, { user, amount: '0.0001' })
      .catch((e: any) => errors.push(`charge: ${e.code ?? e.cause?.code} ${e.message}`));
    await Promise.all([settle, charge]);
    if (errors.length) break;
  }
  expect(errors).toEqual([]);
  await expectLedgerProven(t.db);
});
