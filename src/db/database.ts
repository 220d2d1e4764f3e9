import { AsyncLocalStorage } from 'node:async_hooks';
import { mkdirSync } from 'node:fs';
import { MikroORM as PgORM, type EntityManager } from '@mikro-orm/postgresql';
import type { MikroORM } from '@mikro-orm/core';
import { MikroORM as PgliteORM } from '@mikro-orm/pglite';
import { Migrator } from '@mikro-orm/migrations';
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { entities } from './entities.js';
import { migrationsList } from '../../migrations/index.js';
import { withMigrationSecrets, type SecretsConfig } from './migration-secrets.js';
import { unavailableOr } from './db-errors.js';
import { lockDataDir } from './data-dir-lock.js';
import type { Logger } from '../shared/logger.js';
import type { Config } from '../config.js';

/** Anything raw SQL with `$n` parameters can run on: the pool, or an open transaction. */
export interface Sql {
  query<R = Record<string, any>>(text: string, params?: unknown[], name?: string): Promise<R[]>;
}

export type Tx = Sql & { em: EntityManager };

export interface DatabaseOptions {
  /** postgres://… for a real PostgreSQL; undefined for the embedded PGlite. */
  url?: string;
  /**
   * PostgreSQL only: a streaming replica of `url`'s database (DATABASE_READ_URL), with the same pool size
   * and timeouts. Nothing reads there unless asked ({@link Database.queryReplica}); see src/db/read-replica.ts.
   */
  readUrl?: string;
  /** PGlite data directory, or `memory://`. */
  dataDir?: string;
  /**
   * PGlite only: start from this data-directory dump (PGlite `dumpDataDir()`) instead of running initdb.
   * Tests use a dump of an already migrated database: seconds saved per test file.
   */
  loadDataDir?: Blob;
  debug?: boolean;
  /**
   * PostgreSQL only. Longest a statement may run: the server cancels it (`statement_timeout`), and the
   * client gives up one second later (`query_timeout`: a frozen or unreachable server answers nothing)
   * and discards that connection. Unset: unbounded (the service passes DATABASE_STATEMENT_TIMEOUT_MS).
   */
  statementTimeoutMs?: number;
  /**
   * PostgreSQL only. Longest wait for a pool connection, a new one's connect included (pg-pool
   * `connectionTimeoutMillis`). Unset: unbounded (the service passes DATABASE_ACQUIRE_TIMEOUT_MS).
   */
  acquireTimeoutMs?: number;
  /** Connections of the pool (default 20). */
  poolMax?: number;
  /** PostgreSQL only: connections of the separate pool of {@link Database.background} (default 4). */
  backgroundPoolMax?: number;
  /** Where LISTEN reconnects are reported; silent when unset. */
  log?: Logger;
}

type Listener = (payload: string) => void;

/**
 * LISTEN reconnect backoff: 200 ms doubling to at most 1 s, each delay jittered to 50–100 %. The cap is
 * how long after PostgreSQL is back notifications may still be missed (stale caches, live events not
 * delivered): one connection per process tries at most once a second, which costs nothing.
 */
const RECONNECT_BASE_MS = 200;
const RECONNECT_CAP_MS = 1000;
/** The LISTEN connection runs `select 1` this often: a connection that died silently is noticed. */
const LISTEN_HEARTBEAT_MS = 15_000;
/** Client-side margin over statement_timeout, so a live server cancels first and keeps the connection. */
const QUERY_TIMEOUT_MARGIN_MS = 1000;

/** A FIFO lock; PGlite is one connection, so every unit of work on it runs alone. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

/**
 * The database: MikroORM for the management API (entities, unit of work, migrations) and raw,
 * parameterised SQL on the same connections for the money path and events. On real PostgreSQL raw
 * statements go straight to the pg pool (named prepared statements); on PGlite every unit of work is
 * serialised, because its single connection would otherwise mix concurrent transactions.
 */
export class Database {
  readonly kind: 'postgres' | 'pglite';
  private readonly lock = new Mutex();
  private readonly inLock = new AsyncLocalStorage<boolean>();
  private listeners = new Map<string, Set<Listener>>();
  private reconnectHandlers = new Set<() => void>();
  /** The LISTEN connection while it is up. */
  private listenClient?: pg.Client;
  /** A connect of the LISTEN connection under way (the first one, or a reconnect attempt). */
  private connecting?: Promise<pg.Client>;
  /** Set from the loss of the LISTEN connection until it is back (the reconnect loop owns it then). */
  private lostAt?: number;
  private reconnectTimer?: NodeJS.Timeout;
  private heartbeat?: NodeJS.Timeout;
  private reconnects = 0;
  private closed = false;
  /** The background pool, opened on first use (PostgreSQL only). */
  private backgroundDb?: Promise<Database>;

  private constructor(
    readonly orm: MikroORM,
    private readonly opts: DatabaseOptions,
    private readonly unlock?: () => void,
  ) {
    this.kind = opts.url ? 'postgres' : 'pglite';
  }

  /**
   * Opens the database. An embedded database on disk is locked for this process first
   * (src/db/data-dir-lock.ts): a second process on the same DATA_DIR gets DataDirLockedError.
   */
  static async open(opts: DatabaseOptions): Promise<Database> {
    const onDisk = !opts.url && opts.dataDir !== undefined && !opts.dataDir.startsWith('memory:');
    const unlock = onDisk ? lockDataDir(opts.dataDir!) : undefined;
    try {
      return new Database(await Database.init(opts, true), opts, unlock);
    } catch (err) {
      unlock?.();
      throw err;
    }
  }

  /** The database of a long-running process (the API, the worker): where the config says, with its timeouts. */
  static openForService(config: Config, log: Logger): Promise<Database> {
    if (config.DATABASE_READ_URL && !config.DATABASE_URL)
      log.warn(
        'DATABASE_READ_URL is ignored without DATABASE_URL: the embedded database has no replica; every read goes to it',
      );
    return Database.open({
      url: config.DATABASE_URL,
      readUrl: config.DATABASE_URL ? config.DATABASE_READ_URL : undefined,
      dataDir: config.DATA_DIR,
      statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
      acquireTimeoutMs: config.DATABASE_ACQUIRE_TIMEOUT_MS,
      poolMax: config.DATABASE_POOL_MAX,
      backgroundPoolMax: config.DATABASE_BACKGROUND_POOL_MAX,
      log,
    });
  }

  /**
   * The handle background work uses (webhook delivery, sweepers): on PostgreSQL a second, small pool of
   * its own, so a flood of API reads that takes every connection of the main pool cannot starve it, and
   * background work cannot take the API's connections either. PGlite is one connection: this same handle.
   * Closed with this one.
   */
  background(): Promise<Database> {
    // Closed: no new pool (its statements fail as this handle's do).
    if (this.kind === 'pglite' || this.closed) return Promise.resolve(this);
    // Background work writes, or reads to decide: it never needs the replica.
    this.backgroundDb ??= Database.open({
      ...this.opts,
      readUrl: undefined,
      poolMax: this.opts.backgroundPoolMax ?? 4,
    }).catch((err) => {
      this.backgroundDb = undefined; // the next caller tries again
      throw err;
    });
    return this.backgroundDb;
  }

  private static async init(opts: DatabaseOptions, bounded: boolean): Promise<MikroORM> {
    const common = {
      entities,
      extensions: [Migrator],
      debug: opts.debug ?? false,
      migrations: {
        migrationsList,
        path: 'migrations',
        pathTs: 'migrations',
        snapshotOnMigrate: false,
        transactional: true,
        allOrNothing: true,
        silent: true,
      },
      // Entities are defined with defineEntity; nothing to discover at run time.
      discovery: { warnWhenNoEntities: false },
      allowGlobalContext: false,
    };
    let orm: MikroORM;
    if (opts.url) {
      // MikroORM's read replica (it inherits the pool and driver options, so the same timeouts and
      // dead-connection guards). preferReadReplicas: false keeps every read on the primary unless it asks
      // for the replica by name: money and idempotency can never drift there by default.
      const replica =
        bounded && opts.readUrl
          ? { replicas: [{ name: 'read', clientUrl: opts.readUrl }], preferReadReplicas: false }
          : {};
      orm = (await PgORM.init({
        ...common,
        clientUrl: opts.url,
        pool: { min: 0, max: bounded ? (opts.poolMax ?? 20) : 1 },
        driverOptions: bounded ? poolOptions(opts) : {},
        ...replica,
      } as any)) as any;
    } else {
      const dataDir = opts.dataDir ?? 'memory://';
      if (!dataDir.startsWith('memory:')) mkdirSync(dataDir, { recursive: true });
      // MikroORM copies its options, and a copied Blob loses its internals ("Illegal invocation"):
      // PGlite gets a plain object with the two members it reads.
      const dump = opts.loadDataDir;
      const load = dump
        ? { driverOptions: { loadDataDir: { type: dump.type, arrayBuffer: () => dump.arrayBuffer() } } }
        : {};
      orm = (await PgliteORM.init({ ...common, dbName: dataDir, ...load } as any)) as any;
    }
    return orm;
  }

  /**
   * Apply pending migrations (both drivers run the same list). On PostgreSQL they run on a connection of
   * their own without the request timeouts: a migration of a large table may rightly take minutes.
   * `secrets` (the service's config) gives the migrations that encrypt existing rows their key; without
   * it, such a migration fails when it has rows.
   */
  async migrate(secrets?: SecretsConfig): Promise<string[]> {
    const applied = await this.migrator((orm) => withMigrationSecrets(secrets, () => orm.migrator.up()));
    return applied.map((m) => m.name);
  }

  /** Revert every migration (used by the migration round-trip test). */
  async migrateDownAll(secrets?: SecretsConfig): Promise<void> {
    await this.migrator((orm) => withMigrationSecrets(secrets, () => orm.migrator.down({ to: 0 })));
  }

  private async migrator<T>(fn: (orm: MikroORM) => Promise<T>): Promise<T> {
    if (this.kind === 'pglite') return this.exclusive(() => fn(this.orm));
    const orm = await Database.init(this.opts, false);
    try {
      return await fn(orm);
    } finally {
      await orm.close(true);
    }
  }

  private async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.kind === 'postgres' || this.inLock.getStore()) return fn();
    return this.lock.run(() => this.inLock.run(true, fn));
  }

  private async pgPool(): Promise<pg.Pool> {
    return (await (this.orm.em.getConnection() as any).getNativeClient()) as pg.Pool;
  }

  private async pglite(): Promise<PGlite> {
    return (await (this.orm.em.getConnection() as any).getNativeClient()) as PGlite;
  }

  /** One statement outside any transaction (autocommit). `name` makes it a prepared statement on PostgreSQL. */
  async query<R = Record<string, any>>(text: string, params: unknown[] = [], name?: string): Promise<R[]> {
    if (this.kind === 'postgres') {
      try {
        const pool = await this.pgPool();
        const res = await pool.query({ text, values: params as any[], name });
        return res.rows as R[];
      } catch (err) {
        throw unavailableOr(err);
      }
    }
    return this.exclusive(async () => {
      const res = await (await this.pglite()).query(text, params as any[]);
      return res.rows as R[];
    });
  }

  /** True when a read replica is configured (PostgreSQL with DATABASE_READ_URL). */
  get hasReplica(): boolean {
    return this.kind === 'postgres' && !!this.opts.readUrl;
  }

  /**
   * One statement on the read replica (autocommit), errors thrown as the driver gives them. Only
   * {@link ReadReplica} calls it: it decides which reads may see lag, and falls back to the primary.
   */
  async queryReplica<R = Record<string, any>>(
    text: string,
    params: unknown[] = [],
    name?: string,
  ): Promise<R[]> {
    if (!this.hasReplica) throw new Error('no read replica is configured');
    const pool = (await (this.orm.em.getConnection('read') as any).getNativeClient()) as pg.Pool;
    const res = await pool.query({ text, values: params as any[], name });
    return res.rows as R[];
  }

  /**
   * A transaction with both an EntityManager (unit of work, flushed before commit) and raw SQL on the
   * same connection. Rolls back when `fn` throws. A lost or timed-out connection is the 503 DomainError
   * `unavailable` (the server rolls back what the connection had not committed).
   */
  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.unavailableAsDomainError(() => this.transactionRaw(fn));
  }

  private transactionRaw<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.exclusive(() =>
      this.orm.em.fork().transactional(async (em) => {
        const ctx = em.getTransactionContext() as any;
        const tx: Tx = {
          em: em as EntityManager,
          async query<R>(text: string, params: unknown[] = []) {
            const res = await ctx.executeQuery(CompiledQuery.raw(text, params as any[]));
            return res.rows as R[];
          },
        };
        return fn(tx);
      }),
    );
  }

  /** Work with a fresh EntityManager (reads, or a unit of work you flush yourself). */
  async withEm<T>(fn: (em: EntityManager) => Promise<T>, em?: EntityManager): Promise<T> {
    return this.unavailableAsDomainError(() =>
      this.exclusive(() => fn((em ?? this.orm.em.fork()) as EntityManager)),
    );
  }

  private async unavailableAsDomainError<T>(fn: () => Promise<T>): Promise<T> {
    if (this.kind === 'pglite') return fn();
    try {
      return await fn();
    } catch (err) {
      throw unavailableOr(err);
    }
  }

  fork(): EntityManager {
    return this.orm.em.fork() as EntityManager;
  }

  /**
   * Subscribe to a NOTIFY channel (cross-instance on PostgreSQL; in-process on PGlite).
   *
   * PostgreSQL: one LISTEN connection per handle carries every channel. When it is lost (restart,
   * failover, network) it is reconnected with capped, jittered backoff, every channel is LISTENed again,
   * and then every {@link onReconnect} handler runs: notifications sent while it was down are lost, so
   * whatever they would have invalidated must be dropped.
   */
  async listen(channel: string, fn: Listener): Promise<() => void> {
    let set = this.listeners.get(channel);
    const isNew = !set;
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
    }
    set.add(fn);
    const unlisten = () => void set.delete(fn);
    if (!isNew) return unlisten;
    try {
      if (this.kind === 'postgres') {
        const client = await this.listenConnection();
        // Lost meanwhile: the reconnect loop LISTENs every registered channel.
        if (client)
          await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`).catch((err) => {
            if (this.listenClient === client) throw err;
          });
      } else {
        await (await this.pglite()).listen(channel, (payload) => this.dispatch(channel, payload));
      }
    } catch (err) {
      set.delete(fn);
      if (set.size === 0) this.listeners.delete(channel);
      throw unavailableOr(err);
    }
    return unlisten;
  }

  /**
   * Runs `fn` after every reconnect of the LISTEN connection (never on the first connect; never on PGlite,
   * whose notifications cannot be lost). Each NOTIFY-invalidated cache registers its "drop everything"
   * here, and the webhook worker its wake-up. Returns the unregister function.
   */
  onReconnect(fn: () => void): () => void {
    this.reconnectHandlers.add(fn);
    return () => void this.reconnectHandlers.delete(fn);
  }

  /** Reconnects of the LISTEN connection so far (for tests and diagnostics). */
  get listenReconnects(): number {
    return this.reconnects;
  }

  private dispatch(channel: string, payload: string): void {
    for (const l of this.listeners.get(channel) ?? []) {
      try {
        l(payload);
      } catch (err) {
        this.opts.log?.error({ err, channel }, 'database: a NOTIFY listener failed');
      }
    }
  }

  /** The LISTEN connection; undefined while the reconnect loop is between attempts. */
  private async listenConnection(): Promise<pg.Client | undefined> {
    if (this.listenClient) return this.listenClient;
    if (this.lostAt !== undefined) return this.connecting?.catch(() => undefined);
    this.connecting ??= this.connectListener().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connectListener(): Promise<pg.Client> {
    const statement = this.opts.statementTimeoutMs;
    const client = new pg.Client({
      connectionString: this.opts.url,
      keepAlive: true,
      connectionTimeoutMillis: this.opts.acquireTimeoutMs ?? 10_000,
      query_timeout: (statement ?? 10_000) + QUERY_TIMEOUT_MARGIN_MS,
    });
    client.on('error', (err) => this.listenerLost(client, err));
    client.on('end', () => this.listenerLost(client));
    client.on('notification', (n) => this.dispatch(n.channel, n.payload ?? ''));
    try {
      await client.connect();
      const channels = [...this.listeners.keys()];
      if (channels.length)
        await client.query(channels.map((c) => `LISTEN ${pg.escapeIdentifier(c)}`).join('; '));
      if (this.closed) throw new Error('database closed');
    } catch (err) {
      void client.end().catch(() => undefined);
      throw err;
    }
    this.listenClient = client;
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      client.query('select 1').catch((err) => this.listenerLost(client, err));
    }, LISTEN_HEARTBEAT_MS);
    this.heartbeat.unref();
    return client;
  }

  private listenerLost(client: pg.Client, err?: unknown): void {
    if (this.listenClient !== client) return; // a connect attempt that failed: its caller handles it
    this.listenClient = undefined;
    clearInterval(this.heartbeat);
    void client.end().catch(() => undefined);
    if (this.closed) return;
    this.lostAt = Date.now();
    this.opts.log?.warn(
      { err, channels: [...this.listeners.keys()] },
      'database: LISTEN connection lost; reconnecting',
    );
    this.scheduleReconnect(0);
  }

  private scheduleReconnect(attempt: number): void {
    const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** attempt);
    const delay = Math.round(ceiling * (0.5 + Math.random() * 0.5));
    this.reconnectTimer = setTimeout(() => void this.reconnect(attempt), delay);
    this.reconnectTimer.unref();
  }

  private async reconnect(attempt: number): Promise<void> {
    if (this.closed) return;
    try {
      this.connecting = this.connectListener();
      await this.connecting;
    } catch (err) {
      this.connecting = undefined;
      if (this.closed) return;
      this.opts.log?.debug({ err, attempt: attempt + 1 }, 'database: LISTEN reconnect failed; retrying');
      this.scheduleReconnect(attempt + 1);
      return;
    }
    this.connecting = undefined;
    const downMs = Date.now() - (this.lostAt ?? Date.now());
    this.lostAt = undefined;
    this.reconnects++;
    this.opts.log?.info(
      { attempts: attempt + 1, downMs, channels: [...this.listeners.keys()] },
      'database: LISTEN connection re-established; dropping NOTIFY-invalidated caches',
    );
    for (const fn of this.reconnectHandlers) {
      try {
        fn();
      } catch (err) {
        this.opts.log?.error({ err }, 'database: a reconnect handler failed');
      }
    }
  }

  /** True while the database answers a trivial query. */
  async ping(timeoutMs = 2000): Promise<boolean> {
    if (this.closed) return false;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.query('select 1'),
        new Promise((_, rej) => {
          timer = setTimeout(() => rej(new Error('timeout')), timeoutMs);
        }),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeat);
    const client = this.listenClient;
    this.listenClient = undefined;
    await client?.end().catch(() => undefined);
    const background = this.backgroundDb;
    this.backgroundDb = undefined;
    if (background) await (await background.catch(() => undefined))?.close();
    try {
      await this.exclusive(() => this.orm.close(true));
    } finally {
      this.unlock?.();
    }
  }
}

/**
 * pg Pool options: the acquire timeout, the server-side statement_timeout and a client-side
 * query_timeout a little longer (a frozen or unreachable server never cancels anything), TCP keepalive,
 * and the two guards below on every pooled connection.
 */
function poolOptions(opts: DatabaseOptions): Record<string, unknown> {
  const o: Record<string, unknown> = { keepAlive: true };
  if (opts.acquireTimeoutMs) o.connectionTimeoutMillis = opts.acquireTimeoutMs;
  if (opts.statementTimeoutMs) {
    o.statement_timeout = opts.statementTimeoutMs;
    o.query_timeout = opts.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS;
  }
  o.onPoolCreated = (pool: pg.Pool) =>
    pool.on('connect', (client) => {
      if (opts.statementTimeoutMs) endOnQueryTimeout(client);
      client.once('end', () => forgetDeadClient(pool, client));
    });
  return o;
}

/**
 * A connection whose query timed out on the client still has that query on the wire: end it at once, so
 * it is never handed (busy, maybe mid-transaction) to the next caller, and the server rolls back whatever
 * it had open.
 */
function endOnQueryTimeout(client: pg.PoolClient): void {
  const original = client.query as (...args: any[]) => any;
  const poison = (err: unknown) => {
    if ((err as Error | undefined)?.message === 'Query read timeout')
      void client.end().catch(() => undefined);
  };
  (client as any).query = function (this: pg.PoolClient, ...args: any[]) {
    const i = args.findIndex((a) => typeof a === 'function');
    if (i >= 0) {
      const cb = args[i] as (err: unknown, res: unknown) => void;
      args[i] = (err: unknown, res: unknown) => {
        if (err) poison(err);
        cb(err, res);
      };
    }
    const result = original.apply(this, args);
    if (result && typeof result.then === 'function') result.then(undefined, poison);
    return result;
  };
}

/**
 * A checked-out connection that died is given up by the pool at once. Kysely's controlled transactions
 * (MikroORM's `transactional`) release their connection only after a successful COMMIT or ROLLBACK; on a
 * dead connection both fail, the connection is never released, and every restart of the database would
 * otherwise leak a pool slot (until no request gets a connection, and `close()` waits forever). A late
 * `release()` of a forgotten connection is harmless: pg-pool removes it again.
 */
function forgetDeadClient(pool: pg.Pool, client: pg.PoolClient): void {
  const p = pool as unknown as {
    _clients: unknown[];
    _remove(c: unknown): void;
    _pulseQueue(): void;
  };
  if (!p._clients.includes(client)) return;
  p._remove(client);
  p._pulseQueue();
}
