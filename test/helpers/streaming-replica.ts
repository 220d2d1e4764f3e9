import { rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { asPostgres, postgresTempDir, serverOptions, startPrivatePostgres } from './private-postgres.js';

/**
 * A primary and a streaming replica of our own on loopback, for the read-replica test: the primary is a
 * private cluster (private-postgres.ts), the replica a hot standby copied from it with `pg_basebackup -R`.
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
  /** Stops both servers (immediate) and removes their directories. */
  destroy(): void;
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
  const primary = await startPrivatePostgres({ port: ports.primary });
  const dir = postgresTempDir('pp-replica-');
  const replicaData = join(dir, 'data');
  const ctl = (...args: string[]) => asPostgres('pg_ctl', ['-D', replicaData, '-s', ...args]);
  const replicaUrl = (database = 'postgres') => `postgres://postgres@127.0.0.1:${ports.replica}/${database}`;
  const startReplica = async () => {
    ctl('-o', serverOptions(ports.replica, dir), '-l', join(dir, 'log'), '-w', 'start');
    await until('replica accepts connections', async () => !!(await sql(replicaUrl(), 'select 1')));
  };
  const destroy = () => {
    try {
      ctl('-m', 'immediate', 'stop');
    } catch {
      /* not running */
    }
    rmSync(dir, { recursive: true, force: true });
    primary.destroy();
  };

  try {
    // A fast checkpoint: the copy starts at once instead of after a spread one.
    asPostgres('pg_basebackup', [
      ...['-h', '127.0.0.1', '-p', String(ports.primary), '-U', 'postgres', '-D', replicaData],
      ...['-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
    ]);
    await startReplica();
  } catch (err) {
    destroy();
    throw err;
  }

  const rs: StreamingReplica = {
    primaryUrl: (database) => primary.url(database),
    replicaUrl,
    async createDatabase(name) {
      await primary.createDatabase(name);
      await rs.caughtUp();
    },
    async caughtUp(timeoutMs = 30_000) {
      const [{ lsn }] = await sql(primary.url(), 'select pg_current_wal_lsn()::text as lsn');
      await until(
        'replica replays the primary',
        async () =>
          (await sql(replicaUrl(), 'select pg_last_wal_replay_lsn() >= $1::pg_lsn as ok', [lsn]))[0].ok,
        timeoutMs,
      );
    },
    async pauseReplay() {
      await sql(replicaUrl(), 'select pg_wal_replay_pause()');
      await until(
        'replay paused',
        async () =>
          (await sql(replicaUrl(), 'select pg_get_wal_replay_pause_state() as s'))[0].s === 'paused',
      );
    },
    async resumeReplay() {
      await sql(replicaUrl(), 'select pg_wal_replay_resume()');
    },
    stopReplica() {
      ctl('-m', 'fast', 'stop');
    },
    startReplica,
    destroy,
  };
  return rs;
}
