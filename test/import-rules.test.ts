import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * The import rules `npm run lint` enforces (dependency-cruiser with .dependency-cruiser.cjs): they fail on
 * a cycle (type-only imports too) and on a module importing the composition root, the app or a
 * transport, naming the files, and pass on this repository.
 */
const depcruise = path.resolve('node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');
const config = path.resolve('.dependency-cruiser.cjs');
const run = (cwd = process.cwd()) => {
  const r = spawnSync(
    process.execPath,
    [depcruise, 'src', 'rest-compat', '--config', config, '--output-type', 'err', '--no-progress'],
    { cwd, encoding: 'utf8' },
  );
  return { status: r.status, out: r.stdout + r.stderr };
};

function fixture(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'import-rules-'));
  const all = {
    'tsconfig.json': JSON.stringify({
      compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true },
      include: ['src', 'rest-compat'],
    }),
    'rest-compat/.keep.ts': 'export {};\n',
    ...files,
  };
  for (const [name, text] of Object.entries(all)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

test('this repository has no import cycle and no module importing up', () => {
  const r = run();
  expect(r.out).toMatch(/no dependency violations found \(\d+ modules, \d+ dependencies cruised\)/);
  expect(r.status).toBe(0);
});

test('a cycle fails, naming the files in order (type-only imports count)', () => {
  const dir = fixture({
    'src/modules/a/a.service.ts': "import type { B } from '../b/b.service.js';\nexport type A = B | 1;\n",
    'src/modules/b/b.service.ts': "import { c } from '../c/c.js';\nexport type B = 2;\nexport const b = c;\n",
    'src/modules/c/c.ts': "import type { A } from '../a/a.service.js';\nexport const c: A = 1;\n",
  });
  dirs.push(dir);
  const r = run(dir);
  expect(r.status).not.toBe(0);
  expect(r.out.replace(/\s+/g, ' ')).toContain(
    'error no-import-cycle: src/modules/a/a.service.ts → src/modules/b/b.service.ts → src/modules/c/c.ts → src/modules/a/a.service.ts',
  );
});

test('a module importing services.ts, app.ts or a transport fails; a transport importing services.ts passes', () => {
  const dir = fixture({
    'src/services.ts': 'export interface Services { x: 1 }\n',
    'src/app.ts': "import type { Services } from './services.js';\nexport const app = (s: Services) => s;\n",
    'src/pages/page.ts':
      "import type { Services } from '../services.js';\nexport const page = (s: Services) => s;\n",
    'rest-compat/routes.ts':
      "import type { Services } from '../src/services.js';\nexport const r = (s: Services) => s;\n",
    'src/modules/m/bag.service.ts':
      "import type { Services } from '../../services.js';\nexport type M = Services;\n",
    'src/modules/m/up.ts': "import { app } from '../../app.js';\nexport const up = app;\n",
    'src/modules/m/rest.ts': "import { r } from '../../../rest-compat/routes.js';\nexport const rest = r;\n",
  });
  dirs.push(dir);
  const r = run(dir);
  expect(r.status).not.toBe(0);
  expect(r.out).toContain('3 dependency violations (3 errors, 0 warnings)');
  expect(r.out).toContain(
    'error module-imports-composition-root: src/modules/m/bag.service.ts → src/services.ts',
  );
  expect(r.out).toContain('error module-imports-app: src/modules/m/up.ts → src/app.ts');
  expect(r.out).toContain('error module-imports-transport: src/modules/m/rest.ts → rest-compat/routes.ts');
  expect(r.out).not.toContain('src/pages/page.ts →');
});

test('outside proxy/ only its public entry is imported; paywalls/ and providers/ never import proxy/', () => {
  const dir = fixture({
    'src/modules/proxy/proxy.service.ts': 'export const proxy = 1;\n',
    'src/modules/proxy/flight.ts': 'export const flight = 1;\n',
    'src/modules/proxy/forward.ts': 'export const forward = 1;\n',
    'src/modules/proxy/relayed-response.entity.ts': 'export const entity = 1;\n',
    'src/modules/paywalls/paywall.service.ts':
      "import { proxy } from '../proxy/proxy.service.js';\nexport const p = proxy;\n",
    'src/modules/paywalls/rule.ts':
      "import { routes } from '../providers/routes.js';\nexport const rule = routes;\n",
    'src/modules/providers/routes.ts':
      "import { proxy } from '../proxy/proxy.service.js';\nexport const routes = proxy;\n",
    'src/modules/catalog/catalog.service.ts':
      "import { proxy } from '../proxy/proxy.service.js';\nimport { flight } from '../proxy/flight.js';\nexport const c = proxy + flight;\n",
    'src/db/entities.ts':
      "import { entity } from '../modules/proxy/relayed-response.entity.js';\nimport { forward } from '../modules/proxy/forward.js';\nexport const e = entity + forward;\n",
    'rest-compat/metered.ts':
      "import { flight } from '../src/modules/proxy/flight.js';\nimport { forward } from '../src/modules/proxy/forward.js';\nexport const m = flight + forward;\n",
  });
  dirs.push(dir);
  const r = run(dir);
  expect(r.status).not.toBe(0);
  expect(r.out).toContain('6 dependency violations (6 errors, 0 warnings)');
  expect(r.out).toContain(
    'error proxy-internals: src/modules/catalog/catalog.service.ts → src/modules/proxy/flight.ts',
  );
  expect(r.out).toContain(
    'error proxy-internals-from-registries: src/db/entities.ts → src/modules/proxy/forward.ts',
  );
  expect(r.out).toContain(
    'error proxy-internals-from-transport: rest-compat/metered.ts → src/modules/proxy/forward.ts',
  );
  expect(r.out).toContain(
    'error paywalls-depends-on-neither-proxy-nor-providers: src/modules/paywalls/paywall.service.ts → src/modules/proxy/proxy.service.ts',
  );
  expect(r.out).toContain(
    'error paywalls-depends-on-neither-proxy-nor-providers: src/modules/paywalls/rule.ts → src/modules/providers/routes.ts',
  );
  expect(r.out).toContain(
    'error providers-depends-not-on-proxy: src/modules/providers/routes.ts → src/modules/proxy/proxy.service.ts',
  );
});

test('events/ imports no module; the money modules import only downwards: accounts/ ◄── wallet/ ◄── users/ ◄── ledger/', () => {
  const dir = fixture({
    'src/modules/accounts/account.entity.ts':
      "import { hold } from '../ledger/holds.js';\nexport const account = hold;\n",
    'src/modules/wallet/wallet.service.ts':
      "import { user } from '../users/user.service.js';\nimport { hold } from '../ledger/holds.js';\nexport const wallet = user + hold;\n",
    'src/modules/users/user.service.ts':
      "import { hold } from '../ledger/holds.js';\nexport const user = hold;\n",
    'src/modules/users/up.ts':
      "import { account } from '../accounts/account.entity.js';\nimport { wallet } from '../wallet/wallet.service.js';\nexport const up = account + wallet;\n",
    'src/modules/ledger/holds.ts': 'export const hold = 1;\n',
    'src/modules/events/event.service.ts':
      "import { hold } from '../ledger/holds.js';\nexport const recorded = hold;\n",
    'src/modules/ledger/up.ts':
      "import { up } from '../users/up.js';\nimport { wallet } from '../wallet/wallet.service.js';\nexport const l = up + wallet;\n",
  });
  dirs.push(dir);
  const r = run(dir);
  expect(r.status).not.toBe(0);
  expect(r.out).toContain('5 dependency violations (5 errors, 0 warnings)');
  expect(r.out).toContain(
    'error events-depends-on-no-module: src/modules/events/event.service.ts → src/modules/ledger/holds.ts',
  );
  expect(r.out).toContain(
    'error accounts-is-the-bottom: src/modules/accounts/account.entity.ts → src/modules/ledger/holds.ts',
  );
  expect(r.out).toContain(
    'error wallet-depends-not-on-users: src/modules/wallet/wallet.service.ts → src/modules/users/user.service.ts',
  );
  expect(r.out).toContain(
    'error wallet-depends-not-on-ledger: src/modules/wallet/wallet.service.ts → src/modules/ledger/holds.ts',
  );
  expect(r.out).toContain(
    'error users-depends-not-on-ledger: src/modules/users/user.service.ts → src/modules/ledger/holds.ts',
  );
});
