import { Readable } from 'node:stream';
import type {
  ProviderClient,
  UpstreamOptions,
  UpstreamResponse,
  UpstreamTarget,
} from '../providers/provider-client.js';
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
} from './translate/index.js';
import { readLimited } from './upstream-client.js';
import { Dropped } from './translate/field-policy.js';
import { isObject } from './wire-format.js';

type Json = Record<string, any>;

/** A stream transformer from the provider's events to the client's. */
interface StreamTranslator {
  feed(text: string): string;
  /** The provider's terminal event arrived. */
  readonly done: boolean;
}

/**
 * One direction of docs/reference.md §15 "Across formats": how a client format's body becomes the
 * provider's, and how the provider's answers, streams and errors become the client's. Pure functions
 * (translate/); this file only moves bytes.
 */
export interface Translation {
  /** The provider's endpoint under its base URL. */
  endpoint: string;
  /**
   * The provider's body for the client's (whose model the wire format already set; its cap too, else
   * `ctx.holdCap`), noting the fields left out in `ctx.dropped`.
   */
  request(body: Json, up: Pick<UpstreamTarget, 'capParameter'>, ctx: RequestContext): Json;
  /** The provider's answer as the client's (`ctx.model`: the model the client asked for). */
  answer(json: Json, body: Json, ctx: AnswerContext): Json;
  stream(body: Json, ctx: AnswerContext): StreamTranslator;
  /** What the client reads once the provider's stream ended (chat's `[DONE]`), if anything. */
  tail?(t: StreamTranslator): string;
  /** A provider's error body in the client's shape (the text as is when it is not one). */
  error(text: string): string;
}

/** What a request translation needs besides the body. */
export interface RequestContext {
  /** The hold's cap, for a client body without one (Anthropic requires `max_tokens`). */
  holdCap: number;
  /** The model reasons (thinking ↔ reasoning effort are mapped only then). */
  reasoning: boolean;
  dropped: Dropped;
}

/** What an answer translation needs besides the answer. */
export interface AnswerContext {
  /** The model the client asked for. */
  model: string;
  /** The service's count of the input. */
  inputTokens: number;
}

/** The completion cap the wire format set (chat: the smaller of its two fields), else the hold's. */
function capOf(body: Json, fields: string[], holdCap: number): number {
  const caps = fields.map((f) => body[f]).filter((v): v is number => typeof v === 'number');
  return caps.length > 0 ? Math.min(...caps) : holdCap;
}

const jsonOr = (text: string): Json | null => {
  try {
    const v = JSON.parse(text);
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
};

/** Anthropic's `{type: "error", error: {type, message}}` as OpenAI's `{error: {message, type, param, code}}`. */
export function anthropicErrorToOpenAi(text: string): string {
  const json = jsonOr(text);
  if (!json || !isObject(json.error)) return text;
  return JSON.stringify({
    error: {
      message: String(json.error.message ?? 'The model provider refused the request.'),
      type: String(json.error.type ?? 'invalid_request_error'),
      param: null,
      code: null,
    },
  });
}

/** OpenAI's error body as Anthropic's. */
export function openAiErrorToAnthropic(text: string): string {
  const json = jsonOr(text);
  if (!json || !isObject(json.error) || json.type === 'error') return text;
  return JSON.stringify({
    type: 'error',
    error: {
      type: String(json.error.type ?? 'invalid_request_error'),
      message: String(json.error.message ?? 'The model provider refused the request.'),
    },
  });
}

/** The client asked for a `json_schema` response format (sent as a forced tool). */
const jsonSchemaAsked = (body: Json): boolean =>
  isObject(body.response_format) && body.response_format.type === 'json_schema';

/** Chat completions to an Anthropic provider. */
export const chatToMessages: Translation = {
  endpoint: '/messages',
  request: (body, _up, ctx) =>
    chatRequestToMessages(body, {
      model: body.model,
      maxTokens: capOf(body, ['max_completion_tokens', 'max_tokens'], ctx.holdCap),
      reasoning: ctx.reasoning,
      dropped: ctx.dropped,
    }),
  answer: (json, body, ctx) =>
    messagesAnswerToChat(json, { model: ctx.model, jsonTool: jsonSchemaAsked(body) }),
  stream: (body, ctx) =>
    new MessagesToChatStream({
      model: ctx.model,
      jsonTool: jsonSchemaAsked(body),
      includeUsage: isObject(body.stream_options) && body.stream_options.include_usage === true,
    }),
  // The chat relay ends on `[DONE]` as it does with an OpenAI provider.
  tail: (t) => (t.done ? 'data: [DONE]\n\n' : ''),
  error: anthropicErrorToOpenAi,
};

/** The Responses API to an Anthropic provider. */
export const responsesToMessages: Translation = {
  endpoint: '/messages',
  request: (body, _up, ctx) =>
    responsesRequestToMessages(body, {
      model: body.model,
      maxTokens: capOf(body, ['max_output_tokens'], ctx.holdCap),
      reasoning: ctx.reasoning,
      dropped: ctx.dropped,
    }),
  answer: (json, body, ctx) => messagesAnswerToResponse(json, { model: ctx.model, request: body }),
  stream: (body, ctx) => new MessagesToResponsesStream({ model: ctx.model, request: body }),
  error: anthropicErrorToOpenAi,
};

/** The Messages API to an OpenAI-compatible provider. */
export const messagesToChat: Translation = {
  endpoint: '/chat/completions',
  request: (body, up, ctx) =>
    messagesRequestToChat(body, {
      model: body.model,
      maxTokens: capOf(body, ['max_tokens'], ctx.holdCap),
      capField: up.capParameter === 'MAX_TOKENS' ? 'max_tokens' : 'max_completion_tokens',
      reasoning: ctx.reasoning,
      dropped: ctx.dropped,
    }),
  answer: (json, _body, ctx) => chatAnswerToMessages(json, { model: ctx.model }),
  stream: (_body, ctx) => new ChatToMessagesStream({ model: ctx.model, inputTokens: ctx.inputTokens }),
  // A chat stream that ended without `[DONE]` still closes the Messages stream.
  tail: (t) => (t.done ? '' : (t as ChatToMessagesStream).end()),
  error: openAiErrorToAnthropic,
};

/** Largest provider error body read for translation. */
const MAX_ERROR_BYTES = 1024 * 1024;

const bodyOf = (res: UpstreamResponse, text: string): UpstreamResponse => {
  const buf = Buffer.from(text);
  return { ...res, contentLength: buf.length, body: Readable.from([buf]) as any };
};

/**
 * A ProviderClient that speaks the client's format to a provider of another kind: the request is
 * translated before `base` sends it; the answer, stream or error is translated before the metered core
 * reads it, so metering, settlement and the client's events stay those of the client's format.
 */
export function translatingClient(base: ProviderClient, t: Translation): ProviderClient {
  return {
    kind: base.kind,
    validate(body, up) {
      t.request({ ...body, model: String(body.model ?? '') }, up, {
        holdCap: 4096,
        reasoning: false,
        dropped: new Dropped(),
      });
    },
    async post(up, _endpoint, payload, opts: UpstreamOptions) {
      const body = JSON.parse(payload) as Json;
      const dropped = new Dropped();
      const request = t.request(body, up, {
        holdCap: opts.holdCap ?? 4096,
        reasoning: opts.reasoning ?? false,
        dropped,
      });
      const ctx: AnswerContext = {
        model: opts.clientModel ?? String(body.model ?? ''),
        inputTokens: opts.inputTokens ?? 0,
      };
      const res = {
        ...(await base.post(up, t.endpoint, JSON.stringify(request), opts)),
        answerHeaders: dropped.header(),
      };
      if (res.status < 200 || res.status >= 300) {
        let text = '';
        try {
          text = await readLimited(res, MAX_ERROR_BYTES);
        } catch {
          /* the status says enough */
        }
        return bodyOf(res, t.error(text));
      }
      if (!opts.stream) {
        const text = await readLimited(res, opts.maxBytes ?? Number.MAX_SAFE_INTEGER);
        const json = jsonOr(text);
        return bodyOf(res, json ? JSON.stringify(t.answer(json, body, ctx)) : text);
      }
      const stream = t.stream(body, ctx);
      const source = res.body;
      async function* translated() {
        const decoder = new TextDecoder();
        try {
          for await (const chunk of source) {
            const out = stream.feed(decoder.decode(chunk as Buffer, { stream: true }));
            if (out) yield Buffer.from(out);
            if (stream.done) break;
          }
          const tail = t.tail?.(stream);
          if (tail) yield Buffer.from(tail);
        } finally {
          source.destroy();
        }
      }
      return { ...res, contentLength: null, body: Readable.from(translated()) as any };
    },
  };
}
