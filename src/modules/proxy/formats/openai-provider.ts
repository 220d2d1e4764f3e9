import type { EventSourceMessage } from 'eventsource-parser';
import { openAiCompatibleClient } from '../upstream-client.js';
import {
  badValue,
  ERROR_FINISH,
  isObject,
  jsonOr,
  parseData,
  stripPrefix,
  tokens,
  unsupported,
  type Json,
} from './common.js';
import { neutralError, SseDecoder } from './sse-decoder.js';
import type {
  AnswerPart,
  NeutralAnswer,
  NeutralError,
  NeutralRequest,
  Part,
  ProviderAdapter,
  RequestOutContext,
  StopReason,
  StreamEvent,
  ToolChoice,
  ToolResultContent,
  Usage,
} from './neutral.js';

/**
 * OpenAI's chat completions as a provider kind's wire (any OpenAI-compatible API), to and from the neutral
 * model (docs/translation.md). The chat client format (chat-client.ts) reads and writes the same shapes
 * from the client's side.
 */

/** An Anthropic-shaped image block of a tool result as a chat `image_url` part; null for another block. */
function toolResultImage(b: Json, param: string): Json | null {
  if (b.type !== 'image' || !isObject(b.source)) return null;
  const s = b.source;
  if (s.type === 'base64' && typeof s.media_type === 'string' && typeof s.data === 'string')
    return { type: 'image_url', image_url: { url: `data:${s.media_type};base64,${s.data}` } };
  if (s.type === 'url' && typeof s.url === 'string') return { type: 'image_url', image_url: { url: s.url } };
  if (s.type === 'file')
    throw unsupported(`${param}.source.type`, 'files uploaded to the provider have no equivalent');
  throw badValue(`${param}.source`, 'an image source is base64 data or a URL');
}

/**
 * An Anthropic-shaped document block of a tool result (Claude Code's `Read` of a PDF): a base64 PDF as a
 * chat `file` part, a plain-text document as its text; null for another block.
 */
function toolResultDocument(b: Json, param: string): Json | string | null {
  if (b.type !== 'document' || !isObject(b.source)) return null;
  const s = b.source;
  if (s.type === 'text' && typeof s.data === 'string') return s.data;
  if (s.type === 'base64' && s.media_type === 'application/pdf' && typeof s.data === 'string') {
    const title = typeof b.title === 'string' && b.title !== '' ? b.title : 'document';
    const filename = /\.pdf$/i.test(title) ? title : `${title}.pdf`;
    return { type: 'file', file: { filename, file_data: `data:application/pdf;base64,${s.data}` } };
  }
  throw unsupported(`${param}.source.type`, 'only a base64 PDF or a text document can be translated');
}

/** What the tool message says about the attachments that follow it. */
function attachmentNote(images: number, documents: number): string {
  const count = images + documents;
  const noun = documents === 0 ? 'image' : images === 0 ? 'document' : 'attachment';
  return count === 1
    ? `[The ${noun} of this result follows in the next user message.]`
    : `[The ${count} ${noun}s of this result follow in the next user message.]`;
}

/**
 * A tool result's content as a tool message's text, and its attachments: a chat `tool` message holds text
 * only, so each image (and PDF document) goes, in order, into the user message that follows the tool
 * messages, and the text says so. Other blocks are refused, naming them.
 */
function toolResult(content: ToolResultContent, param: string): { text: string; attachments: Json[] } {
  if (typeof content === 'string') return { text: content, attachments: [] };
  const attachments: Json[] = [];
  let documents = 0;
  const texts = content.map((b, k) => {
    if (isObject(b) && b.type === 'text' && typeof b.text === 'string') return b.text;
    const at = `${param}[${k}]`;
    const image = isObject(b) ? toolResultImage(b, at) : null;
    if (image) {
      attachments.push(image);
      return '';
    }
    const document = isObject(b) ? toolResultDocument(b, at) : null;
    if (typeof document === 'string') return document;
    if (!document)
      throw unsupported(
        `${at}.type`,
        'a tool result sent to this provider holds text, images and documents only',
      );
    attachments.push(document);
    documents++;
    return '';
  });
  let text = texts.join('');
  if (attachments.length)
    text += `${text ? '\n' : ''}${attachmentNote(attachments.length - documents, documents)}`;
  return { text, attachments };
}

/** A user part as a chat content part. */
function userPart(part: Part): Json | null {
  if (part.type === 'text') return { type: 'text', text: part.text };
  if (part.type !== 'image') return null;
  const s = part.source;
  if (s.kind === 'file')
    throw unsupported(`${part.param}.type`, 'files uploaded to the provider have no equivalent');
  return {
    type: 'image_url',
    image_url: { url: s.kind === 'base64' ? `data:${s.mediaType};base64,${s.data}` : s.url },
  };
}

/** Neutral turns as chat messages (tool results become `tool` messages, placed first in their turn). */
function chatMessages(req: NeutralRequest): Json[] {
  const out: Json[] = [];
  for (const m of req.messages) {
    if (typeof m.content === 'string') {
      out.push({ role: m.role, content: m.content });
      continue;
    }
    if (m.role === 'user') {
      const tools: Json[] = [];
      const parts: Json[] = [];
      const attachments: Json[] = [];
      for (const p of m.content) {
        if (p.type === 'tool_result') {
          const result = toolResult(p.content, `${p.param}.content`);
          tools.push({ role: 'tool', tool_call_id: p.toolUseId, content: result.text });
          attachments.push(...result.attachments);
        } else {
          const part = userPart(p);
          if (part) parts.push(part);
        }
      }
      out.push(...tools);
      parts.unshift(...attachments);
      if (parts.length) out.push({ role: 'user', content: parts });
      continue;
    }
    let text: string | null = null;
    const calls: Json[] = [];
    for (const p of m.content) {
      if (p.type === 'text') text = (text ?? '') + p.text;
      else if (p.type === 'tool_use')
        calls.push({
          id: p.id,
          type: 'function',
          function: { name: p.name, arguments: JSON.stringify(p.input ?? {}) },
        });
      // thinking: an earlier answer's, which this provider cannot take back; left out
    }
    const msg: Json = { role: 'assistant', content: text };
    if (calls.length) msg.tool_calls = calls;
    out.push(msg);
  }
  return out;
}

const CHOICES: Record<ToolChoice['type'], (c: ToolChoice) => unknown> = {
  auto: () => 'auto',
  any: () => 'required',
  none: () => 'none',
  tool: (c) => ({ type: 'function', function: { name: (c as { name: string }).name } }),
};

/** A neutral request as a chat completion request (a stream asks for the usage chunk). */
function requestOut(req: NeutralRequest, ctx: RequestOutContext): Json {
  const messages = chatMessages(req);
  const system = req.system.filter((t) => t !== '').join('\n\n');
  if (system !== '') messages.unshift({ role: 'system', content: system });
  const capField = ctx.capParameter === 'MAX_TOKENS' ? 'max_tokens' : 'max_completion_tokens';
  const out: Json = { model: req.model, messages, [capField]: req.maxTokens };
  if (req.stop?.length) out.stop = req.stop;
  if (req.temperature !== undefined) out.temperature = req.temperature;
  if (req.topP !== undefined) out.top_p = req.topP;
  if (req.topK !== undefined) ctx.dropped.add('top_k');
  if (req.tools)
    out.tools = req.tools.map((t) => ({
      type: 'function',
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.inputSchema,
      },
    }));
  if (req.toolChoice) out.tool_choice = CHOICES[req.toolChoice.type](req.toolChoice);
  if (req.parallelToolCalls === false && (req.tools?.length ?? 0) > 0) out.parallel_tool_calls = false;
  const r = req.reasoning;
  if (r?.effort && ctx.reasoning) out.reasoning_effort = r.effort;
  else for (const f of r?.fields ?? []) ctx.dropped.add(f);
  if (req.jsonSchema)
    out.response_format = {
      type: 'json_schema',
      json_schema: { name: 'output', schema: req.jsonSchema, strict: true },
    };
  if (req.stream !== undefined) {
    out.stream = req.stream;
    if (req.stream) out.stream_options = { include_usage: true };
  }
  return out;
}

/** Chat `finish_reason` as the neutral stop (null: it ended in the provider's error). */
export function stopOf(finish: unknown): StopReason | null {
  switch (finish) {
    case ERROR_FINISH:
      return null;
    case 'length':
      return 'length';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end';
  }
}

/**
 * Chat usage, read: `prompt_tokens` holds the cache read (`cached_tokens`, DeepSeek's
 * `prompt_cache_hit_tokens`) and write; the uncached input is the rest (never below 0).
 */
export function usageOf(u: unknown): Usage | null {
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
  return {
    input: prompt - cacheRead - cacheWrite,
    cacheRead,
    cacheWrite,
    output,
    thinking: Math.min(output, tokens(cd.reasoning_tokens)),
  };
}

/** A tool call's arguments as an input object (the provider's invalid JSON → `{}`). */
function inputOf(args: unknown): Json {
  if (typeof args !== 'string' || args === '') return {};
  try {
    const v = JSON.parse(args);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

const idOf = (id: unknown): string | null => stripPrefix(id, /^chatcmpl-/);

/** A `chat.completion` (its first choice) as the neutral answer. */
function answerIn(json: Json): NeutralAnswer {
  const choice = Array.isArray(json.choices) && isObject(json.choices[0]) ? json.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const content: AnswerPart[] = [];
  if (typeof message.content === 'string' && message.content !== '')
    content.push({ type: 'text', text: message.content });
  else if (typeof message.refusal === 'string' && message.refusal !== '')
    content.push({ type: 'text', text: message.refusal });
  if (Array.isArray(message.tool_calls))
    for (const c of message.tool_calls)
      if (isObject(c) && isObject(c.function))
        content.push({
          type: 'tool_use',
          id: c.id,
          name: c.function.name,
          input: inputOf(c.function.arguments),
        });
  return { id: idOf(json.id), content, stop: stopOf(choice.finish_reason), usage: usageOf(json.usage) };
}

/**
 * A chat completion stream as neutral events: its text and tool call deltas become numbered parts (a part
 * ends when another begins or the choice finishes); `[DONE]` (or the end of the body) finishes it.
 */
export class ChatStreamDecoder extends SseDecoder {
  done = false;
  private started = false;
  private index = -1;
  /** What the open part is: text, or the chat tool call index it streams. */
  private open: { kind: 'text' } | { kind: 'tool'; call: number } | null = null;

  private close(emit: (e: StreamEvent) => void): void {
    if (!this.open) return;
    emit({ type: 'part_end', index: this.index });
    this.open = null;
  }

  private text(text: string, emit: (e: StreamEvent) => void): void {
    if (text === '') return;
    if (this.open?.kind !== 'text') {
      this.close(emit);
      this.index++;
      this.open = { kind: 'text' };
      emit({ type: 'part_start', index: this.index, part: { type: 'text', text: '' } });
    }
    emit({ type: 'text_delta', index: this.index, text });
  }

  private toolCall(c: Json, emit: (e: StreamEvent) => void): void {
    const call = typeof c.index === 'number' ? c.index : 0;
    const fn = isObject(c.function) ? c.function : {};
    if (this.open?.kind !== 'tool' || this.open.call !== call) {
      this.close(emit);
      this.index++;
      this.open = { kind: 'tool', call };
      emit({
        type: 'part_start',
        index: this.index,
        part: { type: 'tool_use', id: c.id, name: fn.name, args: '' },
      });
    }
    if (typeof fn.arguments === 'string' && fn.arguments !== '')
      emit({ type: 'tool_delta', index: this.index, args: fn.arguments });
  }

  override end(emit: (e: StreamEvent) => void): void {
    if (this.done || !this.started) return;
    this.close(emit);
    emit({ type: 'finish' });
    this.done = true;
  }

  protected onEvent(e: EventSourceMessage, emit: (e: StreamEvent) => void): void {
    if (this.done) return;
    if (e.data === '[DONE]') {
      this.end(emit);
      return;
    }
    const chunk = parseData(e.data);
    if (!chunk) return;
    if (isObject(chunk.error)) {
      const { type, message } = chunk.error;
      emit({
        type: 'error',
        error: {
          type: typeof type === 'string' ? type : null,
          message: typeof message === 'string' ? message : null,
        },
      });
      return;
    }
    if (!this.started) {
      this.started = true;
      emit({ type: 'start', id: idOf(chunk.id) });
    }
    const usage = usageOf(chunk.usage);
    if (usage) emit({ type: 'usage', usage });
    const choice = Array.isArray(chunk.choices)
      ? chunk.choices.find((c) => isObject(c) && (c.index ?? 0) === 0)
      : null;
    if (!isObject(choice)) return;
    const delta = isObject(choice.delta) ? choice.delta : {};
    if (typeof delta.content === 'string') this.text(delta.content, emit);
    if (typeof delta.refusal === 'string') this.text(delta.refusal, emit);
    if (Array.isArray(delta.tool_calls))
      for (const c of delta.tool_calls) if (isObject(c)) this.toolCall(c, emit);
    if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '') {
      emit({ type: 'stop', stop: stopOf(choice.finish_reason) });
      this.close(emit);
    }
  }
}

/** OpenAI's `{error: {message, type, ...}}`, read (an Anthropic-shaped body is not one). */
function errorIn(text: string): NeutralError | null {
  const json = jsonOr(text);
  if (!json || !isObject(json.error) || json.type === 'error') return null;
  return neutralError(json.error);
}

export const openAiProvider: ProviderAdapter = {
  client: openAiCompatibleClient,
  endpoint: () => '/chat/completions',
  requestOut,
  answerIn,
  streamIn: () => new ChatStreamDecoder(),
  errorIn,
};
