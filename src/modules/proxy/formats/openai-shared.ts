import { badValue, isObject, unsupported, type Json } from './common.js';
import type { NeutralError, Part, Tool, ToolChoice } from './neutral.js';

/** What OpenAI's two client formats (chat completions, Responses) read and write alike. */

const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

/** An OpenAI image URL (a `data:` URL or http(s)) as a neutral image, or a 400 naming `param`. */
export function imageFromUrl(url: unknown, param: string): Part {
  if (typeof url !== 'string' || url === '') throw badValue(param, 'an image URL is required');
  const m = DATA_URL.exec(url);
  if (m) return { type: 'image', source: { kind: 'base64', mediaType: m[1], data: m[2] }, param };
  if (/^https?:\/\//i.test(url)) return { type: 'image', source: { kind: 'url', url }, param };
  throw badValue(param, 'an image must be a base64 data: URL or an http(s) URL');
}

/** An OpenAI function definition (`{name, description?, parameters?}`) as a neutral tool. */
export function functionTool(fn: unknown, param: string): Tool {
  if (!isObject(fn) || typeof fn.name !== 'string' || fn.name === '')
    throw badValue(`${param}.name`, 'a function tool needs a name');
  const tool: Tool = { name: fn.name, inputSchema: {} };
  if (typeof fn.description === 'string') tool.description = fn.description;
  tool.inputSchema = isObject(fn.parameters) ? fn.parameters : { type: 'object', properties: {} };
  return tool;
}

/**
 * A `custom` (free-form input) tool as a function taking its input as one string (Responses:
 * `{type: "custom", name, description}`; chat: the same under `custom`).
 */
export function customTool(tool: Json, param: string): Tool {
  if (typeof tool.name !== 'string' || tool.name === '') throw badValue(`${param}.name`, 'a tool name');
  const out: Tool = {
    name: tool.name,
    inputSchema: {
      type: 'object',
      properties: { input: { type: 'string', description: 'The tool input, free-form.' } },
      required: ['input'],
    },
  };
  if (typeof tool.description === 'string') out.description = tool.description;
  return out;
}

/** The client's `custom` tools' names (chat: under `custom`; Responses: top level). */
export function customToolNames(tools: unknown): Set<string> {
  const names = new Set<string>();
  if (Array.isArray(tools))
    for (const t of tools)
      if (isObject(t) && t.type === 'custom') {
        const name = isObject(t.custom) ? t.custom.name : t.name;
        if (typeof name === 'string') names.add(name);
      }
  return names;
}

/** A custom tool call's free-form input, from the `{input}` its function took. */
export const customInput = (input: unknown): string =>
  typeof input === 'string'
    ? input
    : isObject(input) && typeof input.input === 'string'
      ? input.input
      : JSON.stringify(input ?? {});

/**
 * An OpenAI `tool_choice` (chat: `{type:"function", function:{name}}`; Responses: `{type:"function", name}`)
 * and `parallel_tool_calls` as the neutral ones.
 */
export function openAiToolChoice(
  choice: unknown,
  parallel: unknown,
  param = 'tool_choice',
): { toolChoice?: ToolChoice; parallelToolCalls?: boolean } {
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean')
    throw badValue('parallel_tool_calls', 'a boolean');
  const out: { toolChoice?: ToolChoice; parallelToolCalls?: boolean } =
    parallel === false ? { parallelToolCalls: false } : {};
  if (choice === undefined || choice === null) return out;
  if (choice === 'auto') out.toolChoice = { type: 'auto' };
  else if (choice === 'none') out.toolChoice = { type: 'none' };
  else if (choice === 'required') out.toolChoice = { type: 'any' };
  else if (isObject(choice) && (choice.type === 'function' || choice.type === 'custom')) {
    const named = choice.type === 'function' ? choice.function : choice.custom;
    const name = isObject(named) ? named.name : choice.name;
    if (typeof name !== 'string' || name === '')
      throw badValue(param, 'a named tool choice names a function');
    out.toolChoice = { type: 'tool', name };
  } else if (isObject(choice) && typeof choice.type === 'string')
    throw unsupported(`${param}.type`, `a tool choice of type '${choice.type}' has no equivalent`);
  else throw badValue(param, "'auto', 'none', 'required' or a named function");
  return out;
}

/** `stop` (a string where `string` allows, or an array of strings) as a list; undefined when absent or empty. */
export function stopList(v: unknown, param: string, string: boolean): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  const stops = string && typeof v === 'string' ? [v] : v;
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string'))
    throw badValue(param, string ? 'a string or an array of strings' : 'an array of strings');
  return stops.length ? stops : undefined;
}

/** A boolean field (`stream`), or undefined when absent. */
export function booleanField(v: unknown, param: string): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw badValue(param, 'a boolean');
  return v;
}

/**
 * Anthropic's error types OpenAI has no word for, as OpenAI's type and code (the service's own 413 is
 * `invalid_request_error` with `code: "request_too_large"` too). The other types are the same words.
 */
const OPENAI_TYPE_OF: Readonly<Record<string, { type: string; code: string }>> = {
  request_too_large: { type: 'invalid_request_error', code: 'request_too_large' },
  overloaded_error: { type: 'api_error', code: 'overloaded' },
};

/** A provider's error as OpenAI's `{error: {message, type, param, code}}`. */
export const openAiError = (e: NeutralError): string => {
  const mapped = e.type === null ? undefined : OPENAI_TYPE_OF[e.type];
  return JSON.stringify({
    error: {
      message: e.message ?? 'The model provider refused the request.',
      type: mapped?.type ?? e.type ?? 'invalid_request_error',
      param: null,
      code: mapped?.code ?? null,
    },
  });
};
