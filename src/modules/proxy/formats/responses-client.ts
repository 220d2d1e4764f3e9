import {
  badValue,
  isObject,
  numberField,
  parseArguments,
  textOnly,
  unsupported,
  type Json,
} from './common.js';
import { ANY_JSON_OBJECT, effortOf, NAMESPACE_SEPARATOR } from './field-policy.js';
import {
  booleanField,
  customTool,
  functionTool,
  imageFromUrl,
  openAiError,
  openAiToolChoice,
} from './openai-shared.js';
import { ResponsesStreamEncoder, responsesAnswer } from './responses-answer.js';
import type {
  ClientAdapter,
  Message,
  NeutralRequest,
  Part,
  RequestInContext,
  Tool,
  ToolResultContent,
} from './neutral.js';

/**
 * OpenAI's Responses API as a client format, to and from the neutral model (docs/translation.md): the
 * request read here; the answer and the event stream written in responses-answer.ts.
 */

/**
 * A client tool as the neutral tools it becomes (docs/reference.md §21 "Mapped"): a `namespace` tool's
 * functions as `<namespace>__<name>`, a `custom` tool as a function taking `{input}`.
 */
function tools(tool: unknown, i: number): Tool[] {
  const at = `tools[${i}]`;
  if (!isObject(tool)) throw badValue(at, 'a tool is an object');
  if (tool.type === 'function') return [functionTool(tool, at)];
  if (tool.type === 'custom') return [customTool(tool, at)];
  if (tool.type === 'namespace') {
    if (typeof tool.name !== 'string' || tool.name === '' || !Array.isArray(tool.tools))
      throw badValue(at, 'a namespace tool has a name and tools');
    return tool.tools.map((fn, j) => {
      const param = `${at}.tools[${j}]`;
      if (!isObject(fn) || typeof fn.name !== 'string') throw badValue(param, 'a tool with a name');
      const named = { ...fn, name: `${tool.name}${NAMESPACE_SEPARATOR}${fn.name}` };
      return fn.type === 'custom' ? customTool(named, param) : functionTool(named, param);
    });
  }
  throw unsupported(`${at}.type`, `the built-in '${String(tool.type)}' tool has no equivalent`);
}

/** One content part of an input message as a neutral part. */
function inputPart(part: unknown, param: string): Part {
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
      return imageFromUrl(part.image_url, `${param}.image_url`);
    default:
      throw unsupported(`${param}.type`, `a '${String(part.type)}' part has no equivalent`);
  }
}

/**
 * A function call's `output`: a string, or text and image parts (Codex's `view_image` answers with an
 * `input_image`), as a tool result's content: text, or the Messages-shaped blocks the neutral model keeps
 * (text and image blocks; a provider that takes no image in a tool result moves it, openai-provider.ts).
 */
function toolOutput(output: unknown, param: string): ToolResultContent {
  if (!Array.isArray(output)) return textOnly(output, param, '');
  if (output.every((p) => isObject(p) && p.type !== 'input_image')) return textOnly(output, param, '');
  return output.map((p, j): Json => {
    const at = `${param}[${j}]`;
    const part = inputPart(p, at);
    if (part.type === 'text') return { type: 'text', text: part.text };
    if (part.type !== 'image') throw unsupported(`${at}.type`, 'only text and image parts can be translated');
    const s = part.source;
    if (s.kind === 'base64')
      return { type: 'image', source: { type: 'base64', media_type: s.mediaType, data: s.data } };
    if (s.kind === 'url') return { type: 'image', source: { type: 'url', url: s.url } };
    throw unsupported(`${at}.type`, 'only text and image parts can be translated');
  });
}

/** The Responses `input` → the neutral system pieces and turns (consecutive items of a role: one turn). */
function readInput(input: unknown): { system: string[]; turns: Message[] } {
  const system: string[] = [];
  const turns: Message[] = [];
  if (typeof input === 'string') return { system, turns: [{ role: 'user', content: input }] };
  if (!Array.isArray(input) || input.length === 0)
    throw badValue('input', 'a string or a non-empty array of items');

  const append = (role: 'user' | 'assistant', parts: Part[]) => {
    const last = turns.at(-1);
    if (last && last.role === role) {
      if (typeof last.content === 'string') last.content = [{ type: 'text', text: last.content }];
      last.content.push(...parts);
    } else turns.push({ role, content: parts });
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
        const parts: Part[] | null =
          typeof item.content === 'string'
            ? item.content === ''
              ? []
              : [{ type: 'text', text: item.content }]
            : Array.isArray(item.content)
              ? item.content.map((p, j) => inputPart(p, `${at}.content[${j}]`))
              : null;
        if (parts === null) throw badValue(`${at}.content`, 'a string or an array of content parts');
        if (role === 'assistant') {
          const text = parts.filter((b) => b.type !== 'text' || b.text !== '');
          if (text.some((b) => b.type !== 'text'))
            throw unsupported(`${at}.content`, 'an assistant message holds text only');
          append('assistant', text);
        } else append('user', parts);
        return;
      }
      case 'function_call': {
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string')
          throw badValue(at, 'a function call has a call_id and a name');
        const name =
          typeof item.namespace === 'string' && item.namespace !== ''
            ? `${item.namespace}${NAMESPACE_SEPARATOR}${item.name}`
            : item.name;
        const input = parseArguments(item.arguments, `${at}.arguments`);
        append('assistant', [{ type: 'tool_use', id: item.call_id, name, input }]);
        return;
      }
      case 'custom_tool_call': {
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string')
          throw badValue(at, 'a custom tool call has a call_id and a name');
        const input = { input: String(item.input ?? '') };
        append('assistant', [{ type: 'tool_use', id: item.call_id, name: item.name, input }]);
        return;
      }
      case 'custom_tool_call_output':
      case 'function_call_output': {
        if (typeof item.call_id !== 'string') throw badValue(`${at}.call_id`, 'the call it answers');
        const output = toolOutput(item.output, `${at}.output`);
        append('user', [{ type: 'tool_result', toolUseId: item.call_id, content: output, param: at }]);
        return;
      }
      case 'reasoning':
        // The reasoning of an earlier OpenAI answer: nothing another kind can take back; left out.
        return;
      default:
        throw unsupported(`${at}.type`, `a '${String(type)}' item has no equivalent`);
    }
  });
  return { system, turns };
}

/** A Responses API request as the neutral request, or the 400 naming the field. */
function requestIn(body: Json, ctx: RequestInContext): NeutralRequest {
  const { system, turns } = readInput(body.input);
  const instructions =
    body.instructions === undefined || body.instructions === null
      ? []
      : [textOnly(body.instructions, 'instructions')];
  const req: NeutralRequest = {
    model: ctx.model,
    system: [...instructions, ...system],
    messages: turns,
    maxTokens: ctx.maxTokens,
  };
  const t = numberField(body.temperature, 'temperature');
  if (t !== undefined) req.temperature = t;
  const topP = numberField(body.top_p, 'top_p');
  if (topP !== undefined) req.topP = topP;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badValue('tools', 'an array of tools');
    req.tools = body.tools.flatMap((tool, i) => tools(tool, i));
  }
  Object.assign(req, openAiToolChoice(body.tool_choice, body.parallel_tool_calls));
  const text = isObject(body.text) ? body.text : {};
  const format = isObject(text.format) ? text.format : null;
  if (format && format.type === 'json_schema') {
    if (!isObject(format.schema)) throw badValue('text.format', 'a json_schema format has a schema object');
    req.jsonSchema = format.schema;
  } else if (format && format.type === 'json_object') req.jsonSchema = { ...ANY_JSON_OBJECT };
  else if (format && format.type !== 'text') ctx.dropped.add('text.format');
  if (text.verbosity !== undefined && text.verbosity !== null) ctx.dropped.add('text.verbosity');
  const effort = isObject(body.reasoning) ? body.reasoning.effort : undefined;
  if (effort !== undefined && effort !== null && effort !== 'none')
    req.reasoning = { effort: effortOf(effort), fields: ['reasoning'] };
  const stream = booleanField(body.stream, 'stream');
  if (stream !== undefined) req.stream = stream;
  return req;
}

export const responsesClient: ClientAdapter = {
  format: 'responses',
  capFields: ['max_output_tokens'],
  requestIn,
  answerOut: responsesAnswer,
  streamOut: (ctx) => new ResponsesStreamEncoder(ctx),
  errorOut: openAiError,
};
