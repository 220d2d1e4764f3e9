import type { AddressInfo } from 'node:net';
import { createApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { Database } from '../../src/db/database.js';
import { createLogger } from '../../src/shared/logger.js';
import { createTestDatabase } from './database.js';

export const OWNER_TOKEN = 'ot_test_owner_token_0123456789';

/** One service instance (API + in-process worker) over a database handle it does not own. */
export interface Instance {
  app: App;
  db: Database;
  url: string;
  gql<T = any>(
    token: string | null,
    query: string,
    variables?: Record<string, unknown>,
  ): Promise<{ data: T; errors?: any[] }>;
  rest(
    method: string,
    path: string,
    opts?: { token?: string | null; body?: unknown },
  ): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

/**
 * Several instances of the service on ONE database, like replicas behind a load balancer. On PostgreSQL
 * each instance gets its own connection pool and LISTEN connection to the same database, exactly as
 * separate processes would; the embedded database is one process's, so there the instances share one
 * handle (which still exercises SKIP LOCKED claiming between independent workers).
 */
export async function startInstances(count: number, env: Record<string, string> = {}) {
  const { db, url: dbUrl, drop } = await createTestDatabase();
  const dbs = [db];
  for (let i = 1; i < count; i++) dbs.push(dbUrl ? await Database.open({ url: dbUrl }) : db);
  const instances: Instance[] = [];
  for (const instanceDb of dbs) instances.push(await startInstance(instanceDb, dbUrl, env));
  return {
    instances,
    /** The first instance's handle, for assertions. */
    db,
    shared: !dbUrl,
    async close() {
      for (const i of instances) await i.stop();
      for (const d of dbs.slice(1)) if (d !== db) await d.close();
      await drop();
    },
  };
}

async function startInstance(
  db: Database,
  dbUrl: string | undefined,
  env: Record<string, string>,
): Promise<Instance> {
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    PORT: '0',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    // The fake upstreams of the tests listen on loopback (docs/reference.md §1 "Provider targets").
    PROVIDER_ALLOW_PRIVATE_NETWORKS: 'true',
    BOOTSTRAP_OWNER_TOKEN: OWNER_TOKEN,
    ENCRYPTION_KEY: 'test-encryption-key-0123456789',
    ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
    ...env,
  });
  const app = await createApp({ config, db, log: createLogger(config.LOG_LEVEL) });
  await app.services.owners.bootstrap(OWNER_TOKEN);
  await app.start();
  await new Promise<void>((r) => app.server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  Object.assign(config, { PUBLIC_BASE_URL: url });
  const rest: Instance['rest'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = {};
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(url + path, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    });
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body };
  };
  return {
    app,
    db,
    url,
    rest,
    async gql(token, query, variables) {
      const r = await rest('POST', '/graphql', { token, body: { query, variables } });
      return { data: r.body.data, errors: r.body.errors };
    },
    stop: () => app.stop(1000),
  };
}
