import { Blob } from 'node:buffer';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from '../../src/db/database.js';
import { createScratchPostgres } from '../../src/db/scratch-database.js';

/**
 * PGlite's initdb costs seconds of CPU per database. The first test file that needs one builds a
 * migrated database once and dumps it to a file keyed by the migrations' source and the lockfile;
 * every later file (and later runs) starts from that dump. A changed migration changes the key.
 */
async function migratedPgliteDump(): Promise<Blob> {
  const dir = new URL('../../migrations/', import.meta.url);
  const hash = createHash('sha256');
  // The migrations and the versioned SQL files they apply (migrations/sql).
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|sha256)$/.test(f))
    .sort();
  for (const f of files) hash.update(f).update(readFileSync(new URL(f, dir)));
  // The installed PGlite decides the dump format (the MikroORM driver carries its own copy): key on the lockfile.
  hash.update(readFileSync(new URL('../../package-lock.json', import.meta.url)));
  const file = join(tmpdir(), `paywall-proxy-pglite-${hash.digest('hex').slice(0, 16)}.tar`);
  try {
    return new Blob([readFileSync(file)]);
  } catch {
    const db = await Database.open({ dataDir: 'memory://' });
    await db.migrate();
    const pglite = await (db.orm.em.getConnection() as any).getNativeClient();
    const dump: Blob = await pglite.dumpDataDir('none');
    await db.close();
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, Buffer.from(await dump.arrayBuffer()));
    renameSync(tmp, file); // atomic: a concurrent run never reads half a dump
    // Dumps of older migrations are 40 MB each and never read again.
    for (const f of readdirSync(tmpdir()))
      if (/^paywall-proxy-pglite-[0-9a-f]{16}\.tar$/.test(f) && join(tmpdir(), f) !== file)
        rmSync(join(tmpdir(), f), { force: true });
    return dump;
  }
}

/**
 * A fresh, migrated database for one test file: a new PostgreSQL database on the server of
 * `DATABASE_URL` (dropped at the end), or an in-memory PGlite when no `DATABASE_URL` is set.
 */
export async function createTestDatabase(): Promise<{ db: Database; url?: string; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    // node:buffer's Blob is the runtime one; the DOM typings (pulled in by the pages' preact) name another.
    const dump = (await migratedPgliteDump()) as unknown as globalThis.Blob;
    const db = await Database.open({ dataDir: 'memory://', loadDataDir: dump });
    await db.migrate(); // a no-op on the dump; kept so the contract "fresh and migrated" holds regardless
    return { db, drop: () => db.close() };
  }
  return createScratchPostgres(base, 'pp_test');
}
