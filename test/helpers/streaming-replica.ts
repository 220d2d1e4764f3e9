import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * A primary and a streaming replica of our own on loopback (initdb, then `pg_basebackup -R` into a hot
 * standby), with the machine's PostgreSQL binaries, for the read-replica test. Both run as the
 * `postgres` OS user when we are root (PostgreSQL refuses root), in one temporary directory.
 */
export interface StreamingReplica {
  /** postgres://postgres@127.0.0.1:<primary port>/<database> */
  primaryUrl(database?: string): string;
  /** postgres://postgres@127.0.0.1:<replica port>/<database> */
  replicaUrl(database?: string): string;
  createDatabase(name: string): Promise<void>;
  /** Waits until the replica has replayed everything the primary had written when called. */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** `pg_wal_replay_pause()`, returning once the standby says it is paused: it keeps streaming, not applying. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  stopReplica(): void;
  startReplica(): Promise<void>;
  /** Stops both servers (immediate) and removes their directory. */
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

const isRoot = process.getuid?.() === 0;

function asPostgres(tool: string, args: string[]): string {
  const cmd = join(BIN, tool);
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  try {
    return execFileSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${tool} ${args.join(' ')} failed: ${e.stderr || e.stdout || e.message}`, { cause: err });
  }
}

async function sql<R = any>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as R[];
  } finally {
    await c.end();
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startStreamingReplica(ports: {
  primary: number;
  replica: number;
}): Promise<StreamingReplica> {
  const dir = mkdtempSync(join(tmpdir(), 'pp-replica-'));
  chmodSync(dir, 0o700);
  if (isRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  const primaryData = join(dir, 'primary');
  const replicaData = join(dir, 'replica');
  // fsync off: only the servers' processes stop in this test, never the machine.
  const common = `-k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const ctl = (data: string, ...args: string[]) => asPostgres('pg_ctl', ['-D', data, '-s', ...args]);
  const url = (port: number, database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const startReplica = async () => {
    ctl(replicaData, '-o', `-p ${ports.replica} ${common}`, '-l', join(dir, 'replica.log'), '-w', 'start');
    await until('replica accepts connections', async () => !!(await sql(url(ports.replica), 'select 1')));
  };
  const destroy = () => {
    for (const data of [replicaData, primaryData]) {
      try {
        ctl(data, '-m', 'immediate', 'stop');
      } catch {
        /* not running */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    asPostgres('initdb', ['-D', primaryData, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    // Replication connections over loopback (initdb's defaults have such a line; the test does not rely on it).
    appendFileSync(join(primaryData, 'pg_hba.conf'), '\nhost replication postgres 127.0.0.1/32 trust\n');
    ctl(
      primaryData,
      '-o',
      `-p ${ports.primary} ${common} -c wal_level=replica -c max_wal_senders=4`,
      '-l',
      join(dir, 'primary.log'),
      '-w',
      'start',
    );
    // A fast checkpoint: the copy starts at once instead of after a spread one.
    asPostgres('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(ports.primary),
      '-U',
      'postgres',
      '-D',
      replicaData,
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ]);
    await startReplica();
  } catch (err) {
    destroy();
    throw err;
  }

  const rs: StreamingReplica = {
    primaryUrl: (database) => url(ports.primary, database),
    replicaUrl: (database) => url(ports.replica, database),
    async createDatabase(name) {
      await sql(url(ports.primary), `create database ${name}`);
      await rs.caughtUp();
    },
    async caughtUp(timeoutMs = 30_000) {
      const [{ lsn }] = await sql(url(ports.primary), 'select pg_current_wal_lsn()::text as lsn');
      await until(
        'replica replays the primary',
        async () =>
          (await sql(url(ports.replica), 'select pg_last_wal_replay_lsn() >= $1::pg_lsn as ok', [lsn]))[0].ok,
        timeoutMs,
      );
    },
    async pauseReplay() {
      await sql(url(ports.replica), 'select pg_wal_replay_pause()');
      await until(
        'replay paused',
        async () =>
          (await sql(url(ports.replica), 'select pg_get_wal_replay_pause_state() as s'))[0].s === 'paused',
      );
    },
    async resumeReplay() {
      await sql(url(ports.replica), 'select pg_wal_replay_resume()');
    },
    stopReplica() {
      ctl(replicaData, '-m', 'fast', 'stop');
    },
    startReplica,
    destroy,
  };
  return rs;
}
