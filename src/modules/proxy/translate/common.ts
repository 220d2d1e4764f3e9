import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { DomainError, invalid } from '../../../shared/errors.js';

/**
 * What the translations between OpenAI's formats (chat completions, Responses) and Anthropic's Messages
 * share (docs/reference.md §15 "Across formats", docs/translation.md). Everything here is pure: no I/O, no
 * clock, no randomness.
 */

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Record<string, any> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The 400 for a field that has no equivalent in the other format (`unsupported_parameter`, naming it). */
export const unsupported = (param: string, why: string): DomainError =>
  invalid(
    `'${param}' cannot be translated for this model's provider: ${why}`,
    param,
    'unsupported_parameter',
  );

/** The 400 for a field whose value is malformed (`invalid_value`, naming it). */
export const badValue = (param: string, why: string): DomainError =>
  invalid(`invalid value for '${param}': ${why}`, param, 'invalid_value');

/** A token count a provider reported: a non-negative integer, else 0. */
export const tokens = (v: unknown): number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0;

/** `event: <type>\ndata: <json>\n\n` — the framing Anthropic and the Responses API use. */
export const namedEvent = (type: string, data: unknown): string =>
  `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

/** `data: <json>\n\n` — the framing of chat completion chunks. */
export const dataEvent = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`;

/**
 * Reads SSE text fed in pieces split anywhere (lines, events, JSON) and calls `onEvent` per complete event
 * (the stream relays of every wire format and the translators).
 * Returns what the handlers appended to the output since the last feed.
 */
export abstract class SseTransformer {
  private readonly parser: EventSourceParser;
  protected out = '';

  constructor() {
    this.parser = createParser({ onEvent: (e) => this.onEvent(e) });
  }

  /** Feeds source text; returns the text to write to the client now ('' when nothing). */
  feed(text: string): string {
    this.parser.feed(text);
    const out = this.out;
    this.out = '';
    return out;
  }

  protected abstract onEvent(e: EventSourceMessage): void;
}

/** Parses an event's data as a JSON object, or null. */
export function parseData(data: string): Json | null {
  try {
    const v = JSON.parse(data);
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------------
// Images

const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

/**
 * An OpenAI image URL (a `data:` URL or http(s)) as an Anthropic image block, or a 400 naming `param`.
 */
export function imageBlockFromUrl(url: unknown, param: string): Json {
  if (typeof url !== 'string' || url === '') throw badValue(param, 'an image URL is required');
  const m = DATA_URL.exec(url);
  if (m) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } };
  if (/^https?:\/\//i.test(url)) return { type: 'image', source: { type: 'url', url } };
  throw badValue(param, 'an image must be a base64 data: URL or an http(s) URL');
}

/** An Anthropic image block's source as an OpenAI image URL (data: URL for base64), or a 400. */
export function urlFromImageSource(source: unknown, param: string): string {
  if (isObject(source)) {
    if (source.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string')
      return `data:${source.media_type};base64,${source.data}`;
    if (source.type === 'url' && typeof source.url === 'string') return source.url;
    if (source.type === 'file')
      throw unsupported(`${param}.type`, 'files uploaded to the provider have no equivalent');
  }
  throw badValue(param, 'an image source is base64 or url');
}

// ---------------------------------------------------------------------------------------------------
// Sampling and stops

/** `temperature`: OpenAI takes 0–2, Anthropic 0–1: above 1 has no equivalent. */
export function temperature(v: unknown, param = 'temperature'): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || v < 0) throw badValue(param, 'a number between 0 and 1');
  if (v > 1) throw unsupported(param, "the provider's temperature goes from 0 to 1");
  return v;
}

export function numberField(v: unknown, param: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number') throw badValue(param, 'a number');
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Stop reasons

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

/** Anthropic `stop_reason` → chat `finish_reason`. */
export function finishReason(stop: unknown): ChatFinishReason {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, pause_turn
      return 'stop';
  }
}

/** The chat `finish_reason` some providers end a failed generation with: not a finish. */
export const ERROR_FINISH = 'error';

/** Chat `finish_reason` → Anthropic `stop_reason` (null: it ended in the provider's error). */
export function stopReason(finish: unknown): string | null {
  switch (finish) {
    case ERROR_FINISH:
      return null;
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

// ---------------------------------------------------------------------------------------------------
// Usage

/** Anthropic usage, read: the uncached input, the cache parts, the output. */
export interface MessagesUsageCounts {
  input: number;
  cacheRead: number;
  cacheWrite: number;
  output: number;
  /** The part of the output spent thinking (`output_tokens_details.thinking_tokens`), where sent. */
  thinking: number;
}

const thinkingTokens = (u: Json): number =>
  isObject(u.output_tokens_details) ? tokens(u.output_tokens_details.thinking_tokens) : 0;

export const readMessagesUsage = (u: unknown): MessagesUsageCounts | null =>
  isObject(u)
    ? {
        input: tokens(u.input_tokens),
        cacheRead: tokens(u.cache_read_input_tokens),
        cacheWrite: tokens(u.cache_creation_input_tokens),
        output: tokens(u.output_tokens),
        thinking: thinkingTokens(u),
      }
    : null;

/** A stream's usage so far with an event's: message_delta's counts are cumulative, absent ones kept. */
export function mergeMessagesUsage(prev: MessagesUsageCounts | null, u: Json): MessagesUsageCounts {
  const p = prev ?? { input: 0, cacheRead: 0, cacheWrite: 0, output: 0, thinking: 0 };
  const take = (v: unknown, old: number) =>
    typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : old;
  const details = isObject(u.output_tokens_details) ? u.output_tokens_details : {};
  return {
    input: take(u.input_tokens, p.input),
    cacheRead: take(u.cache_read_input_tokens, p.cacheRead),
    cacheWrite: take(u.cache_creation_input_tokens, p.cacheWrite),
    output: take(u.output_tokens, p.output),
    thinking: take(details.thinking_tokens, p.thinking),
  };
}

/**
 * Anthropic usage → chat completions usage (docs/reference.md §13): `prompt_tokens` is all the input,
 * cache read and cache write included; the cache write goes in `prompt_tokens_details.cache_write_tokens`
 * so the charge keeps its bucket.
 */
export function chatUsageFromMessages(c: MessagesUsageCounts): Json {
  const prompt = c.input + c.cacheRead + c.cacheWrite;
  return {
    prompt_tokens: prompt,
    completion_tokens: c.output,
    total_tokens: prompt + c.output,
    prompt_tokens_details: { cached_tokens: c.cacheRead, cache_write_tokens: c.cacheWrite },
    // the thinking part, so it is charged at the reasoning price (docs/reference.md §21 "Answers")
    completion_tokens_details: { reasoning_tokens: Math.min(c.thinking, c.output) },
  };
}

/** Anthropic usage → Responses usage: `input_tokens` holds the cache read and write. */
export function responsesUsageFromMessages(c: MessagesUsageCounts): Json {
  const input = c.input + c.cacheRead + c.cacheWrite;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: c.cacheRead, cache_write_tokens: c.cacheWrite },
    output_tokens: c.output,
    output_tokens_details: { reasoning_tokens: Math.min(c.thinking, c.output) },
    total_tokens: input + c.output,
  };
}

/**
 * Chat usage → Anthropic usage: `input_tokens` is the input that was neither read from nor written to the
 * cache (never below 0); the two cache parts come beside it.
 */
export function messagesUsageFromChat(u: unknown): Json | null {
  if (!isObject(u)) return null;
  const prompt = tokens(u.prompt_tokens);
  const details = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const cacheRead = Math.min(
    prompt,
    Math.max(tokens(details.cached_tokens), tokens(u.prompt_cache_hit_tokens)),
  );
  const cacheWrite = Math.min(prompt - cacheRead, tokens(details.cache_write_tokens));
  const output = tokens(u.completion_tokens);
  const cd = isObject(u.completion_tokens_details) ? u.completion_tokens_details : {};
  const reasoning = Math.min(output, tokens(cd.reasoning_tokens));
  return {
    ...MESSAGES_USAGE_NULLS,
    input_tokens: prompt - cacheRead - cacheWrite,
    cache_creation_input_tokens: cacheWrite,
    cache_read_input_tokens: cacheRead,
    output_tokens: output,
    // The reasoning part, as Anthropic reports its thinking: charged at the reasoning price (§21 "Answers").
    output_tokens_details: { thinking_tokens: reasoning },
  };
}

/** The usage fields Anthropic's SDK types declare that a translated answer has no value for. */
export const MESSAGES_USAGE_NULLS = {
  cache_creation: null,
  inference_geo: null,
  server_tool_use: null,
  service_tier: null,
  speed: null,
} as const;

/** The message fields Anthropic's SDK types declare that a translated answer has no value for. */
export const MESSAGE_NULLS = { container: null, diagnostics: null, stop_details: null } as const;

// ---------------------------------------------------------------------------------------------------
// Tools (OpenAI function tools ↔ Anthropic custom tools)

/** An OpenAI function definition (`{name, description?, parameters?}`) as an Anthropic tool. */
export function anthropicTool(fn: unknown, param: string): Json {
  if (!isObject(fn) || typeof fn.name !== 'string' || fn.name === '')
    throw badValue(`${param}.name`, 'a function tool needs a name');
  const tool: Json = { name: fn.name };
  if (typeof fn.description === 'string') tool.description = fn.description;
  tool.input_schema = isObject(fn.parameters) ? fn.parameters : { type: 'object', properties: {} };
  return tool;
}

/**
 * An OpenAI `tool_choice` (chat: `{type:"function", function:{name}}`; Responses: `{type:"function", name}`)
 * as Anthropic's, with `disable_parallel_tool_use` when the client set `parallel_tool_calls: false`.
 * Undefined when the client sent neither.
 */
export function anthropicToolChoice(
  choice: unknown,
  parallel: unknown,
  hasTools: boolean,
  param = 'tool_choice',
): Json | undefined {
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean')
    throw badValue('parallel_tool_calls', 'a boolean');
  let out: Json | undefined;
  if (choice === undefined || choice === null) out = undefined;
  else if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'none') return { type: 'none' };
  else if (choice === 'required') out = { type: 'any' };
  else if (isObject(choice) && choice.type === 'function') {
    const name = isObject(choice.function) ? choice.function.name : choice.name;
    if (typeof name !== 'string' || name === '')
      throw badValue(param, 'a named tool choice names a function');
    out = { type: 'tool', name };
  } else if (isObject(choice) && typeof choice.type === 'string')
    throw unsupported(`${param}.type`, `a tool choice of type '${choice.type}' has no equivalent`);
  else throw badValue(param, "'auto', 'none', 'required' or a named function");
  if (parallel === false && hasTools) out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return out;
}

/** A tool call's arguments (a JSON text) as the object Anthropic's `tool_use.input` is, or a 400. */
export function parseArguments(args: unknown, param: string): Json {
  if (args === undefined || args === null || args === '') return {};
  if (typeof args !== 'string') throw badValue(param, 'the arguments are a JSON text');
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    throw badValue(param, 'the arguments are not valid JSON');
  }
  if (!isObject(v)) throw badValue(param, 'the arguments must be a JSON object');
  return v;
}

/**
 * The text of an OpenAI message content (a string, or parts of type `text` / `input_text` / `output_text`),
 * for a role that only takes text (system, developer, tool); any other part is a 400 naming it.
 */
export function textOnly(content: unknown, param: string, join = '\n'): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) throw badValue(param, 'a string or an array of text parts');
  return content
    .map((p, j) => {
      if (isObject(p) && typeof p.text === 'string' && ['text', 'input_text', 'output_text'].includes(p.type))
        return p.text;
      throw unsupported(`${param}[${j}].type`, 'only text parts can be translated here');
    })
    .join(join);
}

/**
 * Refuses what cannot be translated: a field of `refused` whose check gives a reason, and any field neither
 * there nor `known` (null counts as absent).
 */
export function checkFields(
  body: Json,
  known: ReadonlySet<string>,
  refused: Readonly<Record<string, (v: unknown) => string | null>>,
): void {
  for (const [key, value] of Object.entries(body)) {
    if (value === undefined || value === null) continue;
    const refuse = refused[key];
    if (refuse) {
      const why = refuse(value);
      if (why !== null) throw unsupported(key, why);
      continue;
    }
    if (!known.has(key)) throw unsupported(key, 'this field has no equivalent');
  }
}

/** The id of a translated answer: the source id with its prefix swapped (`msg_x` → `chatcmpl-x`). */
export const swapPrefix = (id: unknown, from: RegExp, to: string, fallback: string): string =>
  typeof id === 'string' && id !== '' ? `${to}${id.replace(from, '')}` : fallback;
