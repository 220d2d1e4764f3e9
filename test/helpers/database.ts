import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Database } from '../../src/db/database.js';

/**
 * A fresh, migrated database for one test file: a new PostgreSQL database on the server of
 * `DATABASE_URL` (dropped at the end), or an in-memory PGlite when no `DATABASE_URL` is set.
 */
export async function createTestDatabase(): Promise<{ db: Database; url?: string; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    const db = await Database.open({ dataDir: 'memory://' });
    await db.migrate();
    return { db, drop: () => db.close() };
  }
  const name = `pp_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  const db = await Database.open({ url: url.toString() });
  await db.migrate();
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close();
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}
