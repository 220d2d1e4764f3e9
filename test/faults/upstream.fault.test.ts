import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  Api,
  chatBody,
  createPaywall,
  killAllServices,
  moneyInvariants,
  sqlOf,
  startService,
  streamChat,
  type Paywall,
  type ServiceProcess,
} from './helpers/service.js';

/**
 * Upstream faults against the real service process (docs/reference.md §4 "Upstream errors", docs/proxy.md): a slow
 * provider, one that never sends headers, one that stalls mid-stream, resets (before the answer and
 * mid-stream), malformed JSON, malformed SSE, 429/400 (passed through), 500 (→ 502), a redirect to another
 * host (never followed), a huge answer (UPSTREAM_MAX_BYTES), and usage beyond what the request could produce. Each case: the
 * status and error body the client gets, the amount charged to the raw unit (request 1000 + 1.5 x (2 per
 * prompt token + 5 per completion token), rounded up; nothing when nothing was produced), and the proof.
 */

const TIMEOUT_MS = 1500;
const START_RAW = 1_000_000n;

type Handler = (req: IncomingMessage, res: ServerResponse, body: any) => void;

const answer = (
  content = 'Hello from the faulty upstream!',
  usage = { prompt_tokens: 11, completion_tokens: 7 },
) => ({
  id: 'chatcmpl-fault',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-fault',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
});
const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-fault', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });

let pp: PrivatePostgres;
let service: ServiceProcess;
let api: Api;
let sql: ReturnType<typeof sqlOf>;
let upstream: Server;
let elsewhere: Server;
let upstreamPort: number;
const elsewhereHits: string[] = [];
const hits = new Map<string, number>();
const handlers = new Map<string, Handler>();
const paywalls = new Map<string, Paywall>();
const figures: string[] = [];

async function listen(s: Server): Promise<number> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as AddressInfo).port;
}

beforeAll(async () => {
  pp = await startPrivatePostgres();
  upstream = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const name = (req.url ?? '').split('/')[1];
      hits.set(name, (hits.get(name) ?? 0) + 1);
      let body: any = null;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      } catch {
        /* not JSON */
      }
      const h = handlers.get(name);
      if (h) h(req, res, body);
      else res.writeHead(404).end();
    });
  });
  upstreamPort = await listen(upstream);
  elsewhere = createServer((req, res) => {
    elsewhereHits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer()));
  });
  const elsewherePort = await listen(elsewhere);

  handlers.set('slow', (_q, res) =>
    setTimeout(
      () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer())),
      700,
    ),
  );
  handlers.set('hang', () => {
    /* never answers */
  });
  handlers.set('stall', (_q, res) => {
    sse(res);
    res.write(chunk('Hello'));
    res.write(chunk(' there'));
    /* then nothing, connection open */
  });
  handlers.set('reset', (req) => req.socket.destroy());
  handlers.set('resetmid', (_q, res) => {
    sse(res);
    res.write(chunk('Hello'));
    res.write(chunk(' there'));
    setTimeout(() => res.socket?.destroy(), 50);
  });
  handlers.set('badjson', (_q, res) =>
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end('{"id":"chatcmpl-x","choices":[{"message":'),
  );
  handlers.set('badsse', (_q, res) => {
    sse(res);
    res.write(chunk('Hello'));
    res.write('data: {this is not json\n\n');
    res.write('garbage without a field name\n\n');
    res.write(chunk(' world'));
    res.end('data: [DONE]\n\n');
  });
  handlers.set('429', (_q, res) =>
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '7' }).end(
      JSON.stringify({
        error: {
          message: 'Rate limit reached',
          type: 'requests',
          param: null,
          code: 'rate_limit_exceeded',
        },
      }),
    ),
  );
  handlers.set('400', (_q, res) =>
    res.writeHead(400, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        error: {
          message: "This model's maximum context length is 8 tokens",
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      }),
    ),
  );
  handlers.set('500', (_q, res) =>
    res
      .writeHead(500, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: { message: 'boom', type: 'server_error', param: null, code: null } })),
  );
  for (const code of [302, 307])
    handlers.set(`r${code}`, (_q, res) =>
      res.writeHead(code, { location: `http://127.0.0.1:${elsewherePort}/v1/chat/completions` }).end(),
    );
  handlers.set('announced', (_q, res) => {
    // Announces 5 MiB and sends it slowly (64 KiB every 200 ms, never idle): reading it would take 16 s.
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(5 * 1024 * 1024) });
    const piece = 'a'.repeat(64 * 1024);
    const timer = setInterval(() => {
      if (res.destroyed || res.writableEnded) return clearInterval(timer);
      res.write(piece);
    }, 200);
    res.on('close', () => clearInterval(timer));
  });
  handlers.set('active', (_q, res) => {
    // A stream that keeps sending, a chunk every 500 ms for 4 s: far longer than the idle limit (1.5 s).
    sse(res);
    let n = 0;
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      if (n < 8) res.write(chunk(` w${n++}`));
      else {
        clearInterval(timer);
        res.end('data: [DONE]\n\n');
      }
    }, 500);
    res.on('close', () => clearInterval(timer));
  });
  // A provider that reports usage its request could not produce (issue 30): 500,000,000 completion tokens.
  handlers.set('overreport', (_q, res, body) => {
    const usage = { prompt_tokens: 11, completion_tokens: 500_000_000, total_tokens: 500_000_011 };
    if (!body?.stream) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...answer(), usage }));
      return;
    }
    sse(res);
    res.write(chunk('Hello'));
    const end = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-fault' };
    res.write(
      `data: ${JSON.stringify({ ...end, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
    );
    res.write(`data: ${JSON.stringify({ ...end, choices: [], usage })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
  handlers.set('huge', (_q, res) => {
    // 4 MiB of content in a well-formed answer.
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify(answer('x '.repeat(2 * 1024 * 1024))));
  });

  const dbUrl = await pp.createDatabase('upstream');
  sql = sqlOf(dbUrl);
  service = await startService(dbUrl, {
    UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS),
    UPSTREAM_MAX_BYTES: String(1024 * 1024),
  });
  api = new Api(service.url);
  for (const name of handlers.keys()) {
    const pw = await createPaywall(api, `http://127.0.0.1:${upstreamPort}/${name}/v1`, { name });
    const d = await api.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'u', amount: '1' },
    });
    expect(d.status).toBe(200);
    paywalls.set(name, pw);
  }
}, 120_000);

afterAll(async () => {
  console.log(`upstream summary: ${figures.length} cases: ${figures.join('; ')}`);
  await service?.stop();
  killAllServices();
  await sql?.end();
  upstream?.closeAllConnections();
  upstream?.close();
  elsewhere?.close();
  pp?.destroy();
});

afterEach(async () => {
  const inv = await moneyInvariants(sql);
  expect(inv).toMatchObject({ ok: true });
});

async function moneyOf(name: string) {
  const pw = paywalls.get(name)!;
  const [acc] = await sql.query<{ balance: string; held: string }>(
    `select a.balance_raw::text as balance, a.held_raw::text as held
       from end_user e join ledger_account a on a.id = e.account_id where e.paywall_id = $1 and e.external_id = 'u'`,
    [pw.id],
  );
  const charges = await sql.query<{
    status: string;
    amount: string;
    prompt_tokens: number | null;
    completion_tokens: number | null;
    error_code: string | null;
  }>(
    `select status, amount_raw::text as amount, prompt_tokens, completion_tokens, error_code
       from charge where paywall_id = $1 and kind = 'usage' order by created_at`,
    [pw.id],
  );
  return { balance: BigInt(acc.balance), held: BigInt(acc.held), charges };
}

/** The price formula of the test paywalls, in raw units, rounded up. */
const costRaw = (prompt: number, completion: number) =>
  1000n + BigInt(Math.ceil(1.5 * (2 * prompt + 5 * completion)));

const chat = (name: string) =>
  api.rest('POST', '/v1/chat/completions', {
    token: paywalls.get(name)!.apiKey,
    headers: { 'x-paywall-user': 'u' },
    body: chatBody(),
  });

async function expectNothingCharged(name: string) {
  const m = await moneyOf(name);
  expect({ balance: m.balance, held: m.held }).toEqual({ balance: START_RAW, held: 0n });
  expect(m.charges.every((c) => c.status !== 'held' && c.amount === '0')).toBe(true);
  return m;
}

const upstreamError = { error: expect.objectContaining({ type: 'api_error', code: 'upstream_error' }) };

test('slow but within UPSTREAM_TIMEOUT_MS: answered and charged exactly', async () => {
  const t = Date.now();
  const r = await chat('slow');
  expect(r.status).toBe(200);
  expect(r.headers.get('x-paywall-cost')).toBe('0.001086');
  const m = await moneyOf('slow');
  expect({ balance: m.balance, held: m.held }).toEqual({ balance: START_RAW - 1086n, held: 0n });
  figures.push(`slow 200 in ${Date.now() - t} ms, 1086 charged`);
});

test('hanging (no headers): 502 upstream_error after the timeout, nothing charged', async () => {
  const t = Date.now();
  const r = await chat('hang');
  const ms = Date.now() - t;
  expect(r.status).toBe(502);
  expect(r.body).toEqual(upstreamError);
  expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
  expect(ms).toBeLessThan(TIMEOUT_MS + 5000);
  const m = await expectNothingCharged('hang');
  expect(m.charges.map((c) => c.status)).toEqual(['released']);
  figures.push(`hang 502 after ${ms} ms`);
});

test('stalled mid-stream: the stream ends with an upstream error event, what was produced is charged', async () => {
  const t = Date.now();
  const r = await streamChat(api, paywalls.get('stall')!, 'u');
  const ms = Date.now() - t;
  expect(r.status).toBe(200);
  expect(r.text).toContain('Hello');
  expect(r.text).toMatch(/"code":"upstream_error"/);
  expect(ms).toBeLessThan(TIMEOUT_MS + 5000);
  const m = await moneyOf('stall');
  expect(m.charges).toHaveLength(1);
  const c = m.charges[0];
  expect(c.completion_tokens).toBeGreaterThanOrEqual(1);
  expect(BigInt(c.amount)).toBe(costRaw(c.prompt_tokens!, c.completion_tokens!));
  expect({ balance: m.balance, held: m.held }).toEqual({ balance: START_RAW - BigInt(c.amount), held: 0n });
  figures.push(
    `stall: stream cut after ${ms} ms, ${c.amount} charged (${c.prompt_tokens}+${c.completion_tokens} tokens)`,
  );
});

test('reset before any answer: 502 upstream_error, nothing charged', async () => {
  const r = await chat('reset');
  expect(r.status).toBe(502);
  expect(r.body).toEqual(upstreamError);
  await expectNothingCharged('reset');
  figures.push('reset 502');
});

test('reset mid-stream: an upstream error event, what was produced is charged', async () => {
  const r = await streamChat(api, paywalls.get('resetmid')!, 'u');
  expect(r.status).toBe(200);
  expect(r.text).toMatch(/"code":"upstream_error"/);
  const m = await moneyOf('resetmid');
  const c = m.charges[0];
  expect(m.charges).toHaveLength(1);
  expect(c.completion_tokens).toBeGreaterThanOrEqual(1);
  expect(BigInt(c.amount)).toBe(costRaw(c.prompt_tokens!, c.completion_tokens!));
  expect({ balance: m.balance, held: m.held }).toEqual({ balance: START_RAW - BigInt(c.amount), held: 0n });
  figures.push(`reset mid-stream: ${c.amount} charged`);
});

test('malformed JSON answer: 502 upstream_error, nothing charged', async () => {
  const r = await chat('badjson');
  expect(r.status).toBe(502);
  expect(r.body).toEqual(upstreamError);
  await expectNothingCharged('badjson');
  figures.push('malformed JSON 502');
});

test('malformed SSE: the stream still ends, never a 500 or a hang, and the charge matches the formula', async () => {
  const r = await streamChat(api, paywalls.get('badsse')!, 'u');
  expect(r.status).toBe(200);
  expect(r.text.trimEnd()).toMatch(/data: \[DONE\]$|"code":"upstream_error"[^\n]*$/);
  const m = await moneyOf('badsse');
  expect(m.charges).toHaveLength(1);
  const c = m.charges[0];
  expect(c.status).not.toBe('held');
  expect(BigInt(c.amount)).toBe(c.completion_tokens ? costRaw(c.prompt_tokens!, c.completion_tokens) : 0n);
  expect({ balance: m.balance, held: m.held }).toEqual({ balance: START_RAW - BigInt(c.amount), held: 0n });
  figures.push(`malformed SSE: ${c.status}, ${c.amount} charged`);
});

test('429 and 400 are passed through with the provider error body, nothing charged', async () => {
  const r429 = await chat('429');
  expect(r429.status).toBe(429);
  expect(r429.body.error).toMatchObject({ message: 'Rate limit reached', code: 'rate_limit_exceeded' });
  await expectNothingCharged('429');
  const r400 = await chat('400');
  expect(r400.status).toBe(400);
  expect(r400.body.error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
  await expectNothingCharged('400');
  figures.push('429/400 passed through');
});

test('500: 502 upstream_error, nothing charged (a stream too)', async () => {
  const r = await chat('500');
  expect(r.status).toBe(502);
  expect(r.body).toEqual(upstreamError);
  const s = await streamChat(api, paywalls.get('500')!, 'u');
  expect(s.status).toBe(502);
  expect(JSON.parse(s.text)).toEqual(upstreamError);
  await expectNothingCharged('500');
  figures.push('500 → 502');
});

test.each([302, 307])(
  'a %i redirect to another host is not followed: 502 upstream_error, nothing charged',
  async (code) => {
    const r = await chat(`r${code}`);
    expect(elsewhereHits).toEqual([]);
    expect(r.status).toBe(502);
    expect(r.body).toEqual(upstreamError);
    await expectNothingCharged(`r${code}`);
    figures.push(`${code} not followed → 502`);
  },
);

test('an answer announcing more than UPSTREAM_MAX_BYTES is refused at its headers, without reading it', async () => {
  const t = Date.now();
  const r = await chat('announced');
  const ms = Date.now() - t;
  expect(r.status).toBe(502);
  expect(r.body.error.message).toMatch(/1048576-byte limit/);
  // Refused when the headers came: reading the body would take 16 s, and even the idle limit is 1.5 s.
  expect(ms).toBeLessThan(TIMEOUT_MS);
  await expectNothingCharged('announced');
  figures.push(`announced 5 MiB → 502 in ${ms} ms`);
});

test('an active stream lasting far longer than UPSTREAM_TIMEOUT_MS is never cut by it', async () => {
  const t = Date.now();
  const r = await streamChat(api, paywalls.get('active')!, 'u');
  const ms = Date.now() - t;
  expect(r.status).toBe(200);
  expect(ms).toBeGreaterThan(2 * TIMEOUT_MS);
  for (let i = 0; i < 8; i++) expect(r.text).toContain(`" w${i}"`);
  expect(r.text).not.toMatch(/"error"/);
  expect(r.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  figures.push(`active stream of ${ms} ms (idle limit ${TIMEOUT_MS} ms) completed`);
});

test('a huge answer beyond UPSTREAM_MAX_BYTES: 502 upstream_error, nothing charged', async () => {
  const r = await chat('huge');
  expect(r.status).toBe(502);
  expect(r.body).toEqual(upstreamError);
  await expectNothingCharged('huge');
  figures.push('huge answer → 502');
});

test('a provider over-reporting usage (500,000,000 completion tokens): clamped to the cap sent, charged for it, nothing uncollected', async () => {
  const clamped = async () =>
    Number(/^provider_usage_clamped_total (\d+)$/m.exec((await api.rest('GET', '/metrics')).text)?.[1] ?? 0);
  const before = await clamped();
  const whole = await chat('overreport');
  expect(whole.status).toBe(200);
  const streamed = await streamChat(api, paywalls.get('overreport')!, 'u');
  expect(streamed.status).toBe(200);
  expect(streamed.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  const m = await moneyOf('overreport');
  const rows = await sql.query<{ cap: number; uncollected: string; over: { output: number } }>(
    `select max_completion_tokens as cap, uncollected_raw::text as uncollected,
            metadata->'overReported' as over
       from charge where paywall_id = $1 and kind = 'usage' order by created_at`,
    [paywalls.get('overreport')!.id],
  );
  expect(rows).toHaveLength(2);
  let total = 0n;
  for (const [i, r] of rows.entries()) {
    // 11 prompt tokens and the cap sent upstream (1,000: the model's maximum), nothing more.
    expect(r.cap).toBe(1000);
    expect(m.charges[i]).toMatchObject({ status: 'completed', completion_tokens: 1000 });
    expect(m.charges[i].amount).toBe(costRaw(11, 1000).toString());
    expect(r.uncollected).toBe('0');
    expect(r.over.output).toBe(500_000_000 - 1000);
    total += BigInt(m.charges[i].amount);
  }
  expect(whole.headers.get('x-paywall-cost')).toBe('0.008533');
  expect({ balance: m.balance, held: m.held }).toEqual({ balance: START_RAW - total, held: 0n });
  expect((await clamped()) - before).toBe(2);
  figures.push(
    `over-reporting provider: 2 x ${costRaw(11, 1000)} charged (clamped to the cap), nothing uncollected`,
  );
});
