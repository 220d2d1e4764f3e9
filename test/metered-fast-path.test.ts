import { request } from 'node:http';
import { startTestApp, type TestApp } from './helpers/app.js';

/**
 * The metered routes are served ahead of Express for ordinary requests (rest-compat/metered-fast-path.ts);
 * a chunked body still goes through Express. Both must answer the same, refusal for refusal.
 */
let t: TestApp;
let apiKey: string;

beforeAll(async () => {
  t = await startTestApp();
  apiKey = (await t.createPaywall()).apiKey;
});
afterAll(async () => {
  await t?.close();
});

interface Answer {
  status: number;
  body: unknown;
  contentType: string | undefined;
  requestId: string | undefined;
}

/** POSTs `body`, with a Content-Length (fast path) or chunked (Express). */
function post(
  path: string,
  body: string,
  headers: Record<string, string>,
  chunked: boolean,
): Promise<Answer> {
  const url = new URL(t.url + path);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...headers,
          ...(chunked ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({
            status: res.statusCode!,
            body: parsed,
            contentType: res.headers['content-type'],
            requestId: res.headers['x-request-id'] as string | undefined,
          });
        });
      },
    );
    req.on('error', reject);
    if (chunked) {
      // Two writes without a Content-Length: Transfer-Encoding: chunked.
      req.write(body.slice(0, 1));
      req.end(body.slice(1));
    } else req.end(body);
  });
}

/** metered_fast_path_requests_total, from GET /metrics. */
async function fastPathCount(): Promise<number> {
  const text = (await t.rest('GET', '/metrics')).body as string;
  const m = /^metered_fast_path_requests_total (\d+)$/m.exec(text);
  if (!m) throw new Error('metered_fast_path_requests_total is not exported');
  return Number(m[1]);
}

const chat = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('metered routes: the fast path answers what Express answers', () => {
  const cases: [string, string, string, () => Record<string, string>][] = [
    ['invalid JSON', '/v1/chat/completions', '{"model":', () => ({ authorization: `Bearer ${apiKey}` })],
    ['a JSON string', '/v1/chat/completions', '"hello"', () => ({ authorization: `Bearer ${apiKey}` })],
    ['a JSON array', '/v1/responses', '[1, 2]', () => ({ authorization: `Bearer ${apiKey}` })],
    ['no key', '/v1/chat/completions', chat({ user: 'u1' }), () => ({})],
    [
      'a wrong key',
      '/v1/chat/completions',
      chat({ user: 'u1' }),
      () => ({ authorization: 'Bearer pk_nope' }),
    ],
    ['no user', '/v1/chat/completions', chat(), () => ({ authorization: `Bearer ${apiKey}` })],
    [
      'path and body users differ',
      '/v1/u/alice/chat/completions',
      chat({ user: 'bob' }),
      () => ({ authorization: `Bearer ${apiKey}` }),
    ],
    [
      'a non-string user',
      '/v1/responses?user=q',
      chat({ user: 42 }),
      () => ({ authorization: `Bearer ${apiKey}` }),
    ],
    [
      'an unknown model (user from the query)',
      '/v1/chat/completions?user=carol',
      chat(),
      () => ({ authorization: `Bearer ${apiKey}` }),
    ],
    [
      'embeddings: no user',
      '/v1/embeddings',
      JSON.stringify({ model: 'no-such-model', input: 'hi' }),
      () => ({ authorization: `Bearer ${apiKey}` }),
    ],
    [
      'embeddings: an empty input (user in the path)',
      '/v1/u/erin/embeddings',
      JSON.stringify({ model: 'no-such-model', input: '' }),
      () => ({ authorization: `Bearer ${apiKey}` }),
    ],
    [
      'embeddings: an unknown model (user from the body)',
      '/v1/embeddings/',
      JSON.stringify({ model: 'no-such-model', input: ['a', 'b'], user: 'erin' }),
      () => ({ authorization: `Bearer ${apiKey}` }),
    ],
    [
      'an unknown model (user from the header)',
      '/v1/responses/',
      JSON.stringify({ model: 'no-such-model', input: 'hi' }),
      () => ({ authorization: `Bearer ${apiKey}`, 'x-paywall-user': 'dave', 'x-request-id': 'fast-path-1' }),
    ],
  ];
  it.each(cases)('%s', async (_name, path, body, headers) => {
    // The fast path counts what it answers: one for the request with a Content-Length, none for the
    // chunked one (Express), so each answer below is known to come from the path it names.
    const before = await fastPathCount();
    const fast = await post(path, body, headers(), false);
    expect(await fastPathCount()).toBe(before + 1);
    const viaExpress = await post(path, body, headers(), true);
    expect(await fastPathCount()).toBe(before + 1);
    expect(fast.status).toBeGreaterThanOrEqual(400);
    expect({ ...fast, requestId: undefined }).toEqual({ ...viaExpress, requestId: undefined });
    expect(fast.requestId).toBeTruthy();
    if (headers()['x-request-id']) expect(fast.requestId).toBe('fast-path-1');
  });

  it('counts both under the same route labels', async () => {
    const text = (await t.rest('GET', '/metrics')).body as string;
    expect(text).toMatch(
      /http_requests_total\{route="\/v1\/chat\/completions",method="POST",status="400"\} \d+/,
    );
    expect(text).toMatch(
      /http_requests_total\{route="\/v1\/u\/\{user\}\/chat\/completions",method="POST",status="400"\} \d+/,
    );
    expect(text).toMatch(/http_requests_total\{route="unmatched",method="POST",status="401"\} \d+/);
    expect(text).toMatch(/http_requests_total\{route="\/v1\/embeddings",method="POST",status="404"\} \d+/);
    expect(text).toMatch(
      /http_requests_total\{route="\/v1\/u\/\{user\}\/embeddings",method="POST",status="400"\} \d+/,
    );
    expect(text).not.toContain('alice');
    expect(text).not.toContain('erin');
  });
});
