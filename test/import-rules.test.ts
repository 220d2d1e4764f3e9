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
