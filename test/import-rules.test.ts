import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * The import rules `npm run lint` enforces (scripts/check-imports.ts): the checker fails on a cycle and
 * on a module importing the composition root, naming the files, and passes on this repository.
 */
const script = path.resolve('scripts/check-imports.ts');
const run = (root?: string) => {
  const r = spawnSync(process.execPath, [script, ...(root ? [root] : [])], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
};

function fixture(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'import-rules-'));
  const all = {
    'tsconfig.json': JSON.stringify({
      compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true },
      include: ['src', 'rest-compat'],
    }),
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
  expect(r.out).toMatch(/check-imports: \d+ files, no cycle, no forbidden import/);
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
  expect(r.status).toBe(1);
  expect(r.out).toContain(
    'import cycle among 3 file(s): src/modules/a/a.service.ts -> src/modules/b/b.service.ts -> src/modules/c/c.ts -> src/modules/a/a.service.ts',
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
  expect(r.status).toBe(1);
  expect(r.out).toContain('check-imports: 3 problem(s)');
  expect(r.out).toContain('src/modules/m/bag.service.ts imports src/services.ts (the composition root)');
  expect(r.out).toContain('src/modules/m/up.ts imports src/app.ts (the app entry points)');
  expect(r.out).toContain('src/modules/m/rest.ts imports rest-compat/routes.ts (a transport (REST))');
  expect(r.out).not.toContain('src/pages/page.ts imports');
});
