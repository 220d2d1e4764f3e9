import { readdirSync } from 'node:fs';
import type { Database } from '../src/db/database.js';
import { migrationsList } from '../migrations/index.js';
import { createTestDatabase } from './helpers/database.js';
import { eventMatches } from '../src/modules/events/event-catalog.js';

/**
 * Objects that hand-written migrations create and entities cannot declare (triggers, their functions,
 * partial indexes). MikroORM's diff proposes to drop them; every other difference between the entities
 * and the migrated database is drift and fails the test.
 */
const HAND_WRITTEN = [
  /^drop trigger if exists "(event_fanout|transfer_append_only)" on "(event|transfer)"$/,
  /^drop function if exists "(event_matches|event_fanout|transfer_immutable|event_event_fanout_fn|transfer_transfer_append_only_fn|ledger_hold_one|ledger_settle_one|ledger_tick|ledger_period_start)"\(.*\)$/,
  /^drop index "(charge_open_holds_index|charge_usage_index|ledger_account_platform_kind_unique|ledger_account_earnings_unique|wallet_connection_active_unique|transfer_provider_cost_index|charge_response_id_index)"$/,
];

const OURS = `table_schema = current_schema() and table_name <> 'mikro_orm_migrations'`;

async function tablesOf(db: Database): Promise<string[]> {
  const rows = await db.query<{ t: string }>(
    `select table_name as t from information_schema.tables where ${OURS} order by 1`,
  );
  return rows.map((r) => r.t);
}

async function functionsOf(db: Database): Promise<string[]> {
  const rows = await db.query<{ f: string }>(
    `select p.proname as f from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = current_schema() order by 1`,
  );
  return rows.map((r) => r.f);
}

/** The ledger's functions (their whole definitions) and the row types they use (their columns). */
async function ledgerObjectsOf(db: Database): Promise<Record<string, string>> {
  const rows = await db.query<{ name: string; def: string }>(
    `select p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as name,
            pg_get_functiondef(p.oid) as def
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = current_schema() and p.proname like 'ledger%'
     union all
     select t.typname, string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' order by a.attnum)
       from pg_type t join pg_namespace n on n.oid = t.typnamespace join pg_attribute a on a.attrelid = t.typrelid
      where n.nspname = current_schema() and t.typname like 'ledger%' and t.typtype = 'c'
      group by t.typname`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.def]));
}

/** The SQL MikroORM would run to bring the database in line with the entities, minus hand-written objects. */
async function drift(db: Database): Promise<string[]> {
  const sql = await db.orm.schema.getUpdateSchemaSQL({ wrap: false });
  return sql
    .split(/;\s*\n/)
    .map((s) => s.replace(/;\s*$/, '').trim())
    .filter((s) => s.length > 0 && !HAND_WRITTEN.some((re) => re.test(s)));
}

let db: Database;
let drop: () => Promise<void>;
beforeAll(async () => {
  // createTestDatabase applies every migration to a fresh database (PGlite, or a new PostgreSQL database).
  ({ db, drop } = await createTestDatabase());
});
afterAll(async () => {
  await drop();
});

describe('migrations (same list on PostgreSQL and PGlite; generated, reviewed, reversible)', () => {
  it('registers every migration file under migrations/ in migrations/index.ts, in order', () => {
    const files = readdirSync(new URL('../migrations/', import.meta.url))
      .filter((f) => /^Migration\w+\.ts$/.test(f))
      .map((f) => f.replace(/\.ts$/, ''))
      .sort();
    const names = migrationsList.map((m) => m.name);
    expect(names).toEqual(files);
    expect([...names].sort()).toEqual(names);
  });

  it('a fresh database is at the latest migration, and migrating again changes nothing', async () => {
    const applied = await db.query<{ name: string }>('select name from mikro_orm_migrations order by id');
    expect(applied.map((r) => r.name)).toEqual(migrationsList.map((m) => m.name));
    expect(await db.migrate()).toEqual([]);
  });

  it('leaves no difference between the entities and the migrated database', async () => {
    expect(await drift(db)).toEqual([]);
  });

  it('creates the hand-written guards: append-only transfers, the event fan-out trigger, unique accounts', async () => {
    const triggers = await db.query<{ t: string }>(
      `select tgname as t from pg_trigger where not tgisinternal order by 1`,
    );
    expect(triggers.map((r) => r.t)).toEqual(['event_fanout', 'transfer_append_only']);
    const accounts = await db.query<{ id: string; kind: string }>(
      `select id, kind from ledger_account where paywall_id is null order by id`,
    );
    expect(accounts.map((a) => a.kind)).toEqual(['world', 'fees', 'provider', 'payouts']);
    await expect(
      db.query(`insert into ledger_account (id, kind) values (gen_random_uuid(), 'world')`),
    ).rejects.toThrow(/ledger_account_platform_kind_unique/);
    await db.query(
      `insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw) values (gen_random_uuid(), 'fee', $1, $2, 1)`,
      [accounts[0].id, accounts[1].id],
    );
    await expect(db.query(`update transfer set amount_raw = 2`)).rejects.toThrow(/transfer is append-only/);
    await expect(db.query(`delete from transfer`)).rejects.toThrow(/transfer is append-only/);
  });

  it('is reversible: down to zero leaves none of our tables or functions, and up again works', async () => {
    const tables = await tablesOf(db);
    expect(tables).toEqual(
      expect.arrayContaining([
        'owner',
        'paywall',
        'end_user',
        'ledger_account',
        'transfer',
        'charge',
        'wallet_user',
        'wallet_connection',
        'event',
        'webhook_delivery',
      ]),
    );

    await db.migrateDownAll();
    expect(await tablesOf(db)).toEqual([]);
    expect(await functionsOf(db)).toEqual([]);
    expect(await db.query('select name from mikro_orm_migrations')).toEqual([]);

    const reapplied = await db.migrate();
    expect(reapplied).toEqual(migrationsList.map((m) => m.name));
    expect(await tablesOf(db)).toEqual(tables);
    expect(await drift(db)).toEqual([]);
  });

  it('a database that ran a removed ledger migration ends with the same ledger functions as a fresh one', async () => {
    const fresh = await ledgerObjectsOf(db);
    // As Migration20261201110000_ledger_tick (versions 3 and 4 of the rules in one function, removed) and then
    // Migration20261201300000_lean_ledger_restored left a database: both recorded as executed, the lean
    // functions back, ledger_period_start dropped, a ledger_tick and row types of other columns left behind;
    // Migration20261202100000 (and the ones after it that replace ledger_tick) not yet run.
    await db.query(`drop function ledger_tick(jsonb, jsonb, text)`);
    await db.query(`drop function ledger_period_start(text, timestamptz)`);
    await db.query(`drop type ledger_hold_in`);
    await db.query(`drop type ledger_settled`);
    await db.query(`create type ledger_hold_in as (i int, user_id uuid)`);
    await db.query(`create type ledger_settled as (i int)`);
    await db.query(`create function ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns jsonb
                      language sql as $$ select holds $$`);
    await db.query(`insert into mikro_orm_migrations (name) values ('Migration20261201110000_ledger_tick')`);
    await db.query(
      `delete from mikro_orm_migrations
        where name in ('Migration20261201300000_lean_ledger_restored', 'Migration20261202100000_ledger_tick',
                       'Migration20261203200000_ledger_running_balance')`,
    );

    expect(await db.migrate()).toEqual([
      'Migration20261201300000_lean_ledger_restored',
      'Migration20261202100000_ledger_tick',
      'Migration20261203200000_ledger_running_balance',
    ]);
    expect(await ledgerObjectsOf(db)).toEqual(fresh);
    const fns = await functionsOf(db);
    expect(fns).toEqual(expect.arrayContaining(['ledger_tick', 'ledger_period_start']));
    expect(fns).not.toContain('ledger_hold_one');
    expect(fns).not.toContain('ledger_settle_one');
    // ledger_tick answers: a lone hold for an end user that does not exist is null, not an error.
    const [r] = await db.query<{ r: unknown }>(
      `select ledger_tick(jsonb_build_object('paywall_id', gen_random_uuid(), 'external_id', 'nobody'), null, '1') as r`,
    );
    expect(r.r).toBeNull();
    await db.query(`delete from mikro_orm_migrations where name = 'Migration20261201110000_ledger_tick'`);
  });

  it('event_matches in the database agrees with eventMatches in the service, case by case', async () => {
    const patterns = [
      [],
      ['*'],
      ['paywall.proxy.request.started'],
      ['paywall.proxy.*'],
      ['paywall.*'],
      ['paywall.usage.*', 'paywall.proxy.request.completed'],
      ['paywall.proxy'],
      ['paywall.proxy.request.started.*'],
      ['paywall.prox*'],
      ['.*'],
    ];
    const types = ['paywall.proxy.request.started', 'paywall.usage.charge.created', 'paywall.proxy', 'other'];
    for (const p of patterns)
      for (const t of types) {
        const [row] = await db.query<{ m: boolean }>('select event_matches($1::text[], $2) as m', [p, t]);
        expect({ p, t, m: row.m }).toEqual({ p, t, m: eventMatches(p, t) });
      }
  });
});
