import { blockedCompletion, blockedStream } from './blocked-reply.js';
import { capFieldsFor, parseChatRequest, type ChatRequest } from './chat-request.js';
import {
  inputTokens,
  outputTokens,
  type ReportedUsage,
  type UsageBuckets,
} from '../../shared/usage-buckets.js';
import { chatUsage } from './provider-usage.js';
import { ERROR_FINISH } from './formats/common.js';
import { chargedFields, SseRelay, sseData } from './sse-relay.js';
import { countPromptTokens, ProducedText } from './token-counter.js';
import { isObject, type MeteredRequest, type StreamRelay, type WireFormat } from './wire-format.js';

export type MeteredChatRequest = ChatRequest & MeteredRequest;

class ChatRelay extends SseRelay implements StreamRelay {
  usageTokens(): ReportedUsage | null {
    return chatUsage(this.usage);
  }
}

/** The usage object the proxy writes when the provider sent none: its metered counts per bucket. */
const meteredChatUsage = (u: UsageBuckets) => ({
  prompt_tokens: inputTokens(u),
  completion_tokens: outputTokens(u),
  total_tokens: inputTokens(u) + outputTokens(u),
  prompt_tokens_details: { cached_tokens: u.cacheRead, audio_tokens: u.audioPrompt },
  completion_tokens_details: { reasoning_tokens: u.reasoning, audio_tokens: u.audioCompletion },
});

/** Chat completions (`POST /v1/chat/completions`), docs/reference.md §5, §6. */
export const chatFormat: WireFormat<MeteredChatRequest> = {
  name: 'chat',
  upstreamPath: '/chat/completions',

  parse(body) {
    const req = parseChatRequest(body);
    return { ...req, promptEstimate: countPromptTokens(req) };
  },

  countPrompt: (req, biller) => countPromptTokens(req, biller),

  upstreamBody(req, cap, up) {
    const body: Record<string, unknown> = { ...req.body, model: up.model };
    delete body.user;
    for (const field of capFieldsFor(req.capFields, up.capParameter)) body[field] = cap;
    if (req.stream) {
      const opts = isObject(body.stream_options) ? body.stream_options : {};
      body.stream_options = { ...opts, include_usage: true };
    }
    return JSON.stringify(body);
  },

  jsonUsage: (json) => chatUsage(json.usage),

  // `finish_reason: "error"` (some providers end a failed generation so) is not a finish.
  jsonFinished: (json) =>
    json.error == null &&
    Array.isArray(json.choices) &&
    json.choices.some(
      (c: unknown) =>
        isObject(c) &&
        typeof c.finish_reason === 'string' &&
        c.finish_reason !== '' &&
        c.finish_reason !== ERROR_FINISH,
    ),

  jsonEndedInError: (json) =>
    json.error != null ||
    (Array.isArray(json.choices) &&
      json.choices.some((c: unknown) => isObject(c) && c.finish_reason === ERROR_FINISH)),

  countJson(json) {
    const produced = new ProducedText();
    if (Array.isArray(json.choices)) for (const c of json.choices) produced.addMessage(c?.message);
    return produced.tokens();
  },

  addCost(json, usage, charged) {
    json.usage = {
      ...(isObject(json.usage) ? json.usage : meteredChatUsage(usage)),
      ...chargedFields({ ...charged, balance: null }),
    };
  },

  relay(req) {
    return new ChatRelay(req.includeUsage);
  },

  streamEnd(req, relay, usage, charged) {
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
          usage: { ...meteredChatUsage(usage), ...chargedFields(charged) },
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
