import { request } from 'node:http';
import OpenAI from 'openai';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { startInstances, OWNER_TOKEN, type Instance } from './helpers/instances.js';
import { MODEL, PROVIDER_KEY } from './helpers/proxy-setup.js';

/**
 * The API rate limit (docs/reference.md §10): RATE_LIMIT_PER_MINUTE per paywall key, all instances together (the
 * count is in PostgreSQL); over it, 429 rate_limit_error with Retry-After and x-ratelimit-* headers.
 * Chats are counted by the hold's statement, other routes by one small statement. The clock is moved.
 */
let fake: FakeUpstream;
let cluster: Awaited<ReturnType<typeof startInstances>>;
let a: Instance;
let b: Instance;
const at = (iso: string) => {
  for (const i of cluster.instances) i.app.services.clock.now = () => new Date(iso);
};

beforeAll(async () => {
  fake = await FakeUpstream.start();
  cluster = await startInstances(2, { RATE_LIMIT_PER_MINUTE: '10' });
  [a, b] = cluster.instances;
}, 120_000);
afterAll(async () => {
  await cluster?.close();
  await fake?.close();
});

async function paywall(): Promise<string> {
  const r = await a.gql(
    OWNER_TOKEN,
    `mutation { createPaywall(input: {name: "Limited", mode: DEFAULT}) { apiKey } }`,
  );
  const apiKey = r.data.createPaywall.apiKey;
  for (const q of [
    `mutation { connectProvider(input: {baseUrl: "${fake.baseUrl}", apiKey: "${PROVIDER_KEY}"}) { id } }`,
    `mutation { setModelPricing(input: {modelId: "${MODEL}", prompt: "0.000002", completion: "0.000005", request: "0.001"}) { id } }`,
  ])
    expect((await a.gql(apiKey, q)).errors).toBeUndefined();
  return apiKey;
}

const get = (via: Instance, apiKey: string, path: string) =>
  fetch(`${via.url}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });

describe('RATE_LIMIT_PER_MINUTE across two instances', () => {
  it('answers 10 requests in all in one minute (chats and other routes), then 429 with the headers', async () => {
    at('2026-11-23T10:00:15.000Z');
    const apiKey = await paywall();
    const chat = (via: Instance) =>
      new OpenAI({
        apiKey,
        baseURL: `${via.url}/v1`,
        defaultHeaders: { 'X-Paywall-User': 'ann' },
        maxRetries: 0,
      }).chat.completions
        .create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => 200,
          (e: any) => e.status as number,
        );
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        i % 3 === 0
          ? chat(i % 2 ? a : b)
          : get(i % 2 ? a : b, apiKey, '/v1/user/balance?user=ann').then((r) => r.status),
      ),
    );
    expect(results.filter((s) => s === 200)).toHaveLength(10);
    expect(results.filter((s) => s === 429)).toHaveLength(14);

    const over = await get(b, apiKey, '/v1/models');
    expect(over.status).toBe(429);
    expect(await over.json()).toEqual({
      error: {
        message:
          'Rate limit reached: 10 requests per minute for this API key. Retry after 2026-11-23T10:01:00.000Z.',
        type: 'rate_limit_error',
        param: null,
        code: 'rate_limit_exceeded',
      },
    });
    expect(over.headers.get('retry-after')).toBe('45');
    expect(over.headers.get('x-ratelimit-limit')).toBe('10');
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(over.headers.get('x-ratelimit-reset')).toBe('45');

    // A refused chat is a 429 too, and nothing was recorded for it.
    const refused = await fetch(`${a.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        'x-paywall-user': 'ann',
      },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('45');
    expect((await refused.json()).error.type).toBe('rate_limit_error');

    // The next minute starts over; another key has its own count.
    at('2026-11-23T10:01:00.000Z');
    const next = await get(a, apiKey, '/v1/models');
    expect(next.status).toBe(200);
    expect(next.headers.get('x-ratelimit-remaining')).toBe('9');
    expect(next.headers.get('x-ratelimit-reset')).toBe('60');
    const other = await paywall();
    expect((await get(b, other, '/v1/models')).status).toBe(200);
  });

  it('counts an embeddings request once, by its hold, on either instance and either entry', async () => {
    at('2026-11-23T10:05:00.000Z');
    const apiKey = await paywall();
    const funded = await a.gql(apiKey, `mutation { deposit(input: {user: "bea", amount: "1"}) { balance } }`);
    expect(funded.errors).toBeUndefined();
    const forwardedBefore = fake.embeddingsRequests.length;
    // The SDK's requests take the fast path (a Content-Length); a chunked body is served by Express,
    // whose rate limiter leaves metered routes to the hold.
    const viaSdk = (via: Instance) =>
      new OpenAI({
        apiKey,
        baseURL: `${via.url}/v1`,
        defaultHeaders: { 'X-Paywall-User': 'bea' },
        maxRetries: 0,
      }).embeddings
        .create({ model: MODEL, input: 'hi' })
        .then(
          () => '200',
          (e: any) => `${e.status} ${e.code}`,
        );
    const chunked = (via: Instance) =>
      new Promise<string>((resolve, reject) => {
        const url = new URL(`${via.url}/v1/embeddings`);
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            headers: {
              authorization: `Bearer ${apiKey}`,
              'content-type': 'application/json',
              'x-paywall-user': 'bea',
            },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () =>
              resolve(res.statusCode === 200 ? '200' : `${res.statusCode} ${JSON.parse(text).error.code}`),
            );
          },
        );
        req.on('error', reject);
        const body = JSON.stringify({ model: MODEL, input: 'hi' });
        req.write(body.slice(0, 1));
        req.end(body.slice(1));
      });
    const results: string[] = [];
    for (let i = 0; i < 11; i++) results.push(await (i % 2 ? viaSdk : chunked)(i % 4 < 2 ? a : b));
    expect(results).toEqual([...Array(10).fill('200'), '429 rate_limit_exceeded']);
    expect(fake.embeddingsRequests.length - forwardedBefore).toBe(10);
  });

  it('counts the metered requests refused before a hold (unknown model, no user, bad body): over the limit they get the 429 too', async () => {
    at('2026-11-23T10:07:00.000Z');
    const apiKey = await paywall();
    const post = (via: Instance, path: string, body: unknown, user: string | null = 'cy') =>
      fetch(`${via.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          ...(user ? { 'x-paywall-user': user } : {}),
        },
        body: JSON.stringify(body),
      });
    const refused = [
      () =>
        post(a, '/v1/chat/completions', {
          model: 'no-such-model',
          messages: [{ role: 'user', content: 'hi' }],
        }),
      () =>
        post(b, '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, null),
      () => post(a, '/v1/responses', { input: 'hi' }),
      () => post(b, '/v1/embeddings', { model: 'no-such-model', input: 'hi' }),
      () => post(a, '/v1/messages', { model: MODEL, messages: [] }),
      () =>
        fetch(`${b.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: '{"model": ',
        }),
    ];
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await refused[i % refused.length]()).status);
    // The first 10 answered as they were (404 or 400), and each counted: the key's minute is used up.
    expect(statuses.slice(0, 10).every((s) => s === 400 || s === 404)).toBe(true);
    expect(statuses.slice(10)).toEqual([429, 429]);
    const over = await get(b, apiKey, '/v1/models');
    expect(over.status).toBe(429);
    // Over the limit, a refused request is a 429 with the headers (not its 404 or 400)...
    const unknown = await post(a, '/v1/chat/completions', {
      model: 'no-such-model',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(unknown.status).toBe(429);
    expect(unknown.headers.get('retry-after')).toBe('60');
    expect(unknown.headers.get('x-ratelimit-limit')).toBe('10');
    expect(unknown.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(await unknown.json()).toMatchObject({
      error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' },
    });
    // ...in Anthropic's shape on the Messages route.
    const messages = await post(b, '/v1/messages', { model: MODEL, messages: [] });
    expect(messages.status).toBe(429);
    expect(await messages.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    // A valid chat is refused as before.
    const chat = await post(a, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(chat.status).toBe(429);
  });
});
