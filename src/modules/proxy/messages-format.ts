import type { EventSourceMessage } from 'eventsource-parser';
import { invalid } from '../../shared/errors.js';
import { ZERO_COST_DETAILS } from '../../shared/money.js';
import { outputTokens, type ReportedUsage, type UsageBuckets } from '../../shared/usage-buckets.js';
import type { BlockedReply } from './blocked-reply.js';
import { checkBodyAndModel } from './chat-request.js';
import { messagesUsage } from './provider-usage.js';
import { chargedFields } from './sse-relay.js';
import {
  countText,
  fileTokenBound,
  imagePartTokens,
  type ImageBiller,
  ProducedText,
  UNKNOWN_INPUT_BOUND,
} from './token-counter.js';
import { isObject, type MeteredRequest, type StreamRelay, type WireFormat } from './wire-format.js';
import {
  ANTHROPIC_ERROR_TYPES,
  MESSAGE_DELTA_NULLS,
  MESSAGE_NULLS,
  MESSAGES_USAGE_NULLS,
  SseTransformer,
} from './formats/common.js';
import { MIN_THINKING_BUDGET } from './formats/field-policy.js';

/**
 * Anthropic's Messages API (`POST /v1/messages`), docs/reference.md §15: the money rules of chat; the
 * output cap is `max_tokens` (required), usage is Anthropic's buckets (`input_tokens` uncached,
 * `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`), and a stream is named
 * events (`message_start`, `content_block_*`, `ping`, `message_delta`, `message_stop`). The end user's
 * id (`metadata.user_id`) never goes upstream.
 */

/** Per message (role framing), like chat's per-message overhead; and the reply's priming. */
const PER_MESSAGE = 3;
const REPLY_PRIMING = 3;
const ROLES = new Set(['user', 'assistant', 'system']);

const jsonTokens = (v: unknown): number => (v === undefined || v === null ? 0 : countText(JSON.stringify(v)));

/** Tokens of a document block's source: plain text counted, a base64 file at its bound, a URL unknown. */
function documentTokens(model: string, source: unknown): number {
  if (!isObject(source)) return jsonTokens(source);
  if (source.type === 'text' && typeof source.data === 'string') return countText(source.data);
  if (source.type === 'base64') return fileTokenBound(model, source.data);
  if (source.type === 'content') return blocksTokens(model, source.content);
  // `url` and `file` sources: the proxy cannot see their size.
  return UNKNOWN_INPUT_BOUND;
}

/**
 * Tokens of Messages content (a string, or blocks): text counted with the tokenizer, images and
 * documents at the bounds of token-counter.ts (as chat's image and file parts), tool calls and results
 * as their JSON and text.
 */
export function blocksTokens(model: string, content: unknown, biller: ImageBiller = 'ANTHROPIC'): number {
  if (typeof content === 'string') return countText(content);
  if (!Array.isArray(content)) return jsonTokens(content);
  let n = 0;
  for (const b of content) {
    if (!isObject(b)) continue;
    switch (b.type) {
      case 'text':
        n += countText(typeof b.text === 'string' ? b.text : '');
        break;
      case 'image': {
        // An inline image by the pixel size its header declares; a URL at the largest bound.
        const src = isObject(b.source) ? b.source : {};
        n += imagePartTokens(model, undefined, src.type === 'base64' ? src.data : null, biller);
        break;
      }
      case 'document':
        n += documentTokens(model, b.source) + (typeof b.title === 'string' ? countText(b.title) : 0);
        break;
      case 'tool_use':
      case 'server_tool_use':
        n += countText(typeof b.name === 'string' ? b.name : '') + jsonTokens(b.input);
        break;
      case 'tool_result':
        n += blocksTokens(model, b.content ?? '', biller);
        break;
      case 'thinking':
        n += countText(typeof b.thinking === 'string' ? b.thinking : '');
        break;
      case 'redacted_thinking':
        n += countText(typeof b.data === 'string' ? b.data : '');
        break;
      default:
        n += jsonTokens(b);
    }
  }
  return n;
}

/** Prompt tokens of a Messages request: system, messages, tool definitions. */
export function countMessagesPrompt(
  body: Record<string, unknown>,
  biller: ImageBiller = 'ANTHROPIC',
): number {
  const model = typeof body.model === 'string' ? body.model : '';
  let n = REPLY_PRIMING;
  if (body.system !== undefined && body.system !== null)
    n += PER_MESSAGE + blocksTokens(model, body.system, biller);
  if (Array.isArray(body.messages))
    for (const m of body.messages) if (isObject(m)) n += PER_MESSAGE + blocksTokens(model, m.content, biller);
  n += jsonTokens(body.tools);
  return n;
}

/** Checks content (a string, or an array of blocks each with a `type`); `at` names the field. */
function checkContent(content: unknown, at: string, required: boolean): void {
  if (content === undefined || content === null) {
    if (required) throw invalid(`${at}: Field required`, at, 'missing_required_parameter');
    return;
  }
  if (typeof content === 'string') return;
  if (!Array.isArray(content))
    throw invalid(`${at}: Input should be a valid string or a list of content blocks`, at, 'invalid_type');
  content.forEach((b, i) => {
    if (!isObject(b) || typeof b.type !== 'string')
      throw invalid(
        `${at}.${i}: Input should be a content block with a 'type'`,
        `${at}.${i}`,
        'invalid_type',
      );
    if (b.type === 'text' && typeof b.text !== 'string')
      throw invalid(`${at}.${i}.text: Input should be a valid string`, `${at}.${i}.text`, 'invalid_type');
  });
}

/** An Anthropic `thinking: {type: "enabled", budget_tokens}`'s budget, or null. */
export function thinkingBudget(body: Record<string, unknown>): number | null {
  const t = body.thinking;
  if (!isObject(t) || t.type !== 'enabled') return null;
  return typeof t.budget_tokens === 'number' && Number.isInteger(t.budget_tokens) ? t.budget_tokens : null;
}

/**
 * Validates a Messages body as Anthropic does (the message of each 400 names the field, Anthropic's way:
 * `messages.0.role`): `model`, `max_tokens` (a positive integer, required), `messages` (a non-empty list
 * of `{role, content}`), `system`, `stream`, `metadata.user_id`, `tools`. Other fields are passed on.
 */
export function parseMessagesRequest(input: unknown): MeteredRequest {
  const { body, model } = checkBodyAndModel(input);
  const max = body.max_tokens;
  if (max === undefined || max === null)
    throw invalid('max_tokens: Field required', 'max_tokens', 'missing_required_parameter');
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1)
    throw invalid('max_tokens: Input should be a positive integer', 'max_tokens', 'invalid_value');
  const messages = body.messages;
  if (messages === undefined || messages === null)
    throw invalid('messages: Field required', 'messages', 'missing_required_parameter');
  if (!Array.isArray(messages))
    throw invalid('messages: Input should be a valid list', 'messages', 'invalid_type');
  if (messages.length === 0)
    throw invalid('messages: at least one message is required', 'messages', 'empty_array');
  messages.forEach((m, i) => {
    const at = `messages.${i}`;
    if (!isObject(m)) throw invalid(`${at}: Input should be an object`, at, 'invalid_type');
    if (typeof m.role !== 'string' || !ROLES.has(m.role))
      throw invalid(`${at}.role: Input should be 'user' or 'assistant'`, `${at}.role`, 'invalid_value');
    checkContent(m.content, `${at}.content`, true);
  });
  checkContent(body.system, 'system', false);
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
    throw invalid('stream: Input should be a valid boolean', 'stream', 'invalid_type');
  const meta = body.metadata;
  if (meta !== undefined && meta !== null) {
    if (!isObject(meta)) throw invalid('metadata: Input should be an object', 'metadata', 'invalid_type');
    if (meta.user_id !== undefined && meta.user_id !== null && typeof meta.user_id !== 'string')
      throw invalid('metadata.user_id: Input should be a valid string', 'metadata.user_id', 'invalid_type');
  }
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools))
    throw invalid('tools: Input should be a valid list', 'tools', 'invalid_type');
  return {
    model,
    stream: body.stream === true,
    n: 1,
    clientMaxTokens: max,
    promptEstimate: countMessagesPrompt(body),
    body,
  };
}

/**
 * The client's body without the end user's id (`metadata.user_id`, and a body `user`, docs/reference.md
 * §4), for the provider: `metadata` is dropped when nothing else is left in it.
 */
export function withoutEndUser(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body };
  delete out.user;
  if (isObject(out.metadata)) {
    const meta: Record<string, unknown> = { ...out.metadata };
    delete meta.user_id;
    if (Object.keys(meta).length === 0) delete out.metadata;
    else out.metadata = meta;
  }
  return out;
}

/** Anthropic's usage object from the metered counts (when the provider sent none). */
const meteredUsage = (u: UsageBuckets) => ({
  input_tokens: u.prompt + u.audioPrompt,
  cache_creation_input_tokens: u.cacheWrite,
  cache_read_input_tokens: u.cacheRead,
  output_tokens: outputTokens(u),
});

/** A blocked reply's usage: every field Anthropic's SDK types declare (null where there is no value). */
const ZERO_USAGE = {
  ...MESSAGES_USAGE_NULLS,
  output_tokens_details: null,
  input_tokens: 0,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
  output_tokens: 0,
};

const sseEvent = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

/** Text a content block (or a streamed delta) produced: text, tool input, thinking. */
function addBlock(produced: ProducedText, b: unknown): void {
  if (!isObject(b)) return;
  produced.add(b.text);
  produced.add(b.thinking);
  produced.add(b.name);
  produced.add(b.partial_json);
  if (b.input !== undefined && (b.type === 'tool_use' || b.type === 'server_tool_use')) {
    // A whole tool_use block (JSON answer): its input as JSON; a streamed one starts with `{}` and
    // grows through input_json_delta.
    if (!(isObject(b.input) && Object.keys(b.input).length === 0)) produced.add(JSON.stringify(b.input));
  }
}

/**
 * Relays Anthropic's event stream as it arrives. The usage comes from `message_start.message.usage`
 * (the input side) and each `message_delta.usage` (cumulative: the latest non-null value of each field
 * wins). The last `message_delta` and the `message_stop` are held back: the core settles first, then
 * `streamEnd` writes them, the delta's usage with `cost`, `cost_details` and `balance`.
 */
export class MessagesRelay extends SseTransformer implements StreamRelay {
  done = false;
  finished = false;
  upstreamError = false;
  /** The usage so far (message_start's, updated by each message_delta), or null. */
  usage: Record<string, unknown> | null = null;
  /** The held-back message_delta (its parsed data) and message_stop. */
  heldDelta: Record<string, any> | null = null;
  heldStop: string | null = null;
  /** A message_delta reported output_tokens (message_start's is a placeholder). */
  outputReported = false;
  /** The message as message_start announced it. */
  head: Record<string, any> | null = null;
  private readonly produced = new ProducedText();

  private mergeUsage(u: unknown): void {
    if (!isObject(u)) return;
    const merged: Record<string, unknown> = { ...(this.usage ?? {}) };
    for (const [k, v] of Object.entries(u)) if (v !== null && v !== undefined) merged[k] = v;
    this.usage = merged;
  }

  protected onEvent(e: EventSourceMessage): void {
    if (this.done) return;
    let data: Record<string, any> | null;
    try {
      const parsed = JSON.parse(e.data);
      data = isObject(parsed) ? parsed : null;
    } catch {
      data = null;
    }
    const type = (typeof data?.type === 'string' ? data.type : e.event) ?? '';
    const raw = `event: ${e.event ?? type}\ndata: ${e.data.replace(/\n/g, '\ndata: ')}\n\n`;
    switch (type) {
      case 'message_start':
        if (isObject(data?.message)) {
          this.head = data.message;
          this.mergeUsage(data.message.usage);
        }
        break;
      case 'content_block_start':
        addBlock(this.produced, data?.content_block);
        break;
      case 'content_block_delta':
        addBlock(this.produced, data?.delta);
        break;
      case 'message_delta':
        // A message_delta before another is not the last: it goes out as it came.
        if (this.heldDelta) this.out += sseEvent('message_delta', this.heldDelta);
        this.heldDelta = data ?? { type: 'message_delta', delta: {}, usage: {} };
        this.mergeUsage(data?.usage);
        if (isObject(data?.usage) && typeof data.usage.output_tokens === 'number') this.outputReported = true;
        if (
          isObject(data?.delta) &&
          typeof data.delta.stop_reason === 'string' &&
          data.delta.stop_reason !== ''
        )
          this.finished = true;
        return;
      case 'message_stop':
        this.heldStop = raw;
        this.done = true;
        return;
      case 'error':
        this.upstreamError = true;
        break;
    }
    this.out += raw;
  }

  usageTokens(): ReportedUsage | null {
    const u = messagesUsage(this.usage);
    // message_start's output_tokens is a placeholder (1): until a message_delta reports the output, the
    // output is what the relay counted (a stream cut before it is charged for what it produced).
    if (u && !this.outputReported) delete u.output;
    return u;
  }

  producedTokens(): number {
    return this.produced.tokens();
  }

  progressTokens(): number {
    return this.produced.runningTokens();
  }

  responseId(): unknown {
    return this.head?.id;
  }
}

/** An Anthropic error body (`{"type":"error","error":{"type","message"}}`). */
export const anthropicError = (type: string, message: string) => ({
  type: 'error',
  error: { type, message },
});

/** A blocked reply's message id (`msg_…`, from the reply's random id). */
const messageId = (r: BlockedReply): string => `msg_${r.id.replace(/^chatcmpl-/, '')}`;

/** A payment-blocked reply as an ordinary `message` holding the link, plus `paywall` (§15 "Messages blocked"). */
function blockedMessage(r: BlockedReply): Record<string, unknown> {
  return {
    ...MESSAGE_NULLS,
    id: messageId(r),
    type: 'message',
    role: 'assistant',
    model: r.model,
    // `citations` is a field of every text block in Anthropic's SDK types (null: none), as a translated answer's.
    content: [{ type: 'text', text: r.text, citations: null }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { ...ZERO_USAGE, cost: '0', cost_details: ZERO_COST_DETAILS },
    paywall: r.paywall,
  };
}

export const messagesFormat: WireFormat = {
  name: 'messages',
  upstreamPath: '/messages',

  parse: parseMessagesRequest,
  countPrompt: (req, biller) => countMessagesPrompt(req.body, biller),

  // The hold's cap in `max_tokens` (the client always sends one); the end user's id never goes upstream.
  upstreamBody(req, maxTokens, up) {
    const body: Record<string, unknown> = {
      ...withoutEndUser(req.body),
      model: up.model,
      max_tokens: maxTokens,
    };
    // docs/reference.md §20 "Thinking": a budget must stay below max_tokens. A cap lowered to or below it
    // lowers the budget to cap − 1 (the hold's smallest cap for a thinking request keeps that ≥ 1,024);
    // a client whose own cap is below its budget is sent as it asked.
    const thinking = body.thinking;
    if (
      isObject(thinking) &&
      thinking.type === 'enabled' &&
      typeof thinking.budget_tokens === 'number' &&
      thinking.budget_tokens >= maxTokens &&
      maxTokens < (req.clientMaxTokens ?? maxTokens + 1) &&
      maxTokens - 1 >= MIN_THINKING_BUDGET
    )
      body.thinking = { ...thinking, budget_tokens: maxTokens - 1 };
    return JSON.stringify(body);
  },

  jsonUsage: (json) => messagesUsage(json.usage),

  jsonFinished: (json) =>
    json.type !== 'error' && typeof json.stop_reason === 'string' && json.stop_reason !== '',

  malformed: (json) =>
    json.type === 'error' || isObject(json.error)
      ? 'the answer was an error, not a message'
      : Array.isArray(json.content)
        ? null
        : 'the answer was not a message (no `content` list)',

  countJson(json) {
    const produced = new ProducedText();
    if (Array.isArray(json.content)) for (const b of json.content) addBlock(produced, b);
    return produced.tokens();
  },

  addCost(json, usage, charged) {
    json.usage = {
      ...(isObject(json.usage) ? json.usage : meteredUsage(usage)),
      ...chargedFields({ ...charged, balance: null }),
    };
  },

  relay: () => new MessagesRelay(),

  streamEnd(_req, relay, usage, charged) {
    const r = relay as MessagesRelay;
    const delta = r.heldDelta ?? {
      type: 'message_delta',
      delta: { ...MESSAGE_DELTA_NULLS, stop_reason: 'end_turn', stop_sequence: null },
      usage: {},
    };
    // The delta's own usage (cumulative output, and the input fields newer API versions repeat), else
    // the metered counts; with what was charged.
    const own =
      isObject(delta.usage) && Object.keys(delta.usage).length > 0 ? delta.usage : meteredUsage(usage);
    const out = sseEvent('message_delta', { ...delta, usage: { ...own, ...chargedFields(charged) } });
    return out + (r.heldStop ?? sseEvent('message_stop', { type: 'message_stop' }));
  },

  streamError: (_relay, message) => sseEvent('error', anthropicError('api_error', message)),

  blockedJson: blockedMessage,

  blockedStream(reply) {
    const message = {
      ...blockedMessage(reply),
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: ZERO_USAGE,
    };
    const events: [string, Record<string, unknown>][] = [
      ['message_start', { message }],
      ['content_block_start', { index: 0, content_block: { type: 'text', text: '', citations: null } }],
      ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: reply.text } }],
      ['content_block_stop', { index: 0 }],
      [
        'message_delta',
        {
          delta: { ...MESSAGE_DELTA_NULLS, stop_reason: 'end_turn', stop_sequence: null },
          usage: { ...ZERO_USAGE, cost: '0', cost_details: ZERO_COST_DETAILS },
        },
      ],
      ['message_stop', {}],
    ];
    return events.map(([type, data]) => sseEvent(type, { type, ...data })).join('');
  },

  refusalBody(status, body) {
    if (isObject(body) && body.type === 'error' && isObject(body.error)) return body;
    // Another shape (OpenAI's error object, a proxy's page): Anthropic's, typed by the status.
    const err = isObject(body) && isObject(body.error) ? body.error : null;
    const message =
      typeof err?.message === 'string'
        ? err.message
        : `The model provider refused the request (HTTP ${status}).`;
    return anthropicError(ANTHROPIC_ERROR_TYPES[status] ?? 'invalid_request_error', message);
  },
};
