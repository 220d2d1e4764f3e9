import { connect } from 'node:net';
import { startTestApp, type TestApp } from './helpers/app.js';

/** Collects the service's JSON log lines (pino writes one line per call). */
class LogCapture {
  readonly lines: string[] = [];
  write(chunk: string): void {
    for (const line of chunk.split('\n')) if (line.trim()) this.lines.push(line);
  }
  parsed(): Record<string, any>[] {
    return this.lines.map((l) => JSON.parse(l));
  }
}

const logs = new LogCapture();
let t: TestApp;
let paywall: { id: string; apiKey: string };
const secrets: string[] = [];

beforeAll(async () => {
  t = await startTestApp({ LOG_LEVEL: 'debug' }, { logStream: logs });
  paywall = await t.createPaywall();
  secrets.push(t.ownerToken, paywall.apiKey);
});
afterAll(async () => {
  await t?.close();
});

describe('health and readiness (docs/reference.md §1)', () => {
  it('GET /healthz → 200 {"status":"ok"}, no auth needed', async () => {
    const r = await t.rest('GET', '/healthz');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ok' });
  });

  it('GET /readyz → 200 while the database answers', async () => {
    const r = await t.rest('GET', '/readyz');
    expect(r.status).toBe(200);
  });
});

describe('GET /metrics (Prometheus text)', () => {
  it('counts requests and latencies by route template, method and status, and exposes the ledger counters', async () => {
    await t.rest('GET', '/healthz');
    await t.rest('GET', '/healthz');
    // Ids in paths must not become labels (unbounded cardinality): unknown routes share one label.
    await t.rest('GET', '/v1/no-such-route-6f1c2a', { token: paywall.apiKey });
    const r = await t.rest('GET', '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = r.body as string;
    const healthz = /^http_requests_total\{route="\/healthz",method="GET",status="200"\} (\d+)$/m.exec(text);
    expect(Number(healthz?.[1])).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^http_requests_total\{route="unmatched",method="GET",status="404"\} 1$/m);
    expect(text).not.toContain('no-such-route-6f1c2a');
    expect(text).toMatch(
      /^http_request_duration_seconds_bucket\{le="0\.005",route="\/healthz",method="GET",status="200"\} \d+$/m,
    );
    expect(text).toMatch(
      /^http_request_duration_seconds_count\{route="\/healthz",method="GET",status="200"\} \d+$/m,
    );
    expect(text).toMatch(/^# TYPE http_request_duration_seconds histogram$/m);
    expect(text).toMatch(/^# TYPE ledger_entries_total counter$/m);
    expect(text).toMatch(/^# TYPE ledger_amount_raw_total counter$/m);
    expect(text).toMatch(/^# TYPE process_cpu_seconds_total counter$/m);
  });
});

describe('ledger counters', () => {
  it('count ledger entries and raw units moved, by kind', async () => {
    const metric = async (name: string, kind: string) => {
      const text = (await t.rest('GET', '/metrics')).body as string;
      const m = new RegExp(`^${name}\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(text);
      return m ? Number(m[1]) : 0;
    };
    const before = [
      await metric('ledger_entries_total', 'deposit'),
      await metric('ledger_amount_raw_total', 'deposit'),
    ];
    const chargesBefore = await metric('ledger_entries_total', 'charge');
    const dep = await t.rest('POST', '/v1/user/balance/deposit', {
      token: paywall.apiKey,
      body: { user: 'metrics-user', amount: '2.5' },
    });
    expect(dep.status).toBe(200);
    const charge = await t.rest('POST', '/v1/user/charge', {
      token: paywall.apiKey,
      body: { user: 'metrics-user', amount: '0.5' },
    });
    expect(charge.body.success).toBe(true);
    expect(await metric('ledger_entries_total', 'deposit')).toBe(before[0] + 1);
    expect(await metric('ledger_amount_raw_total', 'deposit')).toBe(before[1] + 2_500_000);
    expect(await metric('ledger_entries_total', 'charge')).toBe(chargesBefore + 1);

    // A refund is a ledger entry too.
    const refundsBefore = [
      await metric('ledger_entries_total', 'refund'),
      await metric('ledger_amount_raw_total', 'refund'),
    ];
    const refund = await t.gql(
      paywall.apiKey,
      `mutation($i: RefundChargeInput!) { refundCharge(input: $i) { amount } }`,
      { i: { chargeId: charge.body.chargeId, amount: '0.2' } },
    );
    expect(refund.errors).toBeUndefined();
    expect(await metric('ledger_entries_total', 'refund')).toBe(refundsBefore[0] + 1);
    expect(await metric('ledger_amount_raw_total', 'refund')).toBe(refundsBefore[1] + 200_000);
  });
});

describe('route labels of the dashboard and static files', () => {
  it('the dashboard page and its client-side routes are "/dashboard", its asset files "static", never "unmatched"', async () => {
    const count = async (route: string, status: number) => {
      const text = (await t.rest('GET', '/metrics')).body as string;
      const m = new RegExp(
        `^http_requests_total\\{route="${route.replace(/[/]/g, '\\/')}",method="GET",status="${status}"\\} (\\d+)$`,
        'm',
      ).exec(text);
      return m ? Number(m[1]) : 0;
    };
    // A request is counted when its answer has finished on the server, which can be just after the client
    // read it (a file is streamed): wait for the count, under a generous deadline.
    const counted = async (route: string, status: number, want: number) => {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
        if ((await count(route, status)) >= want) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      return count(route, status);
    };
    const unmatched404 = await count('unmatched', 404);
    const page = await count('/dashboard', 200);
    expect((await t.rest('GET', '/dashboard')).status).toBe(200);
    expect((await t.rest('GET', '/dashboard/paywalls/1f1e/users')).status).toBe(200);
    expect(await counted('/dashboard', 200, page + 2)).toBe(page + 2);
    const html = await (await fetch(`${t.url}/dashboard`)).text();
    const asset = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)![1];
    const served = await count('static', 200);
    const missing = await count('static', 404);
    expect((await fetch(`${t.url}${asset}`)).status).toBe(200);
    expect((await fetch(`${t.url}/dashboard/assets/gone-0000.js`)).status).toBe(404);
    expect(await counted('static', 200, served + 1)).toBe(served + 1);
    expect(await counted('static', 404, missing + 1)).toBe(missing + 1);
    expect(await count('unmatched', 404)).toBe(unmatched404);
    const text = (await t.rest('GET', '/metrics')).body as string;
    expect(text).not.toMatch(/route="[^"]*,/);
  });
});

describe('request ids', () => {
  it('echoes a caller X-Request-Id and logs it on the request line', async () => {
    const r = await t.rest('GET', '/healthz', { headers: { 'X-Request-Id': 'ops-test-req-42' } });
    expect(r.headers.get('x-request-id')).toBe('ops-test-req-42');
    const line = logs.parsed().find((l) => l.reqId === 'ops-test-req-42' && l.msg === 'request');
    expect(line).toMatchObject({ method: 'GET', url: '/healthz', route: '/healthz', status: 200 });
  });

  it('generates one when none (or an unusable one) is given', async () => {
    const a = await t.rest('GET', '/healthz');
    expect(a.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const b = await t.rest('GET', '/healthz', { headers: { 'X-Request-Id': 'has spaces and {braces}' } });
    expect(b.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.headers.get('x-request-id')).not.toBe(a.headers.get('x-request-id'));
  });

  it('sets it on error answers too', async () => {
    const r = await t.rest('GET', '/v1/models', { headers: { 'X-Request-Id': 'ops-test-401' } });
    expect(r.status).toBe(401);
    expect(r.headers.get('x-request-id')).toBe('ops-test-401');
  });
});

describe('REST error conventions (docs/reference.md §4)', () => {
  const openAiError = (type: string, code: string | null, param: string | null = null) => ({
    error: { message: expect.any(String), type, param, code },
  });

  it('unknown /v1 route → 404 not_found_error in OpenAI shape', async () => {
    const r = await t.rest('POST', '/v1/user/teleport', { token: paywall.apiKey, body: {} });
    expect(r.status).toBe(404);
    expect(r.body).toEqual(openAiError('not_found_error', 'unknown_route'));
    expect(r.body.error.message).toContain('/v1/user/teleport');
  });

  it('no or unknown API key → 401 authentication_error', async () => {
    const none = await t.rest('GET', '/v1/models');
    expect(none.status).toBe(401);
    expect(none.body).toEqual(openAiError('authentication_error', 'missing_api_key'));
    const wrong = await t.rest('GET', '/v1/models', { token: 'pk_live_not_a_key_at_all_000000000000000000' });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual(openAiError('authentication_error', 'invalid_api_key'));
  });

  it('malformed JSON body → 400 invalid_request_error, nothing changed', async () => {
    const r = await t.rest('POST', '/v1/user/balance/deposit', {
      token: paywall.apiKey,
      body: '{"user": "json-alice", "amount": "1"',
    });
    expect(r.status).toBe(400);
    expect(r.body).toEqual(openAiError('invalid_request_error', 'invalid_json'));
    const users = await t.db.query('select 1 from end_user where paywall_id = $1 and external_id = $2', [
      paywall.id,
      'json-alice',
    ]);
    expect(users).toHaveLength(0);
  });

  it('JSON body over 1 MiB → 413 invalid_request_error with code request_too_large; just under is parsed', async () => {
    const body = (size: number) => {
      const shell = '{"user":"alice","amount":"1","metadata":{"pad":""}}';
      return shell.replace('"pad":""', `"pad":"${'x'.repeat(size - shell.length)}"`);
    };
    expect(body(1024 * 1024 + 1)).toHaveLength(1024 * 1024 + 1);
    const big = await t.rest('POST', '/v1/chat/completions', {
      token: paywall.apiKey,
      body: body(1024 * 1024 + 1),
    });
    expect(big.status).toBe(413);
    expect(big.body).toEqual(openAiError('invalid_request_error', 'request_too_large'));
    // Exactly 1 MiB gets past the body limit (and fails later for its own reasons, never with 413).
    const limit = await t.rest('POST', '/v1/chat/completions', {
      token: paywall.apiKey,
      body: body(1024 * 1024),
    });
    expect(limit.status).not.toBe(413);
    expect(limit.body.error.code).not.toBe('request_too_large');
  });

  it("what Node's HTTP parser refuses has the OpenAI error body too: 431 for headers over 16 KiB, 400 for bad HTTP", async () => {
    const big = await fetch(`${t.url}/v1/user/balance?user=${'a'.repeat(20_000)}`, {
      headers: { authorization: `Bearer ${paywall.apiKey}` },
    });
    expect(big.status).toBe(431);
    expect(big.headers.get('content-type')).toBe('application/json');
    expect(await big.json()).toEqual(openAiError('invalid_request_error', 'headers_too_large'));

    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(new URL(t.url).port), '127.0.0.1', () =>
        socket.write('NOT HTTP\r\n\r\n'),
      );
      let got = '';
      socket.setEncoding('utf8').on('data', (d: string) => (got += d));
      socket.on('end', () => resolve(got)).on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual(
      openAiError('invalid_request_error', 'invalid_http'),
    );
  });

  it('never answers with a stack trace', async () => {
    const r = await t.rest('POST', '/v1/user/balance/deposit', { token: paywall.apiKey, body: '[' });
    expect(JSON.stringify(r.body)).not.toMatch(/\bat \w+ \(|node_modules|\.ts:\d+/);
  });
});

describe('structured logs', () => {
  it('every line is JSON; every line written while serving a request carries its request id', async () => {
    // A rotation shows a new key in its answer: it must not reach the logs either.
    const rotated = await t.gql(
      t.ownerToken,
      `mutation($id: ID) { rotatePaywallSecret(paywallId: $id) { apiKey } }`,
      { id: paywall.id },
    );
    expect(rotated.errors).toBeUndefined();
    secrets.push(rotated.data.rotatePaywallSecret.apiKey);
    paywall.apiKey = rotated.data.rotatePaywallSecret.apiKey;
    // Connecting a provider logs from the provider service (no request object there) and carries the
    // upstream key, which must never be logged.
    const upstreamKey = 'sk-upstream-secret-ops-test-0123456789';
    secrets.push(upstreamKey);
    const connected = await t.rest('POST', '/graphql', {
      token: paywall.apiKey,
      headers: { 'X-Request-Id': 'ops-test-connect' },
      body: {
        query: `mutation($input: ConnectProviderInput!) { connectProvider(input: $input) { id } }`,
        variables: { input: { baseUrl: 'http://127.0.0.1:9/v1', apiKey: upstreamKey } },
      },
    });
    expect(connected.body.errors).toBeUndefined();
    // Failed authentication with a real-looking key: the key must not be echoed into a log line.
    await t.rest('GET', '/v1/models', { token: secrets[1] });
    await t.gql('ot_a_wrong_owner_token_000000000000', '{ paywalls { id } }');
    secrets.push('ot_a_wrong_owner_token_000000000000');

    expect(logs.lines.length).toBeGreaterThan(10);
    const parsed = logs.parsed(); // throws on any non-JSON line
    const requestLines = parsed.filter((l) => l.msg === 'request');
    expect(requestLines.length).toBeGreaterThan(10);
    for (const l of parsed) {
      expect(l).toMatchObject({
        level: expect.any(Number),
        time: expect.any(String),
        service: 'paywall-proxy',
      });
    }
    // Every request line has a request id, and every other line carrying that id belongs to a real request.
    const ids = new Set(requestLines.map((l) => l.reqId));
    for (const l of requestLines) expect(typeof l.reqId).toBe('string');
    for (const l of parsed.filter((x) => x.reqId !== undefined)) expect(ids.has(l.reqId)).toBe(true);
    // Request-scoped lines are the only ones that may appear while requests run; background lines
    // (workers, listeners) name their component instead.
    for (const l of parsed.filter((x) => x.reqId === undefined)) expect(l).toHaveProperty('component');
    expect(parsed.filter((l) => l.reqId === 'ops-test-connect').length).toBeGreaterThanOrEqual(1);
  });

  it('no line contains an API key or owner token', async () => {
    for (const line of logs.lines) for (const secret of secrets) expect(line).not.toContain(secret);
  });
});

describe('separate instance: metrics token and a lost database', () => {
  let u: TestApp;
  beforeAll(async () => {
    u = await startTestApp({ METRICS_TOKEN: 'metrics-secret-1234' });
  });
  afterAll(async () => {
    await u?.close();
  });

  it('METRICS_TOKEN set → /metrics needs that bearer token', async () => {
    const none = await u.rest('GET', '/metrics');
    expect(none.status).toBe(401);
    expect(none.body.error.type).toBe('authentication_error');
    // Which of the two it is, with the codes of the API's other 401s, and the scheme a scraper must use.
    expect(none.body.error.code).toBe('missing_api_key');
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
    const wrong = await u.rest('GET', '/metrics', { token: 'metrics-secret-12345' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
    expect(wrong.body.error.message).toMatch(/not the METRICS_TOKEN/);
    const ok = await u.rest('GET', '/metrics', { token: 'metrics-secret-1234' });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatch(/^# TYPE http_requests_total counter$/m);
  });

  it('/readyz → 503 once the database no longer answers, while /healthz stays 200', async () => {
    expect((await u.rest('GET', '/readyz')).status).toBe(200);
    await u.db.close();
    const r = await u.rest('GET', '/readyz');
    expect(r.status).toBe(503);
    expect((await u.rest('GET', '/healthz')).status).toBe(200);
  });
});
