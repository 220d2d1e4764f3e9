import { blockedCompletion, blockedStream } from './blocked-reply.js';
import { capFieldsFor, parseChatRequest, type ChatRequest } from './chat-request.js';
import { SseRelay, sseData, withBalance } from './sse-relay.js';
import { countPromptTokens, ProducedText } from './token-counter.js';
import {
  isObject,
  tokenCount,
  type MeteredRequest,
  type StreamRelay,
  type Tokens,
  type WireFormat,
} from './wire-format.js';

export type MeteredChatRequest = ChatRequest & MeteredRequest;

class ChatRelay extends SseRelay implements StreamRelay {
  usageTokens(): Partial<Tokens> | null {
    return this.usage
      ? {
          prompt: tokenCount(this.usage.prompt_tokens) ?? undefined,
          completion: tokenCount(this.usage.completion_tokens) ?? undefined,
        }
      : null;
  }
}

const chatUsage = (u: Record<string, any> | null): Partial<Tokens> | null =>
  u
    ? {
        prompt: tokenCount(u.prompt_tokens) ?? undefined,
        completion: tokenCount(u.completion_tokens) ?? undefined,
      }
    : null;

/** Chat completions (`POST /v1/chat/completions`), docs/reference.md §5, §6. */
export const chatFormat: WireFormat<MeteredChatRequest> = {
  name: 'chat',
  upstreamPath: '/chat/completions',

  parse(body) {
    const req = parseChatRequest(body);
    return { ...req, promptEstimate: countPromptTokens(req) };
  },

  upstreamBody(req, cap, up) {
    const body: Record<string, unknown> = { ...req.body };
    delete body.user;
    for (const field of capFieldsFor(req.capFields, up.capParameter)) body[field] = cap;
    if (req.stream) {
      const opts = isObject(body.stream_options) ? body.stream_options : {};
      body.stream_options = { ...opts, include_usage: true };
    }
    return JSON.stringify(body);
  },

  jsonUsage: (json) => chatUsage(isObject(json.usage) ? json.usage : null),

  jsonFinished: (json) =>
    json.error == null &&
    Array.isArray(json.choices) &&
    json.choices.some(
      (c: unknown) => isObject(c) && typeof c.finish_reason === 'string' && c.finish_reason !== '',
    ),

  countJson(json) {
    const produced = new ProducedText();
    if (Array.isArray(json.choices)) for (const c of json.choices) produced.addMessage(c?.message);
    return produced.tokens();
  },

  addCost(json, tokens, cost) {
    json.usage = {
      ...(isObject(json.usage)
        ? json.usage
        : {
            prompt_tokens: tokens.prompt,
            completion_tokens: tokens.completion,
            total_tokens: tokens.prompt + tokens.completion,
          }),
      cost,
    };
  },

  relay(req) {
    return new ChatRelay(req.includeUsage);
  },

  streamEnd(req, relay, tokens, charged) {
    const r = relay as ChatRelay;
    let tail = '';
    const held = r.usageChunk(charged);
    if (held) tail += sseData(held);
    else if (req.includeUsage && r.usage === null) {
      // The provider reported no usage: the client asked for it, so report what was metered.
      const h = r.header();
      tail += sseData(
        JSON.stringify({
          id: h.id,
          object: 'chat.completion.chunk',
          created: h.created,
          model: h.model ?? req.model,
          choices: [],
          usage: {
            prompt_tokens: tokens.prompt,
            completion_tokens: tokens.completion,
            total_tokens: tokens.prompt + tokens.completion,
            ...withBalance(charged),
          },
        }),
      );
    }
    return tail + sseData('[DONE]');
  },

  streamError: (_relay, message, code) =>
    sseData(JSON.stringify({ error: { message, type: 'api_error', param: null, code } })),

  blockedJson: (reply) => blockedCompletion(reply),
  blockedStream: (reply, req) => blockedStream(reply, req.includeUsage),
};
