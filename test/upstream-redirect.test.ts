import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestApp } from './helpers/app.js';
import type { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, deposit, MODEL, money } from './helpers/proxy-setup.js';

/**
 * Regression (found by test/faults/upstream.fault.test.ts): a provider answering a redirect got its 3xx
 * status relayed to the client. docs/reference.md §4 passes through only 4xx; a 3xx is not followed and, like a
 * 5xx, is a 502 `upstream_error` with nothing charged.
 */

let t: TestApp;
let redirecting: Server;
let elsewhere: Server;
let hitsElsewhere = 0;

async function listen(s: Server): Promise<number> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as AddressInfo).port;
}

beforeAll(async () => {
  t = await startTestApp();
  elsewhere = createServer((_req, res) => {
    hitsElsewhere++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  const target = await listen(elsewhere);
  redirecting = createServer((req, res) => {
    const status = Number((req.url ?? '').split('/')[1]);
    req.resume();
    req.on('end', () =>
      res.writeHead(status, { location: `http://127.0.0.1:${target}/v1/chat/completions` }).end(),
    );
  });
  await listen(redirecting);
});

afterAll(async () => {
  await t?.close();
  redirecting?.close();
  elsewhere?.close();
});

test.each([301, 302, 307, 308])(
  'an upstream %i is a 502 upstream_error, not followed, nothing charged',
  async (status) => {
    const port = (redirecting.address() as AddressInfo).port;
    const fake = { baseUrl: `http://127.0.0.1:${port}/${status}/v1` } as FakeUpstream;
    const pw = await createProxyPaywall(t, fake);
    await deposit(t, pw, 'alice', '1');
    for (const stream of [false, true]) {
      const r = await t.rest('POST', '/v1/chat/completions', {
        token: pw.apiKey,
        headers: { 'x-paywall-user': 'alice' },
        body: { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], stream },
      });
      expect(r.status).toBe(502);
      expect(r.body.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    }
    expect(hitsElsewhere).toBe(0);
    expect(await money(t, pw, 'alice')).toEqual({ balance: 1_000_000n, held: 0n, ledgerSum: 1_000_000n });
  },
);
