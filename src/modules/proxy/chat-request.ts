import { invalid } from '../../shared/errors.js';
import type { CapParameter } from '../providers/provider-client.js';

/**
 * Roles a message may have. The spec names `system`, `user` and `assistant`; `tool` and `developer`
 * are accepted too because the proxy passes `tools` through, and a tool-calling conversation sends the
 * tool results back as `tool` messages (and current OpenAI models take `developer` instructions).
 * `function` is the older form of a tool result (answering `function_call`), which OpenAI still takes.
 */
export const MESSAGE_ROLES = ['system', 'user', 'assistant', 'tool', 'developer', 'function'] as const;
export type MessageRole = (typeof MESSAGE_ROLES)[number];

const NAME_PATTERN = /^[a-zA-Z0-9_]{1,64}$/;
const MAX_MODEL_LENGTH = 200;
const MAX_N = 128;

/** One validated message, as sent by the client (content may be a string, parts, or null). */
export interface ChatMessage {
  role: MessageRole;
  content: unknown;
  name?: string;
  [key: string]: unknown;
}

/** A validated chat-completion request: what the proxy needs, plus the client's body to pass through. */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream: boolean;
  /** The client asked for the usage chunk (`stream_options.include_usage`). */
  includeUsage: boolean;
  /** The smaller of `max_tokens` / `max_completion_tokens` the client sent, or null. */
  clientMaxTokens: number | null;
  /** The cap field(s) the client sent, in this order; empty when it sent none (see {@link capFieldsFor}). */
  capFields: CapField[];
  /** Number of choices; the hold covers every one of them. */
  n: number;
  /** The client's body, untouched: every parameter the proxy does not manage is forwarded as is. */
  body: Record<string, unknown>;
}

export type CapField = 'max_tokens' | 'max_completion_tokens';

/**
 * The field(s) that carry the completion cap upstream (docs/reference.md §13 "Cap sent upstream"): exactly
 * the client's own when it sent one or both; when it sent neither, `max_completion_tokens` (OpenAI's
 * reasoning models refuse `max_tokens`), or `max_tokens` for a provider connected with
 * `capParameter: MAX_TOKENS` (an older server).
 */
export function capFieldsFor(clientFields: readonly CapField[], capParameter: CapParameter): CapField[] {
  if (clientFields.length > 0) return [...clientFields];
  return [capParameter === 'MAX_TOKENS' ? 'max_tokens' : 'max_completion_tokens'];
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function positiveInt(
  body: Record<string, unknown>,
  field: string,
  max = Number.MAX_SAFE_INTEGER,
): number | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max)
    throw invalid(`'${field}' must be an integer between 1 and ${max}`, field, 'invalid_value');
  return v;
}

/**
 * The deepest nesting of arrays and objects a request body may have. Real bodies (messages, content
 * parts, tool schemas) stay far below it; much deeper ones only overflow the stack of the recursive code
 * that counts, translates and serializes them (a 20,000-deep tool schema did).
 */
export const MAX_BODY_DEPTH = 128;

/** The 400 for a body nested deeper than MAX_BODY_DEPTH, found without recursion. */
function checkDepth(body: unknown): void {
  const stack: [unknown, number][] = [[body, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (depth > MAX_BODY_DEPTH)
      throw invalid(
        `request body is nested deeper than ${MAX_BODY_DEPTH} levels of arrays and objects`,
        null,
        'invalid_body',
      );
    if (Array.isArray(v)) {
      for (const item of v) if (typeof item === 'object' && item !== null) stack.push([item, depth + 1]);
    } else if (typeof v === 'object' && v !== null) {
      for (const key in v) {
        const item = (v as Record<string, unknown>)[key];
        if (typeof item === 'object' && item !== null) stack.push([item, depth + 1]);
      }
    }
  }
}

/**
 * The checks every body shares (chat, Responses, embeddings, Messages and its count): a JSON object,
 * nested at most MAX_BODY_DEPTH deep, naming a model.
 */
export function checkBodyAndModel(input: unknown): { body: Record<string, any>; model: string } {
  if (!isObject(input)) throw invalid('request body must be a JSON object', null, 'invalid_body');
  checkDepth(input);
  const model = input.model;
  if (model === undefined || model === null || model === '')
    throw invalid("you must provide a model parameter ('model')", 'model', 'missing_required_parameter');
  if (typeof model !== 'string' || model.length > MAX_MODEL_LENGTH)
    throw invalid(
      `'model' must be a string of at most ${MAX_MODEL_LENGTH} characters`,
      'model',
      'invalid_type',
    );
  return { body: input, model };
}

/**
 * Validates a chat-completion body (spec "Message" and "Chat completion request body" rules) and
 * returns what the proxy needs. Throws a 400 naming the offending field (`param`) in OpenAI's style,
 * e.g. `messages[0].role`. Parameters the proxy does not manage are left for the upstream to judge.
 */
export function parseChatRequest(input: unknown): ChatRequest {
  const { body, model } = checkBodyAndModel(input);

  const messages = body.messages;
  if (messages === undefined || messages === null)
    throw invalid("missing required parameter: 'messages'", 'messages', 'missing_required_parameter');
  if (!Array.isArray(messages)) throw invalid("'messages' must be an array", 'messages', 'invalid_type');
  if (messages.length === 0)
    throw invalid("'messages' must contain at least 1 message", 'messages', 'empty_array');
  messages.forEach((m, i) => checkMessage(m, i));

  const stream = body.stream;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean')
    throw invalid("'stream' must be a boolean", 'stream', 'invalid_type');

  const options = body.stream_options;
  if (options !== undefined && options !== null) {
    if (!isObject(options))
      throw invalid("'stream_options' must be an object", 'stream_options', 'invalid_type');
    if (options.include_usage !== undefined && typeof options.include_usage !== 'boolean')
      throw invalid(
        "'stream_options.include_usage' must be a boolean",
        'stream_options.include_usage',
        'invalid_type',
      );
  }

  const maxTokens = positiveInt(body, 'max_tokens');
  const maxCompletionTokens = positiveInt(body, 'max_completion_tokens');
  const n = positiveInt(body, 'n', MAX_N) ?? 1;

  const capFields: ChatRequest['capFields'] = [];
  if (maxTokens !== null) capFields.push('max_tokens');
  if (maxCompletionTokens !== null) capFields.push('max_completion_tokens');
  const given = [maxTokens, maxCompletionTokens].filter((x): x is number => x !== null);

  return {
    model,
    messages: messages as ChatMessage[],
    stream: stream === true,
    includeUsage: isObject(options) && options.include_usage === true,
    clientMaxTokens: given.length ? Math.min(...given) : null,
    capFields,
    n,
    body,
  };
}

function checkMessage(m: unknown, i: number): void {
  const at = `messages[${i}]`;
  if (!isObject(m)) throw invalid(`'${at}' must be an object`, at, 'invalid_type');
  if (m.role === undefined || m.role === null)
    throw invalid(`missing required parameter: '${at}.role'`, `${at}.role`, 'missing_required_parameter');
  if (typeof m.role !== 'string' || !(MESSAGE_ROLES as readonly string[]).includes(m.role))
    throw invalid(
      `invalid value for '${at}.role': ${JSON.stringify(m.role)}. Supported values are: ${MESSAGE_ROLES.map((r) => `'${r}'`).join(', ')}`,
      `${at}.role`,
      'invalid_value',
    );
  const content = m.content;
  const contentOk =
    typeof content === 'string' ||
    (Array.isArray(content) && content.every(isObject)) ||
    // an assistant turn that only calls tools has no content; a function result may be null
    (m.role === 'assistant' && (content === null || content === undefined)) ||
    (m.role === 'function' && content === null);
  if (!contentOk)
    throw invalid(
      content === undefined || content === null
        ? `missing required parameter: '${at}.content'`
        : `'${at}.content' must be a string or an array of content parts`,
      `${at}.content`,
      content === undefined || content === null ? 'missing_required_parameter' : 'invalid_type',
    );
  if (m.role === 'function' && (m.name === undefined || m.name === null))
    throw invalid(
      `missing required parameter: '${at}.name' (a function message names the function it answers)`,
      `${at}.name`,
      'missing_required_parameter',
    );
  if (m.name !== undefined && m.name !== null && (typeof m.name !== 'string' || !NAME_PATTERN.test(m.name)))
    throw invalid(
      `invalid value for '${at}.name': it must match ^[a-zA-Z0-9_]{1,64}$ (letters, digits, underscore; 1 to 64 characters)`,
      `${at}.name`,
      'invalid_value',
    );
}
