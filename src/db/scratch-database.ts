import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Database } from './database.js';

export interface ScratchDatabase {
  db: Database;
  url: string;
  drop(): Promise<void>;
}

/**
 * A new, migrated database on the PostgreSQL server of `baseUrl`, dropped by `drop()`. Tests and the
 * bench use it so each run starts empty without touching the base database.
 */
export async function createScratchPostgres(
  baseUrl: string,
  prefix = 'pp_scratch',
): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: baseUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`create database ${name}`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const db = await Database.open({ url: url.toString() });
  await db.migrate();
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close();
      await admin(`drop database if exists ${name} with (force)`);
    },
  };
}
