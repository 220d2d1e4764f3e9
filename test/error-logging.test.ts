import { startTestApp, type TestApp } from './helpers/app.js';

/**
 * Issue 10, "REST 500s are not logged": every unexpected failure, in REST and GraphQL, is one pino line at
 * error level with the stack, the request id and the route template (or GraphQL operation and path), and
 * the client gets "Internal server error" with no stack.
 */
let t: TestApp;
let pw: { id: string; apiKey: string };
const lines: any[] = [];

beforeAll(async () => {
  t = await startTestApp(
    { LOG_LEVEL: 'info' },
    { logStream: { write: (line: string) => lines.push(JSON.parse(line)) } },
  );
  pw = await t.createPaywall();
});
afterAll(async () => {
  await t.close();
});

/** Makes one service method throw (once per call) for the duration of `run`. */
async function failing<T>(obj: any, method: string, error: unknown, run: () => Promise<T>): Promise<T> {
  const original = obj[method];
  obj[method] = async () => {
    throw error;
  };
  try {
    return await run();
  } finally {
    obj[method] = original;
  }
}

const errorLines = (reqId: string) => lines.filter((l) => l.level === 50 && l.reqId === reqId);

describe('500s are logged, never shown', () => {
  it('a resolver failure behind a REST route: error line with stack, request id and route template', async () => {
    const r = await failing(
      t.app.services.webhooks.subscriptions,
      'list',
      new Error('boom: list exploded'),
      () => t.rest('GET', '/v1/u/alice/webhooks/subscriptions', { token: pw.apiKey }),
    );
    expect(r.status).toBe(500);
    expect(r.body).toEqual({
      error: { message: 'Internal server error', type: 'api_error', param: null, code: null },
    });
    const reqId = r.headers.get('x-request-id')!;
    const logged = errorLines(reqId);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      level: 50,
      method: 'GET',
      route: '/v1/u/{user}/webhooks/subscriptions',
      url: '/v1/u/{user}/webhooks/subscriptions',
      err: { message: 'boom: list exploded' },
    });
    expect(logged[0].err.stack).toMatch(/boom: list exploded\n\s+at /);
    // No end-user id in the line.
    expect(JSON.stringify(logged[0])).not.toContain('alice');
  });

  it('a service failure in a route that calls a service directly (chat)', async () => {
    const r = await failing(t.app.services.proxy, 'chat', new TypeError('cannot read x of undefined'), () =>
      t.rest('POST', '/v1/chat/completions', {
        token: pw.apiKey,
        body: { user: 'u', model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      }),
    );
    expect(r.status).toBe(500);
    expect(JSON.stringify(r.body)).not.toMatch(/TypeError|cannot read|\bat /);
    const [line] = errorLines(r.headers.get('x-request-id')!);
    expect(line).toMatchObject({ route: '/v1/chat/completions', err: { type: 'TypeError' } });
    expect(line.err.stack).toContain('cannot read x of undefined');
  });

  it('a failure in GraphQL: error line with stack, operation and field path; the answer is masked', async () => {
    const before = lines.length;
    const r = await failing(
      t.app.services.webhooks.subscriptions,
      'list',
      new Error('boom: graphql list'),
      () => t.gql(pw.apiKey, `query Subs { webhookSubscriptions { id } }`),
    );
    expect(r.errors).toEqual([
      expect.objectContaining({
        message: 'Internal server error',
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      }),
    ]);
    expect(JSON.stringify(r.errors)).not.toContain('boom');
    const logged = lines.slice(before).filter((l) => l.level === 50);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      route: '/graphql',
      operationName: 'Subs',
      path: 'webhookSubscriptions',
      err: { message: 'boom: graphql list' },
    });
    expect(typeof logged[0].reqId).toBe('string');
    expect(logged[0].err.stack).toMatch(/\n\s+at /);
  });

  it('expected refusals (4xx) are not logged as errors', async () => {
    const before = lines.length;
    const r = await t.rest('GET', '/v1/webhooks/subscriptions/not-a-uuid', { token: pw.apiKey });
    expect(r.status).toBe(404);
    const g = await t.gql(pw.apiKey, `query { webhookSubscription(id: "x") { id } }`);
    expect(g.errors?.[0].extensions.code).toBe('NOT_FOUND');
    expect(lines.slice(before).filter((l) => l.level >= 50)).toEqual([]);
  });
});
