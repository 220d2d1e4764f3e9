import { readFileSync } from 'node:fs';
import { DomainError } from '../src/shared/errors.js';
import { ERROR_KINDS } from '../src/shared/error-codes.js';
import { blockedReply } from '../src/modules/proxy/blocked-reply.js';
import { anthropicHeaders, DEFAULT_ANTHROPIC_VERSION } from '../src/modules/proxy/anthropic-client.js';
import {
  countMessagesPrompt,
  messagesFormat,
  MessagesRelay,
  parseMessagesRequest,
} from '../src/modules/proxy/messages-format.js';
import { refusalAnswer } from '../src/modules/proxy/upstream-refusal.js';
import { countText } from '../src/modules/proxy/token-counter.js';
import { splitUsage } from '../src/shared/usage-buckets.js';
import { ANTHROPIC_ERROR_TYPES, isMessagesUrl } from '../rest-compat/anthropic-errors.js';
import { shapedErrorBody } from '../rest-compat/errors.js';
import {
  ANTHROPIC_STREAM_BASIC,
  ANTHROPIC_STREAM_ERROR_EVENT,
  ANTHROPIC_STREAM_TOOL,
} from './helpers/anthropic-fixture.js';

/**
 * The Messages wire format on its own (docs/reference.md §15): validation, the body sent upstream, the
 * SSE relay fed Anthropic's recorded streams cut at arbitrary points, blocked replies, refusals and the
 * Anthropic error mapper.
 */

/** SSE events as [event name, parsed data]. */
function events(sse: string): [string, any][] {
  return sse
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const name = lines.find((l) => l.startsWith('event: '))!.slice('event: '.length);
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice('data: '.length))
        .join('\n');
      return [name, JSON.parse(data)];
    });
}

/** Feeds `text` to a new relay in pieces cut at random points; returns the relay and what it wrote. */
function relayed(text: string, seed: number): { relay: MessagesRelay; out: string } {
  const relay = messagesFormat.relay(parseMessagesRequest(base)) as MessagesRelay;
  let out = '';
  let rnd = seed;
  for (let i = 0; i < text.length;) {
    rnd = (rnd * 1103515245 + 12345) % 2 ** 31;
    const n = 1 + (rnd % 37);
    out += relay.feed(text.slice(i, i + n));
    i += n;
  }
  return { relay, out };
}

const base = { model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Hello' }] };
const charged = { cost: '0.000123', costDetails: { request: '0.0001', prompt: '0.000023' }, balance: '0.5' };

describe('MessagesRelay: Anthropic streams relayed as they arrive', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])(
    'the streaming guide’s example, split at random points (seed %i): every event but the last message_delta and message_stop passes as it came',
    (seed) => {
      const { relay, out } = relayed(ANTHROPIC_STREAM_BASIC, seed);
      expect(relay.done).toBe(true);
      expect(relay.finished).toBe(true);
      expect(relay.upstreamError).toBe(false);
      const upstream = events(ANTHROPIC_STREAM_BASIC);
      expect(events(out)).toEqual(upstream.slice(0, -2));
      // The input side from message_start, the output from message_delta (cumulative, not added).
      expect(relay.usageTokens()).toEqual({
        input: 25,
        output: 15,
        cacheRead: undefined,
        cacheWrite: undefined,
        reasoning: undefined,
      });
      expect(relay.producedTokens()).toBe(countText('Hello!'));
      expect(relay.responseId()).toBe('msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY');

      // After settlement: the held message_delta with the cost, then message_stop.
      const req = parseMessagesRequest({ ...base, stream: true });
      const usage = splitUsage(25, 15, {});
      const tail = events(messagesFormat.streamEnd(req, relay, usage, charged));
      expect(tail).toEqual([
        [
          'message_delta',
          {
            type: 'message_delta',
            delta: { stop_reason: 'end_turn', stop_sequence: null },
            usage: { output_tokens: 15, cost: '0.000123', cost_details: charged.costDetails, balance: '0.5' },
          },
        ],
        ['message_stop', { type: 'message_stop' }],
      ]);
    },
  );

  it('a current-version stream: the cache fields of message_start, the latest non-null value of each field, tool input counted', () => {
    const { relay, out } = relayed(ANTHROPIC_STREAM_TOOL, 11);
    expect(events(out).map(([e]) => e)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'ping',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
    ]);
    expect(relay.usage).toMatchObject({
      input_tokens: 849,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 47,
      service_tier: 'standard',
    });
    expect(relay.usageTokens()).toMatchObject({ input: 849, output: 47, cacheRead: 0, cacheWrite: 0 });
    const json = '{"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]}';
    expect(relay.producedTokens()).toBe(countText(`json${json}`));
    const [[, delta]] = events(
      messagesFormat.streamEnd(parseMessagesRequest(base), relay, splitUsage(849, 47, {}), charged),
    );
    expect(delta.delta.stop_reason).toBe('tool_use');
    expect(delta.usage).toEqual({
      input_tokens: 849,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 47,
      cost: '0.000123',
      cost_details: charged.costDetails,
      balance: '0.5',
    });
  });

  it('a later message_delta overrides the usage: input fields it repeats win over message_start’s', () => {
    const start =
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":null,"output_tokens":1}}}\n\n';
    const d1 =
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":null},"usage":{"output_tokens":5}}\n\n';
    const d2 =
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":12,"cache_read_input_tokens":300,"cache_creation_input_tokens":null,"output_tokens":9}}\n\n';
    const relay = new MessagesRelay();
    const out = relay.feed(start + d1) + relay.feed(d2);
    // The first message_delta was not the last: it went out when the second came.
    expect(events(out).map(([e]) => e)).toEqual(['message_start', 'message_delta']);
    expect(relay.finished).toBe(true);
    expect(relay.done).toBe(false);
    expect(relay.usageTokens()).toEqual({
      input: 312,
      output: 9,
      cacheRead: 300,
      cacheWrite: undefined,
      reasoning: undefined,
    });
    // The stream ended without message_stop: streamEnd supplies it.
    const tail = events(
      messagesFormat.streamEnd(
        parseMessagesRequest(base),
        relay,
        splitUsage(312, 9, { cacheRead: 300 }),
        charged,
      ),
    );
    expect(tail.map(([e]) => e)).toEqual(['message_delta', 'message_stop']);
  });

  it('an Anthropic error event is relayed and marks the stream failed; the proxy’s own error event is Anthropic’s shape', () => {
    const cut = ANTHROPIC_STREAM_BASIC.slice(0, ANTHROPIC_STREAM_BASIC.indexOf('event: content_block_stop'));
    const { relay, out } = relayed(cut + ANTHROPIC_STREAM_ERROR_EVENT, 3);
    expect(relay.upstreamError).toBe(true);
    expect(relay.done).toBe(false);
    expect(relay.finished).toBe(false);
    expect(events(out).at(-1)).toEqual([
      'error',
      { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    ]);
    expect(
      events(messagesFormat.streamError(relay, 'The model provider failed mid-stream.', 'upstream_error')),
    ).toEqual([
      [
        'error',
        { type: 'error', error: { type: 'api_error', message: 'The model provider failed mid-stream.' } },
      ],
    ]);
  });

  it('a stream without usage: the final message_delta reports the metered counts', () => {
    const noUsage = ANTHROPIC_STREAM_BASIC.replace(
      ', "usage": {"input_tokens": 25, "output_tokens": 1}',
      '',
    ).replace(', "usage": {"output_tokens": 15}', '');
    const { relay } = relayed(noUsage, 5);
    expect(relay.usageTokens()).toBeNull();
    const usage = splitUsage(30, relay.producedTokens(), {});
    const [[, delta]] = events(messagesFormat.streamEnd(parseMessagesRequest(base), relay, usage, charged));
    expect(delta.usage).toMatchObject({
      input_tokens: 30,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: countText('Hello!'),
      cost: '0.000123',
    });
  });
});

describe('Messages requests', () => {
  const bad = (body: Record<string, unknown>, param: string) => {
    let err: unknown;
    try {
      parseMessagesRequest(body);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('invalid_request');
    expect((err as DomainError).param).toBe(param);
    expect((err as DomainError).message).toContain(param);
  };

  it('validates as Anthropic does, each 400 naming the field', () => {
    bad({ ...base, model: undefined }, 'model');
    bad({ ...base, max_tokens: undefined }, 'max_tokens');
    bad({ ...base, max_tokens: 0 }, 'max_tokens');
    bad({ ...base, max_tokens: 1.5 }, 'max_tokens');
    bad({ ...base, messages: undefined }, 'messages');
    bad({ ...base, messages: [] }, 'messages');
    bad({ ...base, messages: 'hi' }, 'messages');
    bad({ ...base, messages: [{ role: 'tool', content: 'x' }] }, 'messages.0.role');
    bad({ ...base, messages: [{ role: 'user', content: 'a' }, { role: 'assistant' }] }, 'messages.1.content');
    bad({ ...base, messages: [{ role: 'user', content: [{ text: 'no type' }] }] }, 'messages.0.content.0');
    bad(
      { ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] },
      'messages.0.content.0.text',
    );
    bad({ ...base, system: 7 }, 'system');
    bad({ ...base, stream: 'yes' }, 'stream');
    bad({ ...base, metadata: { user_id: 5 } }, 'metadata.user_id');
    bad({ ...base, tools: {} }, 'tools');
  });

  it('takes max_tokens as the client’s cap and counts system, messages and tools', () => {
    const body = {
      ...base,
      system: [{ type: 'text', text: 'You are terse.' }],
      messages: [
        { role: 'user', content: 'What is the weather?' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 't1', name: 'weather', input: { city: 'Paris' } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'Sunny, 21 C' }] },
      ],
      tools: [{ name: 'weather', input_schema: { type: 'object' } }],
      stream: true,
    };
    const req = parseMessagesRequest(body);
    expect(req).toMatchObject({ model: 'claude-test', stream: true, n: 1, clientMaxTokens: 100 });
    const expected =
      3 +
      (3 + countText('You are terse.')) +
      (3 + countText('What is the weather?')) +
      (3 + countText('weather') + countText('{"city":"Paris"}')) +
      (3 + countText('Sunny, 21 C')) +
      countText(JSON.stringify(body.tools));
    expect(req.promptEstimate).toBe(expected);
    expect(countMessagesPrompt(body)).toBe(expected);
  });

  it('counts an image whose size cannot be read at the bound of the provider kind that bills it (never below)', () => {
    const img = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
    const body = { ...base, messages: [{ role: 'user', content: [img] }] };
    // Anthropic bills at most a 1,568 x 1,568 image (its resize), (w x h) / 750 tokens.
    expect(countMessagesPrompt(body)).toBeGreaterThanOrEqual(Math.ceil((1568 * 1568) / 750));
    // Translated to an OpenAI provider: chat's bound for an unknown model.
    expect(countMessagesPrompt(body, 'OPENAI')).toBeGreaterThanOrEqual(48_169);
  });

  it('sends the hold’s cap in max_tokens, without metadata.user_id or a body user', () => {
    const req = parseMessagesRequest({
      ...base,
      metadata: { user_id: 'alice' },
      user: 'alice',
      temperature: 0.5,
    });
    expect(
      JSON.parse(
        messagesFormat.upstreamBody(req, 42, {
          capParameter: 'MAX_COMPLETION_TOKENS',
          model: 'claude-upstream-1',
        }),
      ),
    ).toEqual({
      model: 'claude-upstream-1',
      max_tokens: 42,
      messages: base.messages,
      temperature: 0.5,
    });
    const kept = parseMessagesRequest({ ...base, metadata: { user_id: 'alice', other: 1 } });
    expect(
      JSON.parse(messagesFormat.upstreamBody(kept, 7, { capParameter: 'MAX_TOKENS', model: 'claude-test' }))
        .metadata,
    ).toEqual({ other: 1 });
  });

  it('reads whole answers: usage, finished by a stop_reason, produced tokens, cost added', () => {
    const answer: Record<string, any> = {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [
        { type: 'thinking', thinking: 'Let me see.', signature: 'sig' },
        { type: 'text', text: 'Sunny.' },
      ],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: 20,
        cache_read_input_tokens: 1000,
        cache_creation_input_tokens: 500,
        output_tokens: 30,
        output_tokens_details: { thinking_tokens: 12 },
      },
    };
    expect(messagesFormat.jsonUsage(answer)).toEqual({
      input: 1520,
      output: 30,
      cacheRead: 1000,
      cacheWrite: 500,
      reasoning: 12,
    });
    expect(messagesFormat.jsonFinished(answer)).toBe(true);
    expect(messagesFormat.jsonFinished({ ...answer, stop_reason: null })).toBe(false);
    expect(messagesFormat.malformed!(answer)).toBeNull();
    expect(
      messagesFormat.malformed!({ type: 'error', error: { type: 'api_error', message: 'x' } }),
    ).not.toBeNull();
    expect(messagesFormat.countJson(answer)).toBe(countText('Let me see.Sunny.'));
    messagesFormat.addCost(answer, splitUsage(1520, 30, {}), charged);
    expect(answer.usage).toMatchObject({
      input_tokens: 20,
      cost: '0.000123',
      cost_details: charged.costDetails,
    });
    expect(answer.usage.balance).toBeUndefined();
  });
});

describe('Messages blocked replies', () => {
  const reply = blockedReply({
    model: 'claude-test',
    reason: 'insufficient_balance',
    url: 'https://pay.example/top-up',
    text: 'Top up here: https://pay.example/top-up',
  });

  it('JSON: an ordinary message holding the link, with the paywall field and zero usage', () => {
    const m = messagesFormat.blockedJson(reply);
    expect(m).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [{ type: 'text', text: reply.text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0, cost: '0' },
      paywall: { reason: 'insufficient_balance', url: 'https://pay.example/top-up' },
    });
    expect(m.id).toMatch(/^msg_/);
  });

  it('JSON and streamed: every field of a message Anthropic sends is there (null where a blocked reply has none)', () => {
    // A message as Anthropic's API answers it (recorded): the fields its SDK's types declare.
    const real = JSON.parse(
      readFileSync(new URL('./fixtures/anthropic/message-text-cache.json', import.meta.url), 'utf8'),
    );
    const m = messagesFormat.blockedJson(reply) as Record<string, any>;
    const start = events(messagesFormat.blockedStream(reply, parseMessagesRequest(base)))[0][1].message;
    for (const message of [m, start]) {
      expect(Object.keys(message)).toEqual(expect.arrayContaining(Object.keys(real)));
      expect(Object.keys(message.usage)).toEqual(expect.arrayContaining(Object.keys(real.usage)));
    }
    expect(m).toMatchObject({ container: null, stop_details: null });
    expect(m.usage).toMatchObject({ cache_creation: null, server_tool_use: null, service_tier: null });
  });

  it('streamed: message_start (with the paywall field) … message_stop, as Anthropic orders them', () => {
    const ev = events(messagesFormat.blockedStream(reply, parseMessagesRequest(base)));
    expect(ev.map(([e, d]) => [e, d.type])).toEqual(
      [
        'message_start',
        'content_block_start',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ].map((e) => [e, e]),
    );
    expect(ev[0][1].message).toMatchObject({ content: [], stop_reason: null, paywall: reply.paywall });
    expect(ev[2][1].delta).toEqual({ type: 'text_delta', text: reply.text });
    expect(ev[4][1].delta).toEqual({
      container: null,
      stop_details: null,
      stop_reason: 'end_turn',
      stop_sequence: null,
    });
  });
});

describe('Anthropic errors and headers', () => {
  it('a provider 4xx keeps Anthropic’s body; another shape gets Anthropic’s, typed by the status', () => {
    const own = { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long' } };
    expect(refusalAnswer(400, JSON.stringify(own), null, messagesFormat.refusalBody).body).toEqual(own);
    expect(refusalAnswer(429, '<html>busy</html>', '7', messagesFormat.refusalBody)).toEqual({
      status: 429,
      headers: { 'retry-after': '7' },
      body: {
        type: 'error',
        error: { type: 'rate_limit_error', message: 'The model provider refused the request (HTTP 429).' },
      },
    });
    const openai = { error: { message: 'bad key', type: 'invalid_request_error', param: null, code: null } };
    expect(refusalAnswer(401, JSON.stringify(openai), null, messagesFormat.refusalBody).body).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: 'bad key' },
    });
    expect(() => refusalAnswer(500, '{}', null, messagesFormat.refusalBody)).toThrow(DomainError);
  });

  it('maps every kind of domain error to Anthropic’s type, keeping its status', () => {
    const expected: Record<number, string[]> = {
      400: ['invalid_request_error'],
      401: ['authentication_error'],
      402: ['billing_error'],
      403: ['permission_error'],
      404: ['not_found_error'],
      409: ['invalid_request_error'],
      413: ['request_too_large'],
      422: ['invalid_request_error'],
      429: ['rate_limit_error'],
      500: ['api_error'],
      502: ['api_error'],
      503: ['api_error', 'overloaded_error'],
    };
    for (const [kind, { status }] of Object.entries(ERROR_KINDS)) {
      const type = ANTHROPIC_ERROR_TYPES[kind as keyof typeof ANTHROPIC_ERROR_TYPES];
      expect(expected[status]).toContain(type);
      const e = new DomainError(kind as any, `failed: ${kind}`);
      expect(shapedErrorBody(e, 'anthropic')).toMatchObject({
        status,
        body: { type: 'error', error: { type, message: `failed: ${kind}` } },
      });
    }
    expect(ANTHROPIC_ERROR_TYPES.unavailable).toBe('overloaded_error');
    expect(ANTHROPIC_ERROR_TYPES.missing_user).toBe('invalid_request_error');
  });

  it('answers Anthropic’s shape on the Messages routes only', () => {
    for (const url of [
      '/v1/messages',
      '/v1/messages/',
      '/v1/messages?beta=true',
      '/v1/messages/count_tokens',
      '/v1/u/alice/messages',
      '/v1/u/alice/messages/count_tokens?x=1',
    ])
      expect(isMessagesUrl(url)).toBe(true);
    for (const url of [
      '/v1/chat/completions',
      '/v1/messagesx',
      '/v1/messages/other',
      '/messages',
      '/v1/u/a/b/messages',
    ])
      expect(isMessagesUrl(url)).toBe(false);
  });

  it('sends the provider’s key, the client’s anthropic-version (default 2023-06-01) and anthropic-beta, nothing else', () => {
    expect(anthropicHeaders('sk-ant-1')).toEqual({
      'x-api-key': 'sk-ant-1',
      'anthropic-version': DEFAULT_ANTHROPIC_VERSION,
    });
    expect(
      anthropicHeaders('sk-ant-1', {
        'anthropic-version': '2023-01-01',
        'anthropic-beta': 'prompt-caching-2024-07-31',
        'x-api-key': 'pw-client-key',
      } as Record<string, string>),
    ).toEqual({
      'x-api-key': 'sk-ant-1',
      'anthropic-version': '2023-01-01',
      'anthropic-beta': 'prompt-caching-2024-07-31',
    });
    // A value that is not a plain header value is not passed on.
    expect(anthropicHeaders('k', { 'anthropic-version': 'a\nb' })['anthropic-version']).toBe(
      DEFAULT_ANTHROPIC_VERSION,
    );
  });
});
