import type { EventSourceMessage } from 'eventsource-parser';
import {
  anthropicTool,
  anthropicToolChoice,
  badValue,
  imageBlockFromUrl,
  isObject,
  namedEvent,
  numberField,
  parseArguments,
  parseData,
  mergeMessagesUsage,
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
import { forceJsonTool, mapEffort } from './chat-to-messages.js';
import {
  Dropped,
  JSON_TOOL,
  NAMESPACE_SEPARATOR,
  noToolNames,
  sortFields,
  type ToolNames,
} from './field-policy.js';

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
  /** The model reasons: `reasoning.effort` becomes thinking (else it is dropped). */
  reasoning?: boolean;
  /** Where the dropped fields are noted (docs/reference.md §21). */
  dropped?: Dropped;
}

/**
 * The names the provider sees for the client's tools, and back (docs/reference.md §21 "Mapped"): a
 * `namespace` tool's functions as `<namespace>__<name>`, a `custom` tool as a function taking `{input}`,
 * a `json_schema` text format as the forced JSON tool.
 */
export function responsesToolNames(request: Json | undefined): ToolNames {
  const names = noToolNames();
  if (!request) return names;
  if (Array.isArray(request.tools))
    for (const tool of request.tools) {
      if (!isObject(tool)) continue;
      if (tool.type === 'namespace' && typeof tool.name === 'string' && Array.isArray(tool.tools))
        for (const fn of tool.tools)
          if (isObject(fn) && typeof fn.name === 'string')
            names.namespaced.set(`${tool.name}${NAMESPACE_SEPARATOR}${fn.name}`, {
              namespace: tool.name,
              name: fn.name,
            });
      if (tool.type === 'custom' && typeof tool.name === 'string') names.custom.add(tool.name);
    }
  const text = request.text;
  if (isObject(text) && isObject(text.format) && text.format.type === 'json_schema')
    names.jsonTool = JSON_TOOL;
  return names;
}

/** A client tool of the Responses API as the Anthropic tools it becomes (a namespace: several). */
function anthropicTools(tool: unknown, i: number): Json[] {
  const at = `tools[${i}]`;
  if (!isObject(tool)) throw badValue(at, 'a tool is an object');
  if (tool.type === 'function') return [anthropicTool(tool, at)];
  if (tool.type === 'custom') return [customTool(tool, at)];
  if (tool.type === 'namespace') {
    if (typeof tool.name !== 'string' || tool.name === '' || !Array.isArray(tool.tools))
      throw badValue(at, 'a namespace tool has a name and tools');
    return tool.tools.map((fn, j) => {
      const param = `${at}.tools[${j}]`;
      if (!isObject(fn) || typeof fn.name !== 'string') throw badValue(param, 'a tool with a name');
      const named = { ...fn, name: `${tool.name}${NAMESPACE_SEPARATOR}${fn.name}` };
      return fn.type === 'custom' ? customTool(named, param) : anthropicTool(named, param);
    });
  }
  throw unsupported(`${at}.type`, `the built-in '${String(tool.type)}' tool has no equivalent`);
}

/** A `custom` (free-form input) tool as a function taking its input as one string. */
function customTool(tool: Json, param: string): Json {
  if (typeof tool.name !== 'string' || tool.name === '') throw badValue(`${param}.name`, 'a tool name');
  const out: Json = {
    name: tool.name,
    input_schema: {
      type: 'object',
      properties: { input: { type: 'string', description: 'The tool input, free-form.' } },
      required: ['input'],
    },
  };
  if (typeof tool.description === 'string') out.description = tool.description;
  return out;
}

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
        const name =
          typeof item.namespace === 'string' && item.namespace !== ''
            ? `${item.namespace}${NAMESPACE_SEPARATOR}${item.name}`
            : item.name;
        append('assistant', [
          {
            type: 'tool_use',
            id: item.call_id,
            name,
            input: parseArguments(item.arguments, `${at}.arguments`),
          },
        ]);
        return;
      }
      case 'custom_tool_call': {
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string')
          throw badValue(at, 'a custom tool call has a call_id and a name');
        append('assistant', [
          { type: 'tool_use', id: item.call_id, name: item.name, input: { input: String(item.input ?? '') } },
        ]);
        return;
      }
      case 'custom_tool_call_output':
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
  const dropped = opts.dropped ?? new Dropped();
  sortFields('responses', body, dropped);
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
    out.tools = body.tools.flatMap((tool, i) => anthropicTools(tool, i));
    hasTools = body.tools.length > 0;
  }
  const choice = anthropicToolChoice(body.tool_choice, body.parallel_tool_calls, hasTools);
  if (choice) out.tool_choice = choice;

  const text = isObject(body.text) ? body.text : {};
  const format = isObject(text.format) ? text.format : null;
  if (format && format.type === 'json_schema') forceJsonTool(out, format.schema, 'text.format');
  else if (format && format.type !== 'text') dropped.add('text.format');
  if (text.verbosity !== undefined && text.verbosity !== null) dropped.add('text.verbosity');
  if (isObject(body.reasoning)) mapEffort(out, body.reasoning.effort, 'reasoning', opts, dropped);

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

/**
 * A tool_use block as the call the client's tool expects: a function call (with its `namespace` when the
 * tool came from one), or a custom tool call carrying the input string.
 */
function clientCall(names: ToolNames, id: string, block: Json, status: string, args?: string): Json {
  const name = String(block.name ?? '');
  if (names.custom.has(name)) {
    const input = isObject(block.input) && typeof block.input.input === 'string' ? block.input.input : '';
    return { id, type: 'custom_tool_call', status, call_id: block.id, name, input };
  }
  const call: Json = {
    id,
    type: 'function_call',
    status,
    call_id: block.id,
    name,
    arguments: args ?? JSON.stringify(block.input ?? {}),
  };
  const ns = names.namespaced.get(name);
  if (ns) Object.assign(call, { name: ns.name, namespace: ns.namespace });
  return call;
}

/** An Anthropic Messages answer → a Responses API `response` object (docs/translation.md). */
export function messagesAnswerToResponse(
  json: Record<string, unknown>,
  opts: MessagesToResponsesOptions,
): Json {
  const id = opts.id ?? swapPrefix(json.id, /^msg_/, 'resp_', 'resp_translated');
  const base = id.replace(/^resp_/, '');
  const output: Json[] = [];
  const names = responsesToolNames(opts.request);
  let message: Json | null = null;
  if (Array.isArray(json.content))
    for (const raw of json.content) {
      if (!isObject(raw)) continue;
      // The forced JSON tool's input is the answer's text.
      const block =
        raw.type === 'tool_use' && names.jsonTool && raw.name === names.jsonTool
          ? { type: 'text', text: JSON.stringify(raw.input ?? {}) }
          : raw;
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
        output.push(clientCall(names, itemId('fc', base, output.length), block, 'completed'));
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
  /** A message streaming the forced JSON tool's input as its text. */
  json?: boolean;
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
  private readonly names: ToolNames;

  constructor(private readonly opts: MessagesToResponsesOptions) {
    super();
    this.names = responsesToolNames(opts.request);
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
    this.usage = mergeMessagesUsage(this.usage, u);
  }

  private blockStart(index: number, raw: Json): void {
    const outputIndex = this.output.length;
    // The forced JSON tool streams as the answer's text.
    const json = raw.type === 'tool_use' && this.names.jsonTool !== null && raw.name === this.names.jsonTool;
    const block = json ? { type: 'text', text: '' } : raw;
    if (block.type === 'text') {
      const item: Json = {
        id: itemId('msg', this.base(), outputIndex),
        type: 'message',
        status: 'in_progress',
        role: 'assistant',
        content: [],
      };
      this.output.push(item);
      this.open.set(index, { outputIndex, item, text: '', json });
      this.emit('response.output_item.added', { output_index: outputIndex, item });
      this.emit('response.content_part.added', {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        part: outputText(''),
      });
      if (typeof block.text === 'string' && block.text !== '') this.textDelta(index, block.text);
    } else if (block.type === 'tool_use') {
      const item = clientCall(this.names, itemId('fc', this.base(), outputIndex), block, 'in_progress', '');
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
    } else if (item.type === 'custom_tool_call') {
      // The input arrives as the JSON of `{input}`: the custom call gets it whole at the end.
      let input = '';
      try {
        const v = JSON.parse(text === '' ? '{}' : text);
        if (isObject(v) && typeof v.input === 'string') input = v.input;
      } catch {
        /* an unreadable input stays empty */
      }
      const done = { ...item, status: 'completed', input };
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
          if (open?.json) {
            if (delta.partial_json !== '') this.textDelta(index, delta.partial_json);
          } else if (open && open.item.type === 'custom_tool_call') open.text += delta.partial_json;
          else if (open && open.item.type === 'function_call' && delta.partial_json !== '') {
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
