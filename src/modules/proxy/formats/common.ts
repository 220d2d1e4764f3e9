import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { DomainError, invalid } from '../../../shared/errors.js';

/**
 * What the format adapters share (docs/reference.md §15 "Across formats", docs/translation.md), and the
 * SSE reading the stream relays of every wire format use. Everything here is pure: no I/O, no clock, no
 * randomness.
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
 * (the stream relays of every wire format).
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

/** A text as a JSON object, or null. */
export const jsonOr = (text: string): Json | null => {
  try {
    const v = JSON.parse(text);
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
};

/** A provider's id without its format's prefix; null when it sent none. */
export const stripPrefix = (id: unknown, prefix: RegExp): string | null =>
  typeof id === 'string' && id !== '' ? id.replace(prefix, '') : null;

/** A neutral id with a client format's prefix (`chatcmpl-x`), or the fallback. */
export const withPrefix = (id: string | null, prefix: string, fallback: string): string =>
  id === null ? fallback : `${prefix}${id}`;

/** Parses an event's data as a JSON object, or null. */
export function parseData(data: string): Json | null {
  try {
    const v = JSON.parse(data);
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
}

/** A number field, or undefined when absent; else a 400 naming it. */
export function numberField(v: unknown, param: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number') throw badValue(param, 'a number');
  return v;
}

/** The chat `finish_reason` some providers end a failed generation with: not a finish. */
export const ERROR_FINISH = 'error';

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

/** The fields of a `message_delta`'s delta that Anthropic's SDK types declare beside stop_reason and stop_sequence (none here). */
export const MESSAGE_DELTA_NULLS = { container: null, stop_details: null } as const;

/** A tool call's arguments (a JSON text) as the object a tool call's input is, or a 400. */
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

/** Anthropic's error `type` for each status its API answers with (its reference, "Errors"). */
export const ANTHROPIC_ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};
