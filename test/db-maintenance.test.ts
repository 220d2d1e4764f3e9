import type { Database } from '../src/db/database.js';
import { DatabaseMaintenance } from '../src/db/maintenance.js';
import { createLogger } from '../src/shared/logger.js';
import { createTestDatabase } from './helpers/database.js';

let db: Database;
let drop: () => Promise<void>;
const log = createLogger('silent');

beforeAll(async () => {
  ({ db, drop } = await createTestDatabase());
  // A table of our schema with dead rows and no statistics yet.
  await db.query(`create table maintenance_probe (id int primary key, v int not null)`);
  await db.query(`insert into maintenance_probe select g, 0 from generate_series(1, 500) g`);
  await db.query(`update maintenance_probe set v = 1`);
});
afterAll(async () => {
  await drop();
});

const stats = async () =>
  (
    await db.query<{ vacuums: number; reltuples: number; analysed: boolean }>(
      `select coalesce(s.vacuum_count, 0)::int as vacuums, c.reltuples::int as reltuples,
              s.last_analyze is not null as analysed
         from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
        where c.relname = 'maintenance_probe'`,
    )
  )[0];

describe('database maintenance (VACUUM ANALYZE where nothing autovacuums)', () => {
  it('is needed on PGlite, and on PostgreSQL exactly when the server has autovacuum off', async () => {
    const m = new DatabaseMaintenance(db, log, 60_000);
    if (db.kind === 'pglite') expect(await m.needed()).toBe(true);
    else {
      const [{ autovacuum }] = await db.query<{ autovacuum: string }>(`show autovacuum`);
      expect(await m.needed()).toBe(autovacuum !== 'on');
    }
  });

  it('vacuums every table of the schema; analyses a table first, then again only when its row count moved', async () => {
    const m = new DatabaseMaintenance(db, log, 60_000);
    const before = await stats();
    expect(before.analysed).toBe(false);
    const first = await m.runOnce();
    for (const t of ['maintenance_probe', 'charge', 'ledger_account', 'event']) {
      expect(first.vacuumed).toContain(t);
      expect(first.analysed).toContain(t);
    }
    const after = await stats();
    expect(after.vacuums).toBe(before.vacuums + 1);
    expect(after.analysed).toBe(true);
    // The planner now knows the table (it had no statistics): 500 live rows, the dead versions gone.
    expect(after.reltuples).toBe(500);

    // Nothing changed: every table is vacuumed again (cheap), none analysed again.
    const second = await m.runOnce();
    expect(second.vacuumed).toEqual(first.vacuumed);
    expect(second.analysed).toEqual([]);

    // 40 more rows (+8 %, under 50 + 10 %): not analysed; 200 more: analysed.
    await db.query(`insert into maintenance_probe select g, 0 from generate_series(501, 540) g`);
    expect((await m.runOnce()).analysed).toEqual([]);
    await db.query(`insert into maintenance_probe select g, 0 from generate_series(541, 740) g`);
    expect((await m.runOnce()).analysed).toEqual(['maintenance_probe']);
    expect((await stats()).reltuples).toBe(740);
  });

  it('runs on its interval once started (only where nothing autovacuums), and stop() waits for a round', async () => {
    const m = new DatabaseMaintenance(db, log, 50);
    const needed = await m.needed();
    const before = (await stats()).vacuums;
    await m.start();
    const deadline = Date.now() + (needed ? 10_000 : 500);
    while ((await stats()).vacuums === before && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    await m.stop();
    if (needed) expect((await stats()).vacuums).toBeGreaterThan(before);
    else expect((await stats()).vacuums).toBe(before); // the server's autovacuum looks after it
  });

  it('stop() during a round ends it after the table it is on', async () => {
    const m = new DatabaseMaintenance(db, log, 60_000);
    const round = m.runOnce();
    await m.stop();
    const { vacuumed } = await round;
    expect(vacuumed.length).toBeLessThanOrEqual(1);
  });

  it('does nothing when the interval is 0', async () => {
    const m = new DatabaseMaintenance(db, log, 0);
    const before = (await stats()).vacuums;
    await m.start();
    await new Promise((r) => setTimeout(r, 200));
    await m.stop();
    expect((await stats()).vacuums).toBe(before);
  });
});
