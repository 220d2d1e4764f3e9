import type { EventSourceMessage } from 'eventsource-parser';
import { anthropicClient } from '../anthropic-client.js';
import {
  badValue,
  isObject,
  jsonOr,
  parseData,
  stripPrefix,
  tokens,
  unsupported,
  type Json,
} from './common.js';
import { neutralError, SseDecoder } from './sse-decoder.js';
import { JSON_TOOL, thinkingFor, type Dropped } from './field-policy.js';
import type {
  NeutralError,
  NeutralRequest,
  Part,
  ProviderAdapter,
  ProviderAnswerContext,
  Reasoning,
  StopReason,
  StreamEvent,
  ToolChoice,
  Usage,
} from './neutral.js';

/**
 * Anthropic's Messages API as a provider kind's wire, to and from the neutral model (docs/translation.md).
 * The Messages client format (messages-client.ts) reads and writes the same shapes from the client's side.
 */

/** A neutral part as an Anthropic content block. */
export function anthropicBlock(part: Part): Json {
  switch (part.type) {
    case 'text':
      return { type: 'text', text: part.text };
    case 'image': {
      const s = part.source;
      if (s.kind === 'base64')
        return { type: 'image', source: { type: 'base64', media_type: s.mediaType, data: s.data } };
      return { type: 'image', source: s.kind === 'url' ? { type: 'url', url: s.url } : s.raw };
    }
    case 'tool_use':
      return { type: 'tool_use', id: part.id, name: part.name, input: part.input };
    case 'tool_result':
      return { type: 'tool_result', tool_use_id: part.toolUseId, content: part.content };
    case 'thinking':
      return part.redacted
        ? { type: 'redacted_thinking', data: part.signature ?? '' }
        : { type: 'thinking', thinking: part.text, signature: part.signature ?? '' };
  }
}

/** `temperature`: OpenAI takes 0–2, Anthropic 0–1: above 1 has no equivalent. */
function temperature(v: number): number {
  if (v < 0) throw badValue('temperature', 'a number between 0 and 1');
  if (v > 1) throw unsupported('temperature', "the provider's temperature goes from 0 to 1");
  return v;
}

/** The neutral tool choice as Anthropic's (`disable_parallel_tool_use` when the client said so). */
function toolChoice(choice: ToolChoice | undefined, parallel: boolean | undefined, hasTools: boolean) {
  if (choice?.type === 'none') return { type: 'none' };
  const out: Json | undefined = choice ? { ...choice } : undefined;
  if (parallel === false && hasTools)
    return { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return out;
}

/**
 * A JSON schema answer as a forced tool whose input schema is the schema (the answer's text is its input
 * as JSON, docs/reference.md §21 "Mapped").
 */
function forceJsonTool(out: Json, schema: Json): void {
  const tools = Array.isArray(out.tools) ? (out.tools as Json[]) : [];
  tools.push({ name: JSON_TOOL, description: 'Give the answer as this JSON object.', input_schema: schema });
  out.tools = tools;
  out.tool_choice = { type: 'tool', name: JSON_TOOL };
}

/**
 * The request continues a tool-use cycle whose assistant turn has no thinking block: the last user turn
 * answers tool calls, and the assistant turn that made them holds no thinking. With thinking enabled,
 * Anthropic refuses that ("a final assistant message must start with a thinking block"), and a client of
 * another format never has the thinking to send back (its answers leave it out).
 */
function continuesToolCycleWithoutThinking(req: NeutralRequest): boolean {
  const last = req.messages.at(-1);
  if (last?.role !== 'user' || typeof last.content === 'string') return false;
  if (!last.content.some((p) => p.type === 'tool_result')) return false;
  const made = req.messages.at(-2);
  return !(
    made?.role === 'assistant' &&
    Array.isArray(made.content) &&
    made.content.some((p) => p.type === 'thinking')
  );
}

/** The lowest `top_p` Anthropic accepts with thinking. */
const MIN_THINKING_TOP_P = 0.95;

/**
 * Reasoning as Anthropic thinking, for a model that reasons (docs/reference.md §21 "Mapped"); otherwise,
 * or when the cap leaves no room for Anthropic's smallest budget, or a tool is forced (Anthropic takes no
 * thinking then), or the request continues a tool-use cycle whose thinking the client could not send
 * back (Anthropic refuses thinking then), the client's fields are dropped and named.
 */
function mapReasoning(out: Json, req: NeutralRequest, r: Reasoning, reasons: boolean, dropped: Dropped) {
  const forced =
    isObject(out.tool_choice) && (out.tool_choice.type === 'tool' || out.tool_choice.type === 'any');
  const thinking =
    r.effort && reasons && !forced && !continuesToolCycleWithoutThinking(req)
      ? thinkingFor(r.effort, req.maxTokens)
      : null;
  if (thinking) {
    out.thinking = thinking;
    // Anthropic takes thinking only with its default sampling: the client's is dropped (and named), but a
    // `top_p` from 0.95 to 1, the one change it allows then.
    for (const key of ['temperature', 'top_k', 'top_p'])
      if (out[key] !== undefined && !(key === 'top_p' && (out.top_p as number) >= MIN_THINKING_TOP_P)) {
        delete out[key];
        dropped.add(key);
      }
  } else for (const f of r.fields) dropped.add(f);
}

/** A neutral request as a Messages request. */
function requestOut(req: NeutralRequest, ctx: { reasoning: boolean; dropped: Dropped }): Json {
  const messages = req.messages.map((m) => ({
    role: m.role,
    content: typeof m.content === 'string' ? m.content : m.content.map(anthropicBlock),
  }));
  const out: Json = { model: req.model, max_tokens: req.maxTokens, messages };
  if (req.system.length) out.system = req.system.join('\n\n');
  if (req.stop?.length) out.stop_sequences = req.stop;
  if (req.temperature !== undefined) out.temperature = temperature(req.temperature);
  if (req.topP !== undefined) out.top_p = req.topP;
  if (req.topK !== undefined) out.top_k = req.topK;
  if (req.tools)
    out.tools = req.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.inputSchema,
    }));
  const choice = toolChoice(req.toolChoice, req.parallelToolCalls, (req.tools?.length ?? 0) > 0);
  if (choice) out.tool_choice = choice;
  if (req.jsonSchema) forceJsonTool(out, req.jsonSchema);
  if (req.reasoning) mapReasoning(out, req, req.reasoning, ctx.reasoning, ctx.dropped);
  if (req.stream !== undefined) out.stream = req.stream;
  return out;
}

/** Anthropic's `stop_reason` as the neutral one (the forced JSON tool's `tool_use` is the answer's end). */
export function stopOf(stop: unknown, jsonSchema = false): StopReason {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return jsonSchema ? 'end' : 'tool_use';
    case 'refusal':
      return 'refusal';
    default:
      // end_turn, stop_sequence, pause_turn
      return 'end';
  }
}

const thinkingTokens = (u: Json): number =>
  isObject(u.output_tokens_details) ? tokens(u.output_tokens_details.thinking_tokens) : 0;

/** Anthropic usage, read: the uncached input, the cache parts, the output and its thinking part. */
export const readMessagesUsage = (u: unknown): Usage | null =>
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
function mergeMessagesUsage(prev: Usage | null, u: Json): Usage {
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

const idOf = (id: unknown): string | null => stripPrefix(id, /^msg_/);

/** A Messages answer as the neutral one (thinking kept; the forced JSON tool's input as text). */
function answerIn(json: Json, ctx: ProviderAnswerContext) {
  const content: ReturnType<ProviderAdapter['answerIn']>['content'] = [];
  if (Array.isArray(json.content))
    for (const b of json.content) {
      if (!isObject(b)) continue;
      if (b.type === 'text' && typeof b.text === 'string') content.push({ type: 'text', text: b.text });
      else if (b.type === 'tool_use' && ctx.jsonSchema && b.name === JSON_TOOL)
        content.push({ type: 'text', text: JSON.stringify(b.input ?? {}) });
      else if (b.type === 'tool_use')
        content.push({ type: 'tool_use', id: b.id, name: b.name, input: b.input as Json });
      else if (b.type === 'thinking' && typeof b.thinking === 'string')
        content.push({ type: 'thinking', text: b.thinking, signature: b.signature });
      else if (b.type === 'redacted_thinking')
        content.push({ type: 'thinking', text: '', signature: b.data, redacted: true });
    }
  return {
    id: idOf(json.id),
    content,
    stop: stopOf(json.stop_reason, ctx.jsonSchema),
    usage: readMessagesUsage(json.usage),
  };
}

/** Anthropic's event stream as neutral events. */
export class AnthropicStreamDecoder extends SseDecoder {
  /** `message_stop` arrived. */
  done = false;
  /** The provider's `stop_reason`, once message_delta carried it. */
  stopReason: string | null = null;
  private usage: Usage | null = null;
  /** Block indexes of the forced JSON tool (streamed as text). */
  private readonly jsonBlocks = new Set<number>();

  constructor(private readonly ctx: ProviderAnswerContext) {
    super();
  }

  private mergeUsage(u: unknown, emit: (e: StreamEvent) => void): void {
    if (!isObject(u)) return;
    this.usage = mergeMessagesUsage(this.usage, u);
    emit({ type: 'usage', usage: this.usage });
  }

  protected onEvent(e: EventSourceMessage, emit: (e: StreamEvent) => void): void {
    if (this.done) return;
    const data = parseData(e.data);
    if (!data) return;
    const type = typeof data.type === 'string' ? data.type : e.event;
    const index = Number(data.index);
    switch (type) {
      case 'message_start': {
        const message = isObject(data.message) ? data.message : {};
        emit({ type: 'start', id: idOf(message.id) });
        this.mergeUsage(message.usage, emit);
        return;
      }
      case 'content_block_start': {
        const b = isObject(data.content_block) ? data.content_block : {};
        if (b.type === 'text')
          emit({
            type: 'part_start',
            index,
            part: { type: 'text', text: typeof b.text === 'string' ? b.text : '' },
          });
        else if (b.type === 'tool_use' && this.ctx.jsonSchema && b.name === JSON_TOOL) {
          this.jsonBlocks.add(index);
          emit({ type: 'part_start', index, part: { type: 'text', text: '' } });
        } else if (b.type === 'tool_use') {
          const args = isObject(b.input) && Object.keys(b.input).length ? JSON.stringify(b.input) : '';
          emit({ type: 'part_start', index, part: { type: 'tool_use', id: b.id, name: b.name, args } });
        } else if (b.type === 'thinking' || b.type === 'redacted_thinking')
          emit({ type: 'part_start', index, part: { type: 'thinking' } });
        else emit({ type: 'part_start', index, part: { type: 'other' } });
        return;
      }
      case 'content_block_delta': {
        const d = isObject(data.delta) ? data.delta : {};
        if (d.type === 'text_delta' && typeof d.text === 'string' && d.text !== '')
          emit({ type: 'text_delta', index, text: d.text });
        else if (d.type === 'input_json_delta' && typeof d.partial_json === 'string' && d.partial_json !== '')
          emit(
            this.jsonBlocks.has(index)
              ? { type: 'text_delta', index, text: d.partial_json }
              : { type: 'tool_delta', index, args: d.partial_json },
          );
        else if (d.type === 'thinking_delta' && typeof d.thinking === 'string' && d.thinking !== '')
          emit({ type: 'thinking_delta', index, text: d.thinking });
        // signature_delta, citations_delta: nothing the neutral stream carries
        return;
      }
      case 'content_block_stop':
        emit({ type: 'part_end', index });
        return;
      case 'message_delta': {
        const d = isObject(data.delta) ? data.delta : {};
        if (typeof d.stop_reason === 'string') this.stopReason = d.stop_reason;
        this.mergeUsage(data.usage, emit);
        return;
      }
      case 'message_stop':
        emit({ type: 'stop', stop: stopOf(this.stopReason, this.ctx.jsonSchema) });
        emit({ type: 'finish' });
        this.done = true;
        return;
      case 'error': {
        const err = isObject(data.error) ? data.error : {};
        emit({
          type: 'error',
          error: {
            type: typeof err.type === 'string' ? err.type : null,
            message: typeof err.message === 'string' ? err.message : null,
          },
        });
        return;
      }
      default:
        // ping, and event types added later
        return;
    }
  }
}

/** Anthropic's `{type: "error", error: {type, message}}`, read. */
function errorIn(text: string): NeutralError | null {
  const json = jsonOr(text);
  if (!json || !isObject(json.error)) return null;
  return neutralError(json.error);
}

export const anthropicProvider: ProviderAdapter = {
  client: anthropicClient,
  endpoint: () => '/messages',
  requestOut,
  answerIn,
  streamIn: (ctx) => new AnthropicStreamDecoder(ctx),
  errorIn,
};
