import {
  badValue,
  dataEvent,
  ERROR_FINISH,
  isObject,
  numberField,
  parseArguments,
  textOnly,
  unsupported,
  withPrefix,
  type Json,
} from './common.js';
import { ANY_JSON_OBJECT, effortOf } from './field-policy.js';
import {
  booleanField,
  customInput,
  customTool,
  customToolNames,
  functionTool,
  imageFromUrl,
  openAiError,
  openAiToolChoice,
  stopList,
} from './openai-shared.js';
import { ClientStreamEncoder } from './stream-encoder.js';
import type {
  ClientAdapter,
  ClientAnswerContext,
  Message,
  NeutralAnswer,
  NeutralRequest,
  Part,
  RequestInContext,
  StopReason,
  StreamEvent,
  Usage,
} from './neutral.js';

/**
 * Chat completions as a client format, to and from the neutral model (docs/translation.md): the client's
 * chat request read, and the neutral answer (whole or streamed) written as the chat answer an OpenAI
 * provider would have given, so the chat relay meters it unchanged.
 */

/** One user-side content part of a chat message as a neutral part. */
function userPart(part: unknown, param: string): Part {
  if (!isObject(part)) throw badValue(param, 'a content part is an object');
  switch (part.type) {
    case 'text':
      if (typeof part.text !== 'string') throw badValue(`${param}.text`, 'a string');
      return { type: 'text', text: part.text };
    case 'image_url': {
      const url = isObject(part.image_url) ? part.image_url.url : part.image_url;
      return imageFromUrl(url, `${param}.image_url.url`);
    }
    default:
      throw unsupported(`${param}.type`, `a '${String(part.type)}' part has no equivalent`);
  }
}

/** An assistant message's text, refusals and tool calls as neutral parts. */
function assistantParts(m: Json, at: string): Part[] {
  if (m.function_call !== undefined && m.function_call !== null)
    throw unsupported(`${at}.function_call`, "the legacy 'function_call' has no equivalent");
  if (m.audio !== undefined && m.audio !== null)
    throw unsupported(`${at}.audio`, 'the provider takes no audio');
  const parts: Part[] = [];
  if (typeof m.content === 'string') {
    if (m.content !== '') parts.push({ type: 'text', text: m.content });
  } else if (Array.isArray(m.content)) {
    m.content.forEach((p, j) => {
      if (isObject(p) && p.type === 'text' && typeof p.text === 'string') {
        if (p.text !== '') parts.push({ type: 'text', text: p.text });
      } else if (isObject(p) && p.type === 'refusal' && typeof p.refusal === 'string') {
        if (p.refusal !== '') parts.push({ type: 'text', text: p.refusal });
      } else
        throw unsupported(`${at}.content[${j}].type`, 'an assistant message holds text and refusals only');
    });
  } else if (m.content !== null && m.content !== undefined)
    throw badValue(`${at}.content`, 'a string, an array of content parts, or null');
  if (m.tool_calls !== undefined && m.tool_calls !== null) {
    if (!Array.isArray(m.tool_calls)) throw badValue(`${at}.tool_calls`, 'an array');
    m.tool_calls.forEach((c, j) => {
      const param = `${at}.tool_calls[${j}]`;
      if (!isObject(c)) throw badValue(param, 'a tool call is an object');
      if (c.type === 'custom') {
        // A custom tool's call: its free-form input goes as the `{input}` its function takes.
        if (typeof c.id !== 'string' || !isObject(c.custom) || typeof c.custom.name !== 'string')
          throw badValue(param, 'a custom tool call has an id and a name');
        if (typeof c.custom.input !== 'string') throw badValue(`${param}.custom.input`, 'a string');
        parts.push({ type: 'tool_use', id: c.id, name: c.custom.name, input: { input: c.custom.input } });
        return;
      }
      if (c.type !== undefined && c.type !== 'function')
        throw unsupported(`${param}.type`, `a '${String(c.type)}' tool call has no equivalent`);
      if (typeof c.id !== 'string' || !isObject(c.function) || typeof c.function.name !== 'string')
        throw badValue(param, 'a tool call has an id and a function name');
      parts.push({
        type: 'tool_use',
        id: c.id,
        name: c.function.name,
        input: parseArguments(c.function.arguments, `${param}.function.arguments`),
      });
    });
  }
  return parts;
}

/** Chat messages → the neutral system pieces and turns. */
function readMessages(messages: unknown): { system: string[]; turns: Message[] } {
  if (!Array.isArray(messages) || messages.length === 0)
    throw badValue('messages', 'a non-empty array of messages');
  const system: string[] = [];
  const turns: Message[] = [];
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
              ? m.content.map((p, j) => userPart(p, `${at}.content[${j}]`))
              : null;
        if (content === null) throw badValue(`${at}.content`, 'a string or an array of content parts');
        turns.push({ role: 'user', content });
        return;
      }
      case 'assistant': {
        const parts = assistantParts(m, at);
        turns.push({ role: 'assistant', content: parts.length ? parts : '' });
        return;
      }
      case 'tool': {
        if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '')
          throw badValue(`${at}.tool_call_id`, 'a tool message names the call it answers');
        const result: Part = {
          type: 'tool_result',
          toolUseId: m.tool_call_id,
          content: textOnly(m.content, `${at}.content`, ''),
          param: at,
        };
        const last = turns.at(-1);
        // Consecutive tool results answer one assistant turn: one user turn holds them all.
        if (
          last &&
          last.role === 'user' &&
          Array.isArray(last.content) &&
          last.content.every((b) => b.type === 'tool_result')
        )
          last.content.push(result);
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

/** A chat completion request as the neutral request, or the 400 naming the field. */
function requestIn(body: Json, ctx: RequestInContext): NeutralRequest {
  const { system, turns } = readMessages(body.messages);
  const req: NeutralRequest = { model: ctx.model, system, messages: turns, maxTokens: ctx.maxTokens };
  const stop = stopList(body.stop, 'stop', true);
  if (stop) req.stop = stop;
  req.temperature = numberField(body.temperature, 'temperature');
  req.topP = numberField(body.top_p, 'top_p');
  req.topK = numberField(body.top_k, 'top_k');
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badValue('tools', 'an array of tools');
    req.tools = body.tools.map((tool, i) => {
      if (isObject(tool) && tool.type === 'custom')
        return customTool(isObject(tool.custom) ? tool.custom : {}, `tools[${i}].custom`);
      if (!isObject(tool) || tool.type !== 'function')
        throw unsupported(
          `tools[${i}].type`,
          `a '${String(isObject(tool) ? tool.type : tool)}' tool has no equivalent`,
        );
      return functionTool(tool.function, `tools[${i}].function`);
    });
  }
  Object.assign(req, openAiToolChoice(body.tool_choice, body.parallel_tool_calls));
  const format = body.response_format;
  if (isObject(format) && format.type === 'json_schema') {
    const schema = isObject(format.json_schema) ? format.json_schema.schema : null;
    if (!isObject(schema)) throw badValue('response_format', 'a json_schema format has a schema object');
    req.jsonSchema = schema;
  } else if (isObject(format) && format.type === 'json_object') req.jsonSchema = { ...ANY_JSON_OBJECT };
  else if (isObject(format) && format.type !== 'text') ctx.dropped.add('response_format');
  const effort = body.reasoning_effort;
  if (effort !== undefined && effort !== null && effort !== 'none')
    req.reasoning = { effort: effortOf(effort), fields: ['reasoning_effort'] };
  req.stream = booleanField(body.stream, 'stream');
  for (const k of Object.keys(req) as (keyof NeutralRequest)[]) if (req[k] === undefined) delete req[k];
  return req;
}

/** The neutral stop as chat's `finish_reason`. */
export const finishOf = (stop: StopReason | null): string =>
  stop === null
    ? ERROR_FINISH
    : { end: 'stop', length: 'length', tool_use: 'tool_calls', refusal: 'content_filter' }[stop];

/**
 * Chat completions usage (docs/reference.md §13): `prompt_tokens` is all the input, cache read and cache
 * write included; the cache write goes in `prompt_tokens_details.cache_write_tokens` so the charge keeps its
 * bucket; the thinking part is the reasoning (charged at the reasoning price, §21 "Answers").
 */
export function chatUsage(c: Usage): Json {
  const prompt = c.input + c.cacheRead + c.cacheWrite;
  return {
    prompt_tokens: prompt,
    completion_tokens: c.output,
    total_tokens: prompt + c.output,
    prompt_tokens_details: { cached_tokens: c.cacheRead, cache_write_tokens: c.cacheWrite },
    completion_tokens_details: { reasoning_tokens: Math.min(c.thinking, c.output) },
  };
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** The neutral answer as a `chat.completion` (thinking is left out). */
function answerOut(answer: NeutralAnswer, ctx: ClientAnswerContext): Json {
  let text: string | null = null;
  const toolCalls: Json[] = [];
  const custom = customToolNames(ctx.body.tools);
  for (const p of answer.content)
    if (p.type === 'text') text = (text ?? '') + p.text;
    else if (p.type === 'tool_use' && custom.has(p.name))
      toolCalls.push({ id: p.id, type: 'custom', custom: { name: p.name, input: customInput(p.input) } });
    else if (p.type === 'tool_use')
      toolCalls.push({
        id: p.id,
        type: 'function',
        function: { name: p.name, arguments: JSON.stringify(p.input ?? {}) },
      });
  const message: Json = { role: 'assistant', content: text, refusal: null, annotations: [] };
  if (toolCalls.length) message.tool_calls = toolCalls;
  const out: Json = {
    id: ctx.id ?? withPrefix(answer.id, 'chatcmpl-', 'chatcmpl-translated'),
    object: 'chat.completion',
    created: ctx.created ?? nowSeconds(),
    model: ctx.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishOf(answer.stop) }],
  };
  if (answer.usage) out.usage = chatUsage(answer.usage);
  return out;
}

/**
 * Writes neutral events as the chat completion chunks an OpenAI provider would have streamed
 * (`data: {...}\n\n`). The usage chunk (`choices: []`) comes at the end when `includeUsage` (the proxy always
 * asks its providers for it; the chat relay removes it when the client did not). The tail is `[DONE]`.
 */
export class ChatStreamEncoder extends ClientStreamEncoder {
  private stop: StopReason | null = 'end';
  private id: string;
  private readonly created: number;
  /** Part index → chat tool call index. */
  private readonly toolIndex = new Map<number, number>();
  /** Part index → the arguments so far of a custom tool's call (its input is sent whole at the part's end). */
  private readonly customArgs = new Map<number, string>();
  private readonly custom: Set<string>;
  private started = false;

  constructor(private readonly ctx: ClientAnswerContext & { includeUsage: boolean }) {
    super();
    this.id = ctx.id ?? 'chatcmpl-translated';
    this.created = ctx.created ?? nowSeconds();
    this.custom = customToolNames(ctx.body.tools);
  }

  private chunk(delta: Json, finish: string | null = null): void {
    this.out += dataEvent({
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.ctx.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.chunk({ role: 'assistant', content: '' });
  }

  protected on(e: StreamEvent): void {
    switch (e.type) {
      case 'start':
        if (this.ctx.id === undefined) this.id = withPrefix(e.id, 'chatcmpl-', this.id);
        this.start();
        return;
      case 'part_start': {
        this.start();
        const p = e.part;
        if (p.type === 'text' && p.text !== '') this.chunk({ content: p.text });
        else if (p.type === 'tool_use') {
          const index = this.toolIndex.size;
          this.toolIndex.set(e.index, index);
          if (typeof p.name === 'string' && this.custom.has(p.name)) {
            // The input arrives as the JSON of `{input}`: the custom call gets it whole at the part's end.
            this.customArgs.set(e.index, p.args);
            this.chunk({ tool_calls: [{ index, id: p.id, type: 'custom', custom: { name: p.name } }] });
            return;
          }
          this.chunk({
            tool_calls: [
              { index, id: p.id, type: 'function', function: { name: p.name, arguments: p.args } },
            ],
          });
        }
        return;
      }
      case 'text_delta':
        this.chunk({ content: e.text });
        return;
      case 'tool_delta': {
        const args = this.customArgs.get(e.index);
        if (args !== undefined) {
          this.customArgs.set(e.index, args + e.args);
          return;
        }
        const index = this.toolIndex.get(e.index);
        if (index !== undefined) this.chunk({ tool_calls: [{ index, function: { arguments: e.args } }] });
        return;
      }
      case 'usage':
        this.usage = e.usage;
        return;
      case 'stop':
        this.stop = e.stop;
        return;
      case 'finish':
        this.start();
        this.chunk({}, finishOf(this.stop));
        this.finished = true;
        if (this.ctx.includeUsage && this.usage)
          this.out += dataEvent({
            id: this.id,
            object: 'chat.completion.chunk',
            created: this.created,
            model: this.ctx.model,
            choices: [],
            usage: chatUsage(this.usage),
          });
        this.done = true;
        return;
      case 'error':
        this.upstreamError = true;
        this.out += dataEvent({
          error: {
            message: e.error.message ?? 'The provider failed.',
            type: 'api_error',
            param: null,
            code: e.error.type,
          },
        });
        return;
      case 'part_end': {
        const args = this.customArgs.get(e.index);
        const index = this.toolIndex.get(e.index);
        if (args === undefined || index === undefined) return; // a chat chunk has no end of part
        this.customArgs.delete(e.index);
        let input: unknown = args;
        try {
          input = JSON.parse(args || '{}');
        } catch {
          /* not JSON: the text as it came */
        }
        this.chunk({ tool_calls: [{ index, custom: { input: customInput(input) } }] });
        return;
      }
      default:
        // thinking: nothing in chat's format
        return;
    }
  }

  /** The chat relay ends on `[DONE]` as it does with an OpenAI provider. */
  tail(): string {
    return this.done && !this.errored ? 'data: [DONE]\n\n' : '';
  }
}

export const chatClient: ClientAdapter = {
  format: 'chat',
  capFields: ['max_completion_tokens', 'max_tokens'],
  requestIn,
  answerOut,
  streamOut: (ctx) =>
    new ChatStreamEncoder({
      ...ctx,
      includeUsage: isObject(ctx.body.stream_options) && ctx.body.stream_options.include_usage === true,
    }),
  errorOut: openAiError,
};
