import type { EventSourceMessage } from 'eventsource-parser';
import {
  badValue,
  ERROR_FINISH,
  isObject,
  messagesUsageFromChat,
  namedEvent,
  numberField,
  parseData,
  SseTransformer,
  stopReason,
  swapPrefix,
  unsupported,
  urlFromImageSource,
  type Json,
  MESSAGE_NULLS,
  MESSAGES_USAGE_NULLS,
} from './common.js';
import { Dropped, effortOfThinking, hasCacheControl, sortFields } from './field-policy.js';

/**
 * Anthropic's Messages API for a model on an OpenAI-compatible provider (docs/reference.md §15 "Across
 * formats", docs/translation.md): the Messages request as a chat completion request, and the chat answer,
 * whole or streamed, as the Messages answer and event stream Anthropic sends.
 */

export interface MessagesToChatRequestOptions {
  /** The model id sent to the provider. */
  model: string;
  /** The output cap: the hold's cap. */
  maxTokens: number;
  /** The field that carries it (docs/reference.md §13 "Cap sent upstream"). */
  capField: 'max_tokens' | 'max_completion_tokens';
  /** The model reasons: thinking and `output_config.effort` become `reasoning_effort` (else dropped). */
  reasoning?: boolean;
  /** Where the dropped fields are noted (docs/reference.md §21). */
  dropped?: Dropped;
}

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

/** A tool_result's content (a string, or text blocks) as a tool message's text. */
function toolResultText(content: unknown, param: string): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw badValue(param, 'a string or an array of blocks');
  return content
    .map((b, k) => {
      if (isObject(b) && b.type === 'text' && typeof b.text === 'string') return b.text;
      throw unsupported(`${param}[${k}].type`, 'a tool result sent to this provider holds text only');
    })
    .join('');
}

/**
 * Anthropic messages → chat messages (tool results become `tool` messages, placed first in their turn).
 * A `role: "system"` message (which Anthropic's API takes too) becomes system text (`system`).
 */
function translateMessages(messages: unknown, system: string[]): Json[] {
  if (!Array.isArray(messages) || messages.length === 0)
    throw badValue('messages', 'a non-empty array of messages');
  const out: Json[] = [];
  messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw badValue(at, 'a message is an object');
    if (m.role === 'system') {
      const text = typeof m.content === 'string' ? m.content : systemText(m.content, `${at}.content`);
      if (text !== '') system.push(text);
      return;
    }
    if (m.role !== 'user' && m.role !== 'assistant')
      throw badValue(`${at}.role`, `unknown role ${JSON.stringify(m.role)}`);
    if (typeof m.content === 'string') {
      out.push({ role: m.role, content: m.content });
      return;
    }
    if (!Array.isArray(m.content)) throw badValue(`${at}.content`, 'a string or an array of content blocks');
    if (m.role === 'user') {
      const tools: Json[] = [];
      const parts: Json[] = [];
      m.content.forEach((b, j) => {
        const param = `${at}.content[${j}]`;
        if (!isObject(b)) throw badValue(param, 'a content block is an object');
        switch (b.type) {
          case 'text':
            parts.push({ type: 'text', text: String(b.text ?? '') });
            return;
          case 'image':
            parts.push({
              type: 'image_url',
              image_url: { url: urlFromImageSource(b.source, `${param}.source`) },
            });
            return;
          case 'tool_result':
            if (typeof b.tool_use_id !== 'string')
              throw badValue(`${param}.tool_use_id`, 'the call it answers');
            tools.push({
              role: 'tool',
              tool_call_id: b.tool_use_id,
              content: toolResultText(b.content, `${param}.content`),
            });
            return;
          default:
            throw unsupported(`${param}.type`, `a '${String(b.type)}' block has no equivalent`);
        }
      });
      out.push(...tools);
      if (parts.length) out.push({ role: 'user', content: parts });
      return;
    }
    let text: string | null = null;
    const calls: Json[] = [];
    m.content.forEach((b, j) => {
      const param = `${at}.content[${j}]`;
      if (!isObject(b)) throw badValue(param, 'a content block is an object');
      switch (b.type) {
        case 'text':
          text = (text ?? '') + String(b.text ?? '');
          return;
        case 'tool_use':
          if (typeof b.id !== 'string' || typeof b.name !== 'string')
            throw badValue(param, 'a tool_use block has an id and a name');
          calls.push({
            id: b.id,
            type: 'function',
            function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
          });
          return;
        case 'thinking':
        case 'redacted_thinking':
          // An earlier Anthropic answer's thinking: nothing this provider can take back; left out.
          return;
        default:
          throw unsupported(`${param}.type`, `a '${String(b.type)}' block has no equivalent`);
      }
    });
    const msg: Json = { role: 'assistant', content: text };
    if (calls.length) msg.tool_calls = calls;
    out.push(msg);
  });
  return out;
}

/**
 * An Anthropic Messages request → an OpenAI chat completion request (docs/translation.md). A stream asks
 * for the usage chunk (`stream_options.include_usage`). Throws the project's 400 naming the field that
 * cannot be translated (`unsupported_parameter`) or is malformed.
 */
export function messagesRequestToChat(
  body: Record<string, unknown>,
  opts: MessagesToChatRequestOptions,
): Record<string, unknown> {
  const dropped = opts.dropped ?? new Dropped();
  sortFields('messages', body, dropped);
  if (hasCacheControl(body)) dropped.add('cache_control');
  const inMessages: string[] = [];
  const messages = translateMessages(body.messages, inMessages);
  const system =
    body.system !== undefined && body.system !== null ? [systemText(body.system), ...inMessages] : inMessages;
  const text = system.filter((t) => t !== '').join('\n\n');
  if (text !== '') messages.unshift({ role: 'system', content: text });
  const out: Json = { model: opts.model, messages, [opts.capField]: opts.maxTokens };

  if (body.stop_sequences !== undefined && body.stop_sequences !== null) {
    const s = body.stop_sequences;
    if (!Array.isArray(s) || !s.every((x) => typeof x === 'string'))
      throw badValue('stop_sequences', 'an array of strings');
    if (s.length) out.stop = s;
  }
  const t = numberField(body.temperature, 'temperature');
  if (t !== undefined) out.temperature = t;
  const topP = numberField(body.top_p, 'top_p');
  if (topP !== undefined) out.top_p = topP;

  let hasTools = false;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badValue('tools', 'an array of tools');
    out.tools = body.tools.map((tool, i) => {
      if (!isObject(tool)) throw badValue(`tools[${i}]`, 'a tool is an object');
      if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom')
        throw unsupported(`tools[${i}].type`, `the server tool '${String(tool.type)}' has no equivalent`);
      if (typeof tool.name !== 'string' || tool.name === '')
        throw badValue(`tools[${i}].name`, 'a tool name');
      const fn: Json = { name: tool.name };
      if (typeof tool.description === 'string') fn.description = tool.description;
      fn.parameters = isObject(tool.input_schema) ? tool.input_schema : { type: 'object', properties: {} };
      return { type: 'function', function: fn };
    });
    hasTools = body.tools.length > 0;
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null) {
    if (!isObject(choice)) throw badValue('tool_choice', 'an object with a type');
    switch (choice.type) {
      case 'auto':
        out.tool_choice = 'auto';
        break;
      case 'any':
        out.tool_choice = 'required';
        break;
      case 'none':
        out.tool_choice = 'none';
        break;
      case 'tool':
        if (typeof choice.name !== 'string') throw badValue('tool_choice.name', 'the tool to use');
        out.tool_choice = { type: 'function', function: { name: choice.name } };
        break;
      default:
        throw badValue('tool_choice.type', "'auto', 'any', 'tool' or 'none'");
    }
    if (choice.disable_parallel_tool_use === true && hasTools) out.parallel_tool_calls = false;
  }

  // Thinking and effort ↔ reasoning_effort, for a model that reasons (docs/reference.md §21 "Mapped").
  const config = isObject(body.output_config) ? body.output_config : {};
  const effort = effortOfThinking(body.thinking, config);
  if (effort && opts.reasoning) out.reasoning_effort = effort;
  else {
    if (isObject(body.thinking) && body.thinking.type !== 'disabled') dropped.add('thinking');
    if (config.effort !== undefined && config.effort !== null) dropped.add('output_config');
  }
  // A JSON schema output format (`output_format`, or `output_config.format`) as OpenAI's.
  const format = isObject(config.format)
    ? config.format
    : isObject(body.output_format)
      ? body.output_format
      : null;
  if (format && format.type === 'json_schema' && isObject(format.schema))
    out.response_format = {
      type: 'json_schema',
      json_schema: { name: 'output', schema: format.schema, strict: true },
    };
  else if (format) dropped.add(isObject(config.format) ? 'output_config' : 'output_format');

  if (body.stream !== undefined && body.stream !== null) {
    if (typeof body.stream !== 'boolean') throw badValue('stream', 'a boolean');
    out.stream = body.stream;
    if (body.stream) out.stream_options = { include_usage: true };
  }
  return out;
}

export interface ChatToMessagesAnswerOptions {
  /** The model id the client asked for. */
  model: string;
  /** The service's count of the input, for a stream's `message_start` (the provider tells it only at the end). */
  inputTokens?: number;
  /** The message id; default: the chat id as `msg_…`. */
  id?: string;
}

/** A chat tool call's arguments as a tool_use input (an object; the provider's invalid JSON → `{}`). */
function inputOf(args: unknown): Json {
  if (typeof args !== 'string' || args === '') return {};
  try {
    const v = JSON.parse(args);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

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

/** A `chat.completion` → an Anthropic `message` (the first choice; docs/translation.md). */
export function chatAnswerToMessages(json: Record<string, unknown>, opts: ChatToMessagesAnswerOptions): Json {
  const choice = Array.isArray(json.choices) && isObject(json.choices[0]) ? json.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const content: Json[] = [];
  if (typeof message.content === 'string' && message.content !== '') content.push(textBlock(message.content));
  else if (typeof message.refusal === 'string' && message.refusal !== '')
    content.push(textBlock(message.refusal));
  if (Array.isArray(message.tool_calls))
    for (const c of message.tool_calls)
      if (isObject(c) && isObject(c.function))
        content.push({
          type: 'tool_use',
          id: c.id,
          name: c.function.name,
          input: inputOf(c.function.arguments),
          caller: { type: 'direct' },
        });
  return {
    ...MESSAGE_NULLS,
    id: opts.id ?? swapPrefix(json.id, /^chatcmpl-/, 'msg_', 'msg_translated'),
    type: 'message',
    role: 'assistant',
    model: opts.model,
    content,
    stop_reason: stopReason(choice.finish_reason),
    stop_sequence: null,
    usage: messagesUsageFromChat(json.usage) ?? ZERO_USAGE,
  };
}

/**
 * Turns a chat completion stream into Anthropic's event stream (`event: <type>\ndata: {...}\n\n`), fed in
 * pieces split anywhere: `message_start`, a `content_block_start` / `_delta` / `_stop` run per text and
 * tool_use block, then at `data: [DONE]` a `message_delta` with the stop reason and the whole usage
 * (an OpenAI provider reports it only at the end, so message_start's usage is 0), and `message_stop`.
 */
export class ChatToMessagesStream extends SseTransformer {
  /** `message_stop` was written. */
  done = false;
  /** A `finish_reason` arrived. */
  finished = false;
  upstreamError = false;
  /** The provider's chat usage object, once the usage chunk arrived. */
  usage: Json | null = null;
  finishReason: string | null = null;

  private id: string | null = null;
  private blockIndex = -1;
  /** What the open block is: a text block, or the chat tool call index it streams. */
  private openBlock: { kind: 'text' } | { kind: 'tool'; call: number } | null = null;

  constructor(private readonly opts: ChatToMessagesAnswerOptions) {
    super();
  }

  private emit(type: string, data: Json): void {
    this.out += namedEvent(type, { type, ...data });
  }

  private start(chatId: unknown): void {
    if (this.id !== null) return;
    this.id = this.opts.id ?? swapPrefix(chatId, /^chatcmpl-/, 'msg_', 'msg_translated');
    this.emit('message_start', {
      message: {
        ...MESSAGE_NULLS,
        id: this.id,
        type: 'message',
        role: 'assistant',
        model: this.opts.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // The provider reports the input only at the end: the service's count of it (§21 "Answers").
        usage: { ...ZERO_USAGE, input_tokens: this.opts.inputTokens ?? 0 },
      },
    });
  }

  private closeBlock(): void {
    if (!this.openBlock) return;
    this.emit('content_block_stop', { index: this.blockIndex });
    this.openBlock = null;
  }

  private text(text: string): void {
    if (text === '') return;
    if (this.openBlock?.kind !== 'text') {
      this.closeBlock();
      this.blockIndex++;
      this.openBlock = { kind: 'text' };
      this.emit('content_block_start', { index: this.blockIndex, content_block: textBlock('') });
    }
    this.emit('content_block_delta', { index: this.blockIndex, delta: { type: 'text_delta', text } });
  }

  private toolCall(c: Json): void {
    const call = typeof c.index === 'number' ? c.index : 0;
    const fn = isObject(c.function) ? c.function : {};
    const open = this.openBlock;
    if (open?.kind !== 'tool' || open.call !== call) {
      this.closeBlock();
      this.blockIndex++;
      this.openBlock = { kind: 'tool', call };
      this.emit('content_block_start', {
        index: this.blockIndex,
        content_block: { type: 'tool_use', id: c.id, name: fn.name, input: {}, caller: { type: 'direct' } },
      });
    }
    if (typeof fn.arguments === 'string' && fn.arguments !== '')
      this.emit('content_block_delta', {
        index: this.blockIndex,
        delta: { type: 'input_json_delta', partial_json: fn.arguments },
      });
  }

  /** Writes the end (message_delta, message_stop) if not written yet; for `[DONE]` or the end of the body. */
  end(): string {
    this.finish();
    const out = this.out;
    this.out = '';
    return out;
  }

  private finish(): void {
    if (this.done || this.id === null) return;
    this.closeBlock();
    const usage = messagesUsageFromChat(this.usage);
    this.emit('message_delta', {
      delta: { stop_reason: stopReason(this.finishReason), stop_sequence: null },
      usage: usage ?? { ...ZERO_USAGE, input_tokens: null },
    });
    this.emit('message_stop', {});
    this.done = true;
  }

  protected onEvent(e: EventSourceMessage): void {
    if (this.done) return;
    if (e.data === '[DONE]') {
      this.finish();
      return;
    }
    const chunk = parseData(e.data);
    if (!chunk) return;
    if (isObject(chunk.error)) {
      this.upstreamError = true;
      this.emit('error', {
        error: {
          type: 'api_error',
          message: typeof chunk.error.message === 'string' ? chunk.error.message : 'The provider failed.',
        },
      });
      return;
    }
    this.start(chunk.id);
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    const choice = Array.isArray(chunk.choices)
      ? chunk.choices.find((c) => isObject(c) && (c.index ?? 0) === 0)
      : null;
    if (!isObject(choice)) return;
    const delta = isObject(choice.delta) ? choice.delta : {};
    if (typeof delta.content === 'string') this.text(delta.content);
    if (typeof delta.refusal === 'string') this.text(delta.refusal);
    if (Array.isArray(delta.tool_calls)) for (const c of delta.tool_calls) if (isObject(c)) this.toolCall(c);
    if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '') {
      this.finishReason = choice.finish_reason;
      // An answer ended in the provider's error is not finished (charged nothing when empty).
      if (choice.finish_reason === ERROR_FINISH) this.upstreamError = true;
      else this.finished = true;
      this.closeBlock();
    }
  }
}
