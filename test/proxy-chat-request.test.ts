import { DomainError } from '../src/shared/errors.js';
import { parseChatRequest } from '../src/modules/proxy/chat-request.js';

const ok = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const paramOf = (body: unknown): string | null => {
  try {
    parseChatRequest(body);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    return (e as DomainError).param;
  }
  throw new Error('expected a validation error');
};

describe('parseChatRequest', () => {
  it('keeps the body and derives what the proxy needs', () => {
    const r = parseChatRequest({
      ...ok,
      stream: true,
      stream_options: { include_usage: true },
      n: 2,
      top_p: 0.5,
    });
    expect(r).toMatchObject({ model: 'm', stream: true, includeUsage: true, n: 2, clientMaxTokens: null });
    // No cap of the client's own: the provider's capParameter decides (test/cap-parameter.test.ts).
    expect(r.capFields).toEqual([]);
    expect(r.body.top_p).toBe(0.5);
  });

  it('keeps the cap field the client used, and the smaller of two', () => {
    expect(parseChatRequest({ ...ok, max_completion_tokens: 30 }).capFields).toEqual([
      'max_completion_tokens',
    ]);
    const both = parseChatRequest({ ...ok, max_tokens: 50, max_completion_tokens: 30 });
    expect(both.clientMaxTokens).toBe(30);
    expect(both.capFields).toEqual(['max_tokens', 'max_completion_tokens']);
  });

  it('accepts assistant tool calls without content and tool results', () => {
    expect(() =>
      parseChatRequest({
        model: 'm',
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 't1', type: 'function', function: { name: 'w', arguments: '{}' } }],
          },
          { role: 'tool', content: 'sunny', tool_call_id: 't1' },
        ],
      }),
    ).not.toThrow();
  });

  it('accepts function results (the older form of a tool result), content null too', () => {
    const r = parseChatRequest({
      model: 'm',
      messages: [
        { role: 'assistant', content: null, function_call: { name: 'w', arguments: '{}' } },
        { role: 'function', name: 'w', content: 'sunny' },
        { role: 'function', name: 'w', content: null },
      ],
    });
    expect(r.messages.map((m) => m.role)).toEqual(['assistant', 'function', 'function']);
  });

  it.each([
    [null, null],
    [[], null],
    [{ messages: ok.messages }, 'model'],
    [{ model: '', messages: ok.messages }, 'model'],
    [{ model: 'm' }, 'messages'],
    [{ model: 'm', messages: [] }, 'messages'],
    [{ model: 'm', messages: [null] }, 'messages[0]'],
    [{ model: 'm', messages: [{ role: 'narrator', content: 'x' }] }, 'messages[0].role'],
    [{ model: 'm', messages: [{ role: 'user' }] }, 'messages[0].content'],
    [{ model: 'm', messages: [{ role: 'user', content: 'x', name: '' }] }, 'messages[0].name'],
    [{ model: 'm', messages: [{ role: 'user', content: 'x', name: 'a-b' }] }, 'messages[0].name'],
    [{ model: 'm', messages: [{ role: 'function', content: 'x' }] }, 'messages[0].name'],
    [{ model: 'm', messages: [{ role: 'function', name: 'f' }] }, 'messages[0].content'],
    [{ ...ok, stream: 1 }, 'stream'],
    [{ ...ok, stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage'],
    [{ ...ok, max_tokens: -5 }, 'max_tokens'],
    [{ ...ok, n: 0 }, 'n'],
  ])('rejects %j naming %s', (body, param) => {
    expect(paramOf(body)).toBe(param);
  });
});
