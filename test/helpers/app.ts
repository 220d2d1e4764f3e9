import type { AddressInfo } from 'node:net';
import type { DestinationStream } from 'pino';
import { createApp, type App } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { Database } from '../../src/db/database.js';
import { createLogger } from '../../src/shared/logger.js';
import { createTestDatabase } from './database.js';

export interface TestApp {
  app: App;
  db: Database;
  config: Config;
  /** http://127.0.0.1:PORT */
  url: string;
  ownerToken: string;
  /** POST /graphql with a bearer token; returns the parsed body and the HTTP status. */
  gql<T = any>(
    token: string | null,
    query: string,
    variables?: Record<string, unknown>,
  ): Promise<{ status: number; data: T; errors?: any[] }>;
  /** fetch against the app with a bearer token and JSON body. */
  rest(
    method: string,
    path: string,
    opts?: { token?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Headers }>;
  /** A new DEFAULT (or SHARED) paywall of the test owner. */
  createPaywall(mode?: 'DEFAULT' | 'SHARED', name?: string): Promise<{ id: string; apiKey: string }>;
  close(): Promise<void>;
}

/**
 * Starts the real service on a loopback port against a fresh database. `opts.logStream` receives the
 * JSON log lines (pass `LOG_LEVEL` in `env`; the default is silent). With `opts.configured`, the database
 * is the one `env` names (DATABASE_URL, DATABASE_READ_URL), opened and migrated as the service does,
 * and left in place at the end.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  opts: { logStream?: DestinationStream; configured?: boolean } = {},
): Promise<TestApp> {
  const {
    db,
    url: dbUrl,
    drop,
  } = opts.configured ? await configuredDatabase(env) : await createTestDatabase();
  const ownerToken = 'ot_test_owner_token_0123456789';
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    PORT: '0',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    // The fake upstreams of the tests listen on loopback (docs/reference.md §1 "Provider targets").
    PROVIDER_ALLOW_PRIVATE_NETWORKS: 'true',
    BOOTSTRAP_OWNER_TOKEN: ownerToken,
    // The tests stand for a reverse proxy on loopback: X-Forwarded-For (PageClient) names the client.
    // Tests of the default (no trusted proxy) pass TRUSTED_PROXIES: ''.
    TRUSTED_PROXIES: '127.0.0.1',
    ENCRYPTION_KEY: 'test-encryption-key-0123456789',
    // A loaded 2-core CI machine must not turn an honest test's large prompt into its byte bound (a hold
    // the test did not expect); the deadline itself is tested with its own tokenizer and in the fault suite.
    TOKEN_COUNT_DEADLINE_MS: '120000',
    ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
    ...env,
  });
  const app = await createApp({ config, db, log: createLogger(config.LOG_LEVEL, opts.logStream) });
  await app.services.owners.bootstrap(ownerToken);
  await app.start();
  await new Promise<void>((r) => app.server.listen(0, '127.0.0.1', r));
  const port = (app.server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}`;
  Object.assign(config, { PUBLIC_BASE_URL: base });

  const rest: TestApp['rest'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | FormData | undefined;
    if (opts.body instanceof FormData)
      body = opts.body; // multipart: fetch sets the type and boundary
    else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    }
    let res: Response;
    try {
      res = await fetch(base + path, { method, headers, body });
    } catch (e) {
      // A pooled keep-alive connection the server closed as idle just as this request was sent (the
      // embedded database shares the server's event loop, so its idle timer can fire late): the request
      // never reached the server. Sent again once on a new connection, as the OpenAI SDKs do.
      if ((e as { cause?: { code?: string } }).cause?.code !== 'ECONNRESET') throw e;
      res = await fetch(base + path, { method, headers, body });
    }
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  const gql: TestApp['gql'] = async (token, query, variables) => {
    const r = await rest('POST', '/graphql', { token, body: { query, variables } });
    return { status: r.status, data: r.body.data, errors: r.body.errors };
  };
  return {
    app,
    db,
    config,
    url: base,
    ownerToken,
    gql,
    rest,
    async createPaywall(mode = 'DEFAULT', name = 'Test paywall') {
      const r = await gql(
        ownerToken,
        `mutation($input: CreatePaywallInput!) { createPaywall(input: $input) { apiKey paywall { id } } }`,
        { input: { name, mode } },
      );
      if (r.errors) throw new Error(JSON.stringify(r.errors));
      return { id: r.data.createPaywall.paywall.id, apiKey: r.data.createPaywall.apiKey };
    },
    async close() {
      await app.stop(1000);
      await drop();
    },
  };
}

/** The database the service itself would open for `env` (its read replica included), migrated. */
async function configuredDatabase(
  env: Record<string, string>,
): Promise<{ db: Database; url?: string; drop(): Promise<void> }> {
  const config = loadConfig({ LOG_LEVEL: 'silent', ...env });
  const db = await Database.openForService(config, createLogger('silent'));
  await db.migrate();
  return { db, url: config.DATABASE_URL, drop: () => db.close() };
}
