import type { EventSourceMessage } from 'eventsource-parser';
import {
  anthropicTool,
  anthropicToolChoice,
  badValue,
  chatUsageFromMessages,
  dataEvent,
  finishReason,
  imageBlockFromUrl,
  isObject,
  numberField,
  parseArguments,
  parseData,
  mergeMessagesUsage,
  readMessagesUsage,
  SseTransformer,
  swapPrefix,
  temperature,
  textOnly,
  unsupported,
  type ChatFinishReason,
  type Json,
  type MessagesUsageCounts,
} from './common.js';
import { Dropped, effortOf, JSON_TOOL, sortFields, thinkingFor } from './field-policy.js';

/**
 * Chat completions for a model on an Anthropic provider (docs/reference.md §15 "Across formats",
 * docs/translation.md): the client's chat request as a Messages request, and the Messages answer (whole or
 * streamed) as the chat answer an OpenAI provider would have given, so the chat relay meters it unchanged.
 */

export interface ChatToMessagesOptions {
  /** The model id sent to the provider. */
  model: string;
  /** The output cap (`max_tokens`, which Anthropic requires): the hold's cap. */
  maxTokens: number;
  /** The model reasons: `reasoning_effort` becomes thinking (else it is dropped). */
  reasoning?: boolean;
  /** Where the dropped fields are noted (docs/reference.md §21). */
  dropped?: Dropped;
}

/** One user-side content part of a chat message as an Anthropic block. */
function userBlock(part: unknown, param: string): Json {
  if (!isObject(part)) throw badValue(param, 'a content part is an object');
  switch (part.type) {
    case 'text':
      if (typeof part.text !== 'string') throw badValue(`${param}.text`, 'a string');
      return { type: 'text', text: part.text };
    case 'image_url': {
      const url = isObject(part.image_url) ? part.image_url.url : part.image_url;
      return imageBlockFromUrl(url, `${param}.image_url.url`);
    }
    default:
      throw unsupported(`${param}.type`, `a '${String(part.type)}' part has no equivalent`);
  }
}

/** Chat messages → Anthropic `system` and `messages`. */
function translateMessages(messages: unknown): { system: string[]; turns: Json[] } {
  if (!Array.isArray(messages) || messages.length === 0)
    throw badValue('messages', 'a non-empty array of messages');
  const system: string[] = [];
  const turns: Json[] = [];
  messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw badValue(at, 'a message is an object');
    switch (m.role) {
      case 'system':
      case 'developer':
        system.push(textOnly(m.content, `${at}.content`));
        return;
      case 'user': {
        const content =
          typeof m.content === 'string'
            ? m.content
            : Array.isArray(m.content)
              ? m.content.map((p, j) => userBlock(p, `${at}.content[${j}]`))
              : null;
        if (content === null) throw badValue(`${at}.content`, 'a string or an array of content parts');
        turns.push({ role: 'user', content });
        return;
      }
      case 'assistant': {
        if (m.function_call !== undefined && m.function_call !== null)
          throw unsupported(`${at}.function_call`, "the legacy 'function_call' has no equivalent");
        if (m.audio !== undefined && m.audio !== null)
          throw unsupported(`${at}.audio`, 'the provider takes no audio');
        const blocks: Json[] = [];
        if (typeof m.content === 'string') {
          if (m.content !== '') blocks.push({ type: 'text', text: m.content });
        } else if (Array.isArray(m.content)) {
          m.content.forEach((p, j) => {
            const param = `${at}.content[${j}]`;
            if (isObject(p) && p.type === 'text' && typeof p.text === 'string') {
              if (p.text !== '') blocks.push({ type: 'text', text: p.text });
            } else if (isObject(p) && p.type === 'refusal' && typeof p.refusal === 'string') {
              if (p.refusal !== '') blocks.push({ type: 'text', text: p.refusal });
            } else throw unsupported(`${param}.type`, 'an assistant message holds text and refusals only');
          });
        } else if (m.content !== null && m.content !== undefined)
          throw badValue(`${at}.content`, 'a string, an array of content parts, or null');
        if (m.tool_calls !== undefined && m.tool_calls !== null) {
          if (!Array.isArray(m.tool_calls)) throw badValue(`${at}.tool_calls`, 'an array');
          m.tool_calls.forEach((c, j) => {
            const param = `${at}.tool_calls[${j}]`;
            if (!isObject(c)) throw badValue(param, 'a tool call is an object');
            if (c.type !== undefined && c.type !== 'function')
              throw unsupported(`${param}.type`, `a '${String(c.type)}' tool call has no equivalent`);
            if (typeof c.id !== 'string' || !isObject(c.function) || typeof c.function.name !== 'string')
              throw badValue(param, 'a tool call has an id and a function name');
            blocks.push({
              type: 'tool_use',
              id: c.id,
              name: c.function.name,
              input: parseArguments(c.function.arguments, `${param}.function.arguments`),
            });
          });
        }
        turns.push({ role: 'assistant', content: blocks.length ? blocks : '' });
        return;
      }
      case 'tool': {
        if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '')
          throw badValue(`${at}.tool_call_id`, 'a tool message names the call it answers');
        const result = {
          type: 'tool_result',
          tool_use_id: m.tool_call_id,
          content: textOnly(m.content, `${at}.content`, ''),
        };
        const last = turns.at(-1);
        // Consecutive tool results answer one assistant turn: one user turn holds them all.
        if (
          last &&
          last.role === 'user' &&
          Array.isArray(last.content) &&
          last.content.every((b: Json) => b.type === 'tool_result')
        )
          (last.content as Json[]).push(result);
        else turns.push({ role: 'user', content: [result] });
        return;
      }
      case 'function':
        throw unsupported(`${at}.role`, "the legacy 'function' role has no equivalent: use 'tool'");
      default:
        throw badValue(`${at}.role`, `unknown role ${JSON.stringify(m.role)}`);
    }
  });
  return { system, turns };
}

/**
 * An OpenAI chat completion request → an Anthropic Messages request (docs/translation.md). Throws the
 * project's 400 naming the field that cannot be translated (`unsupported_parameter`) or is malformed.
 */
export function chatRequestToMessages(
  body: Record<string, unknown>,
  opts: ChatToMessagesOptions,
): Record<string, unknown> {
  const dropped = opts.dropped ?? new Dropped();
  sortFields('chat', body, dropped);
  const { system, turns } = translateMessages(body.messages);
  const out: Json = { model: opts.model, max_tokens: opts.maxTokens, messages: turns };
  if (system.length) out.system = system.join('\n\n');

  if (body.stop !== undefined && body.stop !== null) {
    const stops = typeof body.stop === 'string' ? [body.stop] : body.stop;
    if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string'))
      throw badValue('stop', 'a string or an array of strings');
    if (stops.length) out.stop_sequences = stops;
  }
  const t = temperature(body.temperature);
  if (t !== undefined) out.temperature = t;
  const topP = numberField(body.top_p, 'top_p');
  if (topP !== undefined) out.top_p = topP;
  const topK = numberField(body.top_k, 'top_k');
  if (topK !== undefined) out.top_k = topK;

  let hasTools = false;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badValue('tools', 'an array of tools');
    out.tools = body.tools.map((tool, i) => {
      if (!isObject(tool) || tool.type !== 'function')
        throw unsupported(
          `tools[${i}].type`,
          `a '${String(isObject(tool) ? tool.type : tool)}' tool has no equivalent`,
        );
      return anthropicTool(tool.function, `tools[${i}].function`);
    });
    hasTools = body.tools.length > 0;
  }
  const choice = anthropicToolChoice(body.tool_choice, body.parallel_tool_calls, hasTools);
  if (choice) out.tool_choice = choice;

  const format = body.response_format;
  if (isObject(format) && format.type === 'json_schema') {
    forceJsonTool(out, isObject(format.json_schema) ? format.json_schema.schema : null, 'response_format');
  } else if (isObject(format) && format.type !== 'text') dropped.add('response_format');

  mapEffort(out, body.reasoning_effort, 'reasoning_effort', opts, dropped);

  if (body.stream !== undefined && body.stream !== null) {
    if (typeof body.stream !== 'boolean') throw badValue('stream', 'a boolean');
    out.stream = body.stream;
  }
  return out;
}

/**
 * A `json_schema` output format as a forced tool whose input schema is the schema (the answer's text is
 * its input as JSON, docs/reference.md §21 "Mapped").
 */
export function forceJsonTool(out: Json, schema: unknown, param: string): void {
  if (!isObject(schema)) throw badValue(param, 'a json_schema format has a schema object');
  const tools = Array.isArray(out.tools) ? (out.tools as Json[]) : [];
  tools.push({ name: JSON_TOOL, description: 'Give the answer as this JSON object.', input_schema: schema });
  out.tools = tools;
  out.tool_choice = { type: 'tool', name: JSON_TOOL };
}

/**
 * An OpenAI reasoning effort as Anthropic thinking, for a model that reasons (docs/reference.md §21
 * "Mapped"); otherwise, or when the cap leaves no room for Anthropic's smallest budget, or a tool is forced
 * (Anthropic takes no thinking then), dropped and named. `none` asks for no reasoning: nothing to send.
 */
export function mapEffort(
  out: Json,
  value: unknown,
  param: string,
  opts: { maxTokens: number; reasoning?: boolean },
  dropped: Dropped,
): void {
  if (value === undefined || value === null || value === 'none') return;
  const effort = effortOf(value);
  const forced =
    isObject(out.tool_choice) && (out.tool_choice.type === 'tool' || out.tool_choice.type === 'any');
  const thinking = effort && opts.reasoning && !forced ? thinkingFor(effort, opts.maxTokens) : null;
  if (thinking) {
    out.thinking = thinking;
    // Anthropic takes thinking only with its default sampling: the client's is dropped (and named).
    for (const key of ['temperature', 'top_k'])
      if (out[key] !== undefined) {
        delete out[key];
        dropped.add(key);
      }
  } else dropped.add(param);
}

export interface MessagesToChatOptions {
  /** The model id the client asked for (the answer names it, not the provider's). */
  model: string;
  /** The client asked for a `json_schema` format: the forced tool's input is the answer's text. */
  jsonTool?: boolean;
  /** The answer's id; default: the message id as `chatcmpl-…`. */
  id?: string;
  /** `created` (Unix seconds); default: now. */
  created?: number;
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** Anthropic content blocks → the chat message's text and tool calls (thinking blocks are left out). */
function chatMessageFromBlocks(content: unknown, jsonTool = false): Json {
  let text: string | null = null;
  const toolCalls: Json[] = [];
  if (Array.isArray(content))
    for (const block of content) {
      if (!isObject(block)) continue;
      if (block.type === 'text' && typeof block.text === 'string') text = (text ?? '') + block.text;
      else if (block.type === 'tool_use' && jsonTool && block.name === JSON_TOOL)
        text = (text ?? '') + JSON.stringify(block.input ?? {});
      else if (block.type === 'tool_use')
        toolCalls.push({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
        });
    }
  const message: Json = { role: 'assistant', content: text, refusal: null, annotations: [] };
  if (toolCalls.length) message.tool_calls = toolCalls;
  return message;
}

/** An Anthropic Messages answer → a `chat.completion` (docs/translation.md). */
export function messagesAnswerToChat(json: Record<string, unknown>, opts: MessagesToChatOptions): Json {
  const answer: Json = {
    id: opts.id ?? swapPrefix(json.id, /^msg_/, 'chatcmpl-', 'chatcmpl-translated'),
    object: 'chat.completion',
    created: opts.created ?? nowSeconds(),
    model: opts.model,
    choices: [
      {
        index: 0,
        message: chatMessageFromBlocks(json.content, opts.jsonTool),
        logprobs: null,
        finish_reason:
          opts.jsonTool && json.stop_reason === 'tool_use' ? 'stop' : finishReason(json.stop_reason),
      },
    ],
  };
  const usage = readMessagesUsage(json.usage);
  if (usage) answer.usage = chatUsageFromMessages(usage);
  return answer;
}

export interface MessagesToChatStreamOptions extends MessagesToChatOptions {
  /**
   * Write the usage chunk (`choices: []`) at the end, as an OpenAI provider does when asked
   * `stream_options.include_usage`. The proxy always asks its providers for it (the chat relay removes it
   * when the client did not), so it passes true.
   */
  includeUsage: boolean;
}

/**
 * Turns an Anthropic Messages event stream into the chat completion chunks an OpenAI provider would have
 * streamed (`data: {...}\n\n`), fed in pieces split anywhere. It never writes `data: [DONE]`: the caller
 * ends the stream (the chat relay's own end, after settlement) once `done` is true.
 */
export class MessagesToChatStream extends SseTransformer {
  /** `message_stop` arrived: the answer is complete. */
  done = false;
  /** A `finish_reason` was written. */
  finished = false;
  /** The provider sent an `error` event (written as an OpenAI-style error chunk). */
  upstreamError = false;
  /** The usage seen so far (message_start's input side, message_delta's cumulative counts). */
  usage: MessagesUsageCounts | null = null;
  /** The provider's `stop_reason`, once message_delta carried it. */
  stopReason: string | null = null;

  private id: string;
  private readonly created: number;
  /** Anthropic block index → chat tool call index, for the tool_use blocks. */
  private readonly toolIndex = new Map<number, number>();
  /** Block indexes of the forced JSON tool (streamed as text). */
  private readonly jsonBlocks = new Set<number>();
  private started = false;

  constructor(private readonly opts: MessagesToChatStreamOptions) {
    super();
    this.id = opts.id ?? 'chatcmpl-translated';
    this.created = opts.created ?? nowSeconds();
  }

  /** The usage as chat's usage object, or null when none was seen. */
  chatUsage(): Json | null {
    return this.usage ? chatUsageFromMessages(this.usage) : null;
  }

  private chunk(delta: Json, finish: ChatFinishReason | null = null): void {
    this.out += dataEvent({
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.opts.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.chunk({ role: 'assistant', content: '' });
  }

  private mergeUsage(u: unknown): void {
    if (!isObject(u)) return;
    this.usage = mergeMessagesUsage(this.usage, u);
  }

  protected onEvent(e: EventSourceMessage): void {
    if (this.done) return;
    const data = parseData(e.data);
    if (!data) return;
    const type = typeof data.type === 'string' ? data.type : e.event;
    switch (type) {
      case 'message_start': {
        const message = isObject(data.message) ? data.message : {};
        if (this.opts.id === undefined) this.id = swapPrefix(message.id, /^msg_/, 'chatcmpl-', this.id);
        this.mergeUsage(message.usage);
        this.start();
        return;
      }
      case 'content_block_start': {
        this.start();
        const block = isObject(data.content_block) ? data.content_block : {};
        if (block.type === 'text' && typeof block.text === 'string' && block.text !== '')
          this.chunk({ content: block.text });
        else if (block.type === 'tool_use' && this.opts.jsonTool && block.name === JSON_TOOL)
          this.jsonBlocks.add(Number(data.index));
        else if (block.type === 'tool_use') {
          const index = this.toolIndex.size;
          this.toolIndex.set(Number(data.index), index);
          const args =
            isObject(block.input) && Object.keys(block.input).length ? JSON.stringify(block.input) : '';
          this.chunk({
            tool_calls: [
              { index, id: block.id, type: 'function', function: { name: block.name, arguments: args } },
            ],
          });
        }
        return;
      }
      case 'content_block_delta': {
        const delta = isObject(data.delta) ? data.delta : {};
        if (delta.type === 'text_delta' && typeof delta.text === 'string' && delta.text !== '')
          this.chunk({ content: delta.text });
        else if (
          delta.type === 'input_json_delta' &&
          typeof delta.partial_json === 'string' &&
          this.jsonBlocks.has(Number(data.index))
        ) {
          if (delta.partial_json !== '') this.chunk({ content: delta.partial_json });
        } else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
          const index = this.toolIndex.get(Number(data.index));
          if (index !== undefined && delta.partial_json !== '')
            this.chunk({ tool_calls: [{ index, function: { arguments: delta.partial_json } }] });
        }
        // thinking_delta, signature_delta, citations_delta: nothing in chat's format
        return;
      }
      case 'message_delta': {
        const delta = isObject(data.delta) ? data.delta : {};
        if (typeof delta.stop_reason === 'string') this.stopReason = delta.stop_reason;
        this.mergeUsage(data.usage);
        return;
      }
      case 'message_stop': {
        this.start();
        this.chunk(
          {},
          this.opts.jsonTool && this.stopReason === 'tool_use' ? 'stop' : finishReason(this.stopReason),
        );
        this.finished = true;
        if (this.opts.includeUsage && this.usage)
          this.out += dataEvent({
            id: this.id,
            object: 'chat.completion.chunk',
            created: this.created,
            model: this.opts.model,
            choices: [],
            usage: chatUsageFromMessages(this.usage),
          });
        this.done = true;
        return;
      }
      case 'error': {
        const err = isObject(data.error) ? data.error : {};
        this.upstreamError = true;
        this.out += dataEvent({
          error: {
            message: typeof err.message === 'string' ? err.message : 'The provider failed.',
            type: 'api_error',
            param: null,
            code: typeof err.type === 'string' ? err.type : null,
          },
        });
        return;
      }
      default:
        // ping, content_block_stop, and event types added later: nothing to write
        return;
    }
  }
}
