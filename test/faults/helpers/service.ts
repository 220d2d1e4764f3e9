import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Sql } from '../../../src/db/database.js';
import { proveLedger } from '../../../src/modules/accounts/accounts.js';

/**
 * The real service for the fault suite: `node --experimental-async-context-frame dist/src/main.js` (what
 * `npm start` runs; `npm run test:faults` builds it first) as a child process on a private PostgreSQL
 * cluster, plus the small clients and checks the fault tests share.
 */

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const MAIN = join(ROOT, 'dist/src/main.js');
export const OWNER_TOKEN = 'ot_faults_owner_token_0123456789';
/** pico-less pricing of the tests: request 0.001, prompt 0.000002, completion 0.000005 USDC, markup 1.5. */
export const MODEL = 'gpt-fault';
/** 11 prompt + 7 completion tokens (the fake upstream's usage) at those prices: 1086 raw units. */
export const CHAT_COST_RAW = 1086n;

/** Variables src/config.ts reads, plus jest's NODE_OPTIONS: the child sees only what we give it. */
const STRIP =
  /^(NODE_OPTIONS|NODE_ENV|PORT|HOST|DATABASE_URL|DATA_DIR|PUBLIC_BASE_URL|BOOTSTRAP_OWNER_TOKEN|METRICS_TOKEN|LOG_LEVEL|ENCRYPTION_KEY|WEBHOOK_.*|PROVIDER_.*|SHUTDOWN_GRACE_MS|UPSTREAM_.*|MAX_WS_.*|MAX_CONNECTIONS_PER_IP|TRUSTED_PROXIES|HTTP_HEADERS_TIMEOUT_MS|HTTP_REQUEST_TIMEOUT_MS|RATE_LIMIT_PER_MINUTE|PLATFORM_FEE_BPS|BUILTIN_.*|SMTP_URL|MAIL_FROM|WALLET_TEST_FUNDS|STRIPE_.*)$/;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Seeded PRNG (mulberry32): a failing run can be repeated with the printed seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface ServiceProcess {
  proc: ChildProcess;
  port: number;
  url: string;
  exited: Promise<void>;
  /** Everything it wrote (stdout + stderr), the last 200 KiB. */
  output(): string;
  /** SIGKILL, resolved once the process is gone. */
  kill9(): Promise<void>;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

const running = new Set<ChildProcess>();
/** For afterAll: never leave a service behind a failed test. */
export function killAllServices(): void {
  for (const p of running) p.kill('SIGKILL');
}

/** Starts `node dist/src/main.js` on `port` and waits for /readyz (migrations run at start). */
export async function startService(
  databaseUrl: string,
  env: Record<string, string> = {},
  port?: number,
): Promise<ServiceProcess> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\``);
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !STRIP.test(k)) childEnv[k] = v;
  const p = port ?? (await freePort());
  Object.assign(childEnv, {
    NODE_ENV: 'test',
    PORT: String(p),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATABASE_URL: databaseUrl,
    BOOTSTRAP_OWNER_TOKEN: OWNER_TOKEN,
    ENCRYPTION_KEY: 'faults-encryption-key-0123456789',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    PROVIDER_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_POLL_MS: '100',
    ...env,
  });
  const proc = spawn(process.execPath, ['--experimental-async-context-frame', MAIN], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  let out = '';
  const keep = (d: Buffer) => {
    out += d.toString('utf8');
    if (out.length > 400_000) out = out.slice(-200_000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let gone = false;
  const exited = new Promise<void>((resolve) =>
    proc.once('exit', () => {
      gone = true;
      running.delete(proc);
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${p}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (gone) throw new Error(`the service exited before it was ready:\n${out.slice(-5000)}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`not ready within 60 s:\n${out.slice(-5000)}`);
    }
    const ok = await fetch(`${url}/readyz`)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) break;
    await sleep(50);
  }
  return {
    proc,
    port: p,
    url,
    exited,
    output: () => out,
    async kill9() {
      if (!gone) proc.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (!gone) proc.kill('SIGTERM');
      await exited;
      return proc.exitCode;
    },
  };
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/** A loopback client of one service URL. */
export class Api {
  constructor(public url: string) {}

  async rest(
    method: string,
    path: string,
    opts: {
      token?: string | null;
      body?: unknown;
      headers?: Record<string, string>;
      signal?: AbortSignal;
    } = {},
  ): Promise<HttpAnswer> {
    const res = await fetch(this.url + path, {
      method,
      headers: {
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...opts.headers,
      },
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
    });
    const text = await res.text();
    let body: any = null;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON (SSE) */
    }
    return { status: res.status, headers: res.headers, text, body };
  }

  async gql<T = any>(token: string, query: string, variables?: Record<string, unknown>): Promise<T> {
    const r = await this.rest('POST', '/graphql', { token, body: { query, variables } });
    if (r.status !== 200 || r.body?.errors) throw new Error(`GraphQL ${r.status}: ${r.text.slice(0, 500)}`);
    return r.body.data as T;
  }
}

export interface Paywall {
  id: string;
  apiKey: string;
}

/** A DEFAULT paywall selling MODEL from `upstreamBaseUrl` at the test prices (CHAT_COST_RAW per fake chat). */
export async function createPaywall(
  api: Api,
  upstreamBaseUrl: string,
  opts: { name?: string; maxCompletionTokens?: number } = {},
): Promise<Paywall> {
  const created = await api.gql(
    OWNER_TOKEN,
    `mutation($n: String!) { createPaywall(input: {name: $n, mode: DEFAULT}) { apiKey paywall { id } } }`,
    { n: opts.name ?? 'Faults' },
  );
  const pw = { id: created.createPaywall.paywall.id, apiKey: created.createPaywall.apiKey };
  await api.gql(pw.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl: upstreamBaseUrl, apiKey: 'sk-fault-upstream-key-0001' },
  });
  await api.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: {
      modelId: MODEL,
      prompt: '0.000002',
      completion: '0.000005',
      request: '0.001',
      maxCompletionTokens: opts.maxCompletionTokens ?? 1000,
    },
  });
  await api.gql(pw.apiKey, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
    i: { markup: '1.5' },
  });
  return pw;
}

/** A pg pool on the private cluster's database, with the `Sql` shape the service's own checks take. */
export function sqlOf(url: string): Sql & { end(): Promise<void> } {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
  return {
    async query<R>(text: string, params?: unknown[]): Promise<R[]> {
      return (await pool.query(text, params as any[])).rows as R[];
    },
    end: () => pool.end(),
  };
}

/**
 * The money invariants at this instant: the ledger proof (all balances sum to 0, each account equals its
 * transfers, held equals its open holds, debt equals what its charges owe, no SHARED debt but the
 * built-in provider's, every built-in answer paid its cost) and no end user's account below zero or
 * holding more than it has.
 */
export async function moneyInvariants(sql: Sql): Promise<{ ok: boolean; detail: string }> {
  const proof = await proveLedger(sql);
  const negative = await sql.query<{ id: string; balance: string; held: string }>(
    `select a.id, a.balance_raw::text as balance, a.held_raw::text as held
       from ledger_account a join end_user e on e.account_id = a.id
      where a.balance_raw < 0 or a.held_raw < 0 or a.held_raw > a.balance_raw`,
  );
  const ok = proof.ok && negative.length === 0;
  return {
    ok,
    detail: JSON.stringify({
      total: proof.totalRaw.toString(),
      unbalanced: proof.unbalancedAccounts,
      misheld: proof.misheldAccounts,
      misdebted: proof.misdebtedAccounts,
      sharedDebt: proof.sharedDebtCharges,
      builtinUnpaid: proof.builtinUnpaidCharges,
      negative,
    }),
  };
}

/** `npm run admin -- ledger verify` against the database (exit 0 when the proof holds). */
export async function adminLedgerVerify(databaseUrl: string): Promise<{ code: number | null; out: string }> {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !STRIP.test(k)) childEnv[k] = v;
  Object.assign(childEnv, { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' });
  const proc = spawn(process.execPath, [join(ROOT, 'dist/src/admin.js'), 'ledger', 'verify'], {
    cwd: ROOT,
    env: childEnv,
  });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
  return { code, out };
}

/** A streamed chat read to its end: the SSE text, or the error that cut it. */
export async function streamChat(
  api: Api,
  pw: Paywall,
  user: string,
  extra: Record<string, unknown> = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${api.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${pw.apiKey}`,
      'content-type': 'application/json',
      'x-paywall-user': user,
    },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
      stream_options: { include_usage: true },
      ...extra,
    }),
  });
  return { status: res.status, text: await res.text() };
}

export function chatBody(extra: Record<string, unknown> = {}) {
  return { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], ...extra };
}
