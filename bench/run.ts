/**
 * `npm run bench`: this service against the references of issue 24, same machine, same fake upstream, one
 * run: a bare pass-through, the same pass-through with one naive PostgreSQL statement per request, and the
 * Portkey gateway (which charges nothing). Writes bench/results/latest.md (machine, commit, the issue's
 * table, every row, the goals with PASS/FAIL, their distance in CPU, the ledger proof).
 *
 * Processes (each its own event loop, all on 127.0.0.1, every port chosen free by the OS):
 *   upstream  the fake OpenAI-compatible server of the tests (JSON and SSE, BENCH_CHUNKS content chunks;
 *             Anthropic's Messages API too), and a webhook receiver answering 200 to every delivery
 *   bare      node:http + undici Pool: reads the body, forwards it to the same path, relays the answer
 *             (no auth, no DB)
 *   naive     (on whenever DATABASE_URL is set; BENCH_ONE_STATEMENT=0 turns it off) the same pass-through
 *             charging each answer with one autocommit statement, in a scratch database of its own: when
 *             the upstream's 200 answer has been relayed, it reads the token counts from its text, prices
 *             them like the service (per-token and per-request prices of the model, markup 1.5, in raw
 *             units) and runs `WITH debit AS (UPDATE account … RETURNING …) INSERT INTO ledger_entry …`:
 *             the debit of the user named by x-paywall-user and its ledger row, one statement, then ends
 *             the answer. No hold, no balance check, no event: the issue's "naive statement"
 *   portkey   (BENCH_PORTKEY=0 turns it off) the Portkey AI gateway (@portkey-ai/gateway, MIT, Hono on
 *             Node), installed on demand into bench/.peer (gitignored, not a dependency of the project),
 *             pointed at the fake upstream per request (x-portkey-provider openai, or anthropic for the
 *             Messages API; x-portkey-custom-host). It charges nothing: the "gateway" reference
 *   service   this service (a fresh database on DATABASE_URL's PostgreSQL, else embedded PGlite), one
 *             paywall, BENCH_USERS funded users and one "hot" user, payment on: every request is a hold
 *             and a settlement; one active webhook subscription to every event (BENCH_WEBHOOK)
 *   driver    this process: c keep-alive connections per row, a closed loop for a bounded time
 *
 * Rows: for each scenario (chat JSON, chat SSE, Responses API JSON and SSE, Messages API JSON and SSE,
 * embeddings, images JSON, transcription) and each concurrency, every target back to back (bare, naive, Portkey, service); then the hot
 * user (every request debits the same balance: naive and service). Each row is a warm-up, then the
 * measurement on the same connections. Before the first row, every target serves each scenario's request
 * for a few seconds at c=50 (BENCH_PRIME): a service that has been up for a while runs optimised code, so
 * the rows measure that, not V8 compiling the request path. The whole sequence runs BENCH_ROUNDS times;
 * the report shows each figure's median over the rounds (of two: their mean), errors summed.
 *
 * Pinning (Linux, when `taskset` exists and the driver may use ≥ 2 CPUs): upstream, every proxy (bare,
 * naive, Portkey, service) and the PostgreSQL backends of the bench databases on the server CPU, the
 * driver on the load CPU, like the issue's table. Backends are found per row (pg_stat_activity of the
 * target's own database, after the warm-up) and their original affinity is restored at the end, also on
 * error or Ctrl-C. The postmaster and the server's shared processes (WAL writer, checkpointer, …) are not
 * touched: the server may be shared.
 *
 * CPU per request per process: process.cpuUsage() of each Node process (Portkey runs inside a child of
 * this script, so it is read the same way); for PostgreSQL, utime + stime from /proc/<pid>/stat of the
 * backends of the row's target's database, the naive one's and the service's alike (PGlite runs inside
 * the service: counted there). On a virtual machine, each row also shows the CPU steal during it
 * (/proc/stat), so a noisy row can be told apart.
 *
 * Environment:
 *   DATABASE_URL         PostgreSQL server to create the scratch bench databases on (unset: embedded PGlite
 *                        for the service, and no naive row)
 *   BENCH_SECONDS        measured seconds per row (5)
 *   BENCH_WARMUP         warm-up seconds per row, same connections (1)
 *   BENCH_PRIME          seconds each target serves the scenarios' requests at c=50 before the first row (4)
 *   BENCH_ROUNDS         rounds of the whole sequence; the report takes each figure's median (2)
 *   BENCH_CONCURRENCY    concurrencies (1,10,100)
 *   BENCH_HOT_CONCURRENCY  concurrency of the hot-user row (100)
 *   BENCH_SCENARIOS      chat-json,chat-sse,responses-json,responses-sse,messages-json,messages-sse,
 *                        embeddings,images,transcription,hot (all by default)
 *   BENCH_USERS          funded users, requests spread over them round-robin (1000)
 *   BENCH_CHUNKS         content chunks per streamed answer (20)
 *   BENCH_LIMITS         1: also a service with every daily and rate limit on (0)
 *   BENCH_ONE_STATEMENT  0: no naive-statement row (on with DATABASE_URL)
 *   BENCH_PORTKEY        0: no Portkey row (on; installed once into bench/.peer, skipped with a note if that fails)
 *   BENCH_WEBHOOK        stored: one active subscription to every event, its delivery rows written with each
 *                        event, sent by a worker apart (`npm run worker`: not in this run) (default);
 *                        deliver: the service's in-process worker also sends them to the receiver;
 *                        none: no subscription
 *   BENCH_PIN            0: no pinning (1); BENCH_SERVER_CPU / BENCH_LOAD_CPU pick the CPUs (first / last allowed)
 *   BENCH_OUT            where to write the report (bench/results/latest.md; "-" = nowhere)
 *   BENCH_LOG_LEVEL      the service's log level (silent)
 *   BENCH_KEEP_DB        1: keep the service's scratch database (PostgreSQL) and print its URL
 *   BENCH_PROFILE        service | bare | portkey | upstream: a V8 CPU profile of that process, written under
 *                        $TMPDIR/paywall-proxy-bench when it exits (open it in Chrome DevTools)
 *   BENCH_SERVICE_FLAGS  Node options of the service process only, space-separated
 *                        (--experimental-async-context-frame, as `npm start` runs it; "" for none), to
 *                        compare a runtime setting in one sitting
 */
import 'reflect-metadata';
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { chatCost, parseDecimal } from '../src/shared/money.js';

const env = process.env;
const SECONDS = Number(env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(env.BENCH_WARMUP ?? 1);
const PRIME_SECONDS = Number(env.BENCH_PRIME ?? 4);
const ROUNDS = Math.max(1, Math.floor(Number(env.BENCH_ROUNDS ?? 2)));
const CONCURRENCY = (env.BENCH_CONCURRENCY ?? '1,10,100').split(',').map(Number);
const HOT_CONCURRENCY = Number(env.BENCH_HOT_CONCURRENCY ?? 100);
const SCENARIOS = (
  env.BENCH_SCENARIOS ??
  'chat-json,chat-sse,responses-json,responses-sse,messages-json,messages-sse,embeddings,images,transcription,hot'
)
  .split(',')
  .map((s) => s.trim());
const USERS = Number(env.BENCH_USERS ?? 1000);
const CHUNKS = Number(env.BENCH_CHUNKS ?? 20);
const LIMITS = env.BENCH_LIMITS === '1';
const ONE_STATEMENT = env.BENCH_ONE_STATEMENT !== '0' && !!env.DATABASE_URL;
const PORTKEY = env.BENCH_PORTKEY !== '0';
const PIN = env.BENCH_PIN !== '0';
const WEBHOOK = env.BENCH_WEBHOOK ?? 'stored';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OUT = env.BENCH_OUT ?? join(ROOT, 'bench/results/latest.md');
const MODEL = 'gpt-bench';
/** A model on an Anthropic-kind provider (the same fake upstream): the Messages rows, forwarded natively. */
const CLAUDE_MODEL = 'claude-bench';
/** An embeddings model (input price only) for the embeddings row. */
const EMBED_MODEL = 'embed-bench';
/**
 * An image model and a transcription model priced per token (docs/reference.md §22): the fake upstream
 * answers `gpt-image…` and `gpt-…` models with token usage, which the naive target prices too.
 */
const IMAGE_MODEL = 'gpt-image-bench';
const TRANSCRIBE_MODEL = 'gpt-transcribe-bench';
/**
 * The transcription row's upload: a 1-second WAV (8-bit mono, 8 kHz) as multipart. Every byte is below
 * 0x80 (samples 0x40–0x7f), so the body travels as a string.
 */
const WAV_BOUNDARY = 'bench-boundary-7f3a';
function transcriptionBody(): string {
  const head = Buffer.alloc(44);
  head.write('RIFF', 0);
  head.writeUInt32LE(36 + 8000, 4);
  head.write('WAVEfmt ', 8);
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20);
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(8000, 24);
  head.writeUInt32LE(8000, 28);
  head.writeUInt16LE(1, 32);
  head.writeUInt16LE(8, 34);
  head.write('data', 36);
  head.writeUInt32LE(8000, 40);
  let samples = '';
  for (let i = 0; i < 8000; i++) samples += String.fromCharCode(0x40 + (i % 64));
  const part = (name: string, value: string, file?: string) =>
    `--${WAV_BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"\r\nContent-Type: audio/wav` : ''}\r\n\r\n${value}\r\n`;
  return (
    part('model', TRANSCRIBE_MODEL) +
    part('file', head.toString('latin1') + samples, 'one-second.wav') +
    `--${WAV_BOUNDARY}--\r\n`
  );
}
const PROVIDER_KEY = 'sk-bench-provider-key';
const OWNER_TOKEN = 'ot_bench_owner_token_0123456789';
const HOT_USER = 'hot-user';
/** Every funded user's opening balance in the naive target's database (raw units: far above any run). */
const NAIVE_BALANCE = 1_000_000_000_000n;

/**
 * The prices of the bench's models (USDC per token and per request), set on the service and used by the
 * naive target to price the same answers. The markup (1.5) applies to the token prices, for both.
 */
const PRICES: Record<string, { prompt: string; completion: string; request: string }> = {
  [MODEL]: { prompt: '0.000002', completion: '0.000005', request: '0.0001' },
  [CLAUDE_MODEL]: { prompt: '0.000003', completion: '0.000015', request: '0.0001' },
  [EMBED_MODEL]: { prompt: '0.00000002', completion: '0', request: '0.00001' },
  [IMAGE_MODEL]: { prompt: '0.000005', completion: '0.00004', request: '0.0001' },
  [TRANSCRIBE_MODEL]: { prompt: '0.000006', completion: '0.00001', request: '0.0001' },
};

/**
 * The Portkey gateway: the version the issue names; @hono/node-server 1.14.1 and @hono/node-ws 1.2.0
 * because from @hono/node-server 1.14.2 on, the gateway's streamed answers fail on Node with
 * `TypeError: immutable` (it appends headers to a fetch Response's; Portkey-AI/gateway#1389).
 */
const PORTKEY_PACKAGES = ['@portkey-ai/gateway@1.15.2', '@hono/node-server@1.14.1', '@hono/node-ws@1.2.0'];
const PEER_DIR = join(ROOT, 'bench/.peer');
const PORTKEY_BIN = join(PEER_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');

interface Ready {
  ready: true;
  port: number;
  apiKey?: string;
  /** The upstream's webhook receiver. */
  sinkPort?: number;
}

// ---------------------------------------------------------------- child roles

/**
 * Every child answers `{ id, cmd }` messages (`cpu` is common, roles add their own commands) and exits
 * cleanly on SIGTERM, so that a --cpu-prof profile is written.
 */
function serve(handlers: Record<string, () => Promise<unknown> | unknown> = {}, stop?: () => Promise<void>) {
  const all: Record<string, () => Promise<unknown> | unknown> = {
    cpu: () => process.cpuUsage(),
    ...handlers,
  };
  process.on('message', async (m: any) => {
    const h = m && all[m.cmd];
    if (!h) return;
    try {
      process.send!({ id: m.id, result: await h() });
    } catch (e) {
      process.send!({ id: m.id, error: String((e as Error)?.stack ?? e) });
    }
  });
  // Once: SIGTERM and the driver's exit (disconnect) both come at the end of a run.
  let stopping: Promise<void> | undefined;
  const exit = () =>
    (stopping ??= (async () => {
      await stop?.().catch(() => undefined);
      process.exit(0);
    })());
  process.on('SIGTERM', exit);
  process.on('disconnect', exit); // the driver died
  process.on('SIGINT', () => undefined); // Ctrl-C: the driver stops every child with SIGTERM
}

async function runUpstream(): Promise<void> {
  const { FakeUpstream } = await import('../test/helpers/fake-upstream.js');
  const fake = await FakeUpstream.start({ record: false });
  // CHUNKS words: the fake streams one content chunk per word.
  const content = Array.from({ length: CHUNKS }, (_, i) => `word${i}`).join(' ');
  fake.behavior = { content, usage: { prompt_tokens: 11, completion_tokens: CHUNKS } };
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  serve({}, async () => {
    sink.close();
    await fake.close();
  });
  process.send!({
    ready: true,
    port: Number(new URL(fake.baseUrl).port),
    sinkPort: (sink.address() as AddressInfo).port,
  } satisfies Ready);
}

/** The last count `re` matches in an answer's text (0 if none): a stream's final usage is its last. */
function lastCount(text: string, re: RegExp): number {
  let n = 0;
  for (const m of text.matchAll(re)) n = Number(m[1]);
  return n;
}
const INPUT_TOKENS = /"(?:prompt_tokens|input_tokens)":(\d+)/g;
const OUTPUT_TOKENS = /"(?:completion_tokens|output_tokens)":(\d+)/g;

/**
 * What the naive target charges for an answer of `model`, in raw units (10^-6 USDC): the service's own
 * formula (money.chatCost: the request price, plus markup x the tokens, rounded up), markup 1.5.
 */
function naivePrice(model: string, input: number, output: number): bigint {
  const p = PRICES[model];
  const pico = (usdc: string) => parseDecimal(usdc, 12)!;
  const price = {
    promptPico: pico(p.prompt),
    completionPico: pico(p.completion),
    requestPico: pico(p.request),
  };
  return chatCost(price, 1_500_000n, input, output);
}

/**
 * The bare pass-through; `naive`: it also charges every 200 answer with one statement (debit + ledger
 * row) once the answer has been relayed, before ending it, so the charge is in the request's time like
 * the service's settlement.
 */
async function runBare(upstreamPort: number, naive: boolean): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 256, keepAliveTimeout: 30_000 });
  const db = naive ? await naiveDatabase() : null;
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const path = req.url ?? '/v1/chat/completions';
      pool
        .request({
          path,
          method: 'POST',
          headers: {
            // The client's type: JSON, or a multipart upload's with its boundary.
            'content-type': String(req.headers['content-type'] ?? 'application/json'),
            authorization: `Bearer ${PROVIDER_KEY}`,
          },
          body: Buffer.concat(parts),
        })
        .then(({ statusCode, headers, body }) => {
          res.writeHead(statusCode, {
            'content-type': String(headers['content-type'] ?? 'application/json'),
          });
          const answer: Buffer[] = [];
          body.on('data', (c: Buffer) => {
            res.write(c);
            if (db) answer.push(c);
          });
          body.on('error', () => res.destroy());
          body.on('end', () => {
            if (!db || statusCode !== 200) return void res.end();
            // The model follows from the path (the bench sends one model per API); the token counts from the
            // answer's text: the last input and output counts (a stream's final usage).
            const text = Buffer.concat(answer).toString('latin1');
            const model = path.endsWith('/messages')
              ? CLAUDE_MODEL
              : path.endsWith('/embeddings')
                ? EMBED_MODEL
                : path.endsWith('/images/generations')
                  ? IMAGE_MODEL
                  : path.endsWith('/audio/transcriptions')
                    ? TRANSCRIBE_MODEL
                    : MODEL;
            const input = lastCount(text, INPUT_TOKENS);
            const output = lastCount(text, OUTPUT_TOKENS);
            db.charge(
              String(req.headers['x-paywall-user']),
              naivePrice(model, input, output),
              model,
              input,
              output,
            )
              .then(() => res.end())
              .catch(() => res.destroy());
          });
        })
        .catch(() => {
          res.writeHead(502);
          res.end();
        });
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serve({ backends: () => db?.backends() ?? [], ledger: () => db?.ledger() }, async () => {
    await pool.close();
    await db?.drop();
  });
  process.send!({ ready: true, port: (server.address() as AddressInfo).port } satisfies Ready);
}

/**
 * The naive target's scratch database on DATABASE_URL's server: one `account` row per user, and a
 * `ledger_entry` per charge (primary key and the foreign key to its account, nothing else). Same pool size
 * as the service's (20); idle connections are kept, so the backends measured in a row stay the same.
 */
async function naiveDatabase() {
  const { default: pg } = await import('pg');
  const { randomBytes } = await import('node:crypto');
  const name = `pp_bench_naive_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: env.DATABASE_URL });
    await c.connect();
    await c.query(sql).finally(() => c.end());
  };
  await admin(`create database ${name}`);
  const url = new URL(env.DATABASE_URL!);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 20, idleTimeoutMillis: 0 });
  pool.on('error', () => undefined); // an idle connection closed by the server (the drop at the end)
  await pool.query(`create table account (id text primary key, balance_raw bigint not null)`);
  await pool.query(
    `create table ledger_entry (
       id bigint generated always as identity primary key,
       account_id text not null references account (id),
       amount_raw bigint not null,
       balance_after_raw bigint not null,
       model text not null,
       input_tokens int not null,
       output_tokens int not null,
       created_at timestamptz not null default now())`,
  );
  await pool.query(
    `insert into account select 'user' || i, $3::bigint from generate_series(0, $1::int - 1) i union all select $2, $3::bigint`,
    [USERS, HOT_USER, String(NAIVE_BALANCE)],
  );
  return {
    /** One autocommit statement: the debit and its ledger row. */
    charge: (user: string, amount: bigint, model: string, input: number, output: number) =>
      pool.query({
        name: 'charge',
        text: `with debit as (
                 update account set balance_raw = balance_raw - $2 where id = $1 returning id, balance_raw)
               insert into ledger_entry (account_id, amount_raw, balance_after_raw, model, input_tokens, output_tokens)
               select id, $2, balance_raw, $3, $4, $5 from debit`,
        values: [user, String(amount), model, input, output],
      }),
    backends: async () =>
      (
        await pool.query(
          `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`,
        )
      ).rows.map((r) => Number(r.pid)),
    /** Its rows after the run: one ledger entry per charged answer, debits = ledger. */
    ledger: async (): Promise<NaiveLedger> => {
      const { rows } = await pool.query(
        `select (select count(*)::int from ledger_entry) as entries,
                (select coalesce(sum(amount_raw), 0)::text from ledger_entry) as ledger,
                (select (count(*) * $1::numeric - sum(balance_raw))::text from account) as debited`,
        [String(NAIVE_BALANCE)],
      );
      return rows[0];
    },
    drop: async () => {
      await pool.end();
      await admin(`drop database if exists ${name} with (force)`);
    },
  };
}

interface NaiveLedger {
  entries: number;
  /** Sum of the ledger entries and of the debits, raw units (decimal strings). */
  ledger: string;
  debited: string;
}

/**
 * The Portkey gateway, as its bin starts it (`--headless`: no log UI), inside this child so its CPU is
 * read like every other process's. Its port is a free one found just before.
 */
async function runPortkey(): Promise<void> {
  const port = await freePort();
  // The gateway reads its flags from process.argv when its module is evaluated.
  process.argv = [process.argv[0], PORTKEY_BIN, `--port=${port}`, '--headless'];
  await import(pathToFileURL(PORTKEY_BIN).href);
  for (let i = 0; ; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}/`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i === 100) throw new Error(`Portkey did not answer on port ${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  serve();
  process.send!({ ready: true, port } satisfies Ready);
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** Installs the Portkey gateway into bench/.peer once; null when it is there, else why it is not. */
function installPortkey(): string | null {
  const installed = (name: string) => {
    try {
      return JSON.parse(readFileSync(join(PEER_DIR, 'node_modules', name, 'package.json'), 'utf8')).version;
    } catch {
      return null;
    }
  };
  const wanted = PORTKEY_PACKAGES.map((p) => p.slice(0, p.lastIndexOf('@')));
  if (wanted.every((name, i) => installed(name) === PORTKEY_PACKAGES[i].slice(name.length + 1))) return null;
  console.log(`installing ${PORTKEY_PACKAGES.join(' ')} into bench/.peer (once)…`);
  try {
    mkdirSync(PEER_DIR, { recursive: true });
    // A package.json of its own, so npm installs here and never into the project.
    if (!existsSync(join(PEER_DIR, 'package.json')))
      writeFileSync(join(PEER_DIR, 'package.json'), '{ "private": true }\n');
    execFileSync(
      'npm',
      ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', PEER_DIR, ...PORTKEY_PACKAGES],
      { stdio: ['ignore', 'ignore', 'pipe'], timeout: 300_000 },
    );
    return existsSync(PORTKEY_BIN) ? null : `npm install left no ${PORTKEY_BIN}`;
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    // npm's own words for the cause (code, network error), without its log-file hints.
    const why = String(err.stderr ?? '')
      .split('\n')
      .map((l) => l.replace(/^npm (error|ERR!)\s*/, '').trim())
      .filter((l) => l && !/complete log|behind a proxy|npm help/i.test(l))
      .slice(0, 3)
      .join(' / ');
    return `npm install ${PORTKEY_PACKAGES[0]} failed: ${why || err.message}`;
  }
}

/** A fresh, migrated database: a new one on DATABASE_URL's server (dropped after), else in-memory PGlite. */
async function openDatabase() {
  const { Database } = await import('../src/db/database.js');
  const base = env.DATABASE_URL;
  if (!base) {
    const db = await Database.open({ dataDir: 'memory://' });
    await db.migrate();
    return { db, url: undefined, drop: () => db.close() };
  }
  const { createScratchPostgres } = await import('../src/db/scratch-database.js');
  return createScratchPostgres(base, 'pp_bench');
}

/**
 * The service, one paywall, USERS funded users and HOT_USER. `withLimits`: every limit of docs/reference.md §10 is
 * on (set far above what the run reaches), so the run compares the cost of checking and counting them.
 */
async function runService(upstreamPort: number, sinkPort: number, withLimits: boolean): Promise<void> {
  const { createApp } = await import('../src/app.js');
  const { loadConfig } = await import('../src/config.js');
  const { createLogger } = await import('../src/shared/logger.js');
  const { proveLedger } = await import('../src/modules/accounts/accounts.js');
  const { db, url, drop } = await openDatabase();
  const config = loadConfig({
    PORT: '0',
    LOG_LEVEL: env.BENCH_LOG_LEVEL ?? 'silent',
    BOOTSTRAP_OWNER_TOKEN: OWNER_TOKEN,
    ENCRYPTION_KEY: 'bench-encryption-key-0123456789',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    PROVIDER_ALLOW_PRIVATE_NETWORKS: 'true',
    ...(url ? { DATABASE_URL: url } : {}),
    ...(withLimits ? { RATE_LIMIT_PER_MINUTE: '1000000000' } : {}),
    WEBHOOK_WORKER: WEBHOOK === 'deliver' ? 'true' : 'false',
  });
  const app = await createApp({ config, db, log: createLogger(config.LOG_LEVEL) });
  await app.services.owners.bootstrap(OWNER_TOKEN);
  await app.start();
  await new Promise<void>((r) => app.server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  const call = async (token: string, path: string, body: unknown) => {
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json: any = await res.json();
    if (res.status !== 200 || json.errors) throw new Error(`${path}: ${JSON.stringify(json)}`);
    return json;
  };
  const gql = (token: string, query: string, variables: Record<string, unknown> = {}) =>
    call(token, '/graphql', { query, variables }).then((r) => r.data);

  const created = await gql(
    OWNER_TOKEN,
    `mutation { createPaywall(input: {name: "bench", mode: DEFAULT}) { apiKey paywall { id } } }`,
  );
  const apiKey: string = created.createPaywall.apiKey;
  await gql(apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl: `http://127.0.0.1:${upstreamPort}/v1`, apiKey: PROVIDER_KEY },
  });
  const price = (model: string) => {
    const p = PRICES[model];
    return {
      prompt: p.prompt,
      request: p.request,
      ...(p.completion !== '0' ? { completion: p.completion } : {}),
    };
  };
  await gql(apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: { modelId: MODEL, ...price(MODEL), maxCompletionTokens: 256 },
  });
  await gql(apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: {
      name: 'claude',
      kind: 'ANTHROPIC',
      baseUrl: `http://127.0.0.1:${upstreamPort}/v1`,
      apiKey: PROVIDER_KEY,
    },
  });
  // Cache prices too (the naive target has none: the bench's answers read and write no cache).
  await gql(apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: {
      modelId: CLAUDE_MODEL,
      provider: 'claude',
      ...price(CLAUDE_MODEL),
      cacheRead: '0.0000003',
      cacheWrite: '0.00000375',
      maxCompletionTokens: 256,
    },
  });
  await gql(apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: { modelId: EMBED_MODEL, ...price(EMBED_MODEL) },
  });
  for (const modelId of [IMAGE_MODEL, TRANSCRIBE_MODEL])
    await gql(apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      i: { modelId, ...price(modelId) },
    });
  await gql(apiKey, `mutation { updatePaywall(input: {markup: "1.5"}) { id } }`);
  if (WEBHOOK !== 'none')
    await gql(
      apiKey,
      `mutation($u: String!) { createWebhookSubscription(input: {url: $u, events: ["*"]}) { id } }`,
      {
        u: `http://127.0.0.1:${sinkPort}/bench-hook`,
      },
    );
  if (withLimits) {
    await gql(
      apiKey,
      `mutation { updatePaywall(input: {dailyRequestLimit: 1000000000, dailySpendLimit: "1000000"}) { id } }`,
    );
    await gql(
      apiKey,
      `mutation { setModelPricing(input: {modelId: "${MODEL}", dailyRequestLimit: 1000000000}) { id } }`,
    );
  }
  // Fund every user through the deposit endpoint (20 at a time); the hot user gets enough for any run.
  const users = [...Array.from({ length: USERS }, (_, i) => `user${i}`), HOT_USER];
  for (let i = 0; i < users.length; i += 20)
    await Promise.all(
      users
        .slice(i, i + 20)
        .map((user) =>
          call(apiKey, '/v1/user/balance/deposit', { user, amount: user === HOT_USER ? '100000' : '1000' }),
        ),
    );

  serve(
    {
      info: async () => {
        if (!url) return { database: 'embedded PGlite (in memory, inside the service process)' };
        const rows = await db.query(`select version() as v`);
        return { database: String(rows[0].v) };
      },
      /** PIDs of the PostgreSQL backends serving this (scratch) database: the service's connections. */
      backends: async () => {
        if (!url) return [];
        const rows = await db.query(
          `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`,
        );
        return rows.map((r: any) => Number(r.pid));
      },
      ledger: () => ledgerCheck(db, proveLedger, app.services.proxy),
    },
    async () => {
      await app.stop(2000).catch(() => undefined);
      // BENCH_KEEP_DB=1: leave the scratch database for EXPLAIN and statement experiments.
      if (env.BENCH_KEEP_DB === '1' && url) console.log(`kept the bench database: ${url}`);
      else await drop();
    },
  );
  process.send!({ ready: true, port: (app.server.address() as AddressInfo).port, apiKey } satisfies Ready);
}

interface LedgerReport {
  ok: boolean;
  /** Completed usage charges (the driver compares them with the 200 answers it got). */
  completed: number;
  lines: string[];
}

/**
 * After a run: every served request settled, no hold open, no negative balance, and proveLedger (balances
 * sum to zero, each account = its transfers, held = its open holds). Waits up to 10 s for settlements
 * still in flight (a finished answer is settled asynchronously).
 */
async function ledgerCheck(
  db: { query(sql: string, params?: unknown[]): Promise<any[]> },
  proveLedger: (
    sql: any,
  ) => Promise<{ ok: boolean; totalRaw: bigint; unbalancedAccounts: string[]; misheldAccounts: string[] }>,
  proxy: unknown,
): Promise<LedgerReport> {
  const one = async (sql: string) => (await db.query(sql))[0];
  let open = 0;
  for (let i = 0; i < 100; i++) {
    open = (await one(`select count(*)::int as n from charge where status = 'held'`)).n;
    if (open === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const byStatus = await db.query(
    `select status, count(*)::int as n, coalesce(sum(amount_raw), 0)::text as amount
       from charge where kind = 'usage' group by status order by status`,
  );
  const negative = (
    await one(
      `select count(*)::int as n from ledger_account where kind <> 'world' and (balance_raw < 0 or held_raw < 0 or held_raw > balance_raw)`,
    )
  ).n;
  const held = (await one(`select coalesce(sum(held_raw), 0)::text as held from ledger_account`)).held;
  const proof = await proveLedger(db);
  const completed = byStatus.find((r: any) => r.status === 'completed')?.n ?? 0;
  const lines = [
    `usage charges by status: ${byStatus.map((r: any) => `${r.status} ${r.n} (${(Number(r.amount) / 1e6).toFixed(6)} USDC)`).join(', ') || 'none'}`,
    `open holds: ${open} (held ${held} raw) ${open === 0 && held === '0' ? 'ok' : 'FAILED'}`,
    `negative or over-held balances: ${negative} ${negative === 0 ? 'ok' : 'FAILED'}`,
    `ledger proof (balances sum to 0 [${proof.totalRaw}], each = its transfers [${proof.unbalancedAccounts.length} off], held = open holds [${proof.misheldAccounts.length} off]): ${proof.ok ? 'ok' : 'FAILED'}`,
  ];
  try {
    const events = (await one(`select count(*)::int as n from event`)).n;
    const deliveries = await db.query(
      `select status, count(*)::int as n from webhook_delivery group by status order by status`,
    );
    lines.push(
      `events ${events}; webhook deliveries: ${deliveries.map((r: any) => `${r.status} ${r.n}`).join(', ') || 'none'}`,
    );
  } catch (e) {
    lines.push(`events / webhook deliveries: not counted (${(e as Error).message})`);
  }
  const b = (proxy as { batchStats?: { batches: number; items: number; ms: number } }).batchStats;
  if (b && b.batches)
    lines.push(
      `group commit: ${b.batches} ledger statements, avg ${(b.items / b.batches).toFixed(1)} holds + settlements each, ${(b.ms / b.batches).toFixed(1)} ms each`,
    );
  return { ok: open === 0 && held === '0' && negative === 0 && proof.ok, completed, lines };
}

// ---------------------------------------------------------------- driver: processes, pinning, CPU

/** The service's Node options: those `npm start` runs it with (package.json), unless BENCH_SERVICE_FLAGS says. */
const SERVICE_FLAGS = (env.BENCH_SERVICE_FLAGS ?? '--experimental-async-context-frame')
  .split(' ')
  .filter(Boolean);

function start(role: string, args: string[] = []): Promise<{ child: ChildProcess; msg: Ready }> {
  const execArgv = [
    ...(env.BENCH_PROFILE === role
      ? ['--cpu-prof', `--cpu-prof-dir=${join(os.tmpdir(), 'paywall-proxy-bench')}`]
      : []),
    ...(role === 'service' ? SERVICE_FLAGS : []),
  ];
  const child = fork(fileURLToPath(import.meta.url), [role, ...args], {
    execArgv,
    // Portkey's start-up banner (a spinner and a console.clear) stays out of the bench's output.
    stdio: ['ignore', role === 'portkey' ? 'ignore' : 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (msg: any) => resolve({ child, msg }));
    child.once('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
  });
}

let rpcSeq = 0;
function rpc<T = any>(child: ChildProcess, cmd: string): Promise<T> {
  const id = ++rpcSeq;
  return new Promise((resolve, reject) => {
    const on = (m: any) => {
      if (m?.id !== id) return;
      child.off('message', on);
      if (m.error) reject(new Error(`${cmd}: ${m.error}`));
      else resolve(m.result as T);
    };
    child.on('message', on);
    child.send({ id, cmd }, (err) => {
      if (!err) return;
      child.off('message', on);
      reject(err);
    });
  });
}

/** CPU pinning with taskset; remembers the PostgreSQL backends it pinned to restore them. */
class Pinning {
  readonly server: string;
  readonly load: string;
  readonly enabled: boolean;
  readonly why: string;
  private readonly restore = new Map<number, string>();

  constructor() {
    const allowed = Pinning.cpus(process.pid);
    if (!PIN) [this.enabled, this.why] = [false, 'off (BENCH_PIN=0)'];
    else if (!allowed) [this.enabled, this.why] = [false, 'off (no taskset)'];
    else if (allowed.length < 2) [this.enabled, this.why] = [false, `off (only CPU ${allowed} allowed)`];
    else [this.enabled, this.why] = [true, ''];
    this.server = env.BENCH_SERVER_CPU ?? allowed?.[0] ?? '0';
    this.load = env.BENCH_LOAD_CPU ?? allowed?.[allowed.length - 1] ?? '1';
    if (this.enabled)
      this.why = `upstream, every proxy and the bench databases' PostgreSQL backends on CPU ${this.server}; load driver on CPU ${this.load}`;
  }

  /** The CPUs a process may run on ("0-1,3" expanded), or null without taskset. */
  static cpus(pid: number): string[] | null {
    try {
      const out = execFileSync('taskset', ['-c', '-p', String(pid)], { encoding: 'utf8' });
      return out
        .slice(out.lastIndexOf(':') + 1)
        .trim()
        .split(',')
        .flatMap((part) => {
          const [a, b = a] = part.split('-').map(Number);
          return Array.from({ length: b - a + 1 }, (_, i) => String(a + i));
        });
    } catch {
      return null;
    }
  }

  private set(pid: number, cpus: string): boolean {
    try {
      execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  }

  toServer(pid: number): void {
    if (this.enabled) this.set(pid, this.server);
  }

  toLoad(pid: number): void {
    if (this.enabled) this.set(pid, this.load);
  }

  /** Pins PostgreSQL backends (not seen before) to the server CPU, remembering their affinity. */
  postgres(pids: number[]): void {
    if (!this.enabled) return;
    for (const pid of pids) {
      if (this.restore.has(pid)) continue;
      const before = Pinning.cpus(pid);
      if (before && this.set(pid, this.server)) this.restore.set(pid, before.join(','));
    }
  }

  /** Gives every PostgreSQL backend still alive its original affinity back (idempotent, synchronous). */
  restorePostgres(): void {
    for (const [pid, cpus] of this.restore) this.set(pid, cpus);
    this.restore.clear();
  }
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100;
  } catch {
    return 100;
  }
})();

/** CPU ms (utime + stime) of each of `pids` from /proc, missing ones left out. */
function procCpuMs(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK);
    } catch {
      /* gone, or not on this machine */
    }
  }
  return out;
}

interface CpuSample {
  node: Record<string, number>;
  postgres: Map<number, number>;
}

/** CPU ms so far of the driver, the given Node children and the PostgreSQL backends `pgPids`. */
async function cpuSample(procs: Record<string, ChildProcess>, pgPids: number[]): Promise<CpuSample> {
  const node: Record<string, number> = {};
  for (const [name, child] of Object.entries(procs)) {
    const u = await rpc<NodeJS.CpuUsage>(child, 'cpu');
    node[name] = (u.user + u.system) / 1000;
  }
  const d = process.cpuUsage();
  node.driver = (d.user + d.system) / 1000;
  return { node, postgres: procCpuMs(pgPids) };
}

/** CPU ms per process between two samples; PostgreSQL backends that appeared in between count in full. */
function cpuDelta(a: CpuSample, b: CpuSample): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(b.node)) out[k] = b.node[k] - (a.node[k] ?? 0);
  if (b.postgres.size || a.postgres.size) {
    let pg = 0;
    for (const [pid, ms] of b.postgres) pg += ms - (a.postgres.get(pid) ?? 0);
    out.postgres = pg;
  }
  return out;
}

// ---------------------------------------------------------------- driver: load

interface Result {
  requests: number;
  errors: number;
  /** 200 answers (valid or not): each should be one settled charge on the service. */
  served: number;
  firstError?: string;
  rps: number;
  p50: number;
  p99: number;
  /** Time to the first body byte, streams only. */
  ttfb50: number;
  /** Mean length of the valid answers' bodies (characters; ASCII here, so bytes). */
  bytes: number;
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;

interface Request {
  path: string;
  body: string;
  stream: boolean;
  headers: (i: number) => Record<string, string>;
  /** Is this answer body a complete, unblocked answer carrying the upstream's content? */
  valid: (text: string) => boolean;
}

/** A closed loop on `pool`: `c` workers, each sending its next request when the previous answer ended. */
async function load(pool: Pool, c: number, req: Request, seconds: number): Promise<Result> {
  const latencies: number[] = [];
  const ttfbs: number[] = [];
  let errors = 0;
  let served = 0;
  let bytes = 0;
  let firstError: string | undefined;
  let seq = 0;
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (Date.now() < end) {
        const t0 = performance.now();
        let first = 0;
        try {
          const res = await pool.request({
            path: req.path,
            method: 'POST',
            headers: req.headers(seq++),
            body: req.body,
          });
          if (res.statusCode === 200) served++; // charged even if the body then breaks
          let text = '';
          res.body.setEncoding('utf8');
          for await (const chunk of res.body) {
            if (!first) first = performance.now();
            text += chunk;
          }
          if (res.statusCode === 200 && req.valid(text)) {
            latencies.push(performance.now() - t0);
            if (req.stream) ttfbs.push(first - t0);
            bytes += text.length;
          } else {
            errors++;
            firstError ??= `${res.statusCode} ${text.slice(0, 300)}`;
          }
        } catch (e) {
          errors++;
          firstError ??= String(e);
        }
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  ttfbs.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    served,
    firstError,
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ttfb50: req.stream ? percentile(ttfbs, 50) : NaN,
    bytes: latencies.length ? bytes / latencies.length : NaN,
  };
}

// ---------------------------------------------------------------- driver: targets, scenarios, rows

interface Target {
  /**
   * bare: the reference of added latency; naive: the reference of throughput and PostgreSQL CPU;
   * portkey: the gateway reference; naive and service take the user header and have PostgreSQL backends.
   */
  kind: 'bare' | 'naive' | 'portkey' | 'service';
  name: string;
  port: number;
  child: ChildProcess;
  /** Service targets: its API key; the others have none. */
  apiKey?: string;
  /** 200 answers this target gave over the whole run (warm-ups included). */
  served: number;
  /** Scenarios (keys) this target cannot serve, and why: their rows are not run. */
  cannot: Record<string, string>;
}

interface Scenario {
  key: string;
  name: string;
  api: 'chat' | 'responses' | 'messages' | 'embeddings' | 'images' | 'transcriptions';
  stream: boolean;
  hot: boolean;
}

const SCENARIO: Record<string, Scenario> = Object.fromEntries(
  (
    [
      ['chat-json', 'chat JSON', 'chat', false, false],
      ['chat-sse', 'chat SSE', 'chat', true, false],
      ['responses-json', 'responses JSON', 'responses', false, false],
      ['responses-sse', 'responses SSE', 'responses', true, false],
      ['messages-json', 'messages JSON', 'messages', false, false],
      ['messages-sse', 'messages SSE', 'messages', true, false],
      ['embeddings', 'embeddings', 'embeddings', false, false],
      ['images', 'images JSON', 'images', false, false],
      ['transcription', 'transcription (multipart)', 'transcriptions', false, false],
      ['hot', 'hot user (chat JSON)', 'chat', false, true],
    ] as const
  ).map(([key, name, api, stream, hot]) => [key, { key, name, api, stream, hot }]),
);

/** Long names, for the issue's table. */
const TARGET_TEXT: Record<Target['kind'], string> = {
  bare: 'bare pass-through (node:http + undici)',
  naive: 'pass-through + one naive PostgreSQL statement per request (debit + ledger row)',
  portkey: 'Portkey gateway 1.15.2 (charges nothing)',
  service: 'this service',
};

function requestOf(s: Scenario, t: Target, upstreamPort: number): Request {
  const prompt = 'Hello! How are you today?';
  const body =
    s.api === 'chat'
      ? {
          model: MODEL,
          messages: [{ role: 'user', content: prompt }],
          max_tokens: 64,
          // A stream's usage chunk, for every target alike: the naive target prices the answer from it.
          ...(s.stream ? { stream_options: { include_usage: true } } : {}),
        }
      : s.api === 'responses'
        ? { model: MODEL, input: prompt, max_output_tokens: 64 }
        : s.api === 'messages'
          ? { model: CLAUDE_MODEL, messages: [{ role: 'user', content: prompt }], max_tokens: 64 }
          : s.api === 'images'
            ? { model: IMAGE_MODEL, prompt: 'a small red fox', size: '1024x1024', quality: 'low' }
            : { model: EMBED_MODEL, input: prompt };
  const multipart = s.api === 'transcriptions';
  const json = {
    'content-type': multipart ? `multipart/form-data; boundary=${WAV_BOUNDARY}` : 'application/json',
  };
  const blocked = (text: string) => text.includes('"paywall":{');
  const path = {
    chat: '/v1/chat/completions',
    responses: '/v1/responses',
    messages: '/v1/messages',
    embeddings: '/v1/embeddings',
    images: '/v1/images/generations',
    transcriptions: '/v1/audio/transcriptions',
  }[s.api];
  const valid: Record<Scenario['api'], [(t: string) => boolean, (t: string) => boolean]> = {
    chat: [(t) => t.includes('"choices"'), (t) => t.endsWith('data: [DONE]\n\n')],
    responses: [
      (t) => t.includes('"object":"response"') && t.includes('"output"'),
      (t) => t.includes('event: response.completed'),
    ],
    messages: [(t) => t.includes('"type":"message"'), (t) => t.includes('event: message_stop')],
    embeddings: [(t) => t.includes('"data"') && t.includes('"embedding"'), () => false],
    images: [(t) => t.includes('"data"') && t.includes('"b64_json"'), () => false],
    transcriptions: [(t) => t.includes('"text"') && t.includes('"usage"'), () => false],
  };
  // The upstream's last content word: the answer carries what the model wrote, not just its shape.
  const chatLike = s.api === 'chat' || s.api === 'responses' || s.api === 'messages';
  const lastWord = chatLike && CHUNKS > 0 ? `word${CHUNKS - 1}` : '';
  // Portkey is told the provider and the host per request (no config file): the fake upstream, whose
  // Messages API is Anthropic's.
  const portkeyHeaders: Record<string, string> = {
    ...json,
    'x-portkey-custom-host': `http://127.0.0.1:${upstreamPort}/v1`,
    ...(s.api === 'messages'
      ? { 'x-portkey-provider': 'anthropic', 'x-api-key': PROVIDER_KEY, 'anthropic-version': '2023-06-01' }
      : { 'x-portkey-provider': 'openai', authorization: `Bearer ${PROVIDER_KEY}` }),
  };
  const headers: (i: number) => Record<string, string> =
    t.kind === 'bare'
      ? () => json
      : t.kind === 'portkey'
        ? () => portkeyHeaders
        : (i) => ({
            ...json,
            ...(t.apiKey ? { authorization: `Bearer ${t.apiKey}` } : {}),
            'x-paywall-user': s.hot ? HOT_USER : `user${i % USERS}`,
          });
  return {
    path,
    body: multipart ? transcriptionBody() : JSON.stringify(s.stream ? { ...body, stream: true } : body),
    stream: s.stream,
    headers,
    valid: (text) => !blocked(text) && text.includes(lastWord) && valid[s.api][s.stream ? 1 : 0](text),
  };
}

interface Row {
  scenario: Scenario;
  target: Target;
  c: number;
  r: Result;
  /** CPU ms per request by process: proxy, upstream, postgres (naive and service on PostgreSQL), driver. */
  cpu: Record<string, number>;
  /** CPU time the hypervisor gave to others during the measurement, % of all CPU time (/proc/stat). */
  steal: number;
  /** req/s of each round, in order (one entry until the rounds are merged). */
  rounds: number[];
}

/** /proc/stat's all-CPU counters (user … steal), or null off Linux. */
function cpuTimes(): number[] | null {
  try {
    return readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  } catch {
    return null;
  }
}

/** Steal between two cpuTimes readings, in % of the CPU time that passed (NaN when unknown). */
function stealPercent(before: number[] | null, after: number[] | null): number {
  if (!before || !after) return NaN;
  const d = after.map((v, i) => v - before[i]);
  const total = d.reduce((a, b) => a + b, 0);
  return total > 0 ? (100 * d[7]) / total : NaN;
}

/** One row: warm-up and measurement on the same `c` connections, CPU of every process in between. */
async function runRow(
  s: Scenario,
  t: Target,
  c: number,
  upstream: { child: ChildProcess; port: number },
  pin: Pinning,
): Promise<Row> {
  const req = requestOf(s, t, upstream.port);
  const pool = new Pool(`http://127.0.0.1:${t.port}`, { connections: c, keepAliveTimeout: 30_000 });
  try {
    const warm = await load(pool, c, req, WARMUP_SECONDS);
    // After the warm-up the target's pool has its connections: pin their backends, measure their CPU.
    const hasBackends = t.kind === 'naive' || t.kind === 'service';
    const backendsOf = () => (hasBackends ? rpc<number[]>(t.child, 'backends') : Promise.resolve([]));
    const backends = await backendsOf();
    pin.postgres(backends);
    const procs = { proxy: t.child, upstream: upstream.child };
    const before = await cpuSample(procs, backends);
    const times = cpuTimes();
    const r = await load(pool, c, req, SECONDS);
    const steal = stealPercent(times, cpuTimes());
    const after = await cpuSample(procs, await backendsOf());
    t.served += warm.served + r.served;
    const cpu = Object.fromEntries(
      Object.entries(cpuDelta(before, after)).map(([k, ms]) => [
        k,
        r.requests ? Math.max(0, ms) / r.requests : NaN,
      ]),
    );
    return { scenario: s, target: t, c, r, cpu, steal, rounds: [r.rps] };
  } finally {
    await pool.close();
  }
}

/**
 * Brings a fresh target to steady state before its first row: each scenario's request for an equal share
 * of PRIME_SECONDS at c=50 (what a service that has been up for a while has run). Counted in `served`.
 */
async function prime(t: Target, scenarios: Scenario[], upstreamPort: number): Promise<void> {
  if (PRIME_SECONDS <= 0 || !scenarios.length) return;
  const pool = new Pool(`http://127.0.0.1:${t.port}`, { connections: 50, keepAliveTimeout: 30_000 });
  try {
    for (const s of scenarios)
      t.served += (
        await load(pool, 50, requestOf(s, t, upstreamPort), PRIME_SECONDS / scenarios.length)
      ).served;
  } finally {
    await pool.close();
  }
}

/**
 * One request of `s` through `t` (before any row): null if it is a valid 200 answer, else what came back.
 * Portkey's rows are run only for the scenarios it answers.
 */
async function probe(s: Scenario, t: Target, upstreamPort: number): Promise<string | null> {
  const req = requestOf(s, t, upstreamPort);
  const pool = new Pool(`http://127.0.0.1:${t.port}`, { connections: 1 });
  try {
    const res = await pool.request({
      path: req.path,
      method: 'POST',
      headers: req.headers(0),
      body: req.body,
    });
    const text = await res.body.text();
    return res.statusCode === 200 && req.valid(text) ? null : `${res.statusCode} ${text.slice(0, 300)}`;
  } catch (e) {
    return String(e);
  } finally {
    await pool.close();
  }
}

const median = (values: number[]): number => {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (!v.length) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

/**
 * The rows of every round, one per scenario, target and concurrency: each figure the median of its
 * rounds (of two: their mean); counts (requests, errors, 200 answers) summed.
 */
function mergeRounds(rounds: Row[][]): Row[] {
  const groups = new Map<string, Row[]>();
  for (const row of rounds.flat()) {
    const key = `${row.scenario.key}|${row.target.name}|${row.c}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  return [...groups.values()].map((all) => {
    const m = (f: (r: Row) => number) => median(all.map(f));
    const sum = (f: (r: Result) => number) => all.reduce((a, x) => a + f(x.r), 0);
    const keys = [...new Set(all.flatMap((x) => Object.keys(x.cpu)))];
    return {
      ...all[0],
      r: {
        requests: sum((r) => r.requests),
        errors: sum((r) => r.errors),
        served: sum((r) => r.served),
        firstError: all.find((x) => x.r.firstError)?.r.firstError,
        rps: m((x) => x.r.rps),
        p50: m((x) => x.r.p50),
        p99: m((x) => x.r.p99),
        ttfb50: m((x) => x.r.ttfb50),
        bytes: m((x) => x.r.bytes),
      },
      cpu: Object.fromEntries(keys.map((k) => [k, m((x) => x.cpu[k] ?? NaN)])),
      steal: m((x) => x.steal),
      rounds: all.map((x) => x.r.rps),
    };
  });
}

// ---------------------------------------------------------------- report: tables, goals, distance

const fmt = (n: number | undefined, d = 0) => (n !== undefined && Number.isFinite(n) ? n.toFixed(d) : '-');
const signed = (n: number, d = 2) => (Number.isFinite(n) ? (n >= 0 ? '+' : '') + n.toFixed(d) : '-');

/**
 * The reference row of `kind` for `row`: same scenario and concurrency; for the hot user, the chat JSON row
 * when that reference has no hot-user row (the bare pass-through and Portkey have no users).
 */
function refOf(rows: Row[], kind: Target['kind'], row: Row): Row | undefined {
  const at = (key: string) =>
    rows.find((r) => r.target.kind === kind && r.scenario.key === key && r.c === row.c);
  return at(row.scenario.key) ?? (row.scenario.hot ? at('chat-json') : undefined);
}

const ratioTo = (rows: Row[], kind: Target['kind'], row: Row) => {
  const ref = refOf(rows, kind, row);
  return ref ? row.r.rps / ref.r.rps : NaN;
};

/** A markdown table, right-aligned from column `firstRight` on. */
function markdown(header: string[], cells: string[][], firstRight: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const right = (i: number) => i >= firstRight;
  const line = (r: string[]) =>
    `| ${r.map((c, i) => (right(i) ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (right(i) ? '-'.repeat(w - 1) + ':' : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...cells.map(line)].join('\n');
}

/** Every row (markdown, printed as is and written to the report). */
function table(rows: Row[]): string {
  const header = [
    'scenario',
    'target',
    'c',
    'req/s',
    'rounds',
    'vs bare',
    'vs naive',
    'vs Portkey',
    'p50 ms',
    '+p50',
    'p99 ms',
    'TTFB p50',
    '+TTFB',
    'errors',
    'bytes',
    'CPU ms/req: proxy',
    'PG',
    'proxy+PG',
    'upstream',
    'driver',
    'steal %',
  ];
  const cells = rows.map((row) => {
    const { r, cpu } = row;
    const bare = refOf(rows, 'bare', row);
    const isBare = row.target.kind === 'bare';
    const vs = (kind: Target['kind']) =>
      row.target.kind === kind ? '1.00' : fmt(ratioTo(rows, kind, row), 2);
    return [
      row.scenario.name,
      row.target.name,
      String(row.c),
      fmt(r.rps),
      row.rounds.map((x) => fmt(x)).join('/'),
      vs('bare'),
      vs('naive'),
      vs('portkey'),
      fmt(r.p50, 2),
      isBare || !bare ? '' : signed(r.p50 - bare.r.p50),
      fmt(r.p99, 2),
      row.scenario.stream ? fmt(r.ttfb50, 2) : '',
      row.scenario.stream && !isBare && bare ? signed(r.ttfb50 - bare.r.ttfb50) : '',
      String(r.errors),
      fmt(r.bytes),
      fmt(cpu.proxy, 3),
      fmt(cpu.postgres, 3),
      fmt(cpu.proxy + (cpu.postgres ?? 0), 3),
      fmt(cpu.upstream, 3),
      fmt(cpu.driver, 3),
      fmt(row.steal, 0),
    ];
  });
  return markdown(header, cells, 2);
}

/**
 * The issue's table for each scenario: one line per target, req/s and ratio to the bare pass-through per
 * concurrency (the first service only: limits are the detailed table's).
 */
function issueTables(rows: Row[], targets: Target[]): string[] {
  const out: string[] = [];
  const shown = targets.filter(
    (t) => t.kind !== 'service' || t === targets.find((x) => x.kind === 'service'),
  );
  for (const key of SCENARIOS) {
    const s = SCENARIO[key];
    if (s.hot) continue;
    const header = [s.name, ...CONCURRENCY.flatMap((c) => [`c=${c} req/s`, 'ratio'])];
    const cells = shown.map((t) => [
      TARGET_TEXT[t.kind],
      ...CONCURRENCY.flatMap((c) => {
        const row = rows.find((r) => r.target === t && r.scenario === s && r.c === c);
        if (!row) return [t.cannot[key] ? 'n/a' : '-', ''];
        return [fmt(row.r.rps), t.kind === 'bare' ? '1.00' : fmt(ratioTo(rows, 'bare', row), 2)];
      }),
    ]);
    out.push(markdown(header, cells, 1), '');
  }
  return out;
}

/** Server-core CPU per request of a row: the proxy, PostgreSQL and the upstream, all on that core. */
const coreCpu = (row: Row) => row.cpu.proxy + (row.cpu.postgres ?? 0) + row.cpu.upstream;
const split = (row: Row) =>
  `${row.target.kind === 'service' ? 'service' : 'proxy'} ${fmt(row.cpu.proxy, 3)}` +
  (row.cpu.postgres !== undefined ? `, PostgreSQL ${fmt(row.cpu.postgres, 3)}` : '') +
  `, upstream ${fmt(row.cpu.upstream, 3)}`;

interface Verdict {
  /** "- [PASS] …" */
  line: string;
  /** Its distance in CPU, when the goal ran and the run was pinned. */
  distance?: string;
  pass: boolean | null;
}

/** Why the references may be missing, for the goals that read them. */
interface Missing {
  naive: string;
  portkey: string;
  /** Scenarios the Portkey gateway did not answer (its probe), and what it answered. */
  portkeyCannot: Record<string, string>;
}

/**
 * Issue 24's goals, read from the merged rows of the first service (without limits): for every
 * non-streaming scenario (chat, Responses, Messages, embeddings, images, transcription: the issue's table) throughput against the
 * naive statement and against Portkey, and PostgreSQL CPU per request against the naive statement's; for
 * every streaming scenario the added TTFB and the throughput at c=100; the hot user; the ledger proof.
 * With the upstream, the proxy and PostgreSQL pinned to one core, a throughput of R x a reference needs a
 * request to cost that core at most 1/R of the reference's: the distance says so in CPU.
 */
function goals(rows: Row[], missing: Missing, ledger: { ok: boolean; text: string }, pinned: boolean) {
  const verdicts: Verdict[] = [];
  const svc = (key: string, c: number) =>
    rows.find((r) => r.target.name === 'service' && r.scenario.key === key && r.c === c);
  const ref = (kind: Target['kind'], key: string, c: number) =>
    rows.find((r) => r.target.kind === kind && r.scenario.key === key && r.c === c);
  const push = (text: string, pass: boolean | null, shown: string, distance?: string) =>
    verdicts.push({
      line: `- [${pass === null ? 'n/a' : pass ? 'PASS' : 'FAIL'}] ${text}: ${shown}`,
      distance: pinned && pass !== null && distance ? `- ${text}: ${distance}` : undefined,
      pass,
    });
  /** A throughput goal: the service's req/s at least `min` (or more than `min`) times the reference's. */
  const throughput = (
    text: string,
    key: string,
    c: number,
    kind: 'naive' | 'portkey',
    min: number,
    strict = false,
  ) => {
    const row = svc(key, c);
    const base = ref(kind, key, c);
    if (!row) return push(text, null, 'not run');
    if (!base)
      return push(
        text,
        null,
        kind === 'naive'
          ? missing.naive
          : missing.portkeyCannot[key]
            ? `Portkey does not serve it (it answered ${missing.portkeyCannot[key].slice(0, 120)})`
            : missing.portkey,
      );
    const v = row.r.rps / base.r.rps;
    const budget = coreCpu(base) / min;
    push(
      text,
      strict ? v > min : v >= min,
      `${fmt(v, 2)}x (${fmt(row.r.rps)} against ${fmt(base.r.rps)} req/s)`,
      `needs ≤ ${fmt(budget, 3)} ms of server-core CPU per request (${base.target.name}: ${fmt(coreCpu(base), 3)} = ${split(base)}); ` +
        `measured ${fmt(coreCpu(row), 3)} (${split(row)}), ${fmt(coreCpu(row) / budget, 2)}x the budget`,
    );
  };
  const nonStreaming = SCENARIOS.filter((k) => !SCENARIO[k].stream && !SCENARIO[k].hot);
  const streaming = SCENARIOS.filter((k) => SCENARIO[k].stream);
  for (const key of nonStreaming) {
    const name = SCENARIO[key].name;
    for (const [c, min] of [
      [1, 0.5],
      [10, 1],
      [100, 1],
    ])
      throughput(`${name} c=${c} ≥ ${fmt(min, 1)}x the naive statement's req/s`, key, c, 'naive', min);
    for (const c of [1, 10, 100])
      if (c === 100) throughput(`${name} c=100 ≥ 2x Portkey's req/s`, key, c, 'portkey', 2);
      else throughput(`${name} c=${c} ahead of Portkey (> 1x its req/s)`, key, c, 'portkey', 1, true);
    for (const c of [1, 10]) {
      const text = `${name} c=${c} PostgreSQL CPU per request ≤ 2x the naive statement's`;
      const row = svc(key, c);
      const base = ref('naive', key, c);
      if (!row) push(text, null, 'not run');
      else if (!base) push(text, null, missing.naive);
      else if (row.cpu.postgres === undefined) push(text, null, 'the service runs on embedded PGlite');
      else {
        const v = row.cpu.postgres / base.cpu.postgres;
        push(
          text,
          v <= 2,
          `${fmt(v, 2)}x (${fmt(row.cpu.postgres, 3)} against ${fmt(base.cpu.postgres, 3)} ms)`,
          `needs ≤ ${fmt(2 * base.cpu.postgres, 3)} ms of PostgreSQL CPU per request; measured ${fmt(row.cpu.postgres, 3)}, ` +
            `${fmt(row.cpu.postgres / (2 * base.cpu.postgres), 2)}x that`,
        );
      }
    }
  }
  for (const key of streaming) {
    const name = SCENARIO[key].name;
    const text = `${name} c=10 TTFB p50 added to the bare pass-through's ≤ 1 ms`;
    const row = svc(key, 10);
    const bare = ref('bare', key, 10);
    if (!row || !bare) push(text, null, 'not run');
    else {
      const added = row.r.ttfb50 - bare.r.ttfb50;
      push(
        text,
        added <= 1,
        `${signed(added)} ms (${fmt(row.r.ttfb50, 2)} against ${fmt(bare.r.ttfb50, 2)}; steal ${fmt(row.steal, 0)} %)`,
        `the first byte waits for the hold; the service and PostgreSQL spend ${fmt(row.cpu.proxy + (row.cpu.postgres ?? 0), 3)} ms ` +
          `of CPU per request (${split(row)}; bare: ${split(bare)}) against ${signed(added)} ms measured, 1 ms allowed`,
      );
    }
    throughput(`${name} c=100 ≥ 1.0x the naive statement's req/s`, key, 100, 'naive', 1);
  }
  if (SCENARIOS.includes('hot')) {
    const text = `hot user (one balance) c=${HOT_CONCURRENCY} ≥ 0.8x the many-users chat JSON req/s of the same run`;
    const row = svc('hot', HOT_CONCURRENCY);
    const many = svc('chat-json', HOT_CONCURRENCY);
    if (!row || !many) push(text, null, `not run (needs chat-json at c=${HOT_CONCURRENCY})`);
    else {
      const v = row.r.rps / many.r.rps;
      const budget = coreCpu(many) / 0.8;
      push(
        text,
        v >= 0.8,
        `${fmt(v, 2)}x (${fmt(row.r.rps)} against ${fmt(many.r.rps)} req/s)`,
        `needs ≤ ${fmt(budget, 3)} ms of server-core CPU per request; measured ${fmt(coreCpu(row), 3)} (${split(row)}), ` +
          `${fmt(coreCpu(row) / budget, 2)}x the budget`,
      );
    }
  }
  push('ledger proof after the run', ledger.ok, ledger.text);
  return verdicts;
}

/** Rows where the load driver's own core was (nearly) full: they may measure the driver, not the target. */
function driverBound(rows: Row[]): string[] {
  return rows
    .map((row) => ({ row, busy: (row.cpu.driver * row.r.rps) / 1000 }))
    .filter(({ busy }) => busy >= 0.9)
    .map(
      ({ row, busy }) =>
        `- ${row.scenario.name}, ${row.target.name}, c=${row.c}: the load driver used ${fmt(100 * busy)} % of a core: this row may be limited by the driver`,
    );
}

function machine(database: string, pin: Pinning): string[] {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  const commit = git('rev-parse', '--short', 'HEAD') || 'unknown';
  const dirty = git('status', '--porcelain', '--untracked-files=no') ? ' (uncommitted changes)' : '';
  const cpus = os.cpus();
  return [
    `- date: ${new Date().toISOString()}`,
    `- commit: ${commit}${dirty}, branch ${git('rev-parse', '--abbrev-ref', 'HEAD') || '?'}`,
    `- machine: ${cpus.length} × ${cpus[0]?.model ?? '?'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.type()} ${os.release()}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} at the end`,
    `- node ${process.version}; database: ${database}`,
    `- pinning: ${pin.why}`,
    `- ${ROUNDS === 1 ? 'one round' : `medians of ${ROUNDS} rounds`}: ${
      ROUNDS === 1
        ? 'each row measured once'
        : `the whole sequence of rows ran ${ROUNDS} times (after one priming); each figure is the median of its rounds${ROUNDS === 2 ? ' (of two: their mean)' : ''}, each row's req/s per round in "rounds", errors summed`
    }`,
    `- ${SECONDS} s per row after ${WARMUP_SECONDS} s warm-up on the same connections; ${USERS} funded users (round-robin), ${CHUNKS} content chunks per stream; per-token prices, markup 1.5, holds, ledger, events; webhook: ${WEBHOOK_TEXT[WEBHOOK]}`,
  ];
}

const WEBHOOK_TEXT: Record<string, string> = {
  stored: 'one active subscription to every event (delivery rows written, no worker in the service)',
  deliver: 'one active subscription to every event, delivered by the in-process worker',
  none: 'no subscription',
};

// ---------------------------------------------------------------- driver

/** Ctrl-C or SIGTERM: the run stops, what fails after it (a closed IPC channel) is no news. */
let interrupted = false;

async function driver(): Promise<number> {
  const pin = new Pinning();
  const children: ChildProcess[] = [];
  const stopAll = async () => {
    pin.restorePostgres();
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((r) => {
            if (c.exitCode !== null || c.signalCode !== null) return r();
            const timer = setTimeout(() => (c.kill('SIGKILL'), r()), 10_000);
            c.once('exit', () => (clearTimeout(timer), r()));
            c.kill('SIGTERM');
          }),
      ),
    );
  };
  // Restore PostgreSQL's affinity however the run ends.
  process.on('exit', () => pin.restorePostgres());
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => {
      interrupted = true;
      console.log(`\n${sig}: stopping`);
      void stopAll().finally(() => process.exit(130));
    });

  const unknown = SCENARIOS.filter((s) => !SCENARIO[s]);
  if (unknown.length)
    throw new Error(`unknown BENCH_SCENARIOS ${unknown.join(', ')}; known: ${Object.keys(SCENARIO)}`);
  if (!WEBHOOK_TEXT[WEBHOOK]) throw new Error(`BENCH_WEBHOOK is stored, deliver or none, not ${WEBHOOK}`);
  if (!env.DATABASE_URL)
    console.log('note: DATABASE_URL is unset: the service runs on embedded PGlite, not PostgreSQL');
  const missing: Missing = {
    naive: !env.DATABASE_URL
      ? 'no naive-statement row: it needs PostgreSQL (DATABASE_URL)'
      : 'no naive-statement row (BENCH_ONE_STATEMENT=0)',
    portkey: 'no Portkey row (BENCH_PORTKEY=0)',
    portkeyCannot: {},
  };
  const notes: string[] = [];
  const portkeyWhyNot = PORTKEY ? installPortkey() : 'off (BENCH_PORTKEY=0)';
  if (PORTKEY && portkeyWhyNot) {
    missing.portkey = `no Portkey row: ${portkeyWhyNot}`;
    notes.push(`- Portkey: skipped: ${portkeyWhyNot}`);
    console.log(`note: Portkey skipped: ${portkeyWhyNot}`);
  }
  try {
    const upstream = await start('upstream');
    children.push(upstream.child);
    const up = { child: upstream.child, port: upstream.msg.port };
    const targets: Target[] = [];
    const add = async (kind: Target['kind'], name: string, role: string, args: string[]) => {
      const { child, msg } = await start(role, args);
      children.push(child);
      targets.push({ kind, name, port: msg.port, child, apiKey: msg.apiKey, served: 0, cannot: {} });
      return child;
    };
    await add('bare', 'bare pass-through', 'bare', [String(up.port)]);
    if (ONE_STATEMENT) await add('naive', 'naive statement', 'naive', [String(up.port)]);
    if (PORTKEY && !portkeyWhyNot)
      await add('portkey', 'Portkey', 'portkey', []).catch((e) => {
        missing.portkey = `no Portkey row: it did not start (${(e as Error).message})`;
        notes.push(`- Portkey: skipped: it did not start (${(e as Error).message})`);
      });
    console.log(`setting up the service (migrations, paywall, ${USERS + 1} users, deposits)…`);
    const serviceArgs = [String(up.port), String(upstream.msg.sinkPort)];
    const service = await add('service', 'service', 'service', serviceArgs);
    if (LIMITS) await add('service', 'service + all limits', 'service', [...serviceArgs, 'limits']);
    const info = await rpc<{ database: string }>(service, 'info');

    for (const c of children) pin.toServer(c.pid!);
    pin.toLoad(process.pid);
    console.log(`database: ${info.database}\npinning: ${pin.why}`);
    console.log(
      `${SECONDS} s per row (+${WARMUP_SECONDS} s warm-up), concurrency ${CONCURRENCY.join('/')}, scenarios ${SCENARIOS.join(', ')}, ${ROUNDS} round(s)\n`,
    );

    // Portkey serves only what it can: a scenario it answers with anything but the upstream's 200 answer
    // has no Portkey row, and says why.
    const portkey = targets.find((t) => t.kind === 'portkey');
    if (portkey)
      for (const key of SCENARIOS.filter((k) => !SCENARIO[k].hot)) {
        const why = await probe(SCENARIO[key], portkey, up.port);
        if (!why) continue;
        portkey.cannot[key] = missing.portkeyCannot[key] = why;
        notes.push(`- Portkey: n/a for ${SCENARIO[key].name}: it answered ${why.slice(0, 200)}`);
      }
    // The hot user is a user's balance: only the targets that charge users run it.
    const runs = (t: Target, s: Scenario) =>
      s.hot ? t.kind === 'naive' || t.kind === 'service' : !t.cannot[s.key];

    process.stdout.write(`priming every target (${PRIME_SECONDS} s at c=50 over the scenarios)… `);
    for (const t of targets)
      await prime(
        t,
        SCENARIOS.map((k) => SCENARIO[k]).filter((s) => !s.hot && runs(t, s)),
        up.port,
      );
    console.log('done');

    const rounds: Row[][] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      if (ROUNDS > 1) console.log(`round ${round} of ${ROUNDS}`);
      const rows: Row[] = [];
      for (const key of SCENARIOS) {
        const s = SCENARIO[key];
        for (const c of s.hot ? [HOT_CONCURRENCY] : CONCURRENCY)
          for (const t of targets.filter((x) => runs(x, s))) {
            process.stdout.write(`  ${s.name}, ${t.name}, c=${c}… `);
            const row = await runRow(s, t, c, up, pin);
            rows.push(row);
            const cpu = Object.entries(row.cpu)
              .map(([k, v]) => `${k} ${fmt(v, 3)}`)
              .join(', ');
            console.log(
              `${fmt(row.r.rps)} req/s, p50 ${fmt(row.r.p50, 2)} ms (CPU ms/req: ${cpu}; steal ${fmt(row.steal, 0)} %)`,
            );
            if (row.r.errors) console.log(`    ${row.r.errors} errors, first: ${row.r.firstError}`);
          }
      }
      rounds.push(rows);
    }
    const rows = mergeRounds(rounds);

    const tableText = table(rows);
    const issueText = issueTables(rows, targets);
    console.log(`\n${issueText.join('\n')}\n${tableText}\n`);

    // Payment really was on: every served request is a settled usage charge, the ledger adds up; and the
    // naive target wrote one debit and one ledger row per answer it charged.
    let ledgerOk = true;
    const ledger: string[] = [];
    for (const t of targets.filter((x) => x.kind === 'service')) {
      const l = await rpc<LedgerReport>(t.child, 'ledger').catch((e): LedgerReport => ({
        ok: false,
        completed: NaN,
        lines: [`could not check: ${e.message}`],
      }));
      const settled = l.completed === t.served;
      ledgerOk &&= l.ok && settled;
      ledger.push(
        `${t.name}: ${l.ok && settled ? 'ok' : 'FAILED'}`,
        `  200 answers ${t.served}, completed usage charges ${l.completed} ${settled ? 'ok' : 'FAILED'}`,
        ...l.lines.map((x) => `  ${x}`),
      );
    }
    const naive = targets.find((t) => t.kind === 'naive');
    if (naive) {
      const l = await rpc<NaiveLedger>(naive.child, 'ledger').catch(() => null);
      const ok = !!l && l.entries === naive.served && l.ledger === l.debited;
      ledger.push(
        `${naive.name} (its own database): ${ok ? 'ok' : 'FAILED'}`,
        l
          ? `  200 answers ${naive.served}, ledger entries ${l.entries}; debited ${l.debited} raw, ledger ${l.ledger} raw`
          : '  could not check',
      );
    }
    console.log(ledger.join('\n'));
    const verdicts = goals(
      rows,
      missing,
      {
        ok: ledgerOk,
        text: ledgerOk
          ? 'every 200 answer settled, no open hold, no negative balance, balances = ledger (see "Ledger check")'
          : 'FAILED (see "Ledger check")',
      },
      pin.enabled,
    );
    const goalLines = verdicts.map((v) => v.line);
    const count = (p: boolean | null) => verdicts.filter((v) => v.pass === p).length;
    const summary = `${count(true)} PASS, ${count(false)} FAIL, ${count(null)} n/a`;
    console.log(`\ngoals (issue 24): ${summary}\n${goalLines.join('\n')}`);
    // The budget arithmetic holds only with upstream, proxy and PostgreSQL sharing one pinned core.
    const distance = verdicts.flatMap((v) => (v.distance ? [v.distance] : []));
    if (distance.length) console.log(`\ndistance to the goals:\n${distance.join('\n')}`);
    const bound = driverBound(rows);
    notes.push(...bound);
    if (notes.length) console.log(`\n${notes.join('\n')}`);

    if (OUT !== '-') {
      const report = [
        '# npm run bench — latest',
        '',
        'Written by `npm run bench` (bench/run.ts): this service against the references of issue 24, in one run.',
        'Ratios are against the row of the same scenario and concurrency of the reference named; added latencies',
        'and TTFB against the bare pass-through. CPU is per request, per process. "steal %": CPU time the',
        'hypervisor gave to other guests during the row (/proc/stat); rows with much of it are slower than the',
        'machine is, and their ratios compare unequal conditions.',
        '',
        ...machine(info.database, pin),
        '',
        `## Goals (issue 24): ${summary}`,
        '',
        ...goalLines,
        '',
        ...(distance.length
          ? [
              '## Distance to the goals',
              '',
              'Server-core CPU per request (ms), from the rows below: upstream, proxy and PostgreSQL share that core, so',
              "a throughput of R x a reference needs a request to cost it at most 1/R of the reference's. At c=1 the core",
              "idles between a request's parts, so there the budget is a floor, not the whole story. What is left and",
              'why: `docs/performance.md`.',
              '',
              ...distance,
              '',
            ]
          : []),
        "## The issue's table",
        '',
        ...issueText,
        '## Every row',
        '',
        tableText,
        '',
        ...(notes.length ? ['## Notes', '', ...notes, ''] : []),
        '## Ledger check',
        '',
        '```text',
        ...ledger,
        '```',
        '',
      ].join('\n');
      mkdirSync(dirname(resolve(OUT)), { recursive: true });
      writeFileSync(OUT, report);
      console.log(`\nwrote ${OUT}`);
    }
    if (!ledgerOk) console.log('\nLEDGER CHECK FAILED');
    return ledgerOk ? 0 : 1;
  } finally {
    await stopAll();
  }
}

const [role, arg] = process.argv.slice(2);
if (role === 'upstream') await runUpstream();
else if (role === 'bare') await runBare(Number(arg), false);
else if (role === 'naive') await runBare(Number(arg), true);
else if (role === 'portkey') await runPortkey();
else if (role === 'service')
  await runService(Number(arg), Number(process.argv[4]), process.argv[5] === 'limits');
else
  process.exitCode = await driver().catch((e) => {
    if (interrupted) return 130;
    throw e;
  });
