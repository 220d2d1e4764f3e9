import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DomainError } from '../src/shared/errors.js';
import { chatUsage, messagesUsage, responsesUsage } from '../src/modules/proxy/provider-usage.js';
import { SseRelay } from '../src/modules/proxy/sse-relay.js';
import {
  chatAnswerToMessages,
  chatRequestToMessages,
  ChatToMessagesStream,
  messagesAnswerToChat,
  messagesAnswerToResponse,
  messagesRequestToChat,
  MessagesToChatStream,
  MessagesToResponsesStream,
  responsesRequestToMessages,
} from './helpers/translation-pairs.js';
import { Dropped, FIELD_POLICY } from '../src/modules/proxy/formats/field-policy.js';
import { expectConforms, RESPONSES_EVENT_SCHEMAS, sseEvents } from './helpers/openai-schemas.js';

/**
 * The translation layer between OpenAI's formats and Anthropic's Messages API (docs/translation.md),
 * on payloads recorded from both providers (test/fixtures/anthropic, test/fixtures/openai). Streams are
 * fed whole and split anywhere; the translated streams are read back by the official SDKs.
 */

const fixture = (path: string): string =>
  readFileSync(new URL(`./fixtures/${path}`, import.meta.url), 'utf8');
const json = (path: string): Record<string, any> => JSON.parse(fixture(path));

/** Feeds `text` to a fresh transformer in pieces cut at `cuts`, returning everything it wrote. */
function feedSplit(make: () => { feed(t: string): string }, text: string, cuts: number[]): string {
  const t = make();
  let out = '';
  let at = 0;
  for (const c of [...cuts, text.length]) {
    out += t.feed(text.slice(at, c));
    at = c;
  }
  return out;
}
const every = (n: number, len: number) => Array.from({ length: Math.floor(len / n) }, (_, i) => (i + 1) * n);
/** A deterministic pseudo-random generator (the cuts must be reproducible). */
function randomCuts(len: number, seed: number): number[] {
  let s = seed;
  const cuts: number[] = [];
  for (let at = 0; ;) {
    s = (s * 1103515245 + 12345) % 2147483648;
    at += 1 + (s % 23);
    if (at >= len) return cuts;
    cuts.push(at);
  }
}
/** Whole, every byte, every 7, and 5 random splittings all give the same output. */
function expectSplitInvariant(make: () => { feed(t: string): string }, text: string): string {
  const whole = feedSplit(make, text, []);
  expect(whole.length).toBeGreaterThan(0);
  expect(feedSplit(make, text, every(1, text.length))).toBe(whole);
  expect(feedSplit(make, text, every(7, text.length))).toBe(whole);
  for (const seed of [1, 2, 3, 42, 2026])
    expect(feedSplit(make, text, randomCuts(text.length, seed))).toBe(whole);
  return whole;
}

/** The `data:` JSON of a chat SSE text (no [DONE]). */
const chatChunks = (sse: string): Record<string, any>[] =>
  sseEvents(sse)
    .filter((e) => e.data !== '[DONE]')
    .map((e) => JSON.parse(e.data));

function expectDomainError(fn: () => unknown, param: string, code = 'unsupported_parameter'): void {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(DomainError);
  const err = caught as DomainError;
  expect({ param: err.param, kind: err.code, code: err.publicCode }).toEqual({
    param,
    kind: 'invalid_request',
    code,
  });
  expect(err.message).toContain(param);
}

/** A loopback server answering every POST with `body` as an event stream (for the SDKs). */
async function serveSse(body: string): Promise<{ url: string; close: () => Promise<void>; requests: any[] }> {
  const requests: any[] = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      requests.push({ url: req.url, body: raw ? JSON.parse(raw) : null });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const MODEL = 'claude-as-gpt';
const OPTS = { model: 'claude-opus-4-6', maxTokens: 512 };

// ---------------------------------------------------------------------------------------------------
describe('chat completions → Anthropic Messages (request)', () => {
  const body = json('openai/chat-request-conversation.json');

  it('translates the recorded conversation field by field', () => {
    const out = chatRequestToMessages(body, OPTS);
    expect(out.model).toBe('claude-opus-4-6');
    expect(out.max_tokens).toBe(512);
    expect(out.system).toBe('You are a helpful assistant.');
    expect(out.stream).toBe(true);
    expect(out.temperature).toBe(0.7);
    expect(out.top_p).toBe(1);
    expect(out.stop_sequences).toEqual(['\n\n']);
    // never upstream: the end user, and what has no effect there
    for (const k of [
      'user',
      'store',
      'stream_options',
      'max_completion_tokens',
      'parallel_tool_calls',
      'metadata',
    ])
      expect(out).not.toHaveProperty(k);
    expect(out.tools).toEqual([
      {
        name: 'get_weather',
        description: 'Get current temperature for a given location.',
        input_schema: body.tools[0].function.parameters,
      },
    ]);
    expect(out.tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true });
    const messages = out.messages as any[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(messages[0].content).toEqual([
      { type: 'text', text: "What's in this image?" },
      { type: 'image', source: { type: 'url', url: body.messages[1].content[1].image_url.url } },
      { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQSkZJRg...' } },
    ]);
    expect(messages[1].content).toEqual([{ type: 'text', text: 'A wooden boardwalk through a meadow.' }]);
    expect(messages[2].content).toBe("What's the weather like in Paris today?");
    expect(messages[3].content).toEqual([
      { type: 'tool_use', id: 'call_12345xyz', name: 'get_weather', input: { location: 'Paris, France' } },
      { type: 'tool_use', id: 'call_67890abc', name: 'get_weather', input: { location: 'Bogotá, Colombia' } },
    ]);
    // two consecutive tool results: one user turn
    expect(messages[4].content).toEqual([
      { type: 'tool_result', tool_use_id: 'call_12345xyz', content: '15°C' },
      { type: 'tool_result', tool_use_id: 'call_67890abc', content: '18°C' },
    ]);
  });

  it('maps tool_choice and stop as Anthropic takes them', () => {
    const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: body.tools };
    const choice = (tool_choice: unknown) =>
      chatRequestToMessages({ ...base, tool_choice }, OPTS).tool_choice;
    expect(choice('auto')).toEqual({ type: 'auto' });
    expect(choice('none')).toEqual({ type: 'none' });
    expect(choice('required')).toEqual({ type: 'any' });
    expect(choice({ type: 'function', function: { name: 'get_weather' } })).toEqual({
      type: 'tool',
      name: 'get_weather',
    });
    expect(chatRequestToMessages({ ...base, stop: 'END' }, OPTS).stop_sequences).toEqual(['END']);
    const system = chatRequestToMessages(
      {
        model: 'm',
        messages: [
          { role: 'system', content: 'one' },
          { role: 'user', content: 'hi' },
          { role: 'developer', content: [{ type: 'text', text: 'two' }] },
        ],
      },
      OPTS,
    );
    expect(system.system).toBe('one\n\ntwo');
    expect(system.messages).toEqual([{ role: 'user', content: 'hi' }]);
  });

  it('refuses what it cannot translate, naming the field', () => {
    const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    const refused: [Record<string, unknown>, string][] = [
      [{ n: 2 }, 'n'],
      [{ logprobs: true }, 'logprobs'],
      [{ top_logprobs: 3 }, 'top_logprobs'],
      [{ audio: { voice: 'alloy', format: 'wav' } }, 'audio'],
      [{ modalities: ['text', 'audio'] }, 'modalities'],
      [{ functions: [{ name: 'f' }] }, 'functions'],
      [{ web_search_options: {} }, 'web_search_options'],
      [{ temperature: 1.5 }, 'temperature'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ tool_choice: { type: 'allowed_tools', allowed_tools: {} } }, 'tool_choice.type'],
      [
        { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] },
        'messages[0].content[0].type',
      ],
      [
        { messages: [{ role: 'user', content: [{ type: 'file', file: {} }] }] },
        'messages[0].content[0].type',
      ],
      [{ messages: [{ role: 'function', name: 'f', content: 'x' }] }, 'messages[0].role'],
    ];
    for (const [patch, param] of refused)
      expectDomainError(() => chatRequestToMessages({ ...base, ...patch }, OPTS), param);
    // docs/reference.md §21 "Dropped": what only steers how the provider works is left out and named.
    const droppedFields: [Record<string, unknown>, string][] = [
      [{ logit_bias: { '50256': -100 } }, 'logit_bias'],
      [{ frequency_penalty: 0.5 }, 'frequency_penalty'],
      [{ presence_penalty: 0.5 }, 'presence_penalty'],
      [{ prediction: { type: 'content', content: 'x' } }, 'prediction'],
      [{ some_vendor_field: true }, 'some_vendor_field'],
      [{ reasoning_effort: 'high' }, 'reasoning_effort'], // the model does not reason
      [{ seed: 1, stream_options: { include_usage: true } }, 'seed,stream_options'],
    ];
    for (const [patch, names] of droppedFields) {
      const dropped = new Dropped();
      const out = chatRequestToMessages({ ...base, ...patch }, { ...OPTS, dropped });
      expect(dropped.list.join(',')).toBe(names);
      for (const name of names.split(',')) expect(out).not.toHaveProperty(name);
    }
    // malformed, not unsupported
    expectDomainError(
      () =>
        chatRequestToMessages(
          {
            ...base,
            messages: [
              {
                role: 'assistant',
                content: null,
                tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }],
              },
            ],
          },
          OPTS,
        ),
      'messages[0].tool_calls[0].function.arguments',
      'invalid_value',
    );
    expectDomainError(
      () =>
        chatRequestToMessages(
          {
            ...base,
            messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x' } }] }],
          },
          OPTS,
        ),
      'messages[0].content[0].image_url.url',
      'invalid_value',
    );
    // harmless values of the same fields pass, and are dropped
    const ok = chatRequestToMessages(
      {
        ...base,
        n: 1,
        logprobs: false,
        logit_bias: {},
        frequency_penalty: 0,
        response_format: { type: 'text' },
        modalities: ['text'],
        seed: 7,
        service_tier: 'auto',
        metadata: { a: 'b' },
      },
      OPTS,
    );
    expect(Object.keys(ok).sort()).toEqual(['max_tokens', 'messages', 'model']);
  });
});

// ---------------------------------------------------------------------------------------------------
describe('Anthropic answer → chat completion', () => {
  it('the reference answer with cache usage: text, stop, usage with both cache buckets', () => {
    const answer = messagesAnswerToChat(json('anthropic/message-text-cache.json'), {
      model: MODEL,
      created: 1700000000,
    });
    expectConforms('CreateChatCompletionResponse', answer);
    expect(answer).toMatchObject({
      id: 'chatcmpl-013Zva2CMHLNnXjNJJKqJ2EF',
      object: 'chat.completion',
      created: 1700000000,
      model: MODEL,
      choices: [
        {
          index: 0,
          finish_reason: 'stop',
          message: { role: 'assistant', content: 'Hi! My name is Claude.' },
        },
      ],
      usage: {
        prompt_tokens: 2095 + 2051 + 2051,
        completion_tokens: 503,
        total_tokens: 2095 + 2051 + 2051 + 503,
        prompt_tokens_details: { cached_tokens: 2051, cache_write_tokens: 2051 },
      },
    });
    // The charge reads the translated usage as it reads Anthropic's own.
    expect(chatUsage(answer.usage)).toEqual({
      ...messagesUsage(json('anthropic/message-text-cache.json').usage),
      audioPrompt: undefined,
      reasoning: 0,
      audioCompletion: undefined,
    });
  });

  it('the tool-use answer: tool_calls with JSON arguments, finish_reason tool_calls; stop reasons', () => {
    const answer = messagesAnswerToChat(json('anthropic/message-tool-use.json'), {
      model: MODEL,
      created: 1,
    });
    expectConforms('CreateChatCompletionResponse', answer);
    const choice = (answer.choices as any[])[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe("I'll check the current weather.");
    expect(choice.message.tool_calls).toEqual([
      {
        id: 'toolu_01A09q90qw90lq917835lq9',
        type: 'function',
        function: { name: 'get_weather', arguments: '{"location":"San Francisco, CA","unit":"celsius"}' },
      },
    ]);
    expect(answer).not.toHaveProperty('usage');
    const finish = (stop_reason: string) =>
      (messagesAnswerToChat({ content: [], stop_reason }, { model: MODEL }).choices as any[])[0]
        .finish_reason;
    expect(['end_turn', 'stop_sequence', 'max_tokens', 'tool_use', 'refusal'].map(finish)).toEqual([
      'stop',
      'stop',
      'length',
      'tool_calls',
      'content_filter',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------
describe('Anthropic stream → chat completion chunks', () => {
  const make =
    (includeUsage = true) =>
    () =>
      new MessagesToChatStream({ model: MODEL, created: 1700000000, includeUsage });

  it('the tool-use stream, split anywhere, gives the same chunks; each conforms; the chat relay meters it', () => {
    const sse = fixture('anthropic/stream-tool-use.txt');
    const out = expectSplitInvariant(make(), sse);
    const chunks = chatChunks(out);
    for (const c of chunks) expectConforms('CreateChatCompletionStreamResponse', c);
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks.every((c) => c.id === 'chatcmpl-014p7gG3wDgGV9EUtLvnow3U' && c.model === MODEL)).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe("Okay, let's check the weather for San Francisco, CA:");
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(calls[0]).toEqual({
      index: 0,
      id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6',
      type: 'function',
      function: { name: 'get_weather', arguments: '' },
    });
    expect(calls.slice(1).every((c: any) => c.index === 0 && !('id' in c))).toBe(true);
    expect(JSON.parse(calls.map((c: any) => c.function.arguments).join(''))).toEqual({
      location: 'San Francisco, CA',
      unit: 'fahrenheit',
    });
    const finish = chunks.at(-2)!;
    expect(finish.choices[0]).toMatchObject({ delta: {}, finish_reason: 'tool_calls' });
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 472, completion_tokens: 89, total_tokens: 561 },
    });
    expect(out).not.toContain('[DONE]');

    // The existing chat relay takes it as an OpenAI provider's stream.
    const relay = new SseRelay(true);
    relay.feed(out);
    expect(relay.finished).toBe(true);
    expect(chatUsage(relay.usage)).toMatchObject({ input: 472, output: 89, cacheRead: 0, cacheWrite: 0 });
  });

  it('exposes done, finished and the usage; no usage chunk unless asked', () => {
    const t = new MessagesToChatStream({ model: MODEL, includeUsage: false });
    const sse = fixture('anthropic/stream-json-tool-recorded.txt');
    const cut = sse.indexOf('event: message_stop');
    const before = t.feed(sse.slice(0, cut));
    expect(t.done).toBe(false);
    expect(t.finished).toBe(false);
    const after = t.feed(sse.slice(cut));
    expect(t.done && t.finished).toBe(true);
    expect(t.stopReason).toBe('tool_use');
    expect(t.usage).toEqual({ input: 849, cacheRead: 0, cacheWrite: 0, output: 47, thinking: 0 });
    expect(t.chatUsage()).toMatchObject({ prompt_tokens: 849, completion_tokens: 47 });
    expect(chatChunks(before + after).some((c) => c.usage)).toBe(false);
    const args = chatChunks(before)
      .flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      .map((c: any) => c.function.arguments)
      .join('');
    expect(JSON.parse(args).elements[0].location).toBe('San Francisco');
  });

  it('drops thinking; a text stream ends with stop; an error event becomes an error chunk', () => {
    const thinking = chatChunks(feedSplit(make(), fixture('anthropic/stream-thinking.txt'), []));
    expect(thinking.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe(
      'The greatest common divisor of 1071 and 462 is **21**.',
    );
    expect(JSON.stringify(thinking)).not.toContain('Euclidean');

    const err = new MessagesToChatStream({ model: MODEL, includeUsage: true });
    const raw = err.feed(fixture('anthropic/stream-error.txt'));
    const out = chatChunks(raw);
    expect(out.at(-1)).toEqual({
      error: { message: 'Overloaded', type: 'api_error', param: null, code: 'overloaded_error' },
    });
    expectConforms('ErrorResponse', out.at(-1));
    expect(err.upstreamError).toBe(true);
    // The error ends the stream: nothing the provider sends after it is relayed, and no [DONE].
    expect(err.done).toBe(true);
    expect(err.feed('event: message_stop\ndata: {"type":"message_stop"}\n\n')).toBe('');
    expect(err.end()).toBe('');
    expect(out.map((c) => c.choices?.[0]?.delta?.content ?? '').join('')).toBe('Hello');
    const relay = new SseRelay(true);
    relay.feed(raw);
    expect(relay.upstreamError).toBe(true);
    expect(relay.finished).toBe(false);
  });

  it("the OpenAI SDK's stream helper reads the translated stream", async () => {
    const out = feedSplit(make(), fixture('anthropic/stream-tool-use.txt'), randomCuts(5000, 9));
    const server = await serveSse(out + 'data: [DONE]\n\n');
    try {
      const client = new OpenAI({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
      const stream = client.chat.completions.stream({
        model: MODEL,
        messages: [{ role: 'user', content: 'What is the weather like in San Francisco?' }],
        stream_options: { include_usage: true },
      });
      const final = await stream.finalChatCompletion();
      const choice = final.choices[0];
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content).toBe("Okay, let's check the weather for San Francisco, CA:");
      expect(choice.message.tool_calls).toHaveLength(1);
      const call = choice.message.tool_calls![0] as any;
      expect(call.id).toBe('toolu_01T1x1fJ34qAmk2tNTrN7Up6');
      expect(call.function.name).toBe('get_weather');
      expect(JSON.parse(call.function.arguments)).toEqual({
        location: 'San Francisco, CA',
        unit: 'fahrenheit',
      });
      expect(final.usage).toMatchObject({ prompt_tokens: 472, completion_tokens: 89, total_tokens: 561 });
    } finally {
      await server.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------------
describe('Responses API → Anthropic Messages', () => {
  const body = json('openai/responses-request.json');

  it('translates the request: instructions, items, tool calls and outputs, images, tools', () => {
    const out = responsesRequestToMessages(body, OPTS);
    expect(out).toMatchObject({
      model: 'claude-opus-4-6',
      max_tokens: 512,
      system: 'You are a helpful assistant.',
      temperature: 0.7,
      stream: true,
    });
    for (const k of ['store', 'max_output_tokens', 'instructions', 'input'])
      expect(out).not.toHaveProperty(k);
    expect(out.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: "What's the weather like in Paris today?" }] },
      {
        role: 'assistant',
        content: [
          {
            type: 'tool_use',
            id: 'call_12345xyz',
            name: 'get_weather',
            input: { location: 'Paris, France' },
          },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_12345xyz', content: '15°C' },
          { type: 'text', text: 'And what is in this image?' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo...' } },
        ],
      },
    ]);
    expect(out.tools).toEqual([
      {
        name: 'get_weather',
        description: 'Get current temperature for a given location.',
        input_schema: body.tools[0].parameters,
      },
    ]);
    expect(responsesRequestToMessages({ model: 'm', input: 'Hello' }, OPTS).messages).toEqual([
      { role: 'user', content: 'Hello' },
    ]);
  });

  it('refuses stored state, built-in tools and formats it cannot translate, naming the field', () => {
    const base = { model: 'm', input: 'hi' };
    const refused: [Record<string, unknown>, string][] = [
      [{ previous_response_id: 'resp_1' }, 'previous_response_id'],
      [{ conversation: 'conv_1' }, 'conversation'],
      [{ background: true }, 'background'],
      [{ prompt: { id: 'pmpt_1' } }, 'prompt'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ tools: [{ type: 'file_search', vector_store_ids: ['v'] }] }, 'tools[0].type'],
      [{ tools: [{ type: 'code_interpreter' }] }, 'tools[0].type'],
      [{ tools: [{ type: 'mcp', server_label: 'x' }] }, 'tools[0].type'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
      [
        { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] },
        'input[0].content[0].type',
      ],
      [
        { input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1' }] }] },
        'input[0].content[0].file_id',
      ],
    ];
    for (const [patch, param] of refused)
      expectDomainError(() => responsesRequestToMessages({ ...base, ...patch }, OPTS), param);
    // What Codex sends toward an Anthropic provider: dropped and named, not refused.
    const dropped = new Dropped();
    const out = responsesRequestToMessages(
      {
        ...base,
        include: ['reasoning.encrypted_content'],
        client_metadata: { session: 'x' },
        store: false,
        prompt_cache_key: 'k',
        truncation: 'auto',
        reasoning: { effort: 'high', summary: 'auto' },
        text: { verbosity: 'low' },
      },
      { ...OPTS, dropped },
    );
    expect(dropped.list).toEqual([
      'include',
      'client_metadata',
      'store',
      'prompt_cache_key',
      'truncation',
      'text.verbosity',
      'reasoning',
    ]);
    expect(Object.keys(out).sort()).toEqual(['max_tokens', 'messages', 'model']);
  });

  it('the answer as a response object: output items, status, usage', () => {
    const request = { model: MODEL, instructions: 'Be brief.', max_output_tokens: 100 };
    const r = messagesAnswerToResponse(json('anthropic/message-tool-use.json'), {
      model: MODEL,
      createdAt: 5,
      request,
    });
    expectConforms('Response', r);
    expect(r).toMatchObject({
      id: 'resp_01Aq9w938a90dw8q',
      status: 'completed',
      instructions: 'Be brief.',
      max_output_tokens: 100,
    });
    expect(r.output).toEqual([
      {
        id: 'msg_01Aq9w938a90dw8q_0',
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [
          { type: 'output_text', text: "I'll check the current weather.", annotations: [], logprobs: [] },
        ],
      },
      {
        id: 'fc_01Aq9w938a90dw8q_1',
        type: 'function_call',
        status: 'completed',
        call_id: 'toolu_01A09q90qw90lq917835lq9',
        name: 'get_weather',
        arguments: '{"location":"San Francisco, CA","unit":"celsius"}',
      },
    ]);
    const cached = messagesAnswerToResponse(json('anthropic/message-text-cache.json'), {
      model: MODEL,
      createdAt: 5,
    });
    expectConforms('Response', cached);
    expect(cached.usage).toMatchObject({
      input_tokens: 6197,
      input_tokens_details: { cached_tokens: 2051, cache_write_tokens: 2051 },
      output_tokens: 503,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 6700,
    });
    expect(responsesUsage(cached.usage)).toMatchObject({
      input: 6197,
      cacheRead: 2051,
      cacheWrite: 2051,
      output: 503,
    });
    const capped = messagesAnswerToResponse(
      { ...json('anthropic/message-tool-use.json'), stop_reason: 'max_tokens' },
      { model: MODEL },
    );
    expect(capped).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
    });
  });

  it('the stream as Responses events: split anywhere, sequence numbers, schemas, the recorded event order', () => {
    const make = () => new MessagesToResponsesStream({ model: MODEL, createdAt: 5 });
    const out = expectSplitInvariant(make, fixture('anthropic/stream-tool-use.txt'));
    const events = sseEvents(out);
    const data = events.map((e) => JSON.parse(e.data));
    events.forEach((e, i) => {
      expect(e.event).toBe(data[i].type);
      expect(data[i].sequence_number).toBe(i);
      const schema = RESPONSES_EVENT_SCHEMAS[e.event!];
      if (schema) expectConforms(schema, data[i]);
    });
    expect(data.map((d) => d.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...Array(13).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      ...Array(8).fill('response.function_call_arguments.delta'),
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    // The function-call part follows the order OpenAI itself streamed (recorded).
    const recorded = sseEvents(fixture('openai/responses-stream-tool-call.txt')).map((e) => e.event);
    const dedupe = (types: (string | undefined)[]) => types.filter((t, i) => t !== types[i - 1]);
    expect(dedupe(data.slice(20).map((d) => d.type))).toEqual(dedupe(recorded.slice(2)));
    const completed = data.at(-1)!.response;
    expect(completed.output[1]).toMatchObject({
      type: 'function_call',
      arguments: '{"location": "San Francisco, CA", "unit": "fahrenheit"}',
    });
    expect(completed.usage).toMatchObject({ input_tokens: 472, output_tokens: 89, total_tokens: 561 });
    expect(out).not.toContain('"usage":null');
  });

  it("the OpenAI SDK's Responses stream helper reads the translated stream", async () => {
    const out = feedSplit(
      () => new MessagesToResponsesStream({ model: MODEL }),
      fixture('anthropic/stream-tool-use.txt'),
      every(7, 6000),
    );
    const server = await serveSse(out);
    try {
      const client = new OpenAI({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
      const final = await client.responses.stream({ model: MODEL, input: 'Weather in SF?' }).finalResponse();
      expect(final.status).toBe('completed');
      expect(final.output_text).toBe("Okay, let's check the weather for San Francisco, CA:");
      const call = final.output.find((o) => o.type === 'function_call') as any;
      expect(call.call_id).toBe('toolu_01T1x1fJ34qAmk2tNTrN7Up6');
      expect(JSON.parse(call.arguments)).toEqual({ location: 'San Francisco, CA', unit: 'fahrenheit' });
      expect(final.usage).toMatchObject({ input_tokens: 472, output_tokens: 89 });
    } finally {
      await server.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------------
describe('Anthropic Messages → chat completions (a Messages client on an OpenAI provider)', () => {
  const CHAT_OPTS = { model: 'gpt-4o', maxTokens: 256, capField: 'max_completion_tokens' as const };

  it('translates the request field by field', () => {
    const body = json('anthropic/request-conversation.json');
    const out = messagesRequestToChat(body, CHAT_OPTS);
    expect(out).toMatchObject({
      model: 'gpt-4o',
      max_completion_tokens: 256,
      stop: ['\n\nHuman:'],
      temperature: 0.7,
      top_p: 0.7,
    });
    expect(out).not.toHaveProperty('metadata');
    expect(JSON.stringify(out)).not.toContain('13803d75');
    expect(out.messages).toEqual([
      { role: 'system', content: "Today's date is 2024-06-01." },
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/4AAQSkZJRg...' } },
          {
            type: 'image_url',
            image_url: {
              url: 'https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg',
            },
          },
          { type: 'text', text: "What's the weather in San Francisco?" },
        ],
      },
      {
        role: 'assistant',
        content: "I'll check the current weather.",
        tool_calls: [
          {
            id: 'toolu_01A09q90qw90lq917835lq9',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"location":"San Francisco, CA","unit":"celsius"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_01A09q90qw90lq917835lq9', content: '15 degrees' },
    ]);
    expect(out.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Get the current weather in a given location',
          parameters: body.tools[0].input_schema,
        },
      },
    ]);
    const streamed = messagesRequestToChat(json('anthropic/request-tool-use.json'), {
      ...CHAT_OPTS,
      capField: 'max_tokens',
    });
    expect(streamed).toMatchObject({
      max_tokens: 256,
      tool_choice: 'required',
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(streamed).not.toHaveProperty('max_completion_tokens');
    const tc = (tool_choice: unknown) =>
      messagesRequestToChat({ ...json('anthropic/request-tool-use.json'), tool_choice }, CHAT_OPTS);
    expect(tc({ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true })).toMatchObject({
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    expect(tc({ type: 'auto' }).tool_choice).toBe('auto');
    expect(tc({ type: 'none' }).tool_choice).toBe('none');
  });

  it('refuses what it cannot translate, naming the field', () => {
    const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    const refused: [Record<string, unknown>, string][] = [
      [{ mcp_servers: [] }, 'mcp_servers'],
      [{ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools[0].type'],
      [
        { messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] },
        'messages[0].content[0].type',
      ],
      [
        {
          messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }],
        },
        'messages[0].content[0].source.type',
      ],
      [
        {
          messages: [
            {
              role: 'user',
              content: [
                { type: 'tool_result', tool_use_id: 't', content: [{ type: 'search_result', source: 's' }] },
              ],
            },
          ],
        },
        'messages[0].content[0].content[0].type',
      ],
      [
        {
          messages: [
            {
              role: 'user',
              content: [
                {
                  type: 'tool_result',
                  tool_use_id: 't',
                  content: [{ type: 'document', source: { type: 'url', url: 'https://x.test/a.pdf' } }],
                },
              ],
            },
          ],
        },
        'messages[0].content[0].content[0].source.type',
      ],
      [{ system: [{ type: 'image', source: {} }] }, 'system[0].type'],
    ];
    for (const [patch, param] of refused)
      expectDomainError(() => messagesRequestToChat({ ...base, ...patch }, CHAT_OPTS), param);
    // An image in a tool result is taken (moved to the next user message), but not one without a source.
    const badImage = [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: {} }] }];
    expectDomainError(
      () => messagesRequestToChat({ ...base, messages: [{ role: 'user', content: badImage }] }, CHAT_OPTS),
      'messages[0].content[0].content[0].source',
      'invalid_value',
    );
    // What Claude Code sends toward an OpenAI provider (a model that does not reason): dropped and named.
    const dropped = new Dropped();
    const out = messagesRequestToChat(
      {
        ...base,
        thinking: { type: 'enabled', budget_tokens: 2000 },
        output_config: { effort: 'high' },
        top_k: 5,
        metadata: { user_id: 'x' },
        context_management: { edits: [] },
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
        ],
      },
      { ...CHAT_OPTS, dropped },
    );
    expect(dropped.list).toEqual([
      'top_k',
      'metadata',
      'context_management',
      'cache_control',
      'thinking',
      'output_config',
    ]);
    expect(Object.keys(out).sort()).toEqual(['max_completion_tokens', 'messages', 'model']);
    expect(messagesRequestToChat({ ...base, thinking: { type: 'disabled' } }, CHAT_OPTS)).not.toHaveProperty(
      'thinking',
    );
  });

  it('the recorded chat answers as Anthropic messages', () => {
    const text = chatAnswerToMessages(json('openai/chat-completion-text.json'), { model: 'claude-x' });
    expect(text).toEqual({
      id: 'msg_BcO1gPfCFAf86O5CyQ9CTeEyoc8KG',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      content: [
        {
          type: 'text',
          text: "Why don't skeletons fight each other? They don't have the guts.",
          citations: null,
        },
      ],
      stop_reason: 'end_turn',
      stop_sequence: null,
      // every field Anthropic's SDK types declare (docs/reference.md §21 "Answers")
      container: null,
      diagnostics: null,
      stop_details: null,
      usage: {
        input_tokens: 23,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens: 14,
        output_tokens_details: { thinking_tokens: 0 },
        cache_creation: null,
        inference_geo: null,
        server_tool_use: null,
        service_tier: null,
        speed: null,
      },
    });
    const tool = chatAnswerToMessages(json('openai/chat-completion-tool-call.json'), { model: 'claude-x' });
    expect(tool.stop_reason).toBe('tool_use');
    expect(tool.content).toEqual([
      {
        type: 'tool_use',
        id: 'call_qOfTGgDrItLORNfC6VwUbyLL',
        name: 'get_weather',
        input: { location: 'Shanghai' },
        caller: { type: 'direct' },
      },
    ]);
    const cached = chatAnswerToMessages(
      {
        ...json('openai/chat-completion-text.json'),
        usage: {
          prompt_tokens: 3000,
          completion_tokens: 50,
          prompt_tokens_details: { cached_tokens: 1000, cache_write_tokens: 1500 },
        },
      },
      { model: 'claude-x' },
    );
    expect(cached.usage).toMatchObject({
      input_tokens: 500,
      cache_creation_input_tokens: 1500,
      cache_read_input_tokens: 1000,
      output_tokens: 50,
    });
    expect(messagesUsage(cached.usage)).toMatchObject({
      input: 3000,
      cacheRead: 1000,
      cacheWrite: 1500,
      output: 50,
    });
  });

  it("the chat streams as Anthropic events, split anywhere; the Anthropic SDK's accumulator reads them", async () => {
    const make = () => new ChatToMessagesStream({ model: 'claude-x' });
    const toolOut = expectSplitInvariant(make, fixture('openai/chat-stream-tool-call.txt'));
    const events = sseEvents(toolOut);
    for (const e of events) expect(JSON.parse(e.data).type).toBe(e.event);
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start',
      ...Array(7).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(JSON.parse(events.at(-2)!.data)).toEqual({
      type: 'message_delta',
      delta: { container: null, stop_details: null, stop_reason: 'tool_use', stop_sequence: null },
      usage: {
        input_tokens: 27,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 64,
        output_tokens: 14,
        output_tokens_details: { thinking_tokens: 0 },
        cache_creation: null,
        inference_geo: null,
        server_tool_use: null,
        service_tier: null,
        speed: null,
      },
    });
    const textOut = expectSplitInvariant(make, fixture('openai/chat-stream-text.txt'));

    for (const [out, check] of [
      [
        toolOut,
        (m: Anthropic.Message) => {
          expect(m.stop_reason).toBe('tool_use');
          expect(m.content).toEqual([
            {
              type: 'tool_use',
              id: 'call_DdmO9pD3xa9XTPNJ32zg2hcA',
              name: 'get_weather',
              input: { location: 'Paris, France' },
              caller: { type: 'direct' },
            },
          ]);
          expect(m.usage).toMatchObject({
            input_tokens: 27,
            cache_read_input_tokens: 64,
            cache_creation_input_tokens: 0,
            output_tokens: 14,
          });
        },
      ],
      [
        textOut,
        (m: Anthropic.Message) => {
          expect(m.id).toBe('msg_BcO1hnPjEvZV3bFT9Qy3ioq7rq5Xj');
          expect(m.stop_reason).toBe('end_turn');
          expect(m.content).toEqual([
            {
              type: 'text',
              text: 'Sure, here we go:\n\n1...\n\n2...\n\n3...\n\n4...\n\n5.',
              citations: null,
            },
          ]);
        },
      ],
    ] as const) {
      const server = await serveSse(out);
      try {
        const client = new Anthropic({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
        const message = await client.messages
          .stream({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
          .finalMessage();
        check(message);
        expect(server.requests[0].url).toBe('/v1/messages');
      } finally {
        await server.close();
      }
    }
  });

  it('an error chunk becomes an Anthropic error event; end() closes a stream cut before [DONE]', () => {
    const t = new ChatToMessagesStream({ model: 'claude-x' });
    const out = t.feed(
      'data: {"error":{"message":"upstream failed","type":"api_error","param":null,"code":null}}\n\n',
    );
    expect(out).toBe(
      'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"upstream failed"}}\n\n',
    );
    expect(t.upstreamError).toBe(true);

    const cut = new ChatToMessagesStream({ model: 'claude-x' });
    const sse = fixture('openai/chat-stream-text.txt');
    cut.feed(sse.slice(0, sse.indexOf('"finish_reason":"stop"') - 300));
    expect(cut.done).toBe(false);
    const tail = sseEvents(cut.end());
    expect(tail.map((e) => e.event)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(cut.done).toBe(true);
    expect(cut.end()).toBe('');
  });
});

// ---------------------------------------------------------------------------------------------------
describe('round trips', () => {
  it('Anthropic stream → chat chunks → Anthropic stream keeps the answer (read by the Anthropic SDK)', async () => {
    const chat = feedSplit(
      () => new MessagesToChatStream({ model: 'gpt', includeUsage: true, created: 1 }),
      fixture('anthropic/stream-tool-use.txt'),
      [],
    );
    const back = feedSplit(
      () => new ChatToMessagesStream({ model: 'claude-x' }),
      chat + 'data: [DONE]\n\n',
      randomCuts(9000, 5),
    );
    const server = await serveSse(back);
    try {
      const client = new Anthropic({ baseURL: server.url, apiKey: 'x', maxRetries: 0 });
      const m = await client.messages
        .stream({ model: 'claude-x', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
        .finalMessage();
      expect(m.id).toBe('msg_014p7gG3wDgGV9EUtLvnow3U');
      expect(m.stop_reason).toBe('tool_use');
      expect(m.content).toEqual([
        { type: 'text', text: "Okay, let's check the weather for San Francisco, CA:", citations: null },
        {
          type: 'tool_use',
          id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6',
          name: 'get_weather',
          input: { location: 'San Francisco, CA', unit: 'fahrenheit' },
          caller: { type: 'direct' },
        },
      ]);
      expect(m.usage).toMatchObject({ input_tokens: 472, output_tokens: 89 });
    } finally {
      await server.close();
    }
  });

  it('requests: Anthropic → chat → Anthropic, and answers: Anthropic → chat → Anthropic', () => {
    const original = json('anthropic/request-conversation.json');
    const chat = messagesRequestToChat(original, {
      model: 'gpt-4o',
      maxTokens: 1024,
      capField: 'max_tokens',
    });
    const back = chatRequestToMessages(chat, { model: 'claude-opus-4-6', maxTokens: 1024 });
    expect(back.system).toBe("Today's date is 2024-06-01.");
    expect(back.messages).toEqual([original.messages[0], original.messages[1], original.messages[2]]);
    expect(back.tools).toEqual(original.tools);
    expect(back.stop_sequences).toEqual(original.stop_sequences);

    const answer = json('anthropic/message-tool-use.json');
    const again = chatAnswerToMessages(messagesAnswerToChat(answer, { model: 'gpt' }), {
      model: answer.model,
    });
    expect(again).toMatchObject({
      id: answer.id,
      content: answer.content,
      stop_reason: 'tool_use',
      role: 'assistant',
    });
  });
});

describe('the field table (docs/reference.md §21)', () => {
  it('docs/translation.md lists exactly what FIELD_POLICY decides, field by field', () => {
    const doc = readFileSync(new URL('../docs/translation.md', import.meta.url), 'utf8');
    const table = doc.slice(
      doc.indexOf('<!-- field-policy:start -->'),
      doc.indexOf('<!-- field-policy:end -->'),
    );
    const rows = [
      ...table.matchAll(/^\|\s*(chat|responses|messages)\s*\|\s*`([a-z_]+)`\s*\|\s*(\w+)\s*\|/gm),
    ].map((m) => `${m[1]} ${m[2]} ${m[3]}`);
    const code = Object.entries(FIELD_POLICY).flatMap(([format, fields]) =>
      Object.entries(fields).map(([field, rule]) => `${format} ${field} ${rule.action}`),
    );
    expect(rows.sort()).toEqual(code.sort());
  });
});
