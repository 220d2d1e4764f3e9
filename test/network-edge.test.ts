import { connect, type Socket } from 'node:net';
import { createServer, type IncomingMessage } from 'node:http';
import { startTestApp, type TestApp } from './helpers/app.js';
import { clientNetwork, createClientIp, normalizeIp } from '../src/shared/client-ip.js';
import { loadConfig } from '../src/config.js';
import { closeAfterBody } from '../src/shared/connection-limits.js';

/**
 * The network edge (docs/operations.md "The network edge"): who the client is (X-Forwarded-For only
 * from TRUSTED_PROXIES), the API key checked before a body is read, time limits on receiving a
 * request, and open connections per client address.
 */

/** A raw TCP connection to the app; `answer` resolves with everything received once the server ends it. */
function rawConnection(url: string): { socket: Socket; answer: Promise<string>; ready: Promise<void> } {
  const { port } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  let got = '';
  socket.setEncoding('utf8').on('data', (d: string) => (got += d));
  const answer = new Promise<string>((resolve) => {
    socket.on('close', () => resolve(got));
    socket.on('error', () => undefined);
  });
  const ready = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, answer, ready };
}

const bodyOf = (raw: string) => JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));

describe('the client address (X-Forwarded-For only from TRUSTED_PROXIES)', () => {
  const req = (remoteAddress: string, xff?: string) =>
    ({
      socket: { remoteAddress },
      headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
    }) as IncomingMessage;

  it('no TRUSTED_PROXIES (the default): the TCP peer, whatever the header says, even from loopback', () => {
    expect(loadConfig({}).TRUSTED_PROXIES).toEqual([]);
    const ip = createClientIp([]);
    expect(ip(req('127.0.0.1', '203.0.113.9'))).toBe('127.0.0.1');
    expect(ip(req('10.1.2.3', '203.0.113.9'))).toBe('10.1.2.3');
    expect(ip(req('::ffff:192.0.2.7', '203.0.113.9'))).toBe('192.0.2.7');
  });

  it('from a trusted proxy: the first address from the right that is not a trusted proxy; a value that is not an IP is ignored', () => {
    const ip = createClientIp(loadConfig({ TRUSTED_PROXIES: '127.0.0.1, 10.0.0.0/8' }).TRUSTED_PROXIES);
    expect(ip(req('127.0.0.1', '203.0.113.9'))).toBe('203.0.113.9');
    expect(ip(req('::ffff:127.0.0.1', '::ffff:203.0.113.9'))).toBe('203.0.113.9');
    expect(ip(req('127.0.0.1', '198.51.100.1, 203.0.113.9, 10.2.3.4'))).toBe('203.0.113.9');
    expect(ip(req('127.0.0.1', '2001:DB8::1'))).toBe('2001:db8::1');
    // Not an IP address: the walk stops, the last real hop (the proxy) is the client.
    expect(ip(req('127.0.0.1', 'unknown'))).toBe('127.0.0.1');
    expect(ip(req('127.0.0.1', '203.0.113.9:443'))).toBe('127.0.0.1');
    expect(ip(req('127.0.0.1', `${'a'.repeat(100)}`))).toBe('127.0.0.1');
    expect(ip(req('127.0.0.1', '203.0.113.9, <script>'))).toBe('127.0.0.1');
    expect(ip(req('127.0.0.1'))).toBe('127.0.0.1');
    // A peer that is not a trusted proxy cannot name anyone.
    expect(ip(req('192.0.2.50', '203.0.113.9'))).toBe('192.0.2.50');
    expect(normalizeIp('not an ip')).toBeNull();
  });

  it('per-client limits count an IPv6 /64 as one client network, an IPv4 address as itself', () => {
    const net = '2001:db8:aa:bb::/64';
    for (const ip of ['2001:db8:aa:bb::1', '2001:DB8:AA:BB:ffff:ffff:ffff:ffff', '2001:db8:aa:bb:1:2:3:4'])
      expect(clientNetwork(ip)).toBe(net);
    expect(clientNetwork('2001:db8:aa:bc::1')).toBe('2001:db8:aa:bc::/64');
    expect(clientNetwork('::1')).toBe('0:0:0:0::/64');
    expect(clientNetwork('203.0.113.9')).toBe('203.0.113.9');
    expect(clientNetwork('::ffff:203.0.113.9')).toBe('203.0.113.9');
    expect(clientNetwork('unknown')).toBe('unknown');
  });

  it('TRUSTED_PROXIES must list IP addresses or CIDR ranges', () => {
    for (const bad of ['loopback', '10.0.0.0/33', '1.2.3.4/8/1', 'example.com'])
      expect(() => loadConfig({ TRUSTED_PROXIES: bad })).toThrow(/TRUSTED_PROXIES/);
  });

  it('the wallet’s per-IP sign-in limit stores the address the helper gives (a valid IP, the same value it compares)', async () => {
    const t = await startTestApp({ TRUSTED_PROXIES: '' });
    try {
      const res = await fetch(`${t.url}/wallet/sign-in`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
      expect(res.status).toBe(200);
      const csrf = /name="csrf" value="([^"]+)"/.exec(await res.text())?.[1];
      const cookie = res.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; ');
      const sent = await fetch(`${t.url}/wallet/sign-in`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-forwarded-for': '203.0.113.9',
          cookie,
        },
        body: new URLSearchParams({ email: 'xff@example.com', csrf: csrf ?? '' }).toString(),
      });
      expect(sent.status).toBe(200);
      const rows = await t.db.query<{ ip: string }>(`select ip from wallet_sign_in where email = $1`, [
        'xff@example.com',
      ]);
      expect(rows).toEqual([{ ip: '127.0.0.1' }]);
    } finally {
      await t.close();
    }
  });
});

describe('the API key before the body', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.close();
  });

  it.each([
    ['/v1/chat/completions', 'the metered fast path'],
    ['/v1/u/alice/responses', 'the metered fast path, user in the path'],
    ['/v1/user/balance/deposit', 'an Express route'],
  ])(
    'an unauthenticated 1 MiB POST to %s (%s) gets 401 before its body is sent, and the connection is closed',
    async (path) => {
      for (const [auth, code] of [
        [null, 'missing_api_key'],
        ['Bearer pk_live_not_a_key_at_all_000000000000000000', 'invalid_api_key'],
      ] as const) {
        const c = rawConnection(t.url);
        await c.ready;
        c.socket.write(
          `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n` +
            (auth ? `Authorization: ${auth}\r\n` : '') +
            `\r\n{"model":"m","user":"alice","pad":"`,
        );
        // Only the first bytes of the body were sent: the answer comes anyway, and the server closes.
        const raw = await c.answer;
        expect(raw).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
        expect(raw.toLowerCase()).toContain('connection: close');
        expect(bodyOf(raw)).toEqual({
          error: { message: expect.any(String), type: 'authentication_error', param: null, code },
        });
      }
    },
  );

  it('a client still sending its body when the 401 comes, that reads the answer late, still gets it (no reset destroys it)', async () => {
    // The server answers before the body has arrived. Had it closed the socket then, the rest of the body
    // would meet a reset, the client's write would fail, and a client that had not read the answer yet
    // would lose it. This client pauses reading to be that late client every time.
    const c = rawConnection(t.url);
    await c.ready;
    c.socket.pause();
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n\r\n{"pad":"`,
    );
    await new Promise((r) => setTimeout(r, 200));
    c.socket.write(Buffer.alloc(1024 * 1024 - 8, 'x'));
    await new Promise((r) => setTimeout(r, 200));
    c.socket.resume();
    expect((await c.answer).split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
  });

  it('POST /graphql without a valid credential reads at most 64 KiB of body (413 beyond); with one, up to 1 MiB as before', async () => {
    const pad = 'x'.repeat(100 * 1024);
    const query = { query: '{ paywalls { id } }', variables: { pad } };
    for (const token of [undefined, 'ot_not_a_token_0000000000000000000']) {
      const r = await fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(query),
      });
      expect(r.status).toBe(413);
      expect(await r.json()).toEqual({
        error: {
          message: 'request body exceeds 64 KiB without a valid credential',
          type: 'invalid_request_error',
          param: null,
          code: 'request_too_large',
        },
      });
    }
    const small = await t.gql('ot_not_a_token_0000000000000000000', '{ paywalls { id } }');
    expect(small.status).toBe(401);
    const owner = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t.ownerToken}` },
      body: JSON.stringify(query),
    });
    expect(owner.status).toBe(200);
    const answer = await owner.json();
    expect({ errors: answer.errors, list: Array.isArray(answer.data?.paywalls) }).toEqual({
      errors: undefined,
      list: true,
    });
  });

  it('with a valid key the body is read as before (malformed JSON → 400)', async () => {
    const pw = await t.createPaywall();
    const r = await t.rest('POST', '/v1/chat/completions', { token: pw.apiKey, body: '{"model":' });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_json');
  });
});

describe('the lingering close after a refusal (closeAfterBody)', () => {
  /** A server refusing every request with 401 before reading its body; resolves each socket's close time. */
  async function refusingServer(lingerMs: number) {
    const closedAt: number[] = [];
    const server = createServer((req, res) => {
      req.socket.once('close', () => closedAt.push(Date.now()));
      res.setHeader('Connection', 'close');
      closeAfterBody(req, lingerMs);
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end('no');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    return { server, port, closedAt };
  }

  it('the server keeps reading the rest of the body after its answer, then closes once it has arrived', async () => {
    const { server, port, closedAt } = await refusingServer(3000);
    try {
      // allowHalfOpen: the client keeps sending after the server's FIN, as a slow uploader does.
      const c = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      let got = '';
      const errors: string[] = [];
      c.setEncoding('latin1').on('data', (d: string) => (got += d));
      c.on('error', (e: NodeJS.ErrnoException) => errors.push(e.code ?? e.message));
      const ended = new Promise<void>((r) => c.once('end', () => r()));
      c.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\nab');
      await ended; // the answer and the server's FIN
      expect(got.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
      await new Promise((r) => setTimeout(r, 200));
      expect(closedAt).toEqual([]); // still reading
      const sentAt = Date.now();
      await new Promise<void>((r) => c.write(Buffer.alloc(200000 - 2, 'x'), () => r()));
      for (let i = 0; i < 100 && closedAt.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(closedAt).toHaveLength(1);
      expect(closedAt[0] - sentAt).toBeLessThan(500); // closed on the body's end, not on the 3 s bound
      c.end();
      await new Promise((r) => setTimeout(r, 50));
      expect(errors).toEqual([]); // no reset met the body
    } finally {
      server.close();
    }
  });

  it('a body that never arrives holds the connection at most lingerMs', async () => {
    const { server, port, closedAt } = await refusingServer(300);
    try {
      const c = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      c.on('error', () => undefined);
      const openedAt = Date.now();
      c.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\nab');
      for (let i = 0; i < 200 && closedAt.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(closedAt).toHaveLength(1);
      expect(closedAt[0] - openedAt).toBeGreaterThanOrEqual(300);
      expect(closedAt[0] - openedAt).toBeLessThan(1500);
      c.destroy();
    } finally {
      server.close();
    }
  });
});

describe('slow clients and connections per address', () => {
  it('a request whose headers do not arrive in HTTP_HEADERS_TIMEOUT_MS gets 408 and the connection is closed', async () => {
    const t = await startTestApp({ HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600' });
    try {
      const c = rawConnection(t.url);
      await c.ready;
      c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      const raw = await c.answer;
      expect(raw).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(bodyOf(raw).error.code).toBe('request_timeout');
      // A body that does not arrive in HTTP_REQUEST_TIMEOUT_MS: the same.
      const pw = await t.createPaywall();
      const d = rawConnection(t.url);
      await d.ready;
      d.socket.write(
        `POST /v1/user/balance/deposit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${pw.apiKey}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user":`,
      );
      expect(await d.answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    } finally {
      await t.close();
    }
  });

  it('connections from one address beyond MAX_CONNECTIONS_PER_IP get 429 and are closed; once one closes, a new one is served', async () => {
    const t = await startTestApp({ TRUSTED_PROXIES: '', MAX_CONNECTIONS_PER_IP: '5' });
    const held: ReturnType<typeof rawConnection>[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        const c = rawConnection(t.url);
        await c.ready;
        c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'); // slow: headers never finished
        held.push(c);
      }
      const over = rawConnection(t.url);
      await over.ready;
      over.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const raw = await over.answer;
      expect(raw).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
      expect(bodyOf(raw)).toEqual({
        error: {
          message: expect.stringContaining('MAX_CONNECTIONS_PER_IP is 5'),
          type: 'rate_limit_error',
          param: null,
          code: 'too_many_connections',
        },
      });
      held.shift()!.socket.destroy();
      await new Promise((r) => setImmediate(r));
      let served = '';
      for (let attempt = 0; attempt < 50 && !served.startsWith('HTTP/1.1 200'); attempt++) {
        const again = rawConnection(t.url);
        await again.ready;
        again.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
        served = await again.answer;
        if (!served.startsWith('HTTP/1.1 200')) await new Promise((r) => setTimeout(r, 20));
      }
      expect(served).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(bodyOf(served)).toEqual({ status: 'ok' });
    } finally {
      for (const c of held) c.socket.destroy();
      await t.close();
    }
  });
});
