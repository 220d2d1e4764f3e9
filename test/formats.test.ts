import { anthropicClient } from '../src/modules/proxy/anthropic-client.js';
import { anthropicProvider } from '../src/modules/proxy/formats/anthropic-provider.js';
import { chatClient } from '../src/modules/proxy/formats/chat-client.js';
import { Dropped, sortFields } from '../src/modules/proxy/formats/field-policy.js';
import { translateRequest, TranslatedStream } from '../src/modules/proxy/formats/hub.js';
import { messagesClient } from '../src/modules/proxy/formats/messages-client.js';
import type {
  ClientAdapter,
  NeutralAnswer,
  NeutralRequest,
  ProviderAdapter,
  StreamEvent,
} from '../src/modules/proxy/formats/neutral.js';
import { openAiProvider } from '../src/modules/proxy/formats/openai-provider.js';
import { CLIENT_ADAPTERS, PROVIDER_ADAPTERS } from '../src/modules/proxy/formats/registry.js';
import { clientFor } from '../src/modules/proxy/provider-clients.js';
import { openAiCompatibleClient } from '../src/modules/proxy/upstream-client.js';
import { PROVIDER_KINDS } from '../src/modules/providers/provider-client.js';
import { DomainError } from '../src/shared/errors.js';

/**
 * The adapters against the neutral model (docs/translation.md, docs/architecture.md "Adding a provider
 * kind"): what a provider kind's adapter writes, the client format of the same wire reads back unchanged
 * (requests), and what a client format's adapter writes, the provider kind of the same wire reads back
 * (answers, streams). The two wires of today are each a client format and a provider kind.
 */

const out = { capParameter: 'MAX_COMPLETION_TOKENS' as const, reasoning: true };

/** A request written by `provider`, read back by `client` (its fields sorted by the policy first). */
function requestRoundTrip(provider: ProviderAdapter, client: ClientAdapter, req: NeutralRequest) {
  const dropped = new Dropped();
  const body = provider.requestOut(req, { ...out, dropped });
  sortFields(client.format, body, dropped);
  const back = client.requestIn(body, { model: req.model, maxTokens: req.maxTokens, dropped });
  return { body, back, dropped: dropped.list };
}

/** The answer a stream of neutral events tells: parts, stop, usage (what any client reads of it). */
function fold(events: StreamEvent[]): Omit<NeutralAnswer, 'id'> & { id: string | null | undefined } {
  const parts = new Map<number, any>();
  const answer: any = { id: undefined, content: [], stop: undefined, usage: null };
  for (const e of events) {
    if (e.type === 'start') answer.id = e.id;
    else if (e.type === 'part_start') {
      const p =
        e.part.type === 'text'
          ? { type: 'text', text: e.part.text }
          : e.part.type === 'tool_use'
            ? { type: 'tool_use', id: e.part.id, name: e.part.name, args: e.part.args }
            : { type: e.part.type };
      parts.set(e.index, p);
      answer.content.push(p);
    } else if (e.type === 'text_delta') parts.get(e.index).text += e.text;
    else if (e.type === 'tool_delta') parts.get(e.index).args += e.args;
    else if (e.type === 'usage') answer.usage = e.usage;
    else if (e.type === 'stop') answer.stop = e.stop;
  }
  for (const p of answer.content)
    if (p.type === 'tool_use') {
      p.input = JSON.parse(p.args || '{}');
      delete p.args;
    }
  return answer;
}

/** Client encoder → provider decoder: the events a provider of the client's own wire would stream back. */
function streamRoundTrip(
  client: ClientAdapter,
  provider: ProviderAdapter,
  events: StreamEvent[],
): { text: string; back: StreamEvent[] } {
  const encoder = client.streamOut({ model: 'm', body: { stream_options: { include_usage: true } } });
  let text = events.map((e) => encoder.write(e)).join('') + encoder.tail();
  const decoder = provider.streamIn({ jsonSchema: false });
  const back: StreamEvent[] = [];
  // fed a byte at a time: a decoder reads text split anywhere
  for (const ch of text) decoder.feed(ch, (e) => back.push(e));
  decoder.end((e) => back.push(e));
  text = text.trim();
  return { text, back };
}

const usage = { input: 10, cacheRead: 4, cacheWrite: 2, output: 7, thinking: 3 };

const STREAM: StreamEvent[] = [
  { type: 'start', id: 'abc' },
  { type: 'part_start', index: 0, part: { type: 'text', text: '' } },
  { type: 'text_delta', index: 0, text: 'Hel' },
  { type: 'text_delta', index: 0, text: 'lo' },
  { type: 'part_end', index: 0 },
  { type: 'part_start', index: 1, part: { type: 'tool_use', id: 'call_1', name: 'get', args: '' } },
  { type: 'tool_delta', index: 1, args: '{"city":' },
  { type: 'tool_delta', index: 1, args: '"Paris"}' },
  { type: 'part_end', index: 1 },
  { type: 'usage', usage },
  { type: 'stop', stop: 'tool_use' },
  { type: 'finish' },
];

const FOLDED = {
  id: 'abc',
  content: [
    { type: 'text', text: 'Hello' },
    { type: 'tool_use', id: 'call_1', name: 'get', input: { city: 'Paris' } },
  ],
  stop: 'tool_use',
  usage,
};

describe('the OpenAI chat wire (chat client format ↔ OpenAI provider kind)', () => {
  const req: NeutralRequest = {
    model: 'gpt-x',
    system: ['Be brief.'],
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          {
            type: 'image',
            source: { kind: 'base64', mediaType: 'image/png', data: 'AAAA' },
            param: 'messages[1].content[1].image_url.url',
          },
          {
            type: 'image',
            source: { kind: 'url', url: 'https://example.com/a.png' },
            param: 'messages[1].content[2].image_url.url',
          },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool_use', id: 'call_1', name: 'look', input: { at: 'it' } },
        ],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', toolUseId: 'call_1', content: 'a cat', param: 'messages[3]' }],
      },
    ],
    tools: [{ name: 'look', description: 'Looks.', inputSchema: { type: 'object', properties: {} } }],
    toolChoice: { type: 'tool', name: 'look' },
    parallelToolCalls: false,
    maxTokens: 500,
    temperature: 0.5,
    topP: 0.9,
    stop: ['END'],
    reasoning: { effort: 'medium', fields: ['reasoning_effort'] },
    jsonSchema: { type: 'object', properties: { a: { type: 'string' } } },
    stream: true,
  };

  it('a request written for the provider reads back as the same neutral request', () => {
    const { body, back, dropped } = requestRoundTrip(openAiProvider, chatClient, req);
    expect(body.max_completion_tokens).toBe(500);
    expect(body.stream_options).toEqual({ include_usage: true });
    expect(back).toEqual(req);
    // what only the provider's side adds (the usage chunk asked for) is dropped when read as a client's
    expect(dropped).toEqual(['stream_options']);
  });

  it('an answer written as a chat completion reads back as the same neutral answer', () => {
    const answer: NeutralAnswer = {
      id: 'abc',
      content: [
        { type: 'text', text: 'Hi' },
        { type: 'tool_use', id: 'call_1', name: 'look', input: { at: 'it' } },
      ],
      stop: 'tool_use',
      usage,
    };
    const chat = chatClient.answerOut(answer, { model: 'm', body: {}, created: 1 });
    expect(chat.id).toBe('chatcmpl-abc');
    expect(openAiProvider.answerIn(chat, { jsonSchema: false })).toEqual(answer);
    for (const stop of ['end', 'length', 'refusal', null] as const)
      expect(
        openAiProvider.answerIn(chatClient.answerOut({ ...answer, stop }, { model: 'm', body: {} }), {
          jsonSchema: false,
        }).stop,
      ).toBe(stop);
  });

  it('a stream written as chat chunks reads back as the same answer', () => {
    const { text, back } = streamRoundTrip(chatClient, openAiProvider, STREAM);
    expect(text.endsWith('data: [DONE]')).toBe(true);
    expect(fold(back)).toEqual(FOLDED);
    expect(back.at(-1)).toEqual({ type: 'finish' });
  });

  it('an error body reads back', () => {
    const text = chatClient.errorOut({ type: 'rate_limit_error', message: 'slow down' });
    expect(openAiProvider.errorIn(text)).toEqual({ type: 'rate_limit_error', message: 'slow down' });
    expect(openAiProvider.errorIn('not json')).toBeNull();
  });

  it("Anthropic's error types OpenAI has no word for get OpenAI's type and a code", () => {
    const out = (type: string) => JSON.parse(chatClient.errorOut({ type, message: 'm' })).error;
    expect(out('request_too_large')).toEqual({
      message: 'm',
      type: 'invalid_request_error',
      param: null,
      code: 'request_too_large',
    });
    expect(out('overloaded_error')).toEqual({
      message: 'm',
      type: 'api_error',
      param: null,
      code: 'overloaded',
    });
    expect(out('not_found_error')).toEqual({
      message: 'm',
      type: 'not_found_error',
      param: null,
      code: null,
    });
  });
});

describe('the Anthropic Messages wire (Messages client format ↔ Anthropic provider kind)', () => {
  const req: NeutralRequest = {
    model: 'claude-x',
    system: ['Be brief.'],
    messages: [
      { role: 'user', content: 'Hello' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', text: 'Hmm.', signature: 'sig' },
          { type: 'text', text: 'Let me look.' },
          { type: 'tool_use', id: 'toolu_1', name: 'look', input: { at: 'it' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', toolUseId: 'toolu_1', content: 'a cat', param: 'messages[2].content[0]' },
          {
            type: 'image',
            source: { kind: 'base64', mediaType: 'image/png', data: 'AAAA' },
            param: 'messages[2].content[1].source',
          },
        ],
      },
    ],
    tools: [{ name: 'look', description: 'Looks.', inputSchema: { type: 'object', properties: {} } }],
    toolChoice: { type: 'auto' },
    parallelToolCalls: false,
    maxTokens: 30000,
    topP: 0.95, // the lowest Anthropic takes with thinking
    stop: ['END'],
    reasoning: { effort: 'high', budgetTokens: 24576, fields: ['thinking'] },
    stream: true,
  };

  it('a request written for the provider reads back as the same neutral request', () => {
    const { body, back, dropped } = requestRoundTrip(anthropicProvider, messagesClient, req);
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: 24576 });
    expect(body.tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true });
    expect(back).toEqual(req);
    expect(dropped).toEqual([]);
  });

  it('a temperature above Anthropic’s range is refused naming the field', () => {
    expect(() =>
      anthropicProvider.requestOut(
        { ...req, reasoning: undefined, temperature: 1.5 },
        { ...out, dropped: new Dropped() },
      ),
    ).toThrow(DomainError);
  });

  it('an answer written as a message reads back as the same neutral answer', () => {
    const answer: NeutralAnswer = {
      id: 'abc',
      content: [
        { type: 'text', text: 'Hi' },
        { type: 'tool_use', id: 'toolu_1', name: 'look', input: { at: 'it' } },
      ],
      stop: 'tool_use',
      usage,
    };
    const message = messagesClient.answerOut(answer, { model: 'm', body: {} });
    expect(message.id).toBe('msg_abc');
    expect(anthropicProvider.answerIn(message, { jsonSchema: false })).toEqual(answer);
    for (const stop of ['end', 'length', 'refusal'] as const)
      expect(
        anthropicProvider.answerIn(messagesClient.answerOut({ ...answer, stop }, { model: 'm', body: {} }), {
          jsonSchema: false,
        }).stop,
      ).toBe(stop);
  });

  it('a stream written as Anthropic events reads back as the same answer', () => {
    const { text, back } = streamRoundTrip(messagesClient, anthropicProvider, STREAM);
    expect(text.endsWith('event: message_stop\ndata: {"type":"message_stop"}')).toBe(true);
    expect(fold(back)).toEqual(FOLDED);
    expect(back.at(-1)).toEqual({ type: 'finish' });
  });

  it('an error body reads back', () => {
    const text = messagesClient.errorOut({ type: 'overloaded_error', message: 'Overloaded' });
    expect(anthropicProvider.errorIn(text)).toEqual({ type: 'overloaded_error', message: 'Overloaded' });
  });
});

describe('the hub and the registry', () => {
  it('applies the field policy once, at the neutral boundary: refused fields throw, dropped ones are named', () => {
    const route = { client: chatClient, provider: anthropicProvider };
    const body = { model: 'c', messages: [{ role: 'user', content: 'hi' }], seed: 1, user: 'u' };
    const dropped = new Dropped();
    const { neutral, request } = translateRequest(route, body, { ...out, holdCap: 99, dropped });
    expect(neutral.maxTokens).toBe(99);
    expect(request).toEqual({ model: 'c', max_tokens: 99, messages: [{ role: 'user', content: 'hi' }] });
    expect(dropped.list).toEqual(['seed', 'user']);
    let caught: unknown;
    try {
      translateRequest(route, { ...body, n: 2 }, { ...out, holdCap: 99, dropped: new Dropped() });
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(DomainError);
    expect((caught as DomainError).param).toBe('n');
  });

  it('composes any provider decoder with any client encoder (a chat stream as Responses events)', () => {
    const stream = new TranslatedStream(
      openAiProvider.streamIn({ jsonSchema: false }),
      CLIENT_ADAPTERS.responses.streamOut({ model: 'm', body: {}, created: 1 }),
    );
    const chat = chatClient.streamOut({ model: 'm', body: {}, created: 1 });
    const sse = STREAM.map((e) => chat.write(e)).join('') + chat.tail();
    const text = stream.feed(sse) + stream.end();
    expect(stream.done && stream.finished).toBe(true);
    expect(text).toContain('event: response.completed');
    expect(text).toContain('"arguments":"{\\"city\\":\\"Paris\\"}"');
  });

  it('every provider kind has an adapter; native calls get the kind’s own client, not the hub', () => {
    expect(Object.keys(PROVIDER_ADAPTERS).sort()).toEqual([...PROVIDER_KINDS].sort());
    expect(clientFor({ name: 'chat' }, { kind: 'OPENAI' })).toBe(openAiCompatibleClient);
    expect(clientFor({ name: 'embeddings' }, { kind: 'OPENAI' })).toBe(openAiCompatibleClient);
    expect(clientFor({ name: 'messages' }, { kind: 'ANTHROPIC' })).toBe(anthropicClient);
    expect(clientFor({ name: 'embeddings' }, { kind: 'ANTHROPIC' })).toBeNull();
    const translated = clientFor({ name: 'chat' }, { kind: 'ANTHROPIC' });
    expect(translated).not.toBe(anthropicClient);
    expect(translated?.kind).toBe('ANTHROPIC');
    expect(clientFor({ name: 'messages' }, { kind: 'OPENAI' })?.validate).toBeDefined();
  });
});
