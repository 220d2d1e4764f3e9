import { SseRelay } from '../src/modules/proxy/sse-relay.js';

const chunk = (content: string, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }], usage: null, ...extra })}\n\n`;
const usage = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })}\n\n`;
const finish = `data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null })}\n\n`;

describe('SseRelay', () => {
  it('passes chunks through as written, even when network reads split them anywhere', () => {
    const upstream = chunk('Héllo') + chunk(' wörld') + finish + usage + 'data: [DONE]\n\n';
    const relay = new SseRelay(false);
    let out = '';
    for (let i = 0; i < upstream.length; i += 7) out += relay.feed(upstream.slice(i, i + 7));
    expect(out).toBe(chunk('Héllo') + chunk(' wörld') + finish);
    expect(relay.done).toBe(true);
    expect(relay.finished).toBe(true);
    expect(relay.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 2 });
  });

  it('holds the usage chunk back until the charge is settled, then adds cost and balance', () => {
    const relay = new SseRelay(true);
    const out = relay.feed(chunk('Hi') + usage + 'data: [DONE]\n\n');
    expect(out).toBe(chunk('Hi')); // usage and [DONE] wait for the settlement
    const last = JSON.parse(
      relay.usageChunk({ cost: '0.000012', costDetails: { prompt: '0.000012' }, balance: '0.999988' })!,
    );
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({
      prompt_tokens: 3,
      completion_tokens: 2,
      total_tokens: 5,
      cost: '0.000012',
      cost_details: { prompt: '0.000012' },
      balance: '0.999988',
    });
  });

  it('usage on the finish chunk: the content goes on at once, the usage comes as its own last chunk', () => {
    const relay = new SseRelay(true);
    const withUsage = chunk('end', { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    const out = relay.feed(withUsage);
    expect(JSON.parse(out.trim().slice(6))).toMatchObject({ choices: [{ delta: { content: 'end' } }] });
    expect(JSON.parse(out.trim().slice(6)).usage).toBeUndefined();
    expect(JSON.parse(relay.usageChunk({ cost: '1', costDetails: {}, balance: null })!)).toMatchObject({
      id: 'c1',
      choices: [],
      usage: { prompt_tokens: 3, completion_tokens: 2, cost: '1' },
    });
  });

  it('counts the tokens of what it relayed, and spots upstream error events', () => {
    const relay = new SseRelay(false);
    relay.feed(chunk('one two three'));
    relay.feed(`data: {"error":{"message":"boom","type":"server_error"}}\n\n`);
    expect(relay.producedTokens()).toBe(3);
    expect(relay.upstreamError).toBe(true);
    expect(relay.done).toBe(false);
  });
});
