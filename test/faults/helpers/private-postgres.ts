import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * A PostgreSQL cluster of our own (initdb in a temporary directory, its own port), so the fault suite can
 * restart it with `-m immediate`, freeze it with SIGSTOP and kill it without disturbing the machine's
 * server that other tests and CI use. Real PostgreSQL, same binaries as the machine's.
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

const BIN = (() => {
  const out = spawnSync('bash', ['-c', 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1'], {
    encoding: 'utf8',
  });
  const dir = out.stdout.trim();
  if (!dir) throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql/*/bin');
  return dir;
})();

/** PostgreSQL refuses to run as root: run its tools as the `postgres` user when we are root. */
function asPostgres(cmd: string, args: string[]): string {
  const isRoot = process.getuid?.() === 0;
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  return execFileSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
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

async function waitReady(port: number, timeoutMs = 30000): Promise<void> {
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

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'pp-faults-pg-'));
  chmodSync(dir, 0o700);
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  asPostgres(join(BIN, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  // fsync off: the machine does not crash in these tests, only PostgreSQL's processes do, and the OS keeps
  // what they wrote; it spares the 2-core machine a disk flush per commit.
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300`;
  const ctl = (...args: string[]) => asPostgres(join(BIN, 'pg_ctl'), ['-D', data, '-s', ...args]);
  const start = async () => {
    ctl('-o', opts, '-l', join(dir, 'log'), '-w', 'start');
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
