import pg from 'pg';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';

/** The fault suite's own PostgreSQL: restart, freeze and thaw behave as the other fault tests assume. */
let pp: PrivatePostgres;
beforeAll(async () => {
  pp = await startPrivatePostgres();
});
afterAll(() => pp?.destroy());

test('a restart with -m immediate cuts open connections and the cluster comes back with the data', async () => {
  const url = await pp.createDatabase('probe');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  c.on('error', () => {});
  await c.query('create table t (v int); insert into t values (42)');
  await pp.restartImmediate();
  await expect(c.query('select 1')).rejects.toThrow();
  const c2 = new pg.Client({ connectionString: url });
  await c2.connect();
  expect((await c2.query('select v from t')).rows).toEqual([{ v: 42 }]);
  await c2.end();
});

test('a frozen cluster answers nothing until thawed', async () => {
  const c = new pg.Client({ connectionString: pp.url() });
  await c.connect();
  pp.freeze();
  const pending = c.query('select 7 as v');
  const raced = await Promise.race([
    pending.then(() => 'answered'),
    new Promise((r) => setTimeout(() => r('waiting'), 500)),
  ]);
  expect(raced).toBe('waiting');
  pp.thaw();
  expect((await pending).rows).toEqual([{ v: 7 }]);
  await c.end();
});
