/**
 * `npm test`: the whole suite on a real PostgreSQL, then — when no database was given — the files where the
 * embedded database differs (and the money paths) on PGlite, the way the service runs without configuration.
 *
 *   DATABASE_URL set       every test file on that server (each file creates and drops its own database)
 *   DATABASE_URL unset     a private PostgreSQL cluster of our own (initdb in a temporary directory, a free
 *                          port; Debian's `postgresql` package installed first when the machine has none,
 *                          as the browser tests install Chromium), every test file on it, the cluster removed;
 *                          then `jest -c jest.embedded.config.js` on PGlite
 *   TEST_DATABASE=embedded every test file on PGlite (no PostgreSQL at all)
 *
 * Arguments go to Jest (`npm test -- test/ledger.test.ts`); the embedded pass then runs the same filter and
 * passes when none of its files match. Exit status: the first pass that failed.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { env } from 'node:process';
import { startPrivatePostgres } from './helpers/private-postgres.js';

// jest's package.json exports no bin path: find the package, then its bin.
const jestBin = join(dirname(createRequire(import.meta.url).resolve('jest/package.json')), 'bin', 'jest.js');
const args = process.argv.slice(2);

function jest(label: string, extra: string[], vars: Record<string, string | undefined>): number {
  console.log(`\n=== npm test: ${label}\n`);
  // As a variable, not a flag: Jest's workers and the processes tests start inherit it.
  const nodeOptions = [env.NODE_OPTIONS, '--experimental-vm-modules'].filter(Boolean).join(' ');
  const childEnv: NodeJS.ProcessEnv = { ...env, NODE_OPTIONS: nodeOptions, ...vars };
  for (const [k, v] of Object.entries(vars)) if (v === undefined) delete childEnv[k];
  const r = spawnSync(process.execPath, [jestBin, '--maxWorkers=2', ...extra, ...args], {
    stdio: 'inherit',
    env: childEnv,
  });
  return r.status ?? 1;
}

let status: number;
if (env.DATABASE_URL) {
  status = jest('every file on DATABASE_URL', [], {});
} else if (env.TEST_DATABASE === 'embedded') {
  status = jest('every file on the embedded database (PGlite)', [], { DATABASE_URL: undefined });
} else {
  const cluster = await startPrivatePostgres();
  const stop = () => cluster.destroy();
  process.once('SIGINT', () => (stop(), process.exit(130)));
  process.once('SIGTERM', () => (stop(), process.exit(143)));
  try {
    await cluster.createDatabase('test');
    status = jest(`every file on a private PostgreSQL cluster (port ${cluster.port})`, [], {
      DATABASE_URL: cluster.url('test'),
    });
  } finally {
    stop();
  }
  const embedded = jest(
    'the embedded database (PGlite): jest.embedded.config.js',
    ['-c', 'jest.embedded.config.js', '--passWithNoTests'],
    {
      DATABASE_URL: undefined,
    },
  );
  status ||= embedded;
}
process.exit(status);
