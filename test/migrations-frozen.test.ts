import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';

/**
 * An applied migration is history: a database migrated yesterday never runs it again, so editing its text
 * silently leaves older databases with older code (a function re-created in place, a column default). Every
 * migration file is listed with its SHA-256 in migrations/frozen.sha256 (`sha256sum` format); a change is a new
 * migration. Add a new file to the list once it lands: `(cd migrations && sha256sum NewMigration.ts >> frozen.sha256)`.
 */
const dir = new URL('../migrations/', import.meta.url);
const frozen = new Map(
  readFileSync(new URL('frozen.sha256', dir), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [sum, file] = l.trim().split(/\s+\*?/);
      return [file, sum] as const;
    }),
);
// The migrations and the versioned SQL files they apply (migrations/sql: frozen the same way).
const files = [
  ...readdirSync(dir).filter((f) => /^Migration\w+\.ts$/.test(f)),
  ...readdirSync(new URL('sql/', dir))
    .filter((f) => /\.ts$/.test(f))
    .map((f) => `sql/${f}`),
];
const sha256 = (f: string) =>
  createHash('sha256')
    .update(readFileSync(new URL(f, dir)))
    .digest('hex');

describe('applied migrations are frozen', () => {
  it.each([...frozen.keys()])('%s still has the text it was applied with', (file) => {
    expect(files).toContain(file);
    expect({ file, sha256: sha256(file) }).toEqual({ file, sha256: frozen.get(file) });
  });

  it('lists every migration file (a new one is added to frozen.sha256 when it lands)', () => {
    expect(files.filter((f) => !frozen.has(f))).toEqual([]);
  });
});
