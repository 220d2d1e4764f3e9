import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { deposit, type ProxyPaywall } from './helpers/proxy-setup.js';

/**
 * End-user keys and agent tools across formats (docs/reference.md §19, §21), driven as a tool does: the
 * official SDKs with only a user key, against one paywall with an OpenAI-kind provider (`default`) and an
 * Anthropic-kind provider (`claude`). What the answers' headers say is compared with what the client sent.
 */

const GPT = 'gpt-audit';
const CLAUDE = 'claude-audit';

let t: TestApp;
let openaiFake: FakeUpstream;
let claudeFake: FakeUpstream;
let pw: ProxyPaywall;

async function gqlOk(query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(pw.apiKey, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

beforeAll(async () => {
  openaiFake = await FakeUpstream.start();
  claudeFake = await FakeUpstream.start();
  t = await startTestApp();
  pw = await t.createPaywall('DEFAULT');
  const connect = `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`;
  await gqlOk(connect, { i: { baseUrl: openaiFake.baseUrl, apiKey: 'sk-openai-audit-0001' } });
  await gqlOk(connect, {
    i: { name: 'claude', kind: 'ANTHROPIC', baseUrl: claudeFake.baseUrl, apiKey: 'sk-ant-audit-0001' },
  });
  const price = `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`;
  const prices = { prompt: '0.000001', completion: '0.000004', maxCompletionTokens: 1000 };
  await gqlOk(price, { i: { modelId: GPT, ...prices } });
  await gqlOk(price, {
    i: { modelId: CLAUDE, provider: 'claude', upstreamModel: 'claude-sonnet-4-20250514', ...prices },
  });
});
afterAll(async () => {
  await t?.close();
  await openaiFake?.close();
  await claudeFake?.close();
});
beforeEach(() => {
  openaiFake.reset();
  claudeFake.reset();
});

async function userKey(user: string): Promise<string> {
  const r = await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body: { user } });
  if (r.status !== 201) throw new Error(`${r.status} ${JSON.stringify(r.body)}`);
  return r.body.key as string;
}

describe('x-paywall-dropped-fields names only what the client sent', () => {
  it('a streamed chat completion toward an Anthropic provider without stream_options: not named (the usage chunk the service asks for is its own), and named when the client sent it', async () => {
    await deposit(t, pw, 'df-alice', '1');
    const openai = new OpenAI({
      apiKey: await userKey('df-alice'),
      baseURL: `${t.url}/u/df-alice/v1`,
      maxRetries: 0,
    });
    const ask = {
      model: CLAUDE,
      messages: [{ role: 'user' as const, content: 'Hello' }],
      stream: true as const,
    };

    const plain = await openai.chat.completions.create(ask).withResponse();
    const chunks: any[] = [];
    for await (const c of plain.data) chunks.push(c);
    expect(chunks.some((c) => c.usage)).toBe(false); // the client did not ask for the usage chunk
    expect(plain.response.headers.get('x-paywall-dropped-fields')).toBeNull();

    const withUsage = await openai.chat.completions
      .create({ ...ask, stream_options: { include_usage: true }, seed: 1 })
      .withResponse();
    const usageChunks: any[] = [];
    for await (const c of withUsage.data) usageChunks.push(c);
    expect(usageChunks.at(-1).usage.completion_tokens).toBeGreaterThan(0);
    expect(withUsage.response.headers.get('x-paywall-dropped-fields')?.split(',').sort()).toEqual([
      'seed',
      'stream_options',
    ]);
    for (const r of claudeFake.requests) expect(r.body).not.toHaveProperty('stream_options');
  });
});

describe('the Messages blocked reply to a key over its limit', () => {
  it('JSON and streamed: the text block carries every field of Anthropic’s TextBlock (citations null), as a translated answer’s does', async () => {
    await deposit(t, pw, 'bl-alice', '1');
    const r = await t.rest('POST', '/v1/user/keys', {
      token: pw.apiKey,
      body: { user: 'bl-alice', limit: '0' },
    });
    const anthropic = new Anthropic({ apiKey: r.body.key, baseURL: `${t.url}/u/bl-alice`, maxRetries: 0 });
    for (const model of [CLAUDE, GPT]) {
      const ask = { model, max_tokens: 50, messages: [{ role: 'user' as const, content: 'Hello' }] };
      const m: any = await anthropic.messages.create(ask);
      expect(m.paywall.reason).toBe('key_limit_exceeded');
      expect(m.content).toEqual([
        { type: 'text', text: expect.stringContaining('spending limit'), citations: null },
      ]);
      const starts: any[] = [];
      const stream = anthropic.messages.stream(ask);
      stream.on('streamEvent', (e) => {
        if (e.type === 'content_block_start') starts.push(e.content_block);
      });
      const final = await stream.finalMessage();
      expect(starts).toEqual([{ type: 'text', text: '', citations: null }]);
      expect(final.content[0]).toMatchObject({ type: 'text', citations: null });
    }
    expect(claudeFake.requests).toHaveLength(0);
    expect(openaiFake.requests).toHaveLength(0);
  });
});

describe('output_config toward a model that does not reason', () => {
  it('its JSON schema format is honoured and only its effort is named as dropped (output_config.effort); an effort alone names output_config', async () => {
    await deposit(t, pw, 'oc-alice', '1');
    const r = await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body: { user: 'oc-alice' } });
    const anthropic = new Anthropic({ apiKey: r.body.key, baseURL: t.url, maxRetries: 0 });
    const schema = {
      type: 'object',
      properties: { a: { type: 'string' } },
      required: ['a'],
      additionalProperties: false,
    };
    const ask = { model: GPT, max_tokens: 50, messages: [{ role: 'user' as const, content: 'Hello' }] };
    const both = await anthropic.messages
      .create({ ...ask, output_config: { effort: 'high', format: { type: 'json_schema', schema } } } as any)
      .withResponse();
    expect(both.response.headers.get('x-paywall-dropped-fields')).toBe('output_config.effort');
    expect(openaiFake.requests.at(-1)!.body.response_format).toMatchObject({
      type: 'json_schema',
      json_schema: { schema },
    });
    expect(openaiFake.requests.at(-1)!.body).not.toHaveProperty('reasoning_effort');
    const effortOnly = await anthropic.messages
      .create({ ...ask, output_config: { effort: 'high' } } as any)
      .withResponse();
    expect(effortOnly.response.headers.get('x-paywall-dropped-fields')).toBe('output_config');
  });
});

describe('a reasoning effort that becomes Anthropic thinking', () => {
  it('keeps the sampling Anthropic accepts with thinking: temperature, top_k and a top_p below 0.95 are dropped and named, a top_p of 0.95 or more goes', async () => {
    await gqlOk(`mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      i: {
        modelId: 'claude-thinks-audit',
        provider: 'claude',
        upstreamModel: 'claude-sonnet-4-20250514',
        reasoningModel: true,
        prompt: '0.000001',
        completion: '0.000004',
        maxCompletionTokens: 30000,
      },
    });
    await deposit(t, pw, 'tp-alice', '1');
    const openai = new OpenAI({ apiKey: await userKey('tp-alice'), baseURL: `${t.url}/v1`, maxRetries: 0 });
    const ask = {
      model: 'claude-thinks-audit',
      reasoning_effort: 'low' as const,
      messages: [{ role: 'user' as const, content: 'Hello' }],
    };
    const low = await openai.chat.completions.create({ ...ask, top_p: 0.5 }).withResponse();
    expect(low.response.headers.get('x-paywall-dropped-fields')).toBe('top_p');
    expect(claudeFake.requests.at(-1)!.body.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 });
    expect(claudeFake.requests.at(-1)!.body).not.toHaveProperty('top_p');

    const kept = await openai.responses
      .create({ model: ask.model, input: 'Hello', reasoning: { effort: 'low' }, top_p: 0.97 })
      .withResponse();
    expect(kept.response.headers.get('x-paywall-dropped-fields')).toBeNull();
    expect(claudeFake.requests.at(-1)!.body).toMatchObject({ top_p: 0.97, thinking: { type: 'enabled' } });

    // Without thinking (no effort) the client's top_p goes as it is.
    await openai.chat.completions.create({ model: ask.model, messages: ask.messages, top_p: 0.5 });
    expect(claudeFake.requests.at(-1)!.body.top_p).toBe(0.5);
  });
});

describe('a user key naming another user on the Messages routes', () => {
  it('path, query or header, on messages and count_tokens, native or translated: 403 permission_error in Anthropic’s shape; nothing sent', async () => {
    await deposit(t, pw, 'mx-alice', '1');
    const key = await userKey('mx-alice');
    const ask = { model: CLAUDE, max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] };
    for (const model of [CLAUDE, GPT])
      for (const [path, headers] of [
        ['/u/bob/v1/messages', {}],
        ['/v1/u/bob/messages', {}],
        ['/v1/messages?user=bob', {}],
        ['/v1/messages', { 'x-paywall-user': 'bob' }],
        ['/u/bob/v1/messages/count_tokens', {}],
        ['/v1/messages/count_tokens?user=bob', {}],
        ['/v1/messages/count_tokens', { 'x-paywall-user': 'bob' }],
      ] as const) {
        const r = await t.rest('POST', path, {
          token: null,
          headers: { 'x-api-key': key, ...headers },
          body: { ...ask, model },
        });
        expect([model, path, r.status, r.body]).toEqual([
          model,
          path,
          403,
          { type: 'error', error: { type: 'permission_error', message: expect.any(String) } },
        ]);
      }
    expect(claudeFake.requests).toHaveLength(0);
    expect(openaiFake.requests).toHaveLength(0);
  });
});

describe('a chat completions custom tool toward an Anthropic provider', () => {
  const applyPatch = {
    type: 'custom' as const,
    custom: { name: 'apply_patch', description: 'Apply a patch to the files' },
  };
  const PATCH = '*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch';
  const toolUse = { type: 'tool_use', id: 'toolu_audit_1', name: 'apply_patch', input: { input: PATCH } };
  const sse = (events: [string, unknown][]) =>
    events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join('');
  const message = (content: unknown[], stop: string) => ({
    id: 'msg_audit_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4-20250514',
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage: { input_tokens: 30, output_tokens: 12 },
  });

  it('goes as a function taking {input}; its call comes back as a custom tool call (JSON and stream), and the call and its output go back on the next turn', async () => {
    await deposit(t, pw, 'ct-alice', '1');
    const openai = new OpenAI({ apiKey: await userKey('ct-alice'), baseURL: `${t.url}/v1`, maxRetries: 0 });
    const ask = {
      model: CLAUDE,
      tools: [applyPatch],
      tool_choice: { type: 'custom' as const, custom: { name: 'apply_patch' } },
      messages: [{ role: 'user' as const, content: 'Add a.txt' }],
    };
    claudeFake.next({ answer: message([toolUse], 'tool_use') });
    const json = await openai.chat.completions.create(ask);
    expect(json.choices[0].finish_reason).toBe('tool_calls');
    expect(json.choices[0].message.tool_calls).toEqual([
      { id: 'toolu_audit_1', type: 'custom', custom: { name: 'apply_patch', input: PATCH } },
    ]);
    const sent = claudeFake.requests[0].body;
    expect(sent.tools).toEqual([
      {
        name: 'apply_patch',
        description: 'Apply a patch to the files',
        input_schema: expect.objectContaining({ required: ['input'] }),
      },
    ]);
    expect(sent.tool_choice).toEqual({ type: 'tool', name: 'apply_patch' });

    const half = Math.floor(PATCH.length / 2);
    const partial = (s: string) => JSON.stringify({ input: s });
    const streamed = sse([
      ['message_start', { type: 'message_start', message: message([], null as any) }],
      [
        'content_block_start',
        { type: 'content_block_start', index: 0, content_block: { ...toolUse, input: {} } },
      ],
      [
        'content_block_delta',
        {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'input_json_delta', partial_json: partial(PATCH).slice(0, half) },
        },
      ],
      [
        'content_block_delta',
        {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'input_json_delta', partial_json: partial(PATCH).slice(half) },
        },
      ],
      ['content_block_stop', { type: 'content_block_stop', index: 0 }],
      [
        'message_delta',
        {
          type: 'message_delta',
          delta: { stop_reason: 'tool_use', stop_sequence: null },
          usage: { output_tokens: 12 },
        },
      ],
      ['message_stop', { type: 'message_stop' }],
    ]);
    claudeFake.next({ sse: streamed });
    const stream = await openai.chat.completions.create({ ...ask, stream: true });
    const calls: any[] = [];
    let finish: string | null = null;
    for await (const c of stream) {
      for (const call of c.choices[0]?.delta.tool_calls ?? []) calls.push(call);
      finish = c.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(calls[0]).toMatchObject({
      index: 0,
      id: 'toolu_audit_1',
      type: 'custom',
      custom: { name: 'apply_patch' },
    });
    expect(calls.map((c) => c.custom?.input ?? '').join('')).toBe(PATCH);
    expect(calls.every((c) => c.function === undefined)).toBe(true);
    // The SDK's stream helper puts the call together as it would OpenAI's.
    claudeFake.next({ sse: streamed });
    const helper = await openai.chat.completions.stream({ ...ask, stream: true }).finalChatCompletion();
    expect(helper.choices[0].message.tool_calls).toEqual([
      { id: 'toolu_audit_1', type: 'custom', custom: { name: 'apply_patch', input: PATCH } },
    ]);

    // The next turn: the custom call and its output go back as tool_use / tool_result.
    await openai.chat.completions.create({
      model: CLAUDE,
      tools: [applyPatch],
      messages: [
        ...ask.messages,
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'toolu_audit_1', type: 'custom', custom: { name: 'apply_patch', input: PATCH } },
          ],
        },
        { role: 'tool', tool_call_id: 'toolu_audit_1', content: 'Done' },
      ],
    });
    expect(claudeFake.requests.at(-1)!.body.messages.slice(1)).toEqual([
      { role: 'assistant', content: [{ ...toolUse }] },
      {
        role: 'user',
        content: [
          expect.objectContaining({ type: 'tool_result', tool_use_id: 'toolu_audit_1', content: 'Done' }),
        ],
      },
    ]);
  });
});

describe('JSON mode (json_object) toward an Anthropic provider', () => {
  it('becomes a forced tool taking any JSON object; the answer’s text is that object as JSON (chat and Responses), nothing named as dropped', async () => {
    await deposit(t, pw, 'jo-alice', '1');
    const openai = new OpenAI({ apiKey: await userKey('jo-alice'), baseURL: `${t.url}/v1`, maxRetries: 0 });
    const answer = {
      id: 'msg_audit_json',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-20250514',
      content: [
        { type: 'tool_use', id: 'toolu_json', name: 'json_answer', input: { city: 'Paris', temp: 21 } },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 20, output_tokens: 9 },
    };
    claudeFake.next({ answer });
    const chat = await openai.chat.completions
      .create({
        model: CLAUDE,
        response_format: { type: 'json_object' },
        messages: [{ role: 'user', content: 'The weather in Paris, as JSON' }],
      })
      .withResponse();
    expect(chat.response.headers.get('x-paywall-dropped-fields')).toBeNull();
    expect(chat.data.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { content: expect.any(String) },
    });
    expect(JSON.parse(chat.data.choices[0].message.content!)).toEqual({ city: 'Paris', temp: 21 });
    expect(claudeFake.requests.at(-1)!.body).toMatchObject({
      tools: [{ name: 'json_answer', input_schema: { type: 'object' } }],
      tool_choice: { type: 'tool', name: 'json_answer' },
    });

    claudeFake.next({ answer });
    const resp = await openai.responses
      .create({
        model: CLAUDE,
        input: 'The weather in Paris, as JSON',
        text: { format: { type: 'json_object' } },
      })
      .withResponse();
    expect(resp.response.headers.get('x-paywall-dropped-fields')).toBeNull();
    expect(JSON.parse(resp.data.output_text)).toEqual({ city: 'Paris', temp: 21 });
  });
});
