import { randomUUID } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { createApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { Database } from '../src/db/database.js';
import { isDatabaseUnavailable, unavailableOr } from '../src/db/db-errors.js';
import type { PaywallInfo } from '../src/modules/paywalls/paywall-info.js';
import { DomainError } from '../src/shared/errors.js';
import { sha256Hex } from '../src/shared/ids.js';
import { createLogger } from '../src/shared/logger.js';
import { createTestDatabase } from './helpers/database.js';

/**
 * A database that is not there answers 503 `database_unavailable` (REST, with Retry-After) and
 * SERVICE_UNAVAILABLE (GraphQL), never a 500 and never a stack trace. The service here talks to a
 * PostgreSQL URL whose port nothing listens on: ECONNREFUSED on every connect, as during a restart.
 * (Restarts and freezes of a real server: test/faults/database.fault.test.ts.)
 */

const err = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});

describe('isDatabaseUnavailable', () => {
  test.each([
    ['admin shutdown (restart)', err('terminating connection due to administrator command', '57P01')],
    ['starting up', err('the database system is starting up', '57P03')],
    ['connection failure', err('connection failure', '08006')],
    ['statement_timeout', err('canceling statement due to statement timeout', '57014')],
    ['ECONNREFUSED', err('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['ECONNRESET', err('read ECONNRESET', 'ECONNRESET')],
    ['pg-pool acquire timeout', err('timeout exceeded when trying to connect')],
    ['pg query_timeout', err('Query read timeout')],
    ['pg connection lost', err('Connection terminated unexpectedly')],
    ['dual-stack refusal', new AggregateError([err('x', 'ECONNREFUSED'), err('y', 'ECONNREFUSED')])],
    ['wrapped', Object.assign(new Error('driver'), { cause: err('z', '57P01') })],
  ])('%s is unavailability', (_name, e) => {
    expect(isDatabaseUnavailable(e)).toBe(true);
    const mapped = unavailableOr(e) as DomainError;
    expect(mapped).toBeInstanceOf(DomainError);
    expect(mapped.code).toBe('unavailable');
    expect(mapped.publicCode).toBe('database_unavailable');
  });

  test.each([
    ['unique violation', err('duplicate key value violates unique constraint', '23505')],
    ['deadlock', err('deadlock detected', '40P01')],
    ['syntax error', err('syntax error at or near "selec"', '42601')],
    ['a domain error', new DomainError('invalid_amount', 'bad')],
    ['a plain error', new Error('boom')],
    ['nothing', undefined],
  ])('%s is not', (_name, e) => {
    expect(isDatabaseUnavailable(e)).toBe(false);
    expect(unavailableOr(e)).toBe(e);
  });
});

describe('a service whose database is unreachable', () => {
  let db: Database;
  let app: App;
  let base: string;
  const apiKey = `pk_live_${'k'.repeat(40)}`;
  const paywallId = randomUUID();

  beforeAll(async () => {
    // A port that was free a moment ago: connects are refused.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const url = `postgres://postgres@127.0.0.1:${port}/nothing`;
    db = await Database.open({ url, statementTimeoutMs: 1000, acquireTimeoutMs: 1000 });
    const config = loadConfig({
      LOG_LEVEL: 'silent',
      PORT: '0',
      DATABASE_URL: url,
      ENCRYPTION_KEY: 'test-encryption-key-0123456789',
    });
    app = await createApp({ config, db, log: createLogger('silent') });
    // Not started (its LISTEN would fail); the key is in the cache, as it is for a key used before the
    // outage, so requests get past authentication and fail inside their transaction.
    const info: PaywallInfo = {
      id: paywallId,
      ownerId: randomUUID(),
      name: 'p',
      description: null,
      mode: 'DEFAULT',
      markupPpm: 1_000_000n,
      topupUrl: null,
      trialCreditsRaw: 0n,
      dailyRequestLimit: null,
      dailySpendLimitRaw: null,
      lowBalanceThresholdRaw: null,
      connectMessageTemplate: null,
      topupMessageTemplate: null,
      archivedAt: null,
      apiKeyLastFour: apiKey.slice(-4),
      createdAt: new Date(),
      updatedAt: new Date(),
    };
    (app.services.paywalls as any).byKeyHash.set(sha256Hex(apiKey), {
      info,
      expires: Date.now() + 3_600_000,
    });
    await new Promise<void>((r) => app.server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.stop(500);
    await db?.close();
  });

  const post = (path: string, token: string, body: unknown) =>
    fetch(base + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  test('REST: 503 api_error database_unavailable with Retry-After, no stack trace', async () => {
    const res = await post('/v1/user/balance/deposit', apiKey, { user: 'alice', amount: '1' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    const body = await res.json();
    expect(body).toEqual({
      error: {
        message: expect.any(String),
        type: 'api_error',
        param: null,
        code: 'database_unavailable',
      },
    });
    expect(body.error.message).not.toMatch(/\bat \S+:\d+|ECONNREFUSED|127\.0\.0\.1/);
  });

  test('the metered routes (served ahead of Express) answer the same 503 with Retry-After', async () => {
    const chat = { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] };
    for (const [path, token] of [
      ['/v1/chat/completions', apiKey],
      ['/v1/u/alice/responses', apiKey],
      ['/v1/chat/completions', `pk_live_${'u'.repeat(40)}`], // uncached: authentication reads the database
    ] as const) {
      const res = await post(path, token, { ...chat, user: 'alice', input: 'hi' });
      expect({ path, status: res.status, retryAfter: res.headers.get('retry-after') }).toEqual({
        path,
        status: 503,
        retryAfter: '2',
      });
      expect((await res.json()).error).toMatchObject({ type: 'api_error', code: 'database_unavailable' });
    }
  });

  test('REST: an uncached key (authentication reads the database) is a 503 too', async () => {
    const res = await fetch(`${base}/v1/models`, {
      headers: { authorization: `Bearer pk_live_${'u'.repeat(40)}` },
    });
    expect(res.status).toBe(503);
    expect((await res.json()).error.code).toBe('database_unavailable');
  });

  test('GraphQL: a resolver failure is SERVICE_UNAVAILABLE, HTTP 503 when nothing was answered', async () => {
    const res = await post('/graphql', apiKey, {
      query: `mutation($i: DepositInput!) { deposit(input: $i) { balance } }`,
      variables: { i: { user: 'alice', amount: '1' } },
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    const body = await res.json();
    expect(body.data).toBeNull();
    expect(body.errors).toHaveLength(1);
    expect(body.errors[0].extensions).toEqual({
      code: 'SERVICE_UNAVAILABLE',
      errorCode: 'database_unavailable',
      param: null,
    });
    expect(JSON.stringify(body)).not.toMatch(/stacktrace|ECONNREFUSED/);
  });

  test('GraphQL: a failure while authenticating (context) is SERVICE_UNAVAILABLE and 503', async () => {
    const res = await post('/graphql', `ot_${'o'.repeat(40)}`, { query: '{ paywalls { id } }' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    const body = await res.json();
    expect(body.errors[0].extensions.code).toBe('SERVICE_UNAVAILABLE');
    expect(body.errors[0].extensions.errorCode).toBe('database_unavailable');
    expect(JSON.stringify(body)).not.toMatch(/stacktrace|ECONNREFUSED/);
  });

  test('/readyz is 503 and /healthz 200', async () => {
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });
});

// PostgreSQL only (PGlite has no connections to lose). Terminates one backend of this file's own scratch
// database; the server itself is not touched.
(process.env.DATABASE_URL ? describe : describe.skip)('a connection killed mid-transaction', () => {
  test('is a 503 that committed nothing, and its pool slot is not leaked', async () => {
    const { db, drop } = await createTestDatabase();
    try {
      await db.query('create table killed_tx_probe (v int)');
      let pidOf!: (pid: number) => void;
      const pid = new Promise<number>((r) => (pidOf = r));
      const tx = db.transaction(async (t) => {
        const [r] = await t.query<{ pid: number }>('select pg_backend_pid() as pid');
        await t.query('insert into killed_tx_probe values (1)');
        pidOf(r.pid);
        await t.query('select pg_sleep(30)');
      });
      // The rejection can arrive before pg_terminate_backend's own answer: handle it from the start, or Jest
      // reports it as unhandled and fails the test.
      const failure = tx.then(
        () => null,
        (e: unknown) => e,
      );
      await db.query('select pg_terminate_backend($1)', [await pid]);
      expect(await failure).toMatchObject({ code: 'unavailable', publicCode: 'database_unavailable' });
      expect(await db.query('select * from killed_tx_probe')).toEqual([]);
      // MikroORM/Kysely release a transaction's connection only after COMMIT or ROLLBACK succeeded: a dead
      // one must still leave the pool (else every restart leaks slots and close() never returns).
      const pool = (await (db.orm.em.getConnection() as any).getNativeClient()) as {
        totalCount: number;
        idleCount: number;
      };
      expect(pool.totalCount - pool.idleCount).toBe(0);
    } finally {
      await drop();
    }
  });
});
