import {
  ANTHROPIC_ERROR_TYPES,
  badValue,
  isObject,
  MESSAGE_DELTA_NULLS,
  MESSAGE_NULLS,
  MESSAGES_USAGE_NULLS,
  namedEvent,
  numberField,
  unsupported,
  withPrefix,
  type Json,
} from './common.js';
import { effortOfThinking, hasCacheControl } from './field-policy.js';
import { booleanField, stopList } from './openai-shared.js';
import { ClientStreamEncoder } from './stream-encoder.js';
import type {
  ClientAdapter,
  ClientAnswerContext,
  ImageSource,
  Message,
  NeutralAnswer,
  NeutralError,
  NeutralRequest,
  Part,
  Reasoning,
  RequestInContext,
  StopReason,
  StreamEvent,
  ToolChoice,
  Usage,
} from './neutral.js';

/**
 * Anthropic's Messages API as a client format, to and from the neutral model (docs/translation.md): the
 * Messages request read; the neutral answer, whole or streamed, written as the Messages answer and event
 * stream Anthropic sends.
 */

/** The text of an Anthropic `system` (a string or text blocks). */
function systemText(system: unknown, param = 'system'): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) throw badValue(param, 'a string or an array of text blocks');
  return system
    .map((b, i) => {
      if (isObject(b) && b.type === 'text' && typeof b.text === 'string') return b.text;
      throw unsupported(`${param}[${i}].type`, 'the system prompt holds text blocks only');
    })
    .join('\n');
}

/** An image block's source as a neutral one, or a 400 naming `param`. */
function imageSource(source: unknown, param: string): ImageSource {
  if (isObject(source)) {
    if (source.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string')
      return { kind: 'base64', mediaType: source.media_type, data: source.data };
    if (source.type === 'url' && typeof source.url === 'string') return { kind: 'url', url: source.url };
    if (source.type === 'file') return { kind: 'file', raw: source };
  }
  throw badValue(param, 'an image source is base64 or url');
}

/** One content block of a user turn as a neutral part. */
function userPart(b: unknown, param: string): Part {
  if (!isObject(b)) throw badValue(param, 'a content block is an object');
  switch (b.type) {
    case 'text':
      return { type: 'text', text: String(b.text ?? '') };
    case 'image':
      return { type: 'image', source: imageSource(b.source, `${param}.source`), param: `${param}.source` };
    case 'tool_result': {
      if (typeof b.tool_use_id !== 'string') throw badValue(`${param}.tool_use_id`, 'the call it answers');
      const c = b.content;
      if (c !== undefined && c !== null && typeof c !== 'string' && !Array.isArray(c))
        throw badValue(`${param}.content`, 'a string or an array of blocks');
      return { type: 'tool_result', toolUseId: b.tool_use_id, content: c ?? '', param };
    }
    default:
      throw unsupported(`${param}.type`, `a '${String(b.type)}' block has no equivalent`);
  }
}

/** One content block of an assistant turn as a neutral part. */
function assistantPart(b: unknown, param: string): Part {
  if (!isObject(b)) throw badValue(param, 'a content block is an object');
  switch (b.type) {
    case 'text':
      return { type: 'text', text: String(b.text ?? '') };
    case 'tool_use':
      if (typeof b.id !== 'string' || typeof b.name !== 'string')
        throw badValue(param, 'a tool_use block has an id and a name');
      return { type: 'tool_use', id: b.id, name: b.name, input: (b.input ?? {}) as Json };
    case 'thinking':
      return { type: 'thinking', text: String(b.thinking ?? ''), signature: String(b.signature ?? '') };
    case 'redacted_thinking':
      return { type: 'thinking', text: '', signature: String(b.data ?? ''), redacted: true };
    default:
      throw unsupported(`${param}.type`, `a '${String(b.type)}' block has no equivalent`);
  }
}

/** Anthropic messages → neutral turns; a `role: "system"` message (Anthropic takes it too) → `system`. */
function readMessages(messages: unknown, system: string[]): Message[] {
  if (!Array.isArray(messages) || messages.length === 0)
    throw badValue('messages', 'a non-empty array of messages');
  return messages.flatMap((m, i): Message[] => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw badValue(at, 'a message is an object');
    if (m.role === 'system') {
      const text = typeof m.content === 'string' ? m.content : systemText(m.content, `${at}.content`);
      if (text !== '') system.push(text);
      return [];
    }
    if (m.role !== 'user' && m.role !== 'assistant')
      throw badValue(`${at}.role`, `unknown role ${JSON.stringify(m.role)}`);
    if (typeof m.content === 'string') return [{ role: m.role, content: m.content }];
    if (!Array.isArray(m.content)) throw badValue(`${at}.content`, 'a string or an array of content blocks');
    const read = m.role === 'user' ? userPart : assistantPart;
    return [{ role: m.role, content: m.content.map((b, j) => read(b, `${at}.content[${j}]`)) }];
  });
}

/** Anthropic's `tool_choice` as the neutral one (`disable_parallel_tool_use` → no parallel calls). */
function toolChoiceOf(choice: unknown): { toolChoice?: ToolChoice; parallelToolCalls?: boolean } {
  if (choice === undefined || choice === null) return {};
  if (!isObject(choice)) throw badValue('tool_choice', 'an object with a type');
  let toolChoice: ToolChoice;
  switch (choice.type) {
    case 'auto':
    case 'any':
    case 'none':
      toolChoice = { type: choice.type };
      break;
    case 'tool':
      if (typeof choice.name !== 'string') throw badValue('tool_choice.name', 'the tool to use');
      toolChoice = { type: 'tool', name: choice.name };
      break;
    default:
      throw badValue('tool_choice.type', "'auto', 'any', 'tool' or 'none'");
  }
  return choice.disable_parallel_tool_use === true
    ? { toolChoice, parallelToolCalls: false }
    : { toolChoice };
}

/** Thinking and `output_config.effort` as neutral reasoning (docs/reference.md §21 "Mapped"). */
function reasoningOf(thinking: unknown, config: Json): Reasoning | undefined {
  const effort = effortOfThinking(thinking, config);
  const fields: string[] = [];
  if (isObject(thinking) && thinking.type !== 'disabled') fields.push('thinking');
  // `output_config` may also carry a format that is honoured (a JSON schema): then only its effort is dropped.
  if (config.effort !== undefined && config.effort !== null)
    fields.push(
      Object.keys(config).some((k) => k !== 'effort' && config[k] != null)
        ? 'output_config.effort'
        : 'output_config',
    );
  if (!effort && !fields.length) return undefined;
  const r: Reasoning = { effort, fields };
  if (isObject(thinking) && typeof thinking.budget_tokens === 'number')
    r.budgetTokens = thinking.budget_tokens;
  return r;
}

/** A Messages request as the neutral request, or the 400 naming the field. */
function requestIn(body: Json, ctx: RequestInContext): NeutralRequest {
  if (hasCacheControl(body)) ctx.dropped.add('cache_control');
  const inMessages: string[] = [];
  const messages = readMessages(body.messages, inMessages);
  const system =
    body.system !== undefined && body.system !== null ? [systemText(body.system), ...inMessages] : inMessages;
  const req: NeutralRequest = { model: ctx.model, system, messages, maxTokens: ctx.maxTokens };
  const stop = stopList(body.stop_sequences, 'stop_sequences', false);
  if (stop) req.stop = stop;
  const t = numberField(body.temperature, 'temperature');
  if (t !== undefined) req.temperature = t;
  const topP = numberField(body.top_p, 'top_p');
  if (topP !== undefined) req.topP = topP;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badValue('tools', 'an array of tools');
    req.tools = body.tools.map((tool, i) => {
      if (!isObject(tool)) throw badValue(`tools[${i}]`, 'a tool is an object');
      if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom')
        throw unsupported(`tools[${i}].type`, `the server tool '${String(tool.type)}' has no equivalent`);
      if (typeof tool.name !== 'string' || tool.name === '')
        throw badValue(`tools[${i}].name`, 'a tool name');
      return {
        name: tool.name,
        ...(typeof tool.description === 'string' ? { description: tool.description } : {}),
        inputSchema: isObject(tool.input_schema) ? tool.input_schema : { type: 'object', properties: {} },
      };
    });
  }
  Object.assign(req, toolChoiceOf(body.tool_choice));
  const config = isObject(body.output_config) ? body.output_config : {};
  const reasoning = reasoningOf(body.thinking, config);
  if (reasoning) req.reasoning = reasoning;
  // A JSON schema output format (`output_format`, or `output_config.format`).
  const format = isObject(config.format)
    ? config.format
    : isObject(body.output_format)
      ? body.output_format
      : null;
  if (format && format.type === 'json_schema' && isObject(format.schema)) req.jsonSchema = format.schema;
  else if (format) ctx.dropped.add(isObject(config.format) ? 'output_config' : 'output_format');
  const stream = booleanField(body.stream, 'stream');
  if (stream !== undefined) req.stream = stream;
  return req;
}

/** The neutral stop as Anthropic's `stop_reason` (null: the generation ended in the provider's error). */
const stopReasonOf = (stop: StopReason | null): string | null =>
  stop === null
    ? null
    : { end: 'end_turn', length: 'max_tokens', tool_use: 'tool_use', refusal: 'refusal' }[stop];

/** Anthropic usage: `input_tokens` is the input neither read from nor written to the cache. */
export const messagesUsage = (u: Usage): Json => ({
  ...MESSAGES_USAGE_NULLS,
  input_tokens: u.input,
  cache_creation_input_tokens: u.cacheWrite,
  cache_read_input_tokens: u.cacheRead,
  output_tokens: u.output,
  // The reasoning part, as Anthropic reports its thinking: charged at the reasoning price (§21 "Answers").
  output_tokens_details: { thinking_tokens: u.thinking },
});

const ZERO_USAGE = {
  ...MESSAGES_USAGE_NULLS,
  input_tokens: 0,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
  output_tokens: 0,
  output_tokens_details: null,
};

/** A text block as Anthropic's SDK types declare it. */
const textBlock = (text: string): Json => ({ type: 'text', text, citations: null });

/** The neutral answer as an Anthropic `message` (thinking from another kind has no signature: left out). */
function answerOut(answer: NeutralAnswer, ctx: ClientAnswerContext): Json {
  const content: Json[] = [];
  for (const p of answer.content)
    if (p.type === 'text') content.push(textBlock(p.text));
    else if (p.type === 'tool_use')
      content.push({ type: 'tool_use', id: p.id, name: p.name, input: p.input, caller: { type: 'direct' } });
  return {
    ...MESSAGE_NULLS,
    id: ctx.id ?? withPrefix(answer.id, 'msg_', 'msg_translated'),
    type: 'message',
    role: 'assistant',
    model: ctx.model,
    content,
    stop_reason: stopReasonOf(answer.stop),
    stop_sequence: null,
    usage: answer.usage ? messagesUsage(answer.usage) : ZERO_USAGE,
  };
}

/**
 * Writes neutral events as Anthropic's event stream (`event: <type>\ndata: {...}\n\n`): `message_start`
 * (its usage: the service's count of the input, as the provider may tell it only at the end), a
 * `content_block_start` / `_delta` / `_stop` run per part, then at `finish` a `message_delta` with the stop
 * reason and the whole usage, and `message_stop`.
 */
export class MessagesStreamEncoder extends ClientStreamEncoder {
  /** undefined: no stop seen (a cut stream ends as `end_turn`); null: ended in the provider's error. */
  private stop: StopReason | null | undefined;
  private started = false;

  constructor(private readonly ctx: ClientAnswerContext) {
    super();
  }

  private emit(type: string, data: Json): void {
    this.out += namedEvent(type, { type, ...data });
  }

  protected on(e: StreamEvent): void {
    switch (e.type) {
      case 'start':
        if (this.started) return;
        this.started = true;
        this.emit('message_start', {
          message: {
            ...MESSAGE_NULLS,
            id: this.ctx.id ?? withPrefix(e.id, 'msg_', 'msg_translated'),
            type: 'message',
            role: 'assistant',
            model: this.ctx.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { ...ZERO_USAGE, input_tokens: this.ctx.inputTokens ?? 0 },
          },
        });
        return;
      case 'part_start': {
        const p = e.part;
        if (p.type === 'text') {
          this.emit('content_block_start', { index: e.index, content_block: textBlock('') });
          if (p.text !== '') this.on({ type: 'text_delta', index: e.index, text: p.text });
        } else if (p.type === 'tool_use') {
          const block = { type: 'tool_use', id: p.id, name: p.name, input: {}, caller: { type: 'direct' } };
          this.emit('content_block_start', { index: e.index, content_block: block });
          if (p.args !== '') this.on({ type: 'tool_delta', index: e.index, args: p.args });
        }
        return;
      }
      case 'text_delta':
        this.emit('content_block_delta', { index: e.index, delta: { type: 'text_delta', text: e.text } });
        return;
      case 'tool_delta':
        this.emit('content_block_delta', {
          index: e.index,
          delta: { type: 'input_json_delta', partial_json: e.args },
        });
        return;
      case 'part_end':
        this.emit('content_block_stop', { index: e.index });
        return;
      case 'usage':
        this.usage = e.usage;
        return;
      case 'stop':
        this.stop = e.stop;
        // An answer ended in the provider's error is not finished (charged nothing when empty).
        if (e.stop === null) this.upstreamError = true;
        else this.finished = true;
        return;
      case 'finish':
        if (!this.started) return;
        this.emit('message_delta', {
          delta: {
            ...MESSAGE_DELTA_NULLS,
            stop_reason: stopReasonOf(this.stop === undefined ? 'end' : this.stop),
            stop_sequence: null,
          },
          usage: this.usage ? messagesUsage(this.usage) : { ...ZERO_USAGE, input_tokens: null },
        });
        this.emit('message_stop', {});
        this.done = true;
        return;
      case 'error':
        this.upstreamError = true;
        this.emit('error', {
          error: { type: 'api_error', message: e.error.message ?? 'The provider failed.' },
        });
        return;
      default:
        // thinking from another kind carries no signature Anthropic's clients could send back
        return;
    }
  }

  tail(): string {
    return '';
  }
}

const ANTHROPIC_TYPES = new Set(Object.values(ANTHROPIC_ERROR_TYPES));

/**
 * A provider's error as Anthropic's `{type: "error", error: {type, message}}`, typed by the answer's
 * status: another kind's own types are not Anthropic's (OpenAI answers a 401 or a 404 with
 * `invalid_request_error`, a 429 with `tokens` or `requests`), and Anthropic's clients read the type.
 */
const errorOut = (e: NeutralError, status?: number): string =>
  JSON.stringify({
    type: 'error',
    error: {
      type: anthropicTypeOf(e, status),
      message: e.message ?? 'The model provider refused the request.',
    },
  });

/** The status's Anthropic type; else the error's own type when it is one of Anthropic's (or no status is known). */
function anthropicTypeOf(e: NeutralError, status: number | undefined): string {
  if (status === undefined) return e.type ?? 'invalid_request_error';
  return (
    ANTHROPIC_ERROR_TYPES[status] ??
    (e.type !== null && ANTHROPIC_TYPES.has(e.type) ? e.type : 'invalid_request_error')
  );
}

export const messagesClient: ClientAdapter = {
  format: 'messages',
  capFields: ['max_tokens'],
  requestIn,
  answerOut,
  streamOut: (ctx) => new MessagesStreamEncoder(ctx),
  errorOut,
};
