import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * A PostgreSQL cluster of our own (initdb in a temporary directory, its own port), so the fault suite can
 * restart it with `-m immediate`, freeze it with SIGSTOP and kill it, and the read-replica test can copy
 * it into a standby, without disturbing the machine's server that other tests and CI use. Real
 * PostgreSQL, same binaries as the machine's.
 */
export interface PrivatePostgres {
  port: number;
  /** postgres://postgres@127.0.0.1:<port>/<database> */
  url(database?: string): string;
  /** `pg_ctl restart -m immediate`: every connection dies at once, like a crash; WAL recovery on start. */
  restartImmediate(): Promise<void>;
  stop(mode?: 'fast' | 'immediate'): void;
  start(): Promise<void>;
  /** SIGSTOP the postmaster and every backend: connections stay open and nothing answers. */
  freeze(): void;
  thaw(): void;
  createDatabase(name: string): Promise<string>;
  destroy(): void;
}

/**
 * The newest PostgreSQL server binaries on the machine. Where there are none (a fresh machine with no
 * PostgreSQL, running the README's `npm ci && npm test`), Debian's `postgresql` package is installed first,
 * as the browser tests install Chromium (tests run as root there): these tests never skip. The package's own
 * cluster is not needed and is left stopped; only its binaries and the `postgres` user are used.
 */
let binDir: string | undefined;
function postgresBin(): string {
  if (binDir) return binDir;
  const find = () =>
    spawnSync('bash', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1'], {
      encoding: 'utf8',
    }).stdout.trim();
  let dir = find();
  if (!dir) {
    execFileSync(
      'bash',
      ['-c', 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql'],
      {
        stdio: 'inherit',
      },
    );
    dir = find();
  }
  if (!dir)
    throw new Error(
      'PostgreSQL binaries not found under /usr/lib/postgresql/*/bin after installing postgresql',
    );
  return (binDir = dir);
}

const isRoot = process.getuid?.() === 0;

/**
 * Runs one of PostgreSQL's tools (`initdb`, `pg_ctl`, `pg_basebackup`, …) from the machine's binaries,
 * as the `postgres` user when we are root (PostgreSQL refuses root). A failure says what the tool said.
 */
export function asPostgres(tool: string, args: string[]): string {
  const cmd = join(postgresBin(), tool);
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  try {
    return execFileSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${tool} ${args.join(' ')} failed: ${e.stderr || e.stdout || e.message}`, { cause: err });
  }
}

/**
 * The server options of a private cluster on `port` with its socket in `socketDir` (a standby of one needs
 * the same: max_connections may not be lower than its primary's). fsync off: the machine does not crash
 * in these tests, only PostgreSQL's processes do, and the OS keeps what they wrote; it spares the 2-core
 * machine a disk flush per commit.
 */
export const serverOptions = (port: number, socketDir: string): string =>
  `-p ${port} -k ${socketDir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300`;

/** A new temporary directory the `postgres` user owns (mode 700), for data directories and sockets. */
export function postgresTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o700);
  if (isRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  return dir;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Until the server answers a query (the signal); the deadline only ends a broken start on a loaded machine. */
async function waitReady(port: number, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
    try {
      await c.connect();
      await c.query('select 1');
      await c.end();
      return;
    } catch (err) {
      await c.end().catch(() => {});
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * Starts a cluster of our own. `port`: a fixed one (default: a free one the OS picks). Its defaults
 * (`wal_level = replica`, WAL senders, initdb's trusted loopback replication line) let a standby copy it
 * (streaming-replica.ts).
 */
export async function startPrivatePostgres(opts: { port?: number } = {}): Promise<PrivatePostgres> {
  const dir = postgresTempDir('pp-private-pg-');
  const data = join(dir, 'data');
  asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = opts.port ?? (await freePort());
  const ctl = (...args: string[]) => asPostgres('pg_ctl', ['-D', data, '-s', ...args]);
  const start = async () => {
    ctl('-o', serverOptions(port, dir), '-l', join(dir, 'log'), '-w', 'start');
    await waitReady(port);
  };
  await start();
  const pids = (): number[] => {
    const main = Number(spawnSync('head', ['-1', join(data, 'postmaster.pid')], { encoding: 'utf8' }).stdout);
    const children = spawnSync('pgrep', ['-P', String(main)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number);
    return [main, ...children];
  };
  let frozen: number[] = [];
  const pp: PrivatePostgres = {
    port,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async restartImmediate() {
      ctl('-m', 'immediate', 'stop');
      await start();
    },
    stop(mode = 'fast') {
      ctl('-m', mode, 'stop');
    },
    start,
    freeze() {
      frozen = pids();
      for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    },
    thaw() {
      for (const pid of frozen) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          /* gone */
        }
      }
      frozen = [];
    },
    async createDatabase(name) {
      const c = new pg.Client({ connectionString: pp.url() });
      await c.connect();
      try {
        await c.query(`create database ${name}`);
      } finally {
        await c.end();
      }
      return pp.url(name);
    },
    destroy() {
      pp.thaw();
      try {
        ctl('-m', 'immediate', 'stop');
      } catch {
        /* already down */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return pp;
}
