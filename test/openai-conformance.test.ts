import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { createProxyPaywall, deposit, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import {
  expectConforms,
  openaiSchemas,
  RESPONSES_EVENT_SCHEMAS,
  sseEvents,
  validateEmbeddingResponse,
  violations,
} from './helpers/openai-schemas.js';

/**
 * Every answer shape the service writes, validated against the schemas of OpenAI's published OpenAPI
 * document (test/fixtures/openai-openapi-schemas.json; docs/reference.md §11 "Conformance"): strictly
 * typed SDKs (Java, Kotlin, Rust, Go) generated from that document refuse an answer that lacks a
 * required field. The service's own extension fields (`usage.cost`, `usage.balance`, `paywall`) are extra
 * properties, which none of these schemas forbids.
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

const hi = [{ role: 'user' as const, content: 'Say hello' }];
const INPUT = 'Say hello';

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await createProxyPaywall(t, fake);
  await deposit(t, pw, 'paying', '10');
});
afterAll(async () => {
  await t.close();
  await fake.close();
});
beforeEach(() => fake.reset());

const post = (path: string, body: Record<string, unknown>, user: string | null = 'paying') =>
  t.rest('POST', path, {
    token: pw.apiKey,
    headers: user === null ? {} : { 'x-paywall-user': user },
    body,
  });

/** Each `data:` of a chat stream before `[DONE]`, parsed; fails unless the stream ends in `[DONE]`. */
function chatChunks(body: string): any[] {
  const events = sseEvents(body);
  expect(events.at(-1)?.data).toBe('[DONE]');
  return events.slice(0, -1).map((e) => JSON.parse(e.data));
}

/** Validates every event of a Responses stream by its type; returns the parsed events. */
function expectResponsesEventsConform(body: string): any[] {
  const events = sseEvents(body).map((e) => {
    const data = JSON.parse(e.data);
    // The SSE event name and the data's `type` agree.
    expect(e.event).toBe(data.type);
    return data;
  });
  for (const data of events) {
    const schema = RESPONSES_EVENT_SCHEMAS[data.type];
    if (!schema) throw new Error(`event type ${data.type} has no schema here`);
    expectConforms(schema, data);
  }
  // sequence_number counts up from the first event.
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => events[0].sequence_number + i));
  return events;
}

describe('the fixture and the validator', () => {
  it('come from openai-openapi 2.3.0 and refuse an object that lacks a required field', () => {
    expect(openaiSchemas.source).toMatchObject({
      repository: 'https://github.com/openai/openai-openapi',
      version: '2.3.0',
      openapi: '3.1.0',
    });
    expect(openaiSchemas.source.commit).toMatch(/^[0-9a-f]{40}$/);
    // A Responses object as the service wrote it before this check: no `metadata`, no `logprobs` on
    // the text part, no `cache_write_tokens`. The validator names each.
    const old = {
      id: 'resp_1',
      object: 'response',
      created_at: 1,
      status: 'completed',
      error: null,
      incomplete_details: null,
      instructions: null,
      model: 'm',
      output: [
        {
          id: 'msg_1',
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'x', annotations: [] }],
        },
      ],
      parallel_tool_calls: true,
      temperature: null,
      tool_choice: 'auto',
      tools: [],
      top_p: null,
      usage: {
        input_tokens: 0,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 0,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 0,
      },
    };
    const found = violations('Response', old).join('\n');
    expect(found).toContain(`"missingProperty":"metadata"`);
    expect(found).toContain(`"missingProperty":"logprobs"`);
    expect(found).toContain(`"missingProperty":"cache_write_tokens"`);
    // With the three fields it conforms; `usage: null` (as OpenAI's own examples show) does not.
    const fixed = {
      ...old,
      metadata: {},
      output: [{ ...old.output[0], content: [{ ...old.output[0].content[0], logprobs: [] }] }],
      usage: { ...old.usage, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 } },
    };
    expect(violations('Response', fixed)).toEqual([]);
    expect(violations('Response', { ...fixed, usage: null })).toEqual([
      'Response/usage must be object {"type":"object"}',
    ]);
  });

  it('has the embeddings schema ready for POST /v1/embeddings (docs/reference.md §14)', () => {
    // The API reference's example answer of `POST /embeddings` in the same document.
    const example = {
      object: 'list',
      data: [{ object: 'embedding', embedding: [0.0023064255, -0.009327292, -0.0028842222], index: 0 }],
      model: 'text-embedding-ada-002',
      usage: { prompt_tokens: 8, total_tokens: 8 },
    };
    expect(() =>
      validateEmbeddingResponse({ ...example, usage: { ...example.usage, cost: '0.000001' } }),
    ).not.toThrow();
    const { usage: _usage, ...noUsage } = example;
    expect(() => validateEmbeddingResponse(noUsage)).toThrow(/must have required property 'usage'/);
  });
});

describe('chat completions', () => {
  it('a whole answer conforms to CreateChatCompletionResponse (with usage.cost)', async () => {
    const r = await post('/v1/chat/completions', { model: MODEL, messages: hi });
    expect(r.status).toBe(200);
    expect(r.body.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, cost: '0.001086' });
    expectConforms('CreateChatCompletionResponse', r.body);
  });

  it('a whole answer without the provider’s usage (the service writes it) conforms', async () => {
    fake.next({ usage: null });
    const r = await post('/v1/chat/completions', { model: MODEL, messages: hi });
    expect(r.status).toBe(200);
    expect(r.body.usage.cost).toMatch(/^0\.\d+$/);
    expectConforms('CreateChatCompletionResponse', r.body);
  });

  it('every chunk of a stream, the usage chunk too, conforms to CreateChatCompletionStreamResponse', async () => {
    const r = await post('/v1/chat/completions', {
      model: MODEL,
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(r.status).toBe(200);
    const chunks = chatChunks(r.body);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe(
      'Hello from the fake upstream!',
    );
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: 7, cost: '0.001086' } });
    for (const c of chunks) expectConforms('CreateChatCompletionStreamResponse', c);
  });

  it('the usage chunk the service writes when the provider sends none conforms', async () => {
    fake.next({ usage: null });
    const r = await post('/v1/chat/completions', {
      model: MODEL,
      messages: hi,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = chatChunks(r.body);
    expect(chunks.at(-1).usage.cost).toMatch(/^0\.\d+$/);
    for (const c of chunks) expectConforms('CreateChatCompletionStreamResponse', c);
  });

  it('the error a stream cut mid-way ends with conforms to ErrorResponse', async () => {
    fake.next({ content: 'one two three four five', dieAfterChunks: 2, chunkDelayMs: 5 });
    const r = await post('/v1/chat/completions', { model: MODEL, messages: hi, stream: true });
    const events = sseEvents(r.body);
    const datas = events.filter((e) => e.data !== '[DONE]').map((e) => JSON.parse(e.data));
    const last = datas.at(-1);
    expect(last.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expectConforms('ErrorResponse', last);
    for (const c of datas.slice(0, -1)) expectConforms('CreateChatCompletionStreamResponse', c);
  });

  it('a payment-blocked reply conforms, as a whole answer and as a stream', async () => {
    const r = await post('/v1/chat/completions', { model: MODEL, messages: hi }, 'broke-chat');
    expect(r.status).toBe(200);
    expect(r.body.paywall.reason).toBe('insufficient_balance');
    expect(r.body.choices[0].message.content).toContain(r.body.paywall.url);
    expectConforms('CreateChatCompletionResponse', r.body);

    const s = await post(
      '/v1/chat/completions',
      { model: MODEL, messages: hi, stream: true, stream_options: { include_usage: true } },
      'broke-chat',
    );
    const chunks = chatChunks(s.body);
    expect(chunks).toHaveLength(3);
    expect(chunks[2].usage).toMatchObject({ total_tokens: 0, cost: '0' });
    for (const c of chunks) expectConforms('CreateChatCompletionStreamResponse', c);
    expect(fake.chatRequests).toHaveLength(0);
  });
});

describe('Responses API', () => {
  it('a relayed answer conforms to Response (with usage.cost)', async () => {
    const r = await post('/v1/responses', { model: MODEL, input: INPUT });
    expect(r.status).toBe(200);
    expect(r.body.usage).toMatchObject({ input_tokens: 11, output_tokens: 7, cost: '0.001086' });
    expectConforms('Response', r.body);
  });

  it('an answer whose usage the service writes (the provider sent none) conforms', async () => {
    fake.next({ usage: null });
    const r = await post('/v1/responses', { model: MODEL, input: INPUT });
    expect(r.status).toBe(200);
    expect(r.body.usage).toMatchObject({
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    });
    expect(r.body.usage.total_tokens).toBe(r.body.usage.input_tokens + r.body.usage.output_tokens);
    expectConforms('Response', r.body);
  });

  it('every event of a stream conforms, the held-back response.completed with usage.cost too', async () => {
    const r = await post('/v1/responses', { model: MODEL, input: INPUT, stream: true });
    expect(r.status).toBe(200);
    const events = expectResponsesEventsConform(r.body);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...Array(5).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.at(-1).response.usage).toMatchObject({ output_tokens: 7, cost: '0.001086' });
  });

  it('a stream whose usage the service writes (the provider sent none) conforms', async () => {
    fake.next({ usage: null });
    const r = await post('/v1/responses', { model: MODEL, input: INPUT, stream: true });
    const events = expectResponsesEventsConform(r.body);
    const usage = events.at(-1).response.usage;
    expect(usage.input_tokens_details).toEqual({ cached_tokens: 0, cache_write_tokens: 0 });
    expect(usage.cost).toMatch(/^0\.\d+$/);
  });

  it('the error event of a stream cut mid-way conforms to ResponseErrorEvent', async () => {
    fake.next({ content: 'one two three four five', dieAfterChunks: 2, chunkDelayMs: 5 });
    const r = await post('/v1/responses', { model: MODEL, input: INPUT, stream: true });
    const events = expectResponsesEventsConform(r.body);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'upstream_error' });
  });

  it('a payment-blocked reply conforms, as a whole answer and as every event of a stream', async () => {
    const r = await post('/v1/responses', { model: MODEL, input: INPUT }, 'broke-resp');
    expect(r.status).toBe(200);
    expect(r.body.paywall.reason).toBe('insufficient_balance');
    expect(r.body.output[0].content[0].text).toContain(r.body.paywall.url);
    expect(r.body.metadata).toEqual({});
    expectConforms('Response', r.body);

    const s = await post('/v1/responses', { model: MODEL, input: INPUT, stream: true }, 'broke-resp');
    const events = expectResponsesEventsConform(s.body);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[0].sequence_number).toBe(0);
    expect(events.at(-1).response.output[0].content[0].text).toContain('Top up here');
    expect(fake.responsesRequests).toHaveLength(0);
  });
});

describe('embeddings', () => {
  it('an embeddings answer (with usage.cost and cost_details) conforms to CreateEmbeddingResponse', async () => {
    const r = await post('/v1/embeddings', { model: MODEL, input: INPUT });
    expect(r.status).toBe(200);
    expect(r.body.usage.cost).toMatch(/^0\.\d+$/);
    validateEmbeddingResponse(r.body);
  });

  it('the 402 of a user who cannot pay conforms to ErrorResponse (with the paywall field)', async () => {
    const r = await post('/v1/embeddings', { model: MODEL, input: INPUT }, 'broke-embedder');
    expect(r.status).toBe(402);
    expect(r.body.paywall.reason).toBe('insufficient_balance');
    expectConforms('ErrorResponse', r.body);
  });
});

describe('models and errors', () => {
  it('GET /v1/models conforms to ListModelsResponse, GET /v1/models/{id} to Model', async () => {
    const list = await t.rest('GET', '/v1/models', { token: pw.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.data.map((m: any) => m.id)).toContain(MODEL);
    expectConforms('ListModelsResponse', list.body);
    const one = await t.rest('GET', `/v1/models/${MODEL}`, { token: pw.apiKey });
    expect(one.status).toBe(200);
    expectConforms('Model', one.body);
  });

  it('400, 401 and 404 bodies conform to ErrorResponse', async () => {
    const cases = [
      [await post('/v1/chat/completions', { model: MODEL, messages: hi }, null), 400, 'missing_user'],
      [await post('/v1/responses', { model: MODEL, input: 42 }), 400, 'invalid_type'],
      [await t.rest('GET', '/v1/models', { token: 'pk_not_a_key' }), 401, null],
      [await t.rest('GET', '/v1/models', {}), 401, null],
      [await post('/v1/chat/completions', { model: 'no-such-model', messages: hi }), 404, 'model_not_found'],
      [await t.rest('GET', '/v1/no-such-route', { token: pw.apiKey }), 404, 'unknown_route'],
    ] as const;
    for (const [r, status, code] of cases) {
      expect(r.status).toBe(status);
      if (code) expect(r.body.error.code).toBe(code);
      expectConforms('ErrorResponse', r.body);
    }
  });
});
