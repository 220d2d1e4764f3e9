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

/** Anything raw SQL with `$n` parameters can run on: the pool, or an open transaction. */
export interface Sql {
  query<R = Record<string, any>>(text: string, params?: unknown[], name?: string): Promise<R[]>;
}

export type Tx = Sql & { em: EntityManager };

export interface DatabaseOptions {
  /** postgres://… for a real PostgreSQL; undefined for the embedded PGlite. */
  url?: string;
  /** PGlite data directory, or `memory://`. */
  dataDir?: string;
  /**
   * PGlite only: start from this data-directory dump (PGlite `dumpDataDir()`) instead of running initdb.
   * Tests use a dump of an already migrated database: seconds saved per test file.
   */
  loadDataDir?: Blob;
  debug?: boolean;
}

type Listener = (payload: string) => void;

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
  private listenClient?: pg.Client;
  private closed = false;

  private constructor(
    readonly orm: MikroORM,
    private readonly opts: DatabaseOptions,
  ) {
    this.kind = opts.url ? 'postgres' : 'pglite';
  }

  static async open(opts: DatabaseOptions): Promise<Database> {
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
      orm = (await PgORM.init({ ...common, clientUrl: opts.url, pool: { min: 0, max: 20 } } as any)) as any;
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
    return new Database(orm, opts);
  }

  /**
   * Apply pending migrations (both drivers run the same list). `secrets` (the service's config) gives the
   * migrations that encrypt existing rows their key; without it, such a migration fails when it has rows.
   */
  async migrate(secrets?: SecretsConfig): Promise<string[]> {
    const applied = await this.exclusive(() => withMigrationSecrets(secrets, () => this.orm.migrator.up()));
    return applied.map((m) => m.name);
  }

  /** Revert every migration (used by the migration round-trip test). */
  async migrateDownAll(secrets?: SecretsConfig): Promise<void> {
    await this.exclusive(() => withMigrationSecrets(secrets, () => this.orm.migrator.down({ to: 0 })));
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
      const pool = await this.pgPool();
      const res = await pool.query({ text, values: params as any[], name });
      return res.rows as R[];
    }
    return this.exclusive(async () => {
      const res = await (await this.pglite()).query(text, params as any[]);
      return res.rows as R[];
    });
  }

  /**
   * A transaction with both an EntityManager (unit of work, flushed before commit) and raw SQL on the
   * same connection. Rolls back when `fn` throws.
   */
  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
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
    return this.exclusive(() => fn((em ?? this.orm.em.fork()) as EntityManager));
  }

  fork(): EntityManager {
    return this.orm.em.fork() as EntityManager;
  }

  /** Subscribe to a NOTIFY channel (cross-instance on PostgreSQL; in-process on PGlite). */
  async listen(channel: string, fn: Listener): Promise<() => void> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      const dispatch = (payload: string) => {
        for (const l of this.listeners.get(channel) ?? []) l(payload);
      };
      if (this.kind === 'postgres') {
        if (!this.listenClient) {
          this.listenClient = new pg.Client({ connectionString: this.opts.url });
          this.listenClient.on('error', () => undefined);
          await this.listenClient.connect();
          this.listenClient.on('notification', (n) => {
            for (const l of this.listeners.get(n.channel) ?? []) l(n.payload ?? '');
          });
        }
        await this.listenClient.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      } else {
        await (await this.pglite()).listen(channel, dispatch);
      }
    }
    set.add(fn);
    return () => set!.delete(fn);
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
    await this.listenClient?.end().catch(() => undefined);
    await this.exclusive(() => this.orm.close(true));
  }
}
