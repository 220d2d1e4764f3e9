import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';

/**
 * `npm run bench` is what issue 24 is judged by: it must run on a fresh machine and say the truth about
 * the ledger. This runs the built bench (`npm test` builds it through `pretest`) for a fraction of a
 * second per row, two rounds, on the test run's database (PostgreSQL, or the embedded one), and reads its
 * report: every row measured (the naive-statement reference too, on PostgreSQL), the medians of the
 * rounds, every served request settled, the goals and their distance in CPU. The Portkey row is off here
 * (BENCH_PORTKEY=0): it installs a package from the registry, which a test run must not need. On
 * PostgreSQL it then runs the statement micro-bench and the ablation on the database the bench kept.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'pp-bench-test-'));
const out = join(dir, 'latest.md');
let keptDatabase: string | undefined;

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  if (keptDatabase) {
    const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await c.connect();
    await c.query(`drop database if exists ${new URL(keptDatabase).pathname.slice(1)} with (force)`);
    await c.end();
  }
});

/** The bench's environment: nothing of jest's (NODE_OPTIONS), the database of this run, short rows. */
function benchEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const { NODE_OPTIONS: _ignored, ...env } = process.env;
  return {
    ...env,
    BENCH_SECONDS: '0.5',
    BENCH_WARMUP: '0.2',
    BENCH_PRIME: '0.4',
    BENCH_ROUNDS: '2',
    BENCH_PORTKEY: '0',
    BENCH_CONCURRENCY: '1,4',
    BENCH_HOT_CONCURRENCY: '4',
    BENCH_SCENARIOS: 'chat-json,responses-sse,hot',
    BENCH_USERS: '20',
    BENCH_OUT: out,
    ...extra,
  };
}

test('npm run bench measures every row, settles every answer and writes the goals with their distance', async () => {
  const { stdout } = await run(process.execPath, [join(ROOT, 'dist/bench/run.js')], {
    cwd: ROOT,
    env: benchEnv(process.env.DATABASE_URL ? { BENCH_KEEP_DB: '1' } : {}),
    timeout: 150_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  keptDatabase = /kept the bench database: (\S+)/.exec(stdout)?.[1];
  const report = readFileSync(out, 'utf8');
  const onPostgres = !!process.env.DATABASE_URL;

  // One row per target, scenario and concurrency, with nothing failed; the naive statement on PostgreSQL.
  const rows = report
    .split('\n')
    .filter((l) => /^\| (chat JSON|responses SSE|hot user \(chat JSON\)) +\| (bare|naive|service)/.test(l));
  const cells = rows.map((l) => l.split('|').map((c) => c.trim()));
  const keys = cells.map((c) => `${c[1]} / ${c[2]} / ${c[3]}`);
  const targets = onPostgres
    ? ['bare pass-through', 'naive statement', 'service']
    : ['bare pass-through', 'service'];
  expect(keys).toEqual([
    ...['chat JSON', 'responses SSE'].flatMap((s) =>
      [1, 4].flatMap((c) => targets.map((t) => `${s} / ${t} / ${c}`)),
    ),
    ...targets.slice(1).map((t) => `hot user (chat JSON) / ${t} / 4`),
  ]);
  for (const c of cells) {
    expect(Number(c[4])).toBeGreaterThan(0); // req/s: the median of the two rounds
    const rounds = c[5].split('/').map(Number);
    expect(rounds).toHaveLength(2);
    expect(Number(c[4])).toBeCloseTo((rounds[0] + rounds[1]) / 2, -1);
    expect(c[14]).toBe('0'); // errors
  }
  expect(report).toContain('- medians of 2 rounds: ');

  // The issue's table: a line per target, the bare pass-through the 1.00 of every ratio.
  expect(report).toMatch(/\| chat JSON +\| c=1 req\/s \| ratio \| c=4 req\/s \| ratio \|/);
  expect(report).toMatch(
    /\| bare pass-through \(node:http \+ undici\) +\| +\d+ \| +1\.00 \| +\d+ \| +1\.00 \|/,
  );

  // Payment was on: every 200 answer is a completed usage charge, and the ledger adds up; the naive
  // statement wrote one ledger row per answer.
  const ledger = /200 answers (\d+), completed usage charges (\d+) ok/.exec(report);
  expect(ledger).not.toBeNull();
  expect(Number(ledger![1])).toBeGreaterThan(0);
  expect(ledger![2]).toBe(ledger![1]);
  expect(report).toContain('service: ok');
  expect(report).toContain('open holds: 0 (held 0 raw) ok');
  expect(report).toContain('- [PASS] ledger proof after the run: ');
  if (onPostgres) {
    expect(report).toContain('naive statement (its own database): ok');
    const naive = /200 answers (\d+), ledger entries (\d+); debited (\d+) raw, ledger (\d+) raw/.exec(report);
    expect(naive![2]).toBe(naive![1]);
    expect(naive![4]).toBe(naive![3]);
    expect(BigInt(naive![3])).toBeGreaterThan(0n);
  }

  // Issue 24's goals, each PASS or FAIL when its rows ran, n/a with the reason otherwise.
  if (onPostgres) {
    expect(report).toMatch(
      /- \[(PASS|FAIL)\] chat JSON c=1 ≥ 0\.5x the naive statement's req\/s: \d+\.\d\dx \(\d+ against \d+ req\/s\)/,
    );
    expect(report).toMatch(
      /- \[(PASS|FAIL)\] chat JSON c=1 PostgreSQL CPU per request ≤ 2x the naive statement's: \d+\.\d\dx/,
    );
  } else
    expect(report).toContain(
      "- [n/a] chat JSON c=1 ≥ 0.5x the naive statement's req/s: no naive-statement row: it needs PostgreSQL (DATABASE_URL)",
    );
  expect(report).toContain("- [n/a] chat JSON c=100 ≥ 1.0x the naive statement's req/s: not run");
  expect(report).toContain(
    '- [n/a] chat JSON c=1 ahead of Portkey (> 1x its req/s): no Portkey row (BENCH_PORTKEY=0)',
  );
  expect(report).toContain(
    "- [n/a] responses SSE c=10 TTFB p50 added to the bare pass-through's ≤ 1 ms: not run",
  );
  expect(report).toMatch(
    /- \[(PASS|FAIL)\] hot user \(one balance\) c=4 ≥ 0\.8x the many-users chat JSON req\/s of the same run: \d+\.\d\dx/,
  );
  if (report.includes('- pinning: upstream, every proxy')) {
    expect(report).toContain('## Distance to the goals');
    expect(report).toMatch(
      /- hot user \(one balance\) c=4 ≥ 0\.8x the many-users chat JSON req\/s of the same run: needs ≤ \d+\.\d{3} ms of server-core CPU per request; measured \d+\.\d{3} \(service \d+\.\d{3}(, PostgreSQL \d+\.\d{3})?, upstream \d+\.\d{3}\)/,
    );
    if (onPostgres)
      expect(report).toMatch(
        /- chat JSON c=1 ≥ 0\.5x the naive statement's req\/s: needs ≤ \d+\.\d{3} ms of server-core CPU per request \(naive statement: \d+\.\d{3} = proxy \d+\.\d{3}, PostgreSQL \d+\.\d{3}, upstream \d+\.\d{3}\); measured \d+\.\d{3} \(service \d+\.\d{3}, PostgreSQL \d+\.\d{3}, upstream \d+\.\d{3}\), \d+\.\d\dx the budget/,
      );
  }
}, 180_000);

const onPostgres = process.env.DATABASE_URL ? test : test.skip;

onPostgres(
  'the statement micro-bench and the ablation run on the kept bench database',
  async () => {
    expect(keptDatabase).toBeDefined();
    const { stdout: tick } = await run(process.execPath, [join(ROOT, 'dist/bench/tick.js')], {
      cwd: ROOT,
      env: { ...benchEnv({}), TICK_DB: keptDatabase, TICK_PAIRS: '40', TICK_BATCH: '4', TICK_ROUNDS: '1' },
      timeout: 60_000,
    });
    expect(tick).toMatch(
      /round 1: 20 statements of 4 operation\(s\): backend CPU \d+\.\d{3} ms per statement/,
    );

    const { stdout: ablate } = await run(process.execPath, [join(ROOT, 'dist/bench/ablate.js')], {
      cwd: ROOT,
      env: { ...benchEnv({}), TICK_DB: keptDatabase, TICK_PAIRS: '40', TICK_BATCH: '1,4', TICK_ROUNDS: '1' },
      timeout: 120_000,
    });
    const steps = ablate.split('\n').filter((l) => /^\| (1|4) \| /.test(l));
    expect(steps).toHaveLength(10);
    for (const l of steps) expect(Number(l.split('|')[4])).toBeGreaterThan(0);
    // The copies are gone; the kept database is as it was (its trigger still on).
    const c = new pg.Client({ connectionString: keptDatabase });
    await c.connect();
    try {
      const { rows } = await c.query(`select tgenabled from pg_trigger where tgname = 'event_fanout'`);
      expect(rows).toEqual([{ tgenabled: 'O' }]);
      const copies = await c.query(`select datname from pg_database where datname like '%\\_ablate'`);
      expect(copies.rows).toEqual([]);
    } finally {
      await c.end();
    }
  },
  180_000,
);
