import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/**
 * What a new user does on a fresh clone (docs/reference.md §1, README "Quick start"): `npm start` with no
 * configuration, copy the printed owner token, create a paywall, deposit, read the balance; stop with
 * SIGTERM; start again and find everything where it was. The built service runs as a child process,
 * exactly as `npm start` runs it (`npm test` builds it first through `pretest`).
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'dist/src/main.js');
/**
 * Readiness is the signal (the first 200 from /healthz, the worker's "started" line), not a time: these are
 * only overall deadlines so that a broken start fails instead of hanging, generous enough for a first start
 * (an embedded database created and migrated) on a loaded 2-core machine.
 */
const READY_DEADLINE_MS = 180_000;
/** SHUTDOWN_GRACE_MS default (10 s) plus closing the database, with room for a loaded machine. */
const EXIT_WITHIN_MS = 60_000;
/** Per test: a few starts and stops, each bounded by the deadlines above. */
const TEST_TIMEOUT_MS = 600_000;

/** Every variable src/config.ts reads, plus what jest sets: the child starts as on a fresh machine. */
const CONFIG_VARS = [
  'NODE_ENV',
  'NODE_OPTIONS',
  'PORT',
  'HOST',
  'DATABASE_URL',
  'DATA_DIR',
  'PUBLIC_BASE_URL',
  'BOOTSTRAP_OWNER_TOKEN',
  'METRICS_TOKEN',
  'LOG_LEVEL',
  'ENCRYPTION_KEY',
  'WEBHOOK_MAX_ATTEMPTS',
  'WEBHOOK_BACKOFF_BASE_MS',
  'WEBHOOK_TIMEOUT_MS',
  'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
  'WEBHOOK_WORKER',
  'WEBHOOK_POLL_MS',
  'SHUTDOWN_GRACE_MS',
  'UPSTREAM_TIMEOUT_MS',
  'UPSTREAM_MAX_DURATION_MS',
  'UPSTREAM_MAX_BYTES',
  'MAX_WS_CONNECTIONS',
];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

interface Running {
  proc: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Milliseconds from spawn to the first 200 from /healthz. */
  healthyAfterMs: number;
}

const running = new Set<ChildProcess>();

/**
 * `viaNpm`: as a user types it, `npm start` (its prestart build skipped with --ignore-scripts: `npm test`
 * built dist/ already, and other test files read it), so that signals go through npm and its shell.
 */
async function startService(env: Record<string, string>, viaNpm = false): Promise<Running> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does it)`);
  const childEnv: Record<string, string | undefined> = { ...process.env };
  for (const k of CONFIG_VARS) delete childEnv[k];
  const port = await freePort();
  Object.assign(childEnv, { PORT: String(port) }, env);
  const started = Date.now();
  const proc = spawn(viaNpm ? 'npm' : process.execPath, viaNpm ? ['start', '--ignore-scripts'] : [MAIN], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close', not 'exit': the process's last output (its "stopped" line) has reached the pipes by then.
    proc.once('close', (code, signal) => {
      running.delete(proc);
      resolve({ code, signal });
    }),
  );
  let gone = false;
  void exited.then(() => (gone = true));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (gone) throw new Error(`the service exited before it was healthy:\n${out}\n${err}`);
    if (Date.now() - started > READY_DEADLINE_MS)
      throw new Error(`not healthy within ${READY_DEADLINE_MS} ms:\n${out}\n${err}`);
    const ok = await fetch(`${url}/healthz`)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, url, stdout: () => out, stderr: () => err, exited, healthyAfterMs: Date.now() - started };
}

/** Waits until a process's output (read by `out`) holds `text`; throws with the output past `deadlineMs`. */
async function untilOutput(out: () => string, text: string, deadlineMs = READY_DEADLINE_MS): Promise<void> {
  const started = Date.now();
  while (!out().includes(text)) {
    if (Date.now() - started > deadlineMs) throw new Error(`no ${text} in the output:\n${out()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function stopService(s: Running): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  s.proc.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`no exit within ${EXIT_WITHIN_MS} ms after SIGTERM:\n${s.stdout()}\n${s.stderr()}`)),
      EXIT_WITHIN_MS,
    );
  });
  try {
    return await Promise.race([s.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

afterAll(() => {
  // Only on failure: never leave a service running behind the test run.
  for (const p of running) p.kill('SIGKILL');
});

const TOKEN_LINE = /^Owner token \(shown once, keep it\): (ot_[A-Za-z0-9_-]{20,})$/m;

async function call(
  url: string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(url + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return {
    status: res.status,
    body: (await res.json()) as any,
    replayed: res.headers.get('idempotent-replayed'),
  };
}

/** The README quick start, step by step: the same requests as its curl lines, the same answers. */
async function quickStart(url: string, ownerToken: string) {
  // The dashboard (docs/reference.md §12) is served by the built service on the same port.
  const dashboard = await fetch(`${url}/dashboard`);
  expect(dashboard.status).toBe(200);
  expect(await dashboard.text()).toContain('<div id="root"></div>');
  const created = await call(url, 'POST', '/graphql', ownerToken, {
    query:
      'mutation { createPaywall(input: {name: "My app", mode: DEFAULT}) { apiKey paywall { id name mode } } }',
  });
  expect(created.status).toBe(200);
  expect(created.body.errors).toBeUndefined();
  const { apiKey, paywall } = created.body.data.createPaywall;
  expect(apiKey).toMatch(/^pk_live_/);
  expect(paywall).toMatchObject({ name: 'My app', mode: 'DEFAULT' });

  const deposit = () =>
    call(
      url,
      'POST',
      '/v1/user/balance/deposit',
      apiKey,
      { user: 'alice', amount: '5' },
      {
        'Idempotency-Key': 'welcome-alice',
      },
    );
  const first = await deposit();
  expect(first).toEqual({
    status: 200,
    body: { balance: '5000000', balanceFormatted: '5.000000' },
    replayed: null,
  });
  // README: the same deposit again changes nothing and replays the first answer.
  expect(await deposit()).toEqual({ ...first, replayed: 'true' });

  const charge = await call(
    url,
    'POST',
    '/v1/user/charge',
    apiKey,
    { user: 'alice', amount: '0.25' },
    {
      'Idempotency-Key': 'run-1',
    },
  );
  expect(charge.status).toBe(200);
  expect(charge.body).toEqual({
    success: true,
    message: 'Charged 0.25 USDC.',
    chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
  });

  const balance = await call(url, 'GET', '/v1/user/balance?user=alice', apiKey);
  expect(balance.body).toEqual({ balance: '4750000', balanceFormatted: '4.750000' });
  return { apiKey, paywallId: paywall.id as string };
}

/** Fresh start → quick start → SIGTERM → restart on the same data → nothing lost, no second owner. */
async function firstRunAndRestart(env: Record<string, string>) {
  const first = await startService(env);
  // The service answers /healthz as soon as it listens; its 'listening' log line can reach this pipe a
  // moment later on a loaded machine (CI saw the line missing once).
  await untilOutput(first.stdout, '"msg":"listening"');
  const out = first.stdout();
  const match = TOKEN_LINE.exec(out);
  expect(match).not.toBeNull();
  const ownerToken = match![1];
  // Apart from the owner-token banner, stdout is JSON log lines, and the token is in none of them.
  const logLines = out.split('\n').filter((l) => l.trim() && !TOKEN_LINE.test(l));
  for (const line of logLines) {
    expect(() => JSON.parse(line)).not.toThrow();
    expect(line).not.toContain(ownerToken);
  }
  expect(logLines.map((l) => JSON.parse(l).msg)).toEqual(
    expect.arrayContaining(['migrations applied', 'listening']),
  );

  const { apiKey, paywallId } = await quickStart(first.url, ownerToken);
  expect((await fetch(`${first.url}/readyz`)).status).toBe(200);

  expect(await stopService(first)).toEqual({ code: 0, signal: null });
  expect(first.stdout()).toMatch(/"msg":"stopped"/);

  const second = await startService(env);
  try {
    expect(second.stdout()).not.toMatch(/Owner token/);
    expect(second.stdout()).not.toMatch(/"msg":"migrations applied"/);
    const balance = await call(second.url, 'GET', '/v1/user/balance?user=alice', apiKey);
    expect(balance.status).toBe(200);
    expect(balance.body).toEqual({ balance: '4750000', balanceFormatted: '4.750000' });
    const mine = await call(second.url, 'POST', '/graphql', ownerToken, {
      query: '{ paywalls { id name } }',
    });
    expect(mine.body.data.paywalls).toEqual([{ id: paywallId, name: 'My app' }]);
  } finally {
    expect(await stopService(second)).toEqual({ code: 0, signal: null });
  }
}

describe('npm start on a fresh clone (docs/reference.md §1)', () => {
  it(
    'embedded database, no configuration: healthy, owner token printed once, quick start works, data survives a restart, SIGTERM exits 0',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-startup-'));
      try {
        await firstRunAndRestart({ DATA_DIR: dataDir });
        expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(true);
      } finally {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a SIGTERM to `npm start` reaches the service: it shuts down gracefully and frees its port',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-startup-npm-'));
      try {
        const s = await startService({ DATA_DIR: dataDir }, true);
        // npm forwards SIGTERM to its script's shell; only a shell that exec'ed the service passes it on.
        expect(await stopService(s)).toMatchObject({ code: 0 });
        expect(s.stdout()).toMatch(/"msg":"stopped"/);
        const stillThere = await fetch(`${s.url}/healthz`).then(
          () => true,
          () => false,
        );
        expect(stillThere).toBe(false);
      } finally {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a SIGTERM while the service is still starting (migrating a fresh DATA_DIR) stops it cleanly: exit 0, and the next start works',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-startup-early-'));
      const env: Record<string, string | undefined> = { ...process.env };
      for (const k of CONFIG_VARS) delete env[k];
      const port = await freePort();
      const proc = spawn(process.execPath, [MAIN], {
        cwd: ROOT,
        env: { ...env, DATA_DIR: dataDir, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      running.add(proc);
      let out = '';
      proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
      proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        // 'close': the process's last output ("stopped") has reached the pipes by then.
        proc.once('close', (code, signal) => resolve({ code, signal })),
      );
      try {
        // The database is open and the migrations of a fresh directory are running: a process manager
        // stopping the service now (a rollout, Ctrl-C) must see a clean exit, not death by signal.
        await untilOutput(() => out, '"msg":"database opened"');
        proc.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          exited,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no exit after SIGTERM:\n${out}`)), READY_DEADLINE_MS);
          }),
        ]).finally(() => clearTimeout(timer));
        expect(result).toEqual({ code: 0, signal: null });
        expect(out).toMatch(/"msg":"stopped"/);
        expect(out).not.toMatch(/"msg":"listening"/);
        running.delete(proc);
        // Nothing half-done is left behind: the next start on the same directory is healthy.
        const again = await startService({ DATA_DIR: dataDir });
        expect(await stopService(again)).toEqual({ code: 0, signal: null });
      } finally {
        running.delete(proc);
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a SIGTERM to `npm run worker` reaches the webhook worker: it stops gracefully',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-startup-worker-'));
      const env: Record<string, string | undefined> = { ...process.env };
      for (const k of CONFIG_VARS) delete env[k];
      const proc = spawn('npm', ['run', 'worker', '--ignore-scripts'], {
        cwd: ROOT,
        env: { ...env, DATA_DIR: dataDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      running.add(proc);
      let out = '';
      proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
      proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
      const exited = new Promise<number | null>((resolve) => proc.once('close', (code) => resolve(code)));
      try {
        await untilOutput(() => out, 'webhook worker started');
        proc.kill('SIGTERM');
        expect(await exited).toBe(0);
        expect(out).toMatch(/"msg":"webhook worker stopped"/);
      } finally {
        running.delete(proc);
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  (process.env.DATABASE_URL ? it : it.skip)(
    'real PostgreSQL through DATABASE_URL: same behaviour on a fresh database (skipped on the embedded pass: needs DATABASE_URL)',
    async () => {
      const base = process.env.DATABASE_URL!;
      const name = `pp_startup_${randomBytes(6).toString('hex')}`;
      const admin = new pg.Client({ connectionString: base });
      await admin.connect();
      await admin.query(`create database ${name}`);
      const url = new URL(base);
      url.pathname = `/${name}`;
      // DATA_DIR still holds the generated encryption key; the data itself is in PostgreSQL.
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-startup-pg-'));
      try {
        await firstRunAndRestart({ DATABASE_URL: url.toString(), DATA_DIR: dataDir });
        expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(false);
      } finally {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
        await admin.query(`drop database if exists ${name} with (force)`);
        await admin.end();
      }
    },
    120_000,
  );
});

/** Runs a built entry point (dist/src/…) to its exit, with a fresh environment plus `env`. */
async function runToExit(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const childEnv: Record<string, string | undefined> = { ...process.env };
  for (const k of CONFIG_VARS) delete childEnv[k];
  Object.assign(childEnv, env);
  const proc = spawn(process.execPath, [join(ROOT, 'dist/src', script), ...args], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  let stdout = '';
  let stderr = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
  running.delete(proc);
  return { code, stdout, stderr };
}

/** A pid that no process has any more: a child that has exited. */
async function deadPid(): Promise<number> {
  const p = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((r) => p.once('exit', r));
  return p.pid!;
}

describe('one process per embedded DATA_DIR; a busy port (docs/reference.md §18)', () => {
  it(
    'a second service, worker or admin on the same DATA_DIR exits 1 naming the directory and the holder’s pid; the first keeps serving, and its data is all there after a restart',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-lock-'));
      try {
        const first = await startService({ DATA_DIR: dataDir });
        const ownerToken = TOKEN_LINE.exec(first.stdout())![1];
        const { apiKey } = await quickStart(first.url, ownerToken);
        const holder = first.proc.pid!;
        const lockFile = join(dataDir, 'paywall-proxy.lock');
        expect(readFileSync(lockFile, 'utf8').trim()).toBe(String(holder));

        const message = `DATA_DIR ${dataDir} is in use by another process (pid ${holder})`;
        const second = await runToExit('main.js', [], { DATA_DIR: dataDir, PORT: String(await freePort()) });
        expect(second.code).toBe(1);
        expect(second.stderr.trim().split('\n')).toHaveLength(1);
        expect(second.stderr).toContain(message);
        expect(second.stdout).not.toMatch(/Owner token/);
        const worker = await runToExit('worker.js', [], { DATA_DIR: dataDir });
        expect({ code: worker.code, said: worker.stderr.includes(message) }).toEqual({ code: 1, said: true });
        // The admin tools too: they would open the same files. The message is the lock's, nothing else runs.
        const admin = await runToExit('admin.js', ['withdrawals', 'list'], { DATA_DIR: dataDir });
        expect({
          code: admin.code,
          stdout: admin.stdout,
          lines: admin.stderr.trim().split('\n').length,
        }).toEqual({
          code: 1,
          stdout: '',
          lines: 1,
        });
        expect(admin.stderr).toContain(message);
        expect(existsSync(join(dataDir, 'admin.sock'))).toBe(false);

        // The first one still serves, with its lock, and what it acknowledged is kept.
        expect(readFileSync(lockFile, 'utf8').trim()).toBe(String(holder));
        const deposit = await call(first.url, 'POST', '/v1/user/balance/deposit', apiKey, {
          user: 'bob',
          amount: '2',
        });
        expect(deposit).toMatchObject({ status: 200, body: { balance: '2000000' } });
        expect(await stopService(first)).toEqual({ code: 0, signal: null });
        expect(existsSync(lockFile)).toBe(false);

        const again = await startService({ DATA_DIR: dataDir });
        try {
          const bob = await call(again.url, 'GET', '/v1/user/balance?user=bob', apiKey);
          expect(bob.body).toEqual({ balance: '2000000', balanceFormatted: '2.000000' });
        } finally {
          expect(await stopService(again)).toEqual({ code: 0, signal: null });
        }
        // With the service stopped, the admin tools run.
        const verify = await runToExit('admin.js', ['ledger', 'verify'], { DATA_DIR: dataDir });
        expect(verify.code).toBe(0);
        expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true });
      } finally {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'admin --help and a wrong command answer without the database: no lock taken, none created, none needed while the service holds it',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-admin-help-'));
      try {
        // A live process (this test) holds the directory, as a running service would.
        const lockFile = join(dataDir, 'paywall-proxy.lock');
        writeFileSync(lockFile, `${process.pid}\n`);
        const help = await runToExit('admin.js', ['--help'], { DATA_DIR: dataDir });
        expect({ code: help.code, stderr: help.stderr }).toEqual({ code: 0, stderr: '' });
        expect(help.stdout).toMatch(/^usage: npm run admin -- withdrawals list/);
        const wrong = await runToExit('admin.js', ['withdrawals', 'frobnicate'], { DATA_DIR: dataDir });
        expect({ code: wrong.code, stdout: wrong.stdout }).toEqual({ code: 2, stdout: '' });
        expect(wrong.stderr).toMatch(/^usage: npm run admin --/);
        const badStatus = await runToExit('admin.js', ['withdrawals', 'list', '--status', 'LOST'], {
          DATA_DIR: dataDir,
        });
        expect(badStatus.code).toBe(2);
        expect(badStatus.stderr).toMatch(/^error: unknown status LOST\nusage:/);
        // Nothing was opened or created, and the holder's lock is untouched.
        expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(false);
        expect(readFileSync(lockFile, 'utf8').trim()).toBe(String(process.pid));
      } finally {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a lock left by a process that died is taken over',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-lock-stale-'));
      try {
        const lockFile = join(dataDir, 'paywall-proxy.lock');
        writeFileSync(lockFile, `${await deadPid()}\n`);
        const s = await startService({ DATA_DIR: dataDir });
        expect(readFileSync(lockFile, 'utf8').trim()).toBe(String(s.proc.pid));
        expect(await stopService(s)).toEqual({ code: 0, signal: null });
        expect(existsSync(lockFile)).toBe(false);
        // The same for the admin tools (they release it on exit too).
        writeFileSync(lockFile, `${await deadPid()}\n`);
        const verify = await runToExit('admin.js', ['ledger', 'verify'], { DATA_DIR: dataDir });
        expect(verify.code).toBe(0);
        expect(existsSync(lockFile)).toBe(false);
      } finally {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a port in use: exit 1 with one line naming the port, before the database is opened',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pp-port-'));
      const busy = createServer();
      await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
      const port = (busy.address() as { port: number }).port;
      try {
        const r = await runToExit('main.js', [], {
          DATA_DIR: dataDir,
          PORT: String(port),
          HOST: '127.0.0.1',
        });
        expect(r.code).toBe(1);
        expect(r.stderr.trim().split('\n')).toEqual([
          `port ${port} is already in use (HOST 127.0.0.1): another process is listening there. Stop it, or set PORT to a free port.`,
        ]);
        expect(r.stdout).not.toMatch(/"msg":"listening"|Owner token/);
        // Found before anything was opened: no database was created, no lock left behind.
        expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(false);
        expect(existsSync(join(dataDir, 'paywall-proxy.lock'))).toBe(false);
      } finally {
        await new Promise((r) => busy.close(r));
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      }
    },
    TEST_TIMEOUT_MS,
  );
});
