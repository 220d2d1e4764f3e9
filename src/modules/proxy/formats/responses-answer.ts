import { isObject, namedEvent, withPrefix, type Json } from './common.js';
import { JSON_TOOL, NAMESPACE_SEPARATOR, noToolNames, type ToolNames } from './field-policy.js';
import { ClientStreamEncoder } from './stream-encoder.js';
import type { ClientAnswerContext, NeutralAnswer, StopReason, StreamEvent, Usage } from './neutral.js';

/**
 * The neutral answer, whole or streamed, as the Responses API's `response` object and event stream
 * (docs/translation.md), so the Responses relay meters it unchanged. The request side is
 * responses-client.ts.
 */

/**
 * The names the provider saw for the client's tools, and back (docs/reference.md §21 "Mapped"): a
 * `namespace` tool's functions as `<namespace>__<name>`, a `custom` tool as a function taking `{input}`.
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
  if (
    isObject(text) &&
    isObject(text.format) &&
    (text.format.type === 'json_schema' || text.format.type === 'json_object')
  )
    names.jsonTool = JSON_TOOL;
  return names;
}

/** Responses usage: `input_tokens` holds the cache read and write. */
export function responsesUsage(c: Usage): Json {
  const input = c.input + c.cacheRead + c.cacheWrite;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: c.cacheRead, cache_write_tokens: c.cacheWrite },
    output_tokens: c.output,
    output_tokens_details: { reasoning_tokens: Math.min(c.thinking, c.output) },
    total_tokens: input + c.output,
  };
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** An `output_text` part (OpenAI's schema requires `annotations` and `logprobs`). */
const outputText = (text: string): Json => ({ type: 'output_text', text, annotations: [], logprobs: [] });

/** The fields of a `response` object besides id, status, output and usage, echoing the request. */
function responseShell(ctx: ClientAnswerContext, id: string, createdAt: number): Json {
  const r = ctx.body;
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
    model: ctx.model,
    output: [],
    parallel_tool_calls: pick('parallel_tool_calls', true),
    previous_response_id: null,
    temperature: pick('temperature', null),
    tool_choice: pick('tool_choice', 'auto'),
    tools: pick('tools', []),
    top_p: pick('top_p', null),
  };
}

/** status and incomplete_details for a neutral stop. */
function ending(stop: StopReason | null | undefined) {
  if (stop === 'length')
    return { status: 'incomplete' as const, incomplete_details: { reason: 'max_output_tokens' } };
  if (stop === 'refusal')
    return { status: 'incomplete' as const, incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed' as const, incomplete_details: null };
}

const itemId = (prefix: string, base: string, n: number): string => `${prefix}_${base}_${n}`;

/**
 * A tool call as the call the client's tool expects: a function call (with its `namespace` when the tool
 * came from one), or a custom tool call carrying the input string.
 */
function clientCall(names: ToolNames, id: string, call: Json, status: string, args?: string): Json {
  const name = String(call.name ?? '');
  if (names.custom.has(name)) {
    const input = isObject(call.input) && typeof call.input.input === 'string' ? call.input.input : '';
    return { id, type: 'custom_tool_call', status, call_id: call.id, name, input };
  }
  const out: Json = {
    id,
    type: 'function_call',
    status,
    call_id: call.id,
    name,
    arguments: args ?? JSON.stringify(call.input ?? {}),
  };
  const ns = names.namespaced.get(name);
  if (ns) Object.assign(out, { name: ns.name, namespace: ns.namespace });
  return out;
}

/** The neutral answer as a `response` object (thinking is left out). */
export function responsesAnswer(answer: NeutralAnswer, ctx: ClientAnswerContext): Json {
  const id = ctx.id ?? withPrefix(answer.id, 'resp_', 'resp_translated');
  const base = id.replace(/^resp_/, '');
  const output: Json[] = [];
  const names = responsesToolNames(ctx.body);
  let message: Json | null = null;
  for (const p of answer.content) {
    if (p.type === 'text') {
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
      (message.content as Json[]).push(outputText(p.text));
    } else if (p.type === 'tool_use') {
      message = null;
      output.push(clientCall(names, itemId('fc', base, output.length), p, 'completed'));
    }
  }
  const response: Json = {
    ...responseShell(ctx, id, ctx.created ?? nowSeconds()),
    ...ending(answer.stop),
    output,
  };
  if (answer.usage) response.usage = responsesUsage(answer.usage);
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
 * Writes neutral events as the Responses API's events (`event: <type>\ndata: {...}`, each with `type` and
 * `sequence_number`). `finish` becomes `response.completed` (or `response.incomplete` when the cap was
 * reached) with the usage; the Responses relay holds that event back to add the charge.
 */
export class ResponsesStreamEncoder extends ClientStreamEncoder {
  private stop: StopReason | null = 'end';
  private seq = 0;
  private id: string;
  private readonly createdAt: number;
  private readonly output: Json[] = [];
  /** Part index → the item it streams into. */
  private readonly open = new Map<number, OpenItem>();
  private started = false;
  private readonly names: ToolNames;

  constructor(private readonly ctx: ClientAnswerContext) {
    super();
    this.names = responsesToolNames(ctx.body);
    this.id = ctx.id ?? 'resp_translated';
    this.createdAt = ctx.created ?? nowSeconds();
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
    const response = responseShell(this.ctx, this.id, this.createdAt);
    this.emit('response.created', { response });
    this.emit('response.in_progress', { response });
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

  private partStart(index: number, part: Extract<StreamEvent, { type: 'part_start' }>['part']): void {
    const outputIndex = this.output.length;
    if (part.type === 'text') {
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
      if (part.text !== '') this.textDelta(index, part.text);
    } else if (part.type === 'tool_use') {
      const call = { id: part.id, name: part.name };
      const item = clientCall(this.names, itemId('fc', this.base(), outputIndex), call, 'in_progress', '');
      this.output.push(item);
      this.open.set(index, { outputIndex, item, text: part.args });
      this.emit('response.output_item.added', { output_index: outputIndex, item });
    }
    // thinking: no item (docs/translation.md)
  }

  private toolDelta(index: number, args: string): void {
    const open = this.open.get(index);
    if (open && open.item.type === 'custom_tool_call') open.text += args;
    else if (open && open.item.type === 'function_call') {
      open.text += args;
      this.emit('response.function_call_arguments.delta', {
        item_id: open.item.id,
        output_index: open.outputIndex,
        delta: args,
      });
    }
  }

  private partEnd(index: number): void {
    const open = this.open.get(index);
    if (!open) return;
    this.open.delete(index);
    const { item, outputIndex, text } = open;
    let done: Json;
    if (item.type === 'message') {
      const part = outputText(text);
      const at = { item_id: item.id, output_index: outputIndex, content_index: 0 };
      this.emit('response.output_text.done', { ...at, text, logprobs: [] });
      this.emit('response.content_part.done', { ...at, part });
      done = { ...item, status: 'completed', content: [part] };
    } else if (item.type === 'custom_tool_call') {
      // The input arrives as the JSON of `{input}`: the custom call gets it whole at the end.
      let input = '';
      try {
        const v = JSON.parse(text === '' ? '{}' : text);
        if (isObject(v) && typeof v.input === 'string') input = v.input;
      } catch {
        /* an unreadable input stays empty */
      }
      done = { ...item, status: 'completed', input };
    } else {
      const args = text === '' ? '{}' : text;
      this.emit('response.function_call_arguments.done', {
        item_id: item.id,
        output_index: outputIndex,
        name: item.name,
        arguments: args,
      });
      done = { ...item, status: 'completed', arguments: args };
    }
    this.output[outputIndex] = done;
    this.emit('response.output_item.done', { output_index: outputIndex, item: done });
  }

  protected on(e: StreamEvent): void {
    switch (e.type) {
      case 'start':
        if (this.ctx.id === undefined) this.id = withPrefix(e.id, 'resp_', this.id);
        this.start();
        return;
      case 'part_start':
        this.start();
        this.partStart(e.index, e.part);
        return;
      case 'text_delta':
        this.textDelta(e.index, e.text);
        return;
      case 'tool_delta':
        this.toolDelta(e.index, e.args);
        return;
      case 'part_end':
        this.partEnd(e.index);
        return;
      case 'usage':
        this.usage = e.usage;
        return;
      case 'stop':
        this.stop = e.stop;
        return;
      case 'finish': {
        this.start();
        for (const i of [...this.open.keys()]) this.partEnd(i);
        const end = ending(this.stop);
        const response: Json = {
          ...responseShell(this.ctx, this.id, this.createdAt),
          ...end,
          output: this.output,
        };
        if (this.usage) response.usage = responsesUsage(this.usage);
        this.emit(end.status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
        this.done = true;
        this.finished = true;
        return;
      }
      case 'error':
        this.upstreamError = true;
        this.emit('error', {
          code: e.error.type,
          message: e.error.message ?? 'The provider failed.',
          param: null,
        });
        return;
      default:
        return;
    }
  }

  tail(): string {
    return '';
  }
}
