import Anthropic, { AuthenticationError, BadRequestError, NotFoundError } from '@anthropic-ai/sdk';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';

/**
 * POST /v1/messages (docs/reference.md §15): Anthropic's Messages API under the payment rules of chat,
 * through Anthropic's official SDK.
 */

let t: TestApp;
let fake: FakeUpstream;
/** A paywall whose one provider is OpenAI-compatible (selling MODEL). */
let openaiPw: ProxyPaywall;

/** Anthropic's SDK against the service: the paywall key in `x-api-key`, the user in X-Paywall-User. */
const anthropic = (apiKey: string, user?: string, opts: { bearer?: boolean } = {}) =>
  new Anthropic({
    baseURL: t.url,
    ...(opts.bearer ? { authToken: apiKey, apiKey: null } : { apiKey }),
    defaultHeaders: user ? { 'x-paywall-user': user } : {},
    maxRetries: 0,
  });

const ask = { max_tokens: 50, messages: [{ role: 'user' as const, content: 'Hello' }] };

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  openaiPw = await createProxyPaywall(t, fake);
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

describe('Messages errors in Anthropic’s shape (raised by the SDK as its error classes)', () => {
  it('a bad key: 401 authentication_error (AuthenticationError), in x-api-key and as a bearer token', async () => {
    for (const bearer of [false, true]) {
      const err = await anthropic('pk_not_a_key', 'alice', { bearer })
        .messages.create({ model: MODEL, ...ask })
        .catch((e) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err.status).toBe(401);
      expect(err.error).toEqual({
        type: 'error',
        error: { type: 'authentication_error', message: 'Invalid API key.' },
      });
    }
    const none = await t.rest('POST', '/v1/messages', { body: { model: MODEL, ...ask } });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({
      type: 'error',
      error: {
        type: 'authentication_error',
        message: 'Missing API key: send it as `Authorization: Bearer <key>` or `x-api-key`.',
      },
    });
    expect(fake.requests).toHaveLength(0);
  });

  it('no end user: 400 invalid_request_error (BadRequestError)', async () => {
    const err = await anthropic(openaiPw.apiKey)
      .messages.create({ model: MODEL, ...ask })
      .catch((e) => e);
    expect(err).toBeInstanceOf(BadRequestError);
    expect(err.error.type).toBe('error');
    expect(err.error.error.type).toBe('invalid_request_error');
    expect(err.error.error.message).toMatch(/No end user given/);
    expect(fake.requests).toHaveLength(0);
  });

  it('a model the paywall does not sell: 404 not_found_error (NotFoundError)', async () => {
    const err = await anthropic(openaiPw.apiKey, 'alice')
      .messages.create({ model: 'claude-unknown', ...ask })
      .catch((e) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    expect(err.error.error.message).toContain('claude-unknown');
  });

  it('a body Anthropic would refuse: 400 naming the field, before anything is held or sent', async () => {
    const r = await t.rest('POST', '/v1/messages', {
      headers: { 'x-api-key': openaiPw.apiKey, 'x-paywall-user': 'alice' },
      body: { model: MODEL, messages: ask.messages },
    });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
    const json = await t.rest('POST', '/v1/u/alice/messages', {
      headers: { 'x-api-key': openaiPw.apiKey, 'content-type': 'application/json' },
      body: '{"model":',
    });
    expect(json.status).toBe(400);
    expect(json.body).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'request body is not valid JSON' },
    });
    expect(fake.requests).toHaveLength(0);
  });

  it('a model on an OpenAI-compatible provider: a clear 400 (no translation is wired)', async () => {
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const r = await t.rest('POST', path, {
        headers: { 'x-api-key': openaiPw.apiKey, 'x-paywall-user': 'alice' },
        body: { model: MODEL, ...ask },
      });
      expect(r.status).toBe(400);
      expect(r.body.type).toBe('error');
      expect(r.body.error.type).toBe('invalid_request_error');
      expect(r.body.error.message).toMatch(/needs a model on an ANTHROPIC provider/);
    }
    expect(fake.requests).toHaveLength(0);
  });

  it('x-api-key authenticates the other /v1 routes too (OpenAI’s error shape there)', async () => {
    const models = await t.rest('GET', '/v1/models', { headers: { 'x-api-key': openaiPw.apiKey } });
    expect(models.status).toBe(200);
    const bad = await t.rest('GET', '/v1/models', { headers: { 'x-api-key': 'nope' } });
    expect(bad.status).toBe(401);
    expect(bad.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
  });
});
