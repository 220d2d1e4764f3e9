import { randomUUID } from 'node:crypto';
import type { Database } from '../src/db/database.js';
import { proveLedger, WORLD_ACCOUNT_ID } from '../src/modules/accounts/accounts.js';
import { createTestDatabase } from './helpers/database.js';

/**
 * The accounts migration moves a database written by the previous version (balances and holds on
 * `end_user`, history in `ledger_entry`) into accounts and transfers without losing a raw unit, and
 * its `down` moves DEFAULT balances and history back.
 */
const PREVIOUS = 'Migration20261122002900_triggers';

let db: Database;
let drop: () => Promise<void>;
beforeAll(async () => {
  ({ db, drop } = await createTestDatabase());
  await db.orm.migrator.down({ to: PREVIOUS });
});
afterAll(async () => {
  await drop();
});

interface OldUser {
  id: string;
  paywall: string;
  external: string;
  entries: { kind: string; amount: number }[];
  held: number;
}

/** Populates the previous schema the way the previous version wrote it (balance = sum of entries). */
async function populate(): Promise<OldUser[]> {
  const owner = randomUUID();
  await db.query(`insert into owner (id, name, token_hash) values ($1, 'o', $2)`, [
    owner,
    randomUUID().replace(/-/g, ''),
  ]);
  const paywalls = [randomUUID(), randomUUID(), randomUUID()];
  const modes = ['DEFAULT', 'DEFAULT', 'SHARED'];
  for (const [i, id] of paywalls.entries())
    await db.query(
      `insert into paywall (id, owner_id, name, mode, api_key_hash, api_key_last_four) values ($1, $2, $3, $4, $5, 'abcd')`,
      [id, owner, `pw${i}`, modes[i], randomUUID().replace(/-/g, '')],
    );
  const users: OldUser[] = [];
  // 40 users with deposits, trials, manual charges and usage charges; some with a hold in flight.
  for (let n = 0; n < 40; n++) {
    const paywall = paywalls[n % 2];
    const entries: { kind: string; amount: number }[] = [];
    let balance = 0;
    if (n % 3 === 0) entries.push({ kind: 'trial', amount: 250_000 });
    entries.push({ kind: 'deposit', amount: 1_000_000 + n * 7_919 });
    entries.push({ kind: 'charge', amount: -(30_000 + n) });
    if (n % 2 === 0) entries.push({ kind: 'usage', amount: -(1_086 + n * 13) });
    if (n % 5 === 0) entries.push({ kind: 'deposit', amount: 3 });
    for (const e of entries) balance += e.amount;
    users.push({ id: randomUUID(), paywall, external: `user-${n}`, entries, held: n % 4 === 0 ? 5_000 : 0 });
    await db.query(
      `insert into end_user (id, paywall_id, external_id, balance_raw, held_raw) values ($1, $2, $3, $4, $5)`,
      [users[n].id, paywall, users[n].external, balance, users[n].held],
    );
    let after = 0;
    for (const e of entries) {
      after += e.amount;
      const chargeId = e.amount < 0 ? randomUUID() : null;
      if (chargeId)
        await db.query(
          `insert into charge (id, paywall_id, user_id, kind, status, amount_raw) values ($1, $2, $3, $4, 'completed', $5)`,
          [chargeId, paywall, users[n].id, e.kind === 'usage' ? 'usage' : 'manual', -e.amount],
        );
      await db.query(
        `insert into ledger_entry (id, paywall_id, user_id, kind, amount_raw, balance_after_raw, charge_id, metadata)
         values ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [randomUUID(), paywall, users[n].id, e.kind, e.amount, after, chargeId, JSON.stringify({ n })],
      );
    }
    if (users[n].held > 0)
      await db.query(
        `insert into charge (id, paywall_id, user_id, kind, status, hold_raw) values ($1, $2, $3, 'usage', 'held', $4)`,
        [randomUUID(), paywall, users[n].id, users[n].held],
      );
  }
  // A SHARED user seen but never funded, and one holding an old trial grant.
  const sharedPlain = {
    id: randomUUID(),
    paywall: paywalls[2],
    external: 'shared-plain',
    entries: [],
    held: 0,
  };
  const sharedTrial = {
    id: randomUUID(),
    paywall: paywalls[2],
    external: 'shared-trial',
    entries: [{ kind: 'trial', amount: 100_000 }],
    held: 0,
  };
  await db.query(`insert into end_user (id, paywall_id, external_id) values ($1, $2, $3)`, [
    sharedPlain.id,
    sharedPlain.paywall,
    sharedPlain.external,
  ]);
  await db.query(
    `insert into end_user (id, paywall_id, external_id, balance_raw) values ($1, $2, $3, 100000)`,
    [sharedTrial.id, sharedTrial.paywall, sharedTrial.external],
  );
  await db.query(
    `insert into ledger_entry (id, paywall_id, user_id, kind, amount_raw, balance_after_raw) values ($1, $2, $3, 'trial', 100000, 100000)`,
    [randomUUID(), sharedTrial.paywall, sharedTrial.id],
  );
  return [...users, sharedPlain, sharedTrial];
}

describe('accounts migration on a database of the previous version', () => {
  let users: OldUser[];
  let before: any[];

  it('starts from the previous schema, populated', async () => {
    users = await populate();
    before = await db.query(
      `select e.id, e.balance_raw::text as balance, e.held_raw::text as held,
              (select coalesce(sum(amount_raw), 0) from ledger_entry l where l.user_id = e.id)::text as ledger,
              (select count(*) from ledger_entry l where l.user_id = e.id)::int as entries
         from end_user e order by e.id`,
    );
    expect(before).toHaveLength(42);
    for (const b of before) expect(b.balance).toBe(b.ledger);
  });

  it('moves every balance, hold and entry into accounts and transfers, to the raw unit', async () => {
    await db.migrate();
    const after = await db.query(
      `select e.id, e.account_id, coalesce(a.balance_raw, 0)::text as balance, coalesce(a.held_raw, 0)::text as held,
              (select coalesce(sum(case when t.credit_account_id = e.account_id then t.amount_raw else -t.amount_raw end), 0)
                 from transfer t where t.end_user_id = e.id)::text as ledger,
              (select count(*) from transfer t where t.end_user_id = e.id)::int as entries
         from end_user e left join ledger_account a on a.id = e.account_id order by e.id`,
    );
    expect(after.map(({ account_id: _a, ...r }) => r)).toEqual(before);
    // DEFAULT users and the SHARED user with money keep their own account; the empty SHARED user has none.
    const plain = users.find((u) => u.external === 'shared-plain')!;
    expect(after.find((r) => r.id === plain.id)!.account_id).toBeNull();
    for (const u of users.filter((x) => x.external !== 'shared-plain'))
      expect(after.find((r) => r.id === u.id)!.account_id).toBe(u.id);

    // Money in came from world; money spent is each paywall's earnings.
    const deposited = users
      .flatMap((u) => u.entries)
      .filter((e) => e.amount > 0)
      .reduce((s, e) => s + e.amount, 0);
    const spent = users
      .flatMap((u) => u.entries)
      .filter((e) => e.amount < 0)
      .reduce((s, e) => s - e.amount, 0);
    const world = await db.query(`select balance_raw::text as b from ledger_account where id = $1`, [
      WORLD_ACCOUNT_ID,
    ]);
    expect(world[0].b).toBe(String(-deposited));
    const earnings = await db.query(
      `select coalesce(sum(balance_raw), 0)::text as b from ledger_account where kind = 'earnings'`,
    );
    expect(earnings[0].b).toBe(String(spent));
    expect(
      (await db.query(`select count(*)::int as n from ledger_account where kind = 'earnings'`))[0].n,
    ).toBe(3);

    // Holds in flight now name the account they reserve on.
    const holds = await db.query(
      `select count(*)::int as n from charge where status = 'held' and account_id = user_id`,
    );
    expect(holds[0].n).toBe(users.filter((u) => u.held > 0).length);

    const proof = await proveLedger(db);
    expect({
      total: proof.totalRaw,
      unbalanced: proof.unbalancedAccounts,
      misheld: proof.misheldAccounts,
    }).toEqual({
      total: 0n,
      unbalanced: [],
      misheld: [],
    });
  });

  it('down moves balances and history back to the previous shape', async () => {
    await db.orm.migrator.down({ to: PREVIOUS });
    const back = await db.query(
      `select e.id, e.balance_raw::text as balance, e.held_raw::text as held,
              (select coalesce(sum(amount_raw), 0) from ledger_entry l where l.user_id = e.id)::text as ledger,
              (select count(*) from ledger_entry l where l.user_id = e.id)::int as entries
         from end_user e order by e.id`,
    );
    expect(back).toEqual(before);
    await db.migrate();
  });
});
