import type { EventSourceMessage } from 'eventsource-parser';
import {
  anthropicTool,
  anthropicToolChoice,
  badValue,
  checkFields,
  imageBlockFromUrl,
  isObject,
  namedEvent,
  numberField,
  parseArguments,
  parseData,
  readMessagesUsage,
  responsesUsageFromMessages,
  SseTransformer,
  swapPrefix,
  temperature,
  textOnly,
  unsupported,
  type Json,
  type MessagesUsageCounts,
} from './common.js';

/**
 * OpenAI's Responses API for a model on an Anthropic provider (docs/reference.md §15 "Across formats",
 * docs/translation.md): the request as a Messages request; the Messages answer, whole or streamed, as the
 * `response` object and the event stream OpenAI sends (the Responses relay meters it unchanged).
 */

export interface ResponsesToMessagesOptions {
  /** The model id sent to the provider. */
  model: string;
  /** The output cap (`max_tokens`): the hold's cap. */
  maxTokens: number;
}

const RESPONSES_KNOWN = new Set([
  'model',
  'input',
  'instructions',
  'max_output_tokens',
  'stream',
  'stream_options',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  // dropped: no effect on the answer, and the end user's identity never goes upstream
  'user',
  'safety_identifier',
  'metadata',
  'store',
  'service_tier',
  'prompt_cache_key',
]);

const RESPONSES_REFUSED: Record<string, (v: unknown) => string | null> = {
  previous_response_id: () => 'stored responses cannot be continued on this provider',
  conversation: () => 'stored conversations cannot be continued on this provider',
  prompt: () => 'stored prompts have no equivalent',
  background: (v) => (v === false ? null : 'background responses have no equivalent'),
  include: (v) => (Array.isArray(v) && v.length === 0 ? null : 'extra output data has no equivalent'),
  reasoning: (v) =>
    isObject(v) &&
    (v.effort === undefined || v.effort === null) &&
    (v.summary === undefined || v.summary === null)
      ? null
      : 'reasoning settings have no equivalent',
  text: (v) =>
    isObject(v) &&
    (v.format === undefined || v.format === null || (isObject(v.format) && v.format.type === 'text')) &&
    (v.verbosity === undefined || v.verbosity === null)
      ? null
      : 'structured output formats and verbosity are not translated',
  truncation: (v) => (v === 'disabled' ? null : 'automatic truncation has no equivalent'),
  top_logprobs: () => 'the provider returns no log probabilities',
  max_tool_calls: () => 'a limit on built-in tool calls has no equivalent',
};

/** One content part of an input message as an Anthropic block. */
function inputBlock(part: unknown, param: string): Json {
  if (!isObject(part)) throw badValue(param, 'a content part is an object');
  switch (part.type) {
    case 'input_text':
    case 'output_text':
      if (typeof part.text !== 'string') throw badValue(`${param}.text`, 'a string');
      return { type: 'text', text: part.text };
    case 'refusal':
      if (typeof part.refusal !== 'string') throw badValue(`${param}.refusal`, 'a string');
      return { type: 'text', text: part.refusal };
    case 'input_image':
      if (part.file_id !== undefined && part.file_id !== null)
        throw unsupported(`${param}.file_id`, 'files stored with OpenAI have no equivalent');
      return imageBlockFromUrl(part.image_url, `${param}.image_url`);
    default:
      throw unsupported(`${param}.type`, `a '${String(part.type)}' part has no equivalent`);
  }
}

/** The Responses `input` → Anthropic `system` parts and `messages`. */
function translateInput(input: unknown): { system: string[]; turns: Json[] } {
  const system: string[] = [];
  const turns: Json[] = [];
  if (typeof input === 'string') return { system, turns: [{ role: 'user', content: input }] };
  if (!Array.isArray(input) || input.length === 0)
    throw badValue('input', 'a string or a non-empty array of items');

  /** Appends blocks to the last turn when it has this role, else opens a turn. */
  const append = (role: 'user' | 'assistant', blocks: Json[]) => {
    const last = turns.at(-1);
    if (last && last.role === role) {
      if (typeof last.content === 'string') last.content = [{ type: 'text', text: last.content }];
      (last.content as Json[]).push(...blocks);
    } else turns.push({ role, content: blocks });
  };

  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (!isObject(item)) throw badValue(at, 'an input item is an object');
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const role = item.role;
        if (role === 'system' || role === 'developer') {
          system.push(textOnly(item.content, `${at}.content`));
          return;
        }
        if (role !== 'user' && role !== 'assistant')
          throw badValue(`${at}.role`, `unknown role ${JSON.stringify(role)}`);
        const blocks =
          typeof item.content === 'string'
            ? item.content === ''
              ? []
              : [{ type: 'text', text: item.content }]
            : Array.isArray(item.content)
              ? item.content.map((p, j) => inputBlock(p, `${at}.content[${j}]`))
              : null;
        if (blocks === null) throw badValue(`${at}.content`, 'a string or an array of content parts');
        if (role === 'assistant') {
          const text = blocks.filter((b) => b.type !== 'text' || b.text !== '');
          if (text.some((b) => b.type !== 'text'))
            throw unsupported(`${at}.content`, 'an assistant message holds text only');
          append('assistant', text);
        } else append('user', blocks);
        return;
      }
      case 'function_call': {
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string')
          throw badValue(at, 'a function call has a call_id and a name');
        append('assistant', [
          {
            type: 'tool_use',
            id: item.call_id,
            name: item.name,
            input: parseArguments(item.arguments, `${at}.arguments`),
          },
        ]);
        return;
      }
      case 'function_call_output': {
        if (typeof item.call_id !== 'string') throw badValue(`${at}.call_id`, 'the call it answers');
        const output = textOnly(item.output, `${at}.output`, '');
        append('user', [{ type: 'tool_result', tool_use_id: item.call_id, content: output }]);
        return;
      }
      case 'reasoning':
        // The reasoning of an earlier OpenAI answer: nothing Anthropic can take back; left out.
        return;
      default:
        throw unsupported(`${at}.type`, `a '${String(type)}' item has no equivalent`);
    }
  });
  return { system, turns };
}

/**
 * A Responses API request → an Anthropic Messages request (docs/translation.md). Throws the project's 400
 * naming the field that cannot be translated (`unsupported_parameter`) or is malformed.
 */
export function responsesRequestToMessages(
  body: Record<string, unknown>,
  opts: ResponsesToMessagesOptions,
): Record<string, unknown> {
  checkFields(body, RESPONSES_KNOWN, RESPONSES_REFUSED);
  const { system, turns } = translateInput(body.input);
  const out: Json = { model: opts.model, max_tokens: opts.maxTokens, messages: turns };
  const instructions =
    body.instructions === undefined || body.instructions === null
      ? []
      : [textOnly(body.instructions, 'instructions')];
  const systemText = [...instructions, ...system];
  if (systemText.length) out.system = systemText.join('\n\n');

  const t = temperature(body.temperature);
  if (t !== undefined) out.temperature = t;
  const topP = numberField(body.top_p, 'top_p');
  if (topP !== undefined) out.top_p = topP;

  let hasTools = false;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badValue('tools', 'an array of tools');
    out.tools = body.tools.map((tool, i) => {
      if (!isObject(tool) || tool.type !== 'function')
        throw unsupported(
          `tools[${i}].type`,
          `the built-in '${String(isObject(tool) ? tool.type : tool)}' tool has no equivalent`,
        );
      return anthropicTool(tool, `tools[${i}]`);
    });
    hasTools = body.tools.length > 0;
  }
  const choice = anthropicToolChoice(body.tool_choice, body.parallel_tool_calls, hasTools);
  if (choice) out.tool_choice = choice;

  if (body.stream !== undefined && body.stream !== null) {
    if (typeof body.stream !== 'boolean') throw badValue('stream', 'a boolean');
    out.stream = body.stream;
  }
  return out;
}

export interface MessagesToResponsesOptions {
  /** The model id the client asked for. */
  model: string;
  /** The response id; default: the message id as `resp_…`. */
  id?: string;
  /** `created_at` (Unix seconds); default: now. */
  createdAt?: number;
  /** The client's Responses request: the answer echoes its settings (instructions, tools, …). */
  request?: Record<string, unknown>;
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** An `output_text` part (OpenAI's schema requires `annotations` and `logprobs`). */
const outputText = (text: string): Json => ({ type: 'output_text', text, annotations: [], logprobs: [] });

/** The fields of a `response` object besides id, status, output and usage, echoing the request. */
function responseShell(opts: MessagesToResponsesOptions, id: string, createdAt: number): Json {
  const r = opts.request ?? {};
  const pick = (key: string, fallback: unknown) => (r[key] === undefined ? fallback : r[key]);
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: pick('instructions', null),
    max_output_tokens: pick('max_output_tokens', null),
    metadata: isObject(r.metadata) ? r.metadata : {},
    model: opts.model,
    output: [],
    parallel_tool_calls: pick('parallel_tool_calls', true),
    previous_response_id: null,
    temperature: pick('temperature', null),
    tool_choice: pick('tool_choice', 'auto'),
    tools: pick('tools', []),
    top_p: pick('top_p', null),
  };
}

/** status and incomplete_details for an Anthropic stop reason. */
function ending(stop: unknown): { status: 'completed' | 'incomplete'; incomplete_details: Json | null } {
  if (stop === 'max_tokens' || stop === 'model_context_window_exceeded')
    return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (stop === 'refusal') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

const itemId = (prefix: string, base: string, n: number): string => `${prefix}_${base}_${n}`;

/** An Anthropic Messages answer → a Responses API `response` object (docs/translation.md). */
export function messagesAnswerToResponse(
  json: Record<string, unknown>,
  opts: MessagesToResponsesOptions,
): Json {
  const id = opts.id ?? swapPrefix(json.id, /^msg_/, 'resp_', 'resp_translated');
  const base = id.replace(/^resp_/, '');
  const output: Json[] = [];
  let message: Json | null = null;
  if (Array.isArray(json.content))
    for (const block of json.content) {
      if (!isObject(block)) continue;
      if (block.type === 'text' && typeof block.text === 'string') {
        if (!message) {
          message = {
            id: itemId('msg', base, output.length),
            type: 'message',
            status: 'completed',
            role: 'assistant',
            content: [],
          };
          output.push(message);
        }
        (message.content as Json[]).push(outputText(block.text));
      } else if (block.type === 'tool_use') {
        message = null;
        output.push({
          id: itemId('fc', base, output.length),
          type: 'function_call',
          status: 'completed',
          call_id: block.id,
          name: block.name,
          arguments: JSON.stringify(block.input ?? {}),
        });
      }
      // thinking and redacted_thinking blocks are left out (docs/translation.md)
    }
  const response: Json = {
    ...responseShell(opts, id, opts.createdAt ?? nowSeconds()),
    ...ending(json.stop_reason),
    output,
  };
  const usage = readMessagesUsage(json.usage);
  if (usage) response.usage = responsesUsageFromMessages(usage);
  return response;
}

/** One output item being streamed. */
interface OpenItem {
  outputIndex: number;
  item: Json;
  /** text so far (message) or arguments so far (function call) */
  text: string;
}

/**
 * Turns an Anthropic Messages event stream into the Responses API's events (`event: <type>\ndata: {...}`,
 * each with `type` and `sequence_number`), fed in pieces split anywhere. `message_stop` becomes
 * `response.completed` (or `response.incomplete` when the cap was reached) with the usage; the caller
 * (the Responses relay) holds that event back to add the charge.
 */
export class MessagesToResponsesStream extends SseTransformer {
  /** The terminal event was written. */
  done = false;
  /** Same as done: a Responses stream ends with its terminal event. */
  finished = false;
  upstreamError = false;
  usage: MessagesUsageCounts | null = null;
  stopReason: string | null = null;

  private seq = 0;
  private id: string;
  private readonly createdAt: number;
  private readonly output: Json[] = [];
  /** Anthropic block index → the item it streams into. */
  private readonly open = new Map<number, OpenItem>();
  private started = false;

  constructor(private readonly opts: MessagesToResponsesOptions) {
    super();
    this.id = opts.id ?? 'resp_translated';
    this.createdAt = opts.createdAt ?? nowSeconds();
  }

  /** The usage as the Responses API's usage object, or null. */
  responsesUsage(): Json | null {
    return this.usage ? responsesUsageFromMessages(this.usage) : null;
  }

  private emit(type: string, data: Json): void {
    this.out += namedEvent(type, { type, sequence_number: this.seq++, ...data });
  }

  private base(): string {
    return this.id.replace(/^resp_/, '');
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    const response = responseShell(this.opts, this.id, this.createdAt);
    this.emit('response.created', { response });
    this.emit('response.in_progress', { response });
  }

  private mergeUsage(u: unknown): void {
    if (!isObject(u)) return;
    const prev = this.usage ?? { input: 0, cacheRead: 0, cacheWrite: 0, output: 0 };
    const take = (v: unknown, old: number) =>
      typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : old;
    this.usage = {
      input: take(u.input_tokens, prev.input),
      cacheRead: take(u.cache_read_input_tokens, prev.cacheRead),
      cacheWrite: take(u.cache_creation_input_tokens, prev.cacheWrite),
      output: take(u.output_tokens, prev.output),
    };
  }

  private blockStart(index: number, block: Json): void {
    const outputIndex = this.output.length;
    if (block.type === 'text') {
      const item: Json = {
        id: itemId('msg', this.base(), outputIndex),
        type: 'message',
        status: 'in_progress',
        role: 'assistant',
        content: [],
      };
      this.output.push(item);
      this.open.set(index, { outputIndex, item, text: '' });
      this.emit('response.output_item.added', { output_index: outputIndex, item });
      this.emit('response.content_part.added', {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        part: outputText(''),
      });
      if (typeof block.text === 'string' && block.text !== '') this.textDelta(index, block.text);
    } else if (block.type === 'tool_use') {
      const item: Json = {
        id: itemId('fc', this.base(), outputIndex),
        type: 'function_call',
        status: 'in_progress',
        call_id: block.id,
        name: block.name,
        arguments: '',
      };
      this.output.push(item);
      this.open.set(index, { outputIndex, item, text: '' });
      this.emit('response.output_item.added', { output_index: outputIndex, item });
    }
    // thinking / redacted_thinking blocks: no item (docs/translation.md)
  }

  private textDelta(index: number, text: string): void {
    const open = this.open.get(index);
    if (!open || open.item.type !== 'message') return;
    open.text += text;
    this.emit('response.output_text.delta', {
      item_id: open.item.id,
      output_index: open.outputIndex,
      content_index: 0,
      delta: text,
      logprobs: [],
    });
  }

  private blockStop(index: number): void {
    const open = this.open.get(index);
    if (!open) return;
    this.open.delete(index);
    const { item, outputIndex, text } = open;
    if (item.type === 'message') {
      const part = outputText(text);
      this.emit('response.output_text.done', {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        text,
        logprobs: [],
      });
      this.emit('response.content_part.done', {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        part,
      });
      const done = { ...item, status: 'completed', content: [part] };
      this.output[outputIndex] = done;
      this.emit('response.output_item.done', { output_index: outputIndex, item: done });
    } else {
      const args = text === '' ? '{}' : text;
      this.emit('response.function_call_arguments.done', {
        item_id: item.id,
        output_index: outputIndex,
        name: item.name,
        arguments: args,
      });
      const done = { ...item, status: 'completed', arguments: args };
      this.output[outputIndex] = done;
      this.emit('response.output_item.done', { output_index: outputIndex, item: done });
    }
  }

  protected onEvent(e: EventSourceMessage): void {
    if (this.done) return;
    const data = parseData(e.data);
    if (!data) return;
    const type = typeof data.type === 'string' ? data.type : e.event;
    const index = Number(data.index);
    switch (type) {
      case 'message_start': {
        const message = isObject(data.message) ? data.message : {};
        if (this.opts.id === undefined) this.id = swapPrefix(message.id, /^msg_/, 'resp_', this.id);
        this.mergeUsage(message.usage);
        this.start();
        return;
      }
      case 'content_block_start':
        this.start();
        this.blockStart(index, isObject(data.content_block) ? data.content_block : {});
        return;
      case 'content_block_delta': {
        const delta = isObject(data.delta) ? data.delta : {};
        if (delta.type === 'text_delta' && typeof delta.text === 'string' && delta.text !== '')
          this.textDelta(index, delta.text);
        else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
          const open = this.open.get(index);
          if (open && open.item.type === 'function_call' && delta.partial_json !== '') {
            open.text += delta.partial_json;
            this.emit('response.function_call_arguments.delta', {
              item_id: open.item.id,
              output_index: open.outputIndex,
              delta: delta.partial_json,
            });
          }
        }
        return;
      }
      case 'content_block_stop':
        this.blockStop(index);
        return;
      case 'message_delta': {
        const delta = isObject(data.delta) ? data.delta : {};
        if (typeof delta.stop_reason === 'string') this.stopReason = delta.stop_reason;
        this.mergeUsage(data.usage);
        return;
      }
      case 'message_stop': {
        this.start();
        for (const i of [...this.open.keys()]) this.blockStop(i);
        const end = ending(this.stopReason);
        const response: Json = {
          ...responseShell(this.opts, this.id, this.createdAt),
          ...end,
          output: this.output,
        };
        if (this.usage) response.usage = responsesUsageFromMessages(this.usage);
        this.emit(end.status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
        this.done = true;
        this.finished = true;
        return;
      }
      case 'error': {
        const err = isObject(data.error) ? data.error : {};
        this.upstreamError = true;
        this.emit('error', {
          code: typeof err.type === 'string' ? err.type : null,
          message: typeof err.message === 'string' ? err.message : 'The provider failed.',
          param: null,
        });
        return;
      }
      default:
        return;
    }
  }
}
