import { isObject, unsupported, type Json } from './common.js';

/**
 * What becomes of each top-level field of a client's body on its way to a provider of another kind
 * (docs/reference.md §21, docs/translation.md): the one table, per client format, that the hub applies
 * (hub.ts `translateRequest`) before the client format's adapter reads the body into the neutral model.
 *
 * - `translated`: carried over to the provider's own field of the same meaning.
 * - `mapped`: carried over to a field of another shape (the adapters say how; thinking ↔ reasoning
 *   effort is mapped only for a model that reasons, else dropped and named).
 * - `dropped`: has no equivalent and steers only how the provider works: left out, and named in the
 *   answer's `x-paywall-dropped-fields`.
 * - `refused`: dropping it would change what the client parses or pays for: a 400 naming the field
 *   (unless `allows` says the value asks for nothing, e.g. `n: 1`).
 *
 * A field not in the table is dropped and named, like `dropped` (a client's field the service does not know
 * is most likely a new setting of how the provider works).
 */
export type FieldRule =
  | { action: 'translated' }
  | { action: 'mapped' }
  | { action: 'dropped' }
  | { action: 'refused'; why: string; allows?: (v: unknown) => boolean };

/** The client formats a translation starts from. */
export type SourceFormat = 'chat' | 'responses' | 'messages';

const T: FieldRule = { action: 'translated' };
const M: FieldRule = { action: 'mapped' };
const D: FieldRule = { action: 'dropped' };
const refused = (why: string, allows?: (v: unknown) => boolean): FieldRule => ({
  action: 'refused',
  why,
  allows,
});

const LOGPROBS = 'the provider returns no log probabilities';

/** Chat completions → Anthropic Messages. */
const CHAT: Record<string, FieldRule> = {
  model: T,
  messages: T,
  max_tokens: T,
  max_completion_tokens: T,
  stream: T,
  temperature: T,
  top_p: T,
  top_k: T,
  stop: T,
  tools: T,
  tool_choice: T,
  parallel_tool_calls: M,
  reasoning_effort: M,
  response_format: M,
  user: D,
  safety_identifier: D,
  metadata: D,
  store: D,
  seed: D,
  service_tier: D,
  prompt_cache_key: D,
  prompt_cache_retention: D,
  stream_options: D,
  logit_bias: D,
  frequency_penalty: D,
  presence_penalty: D,
  verbosity: D,
  prediction: D,
  n: refused('the provider returns one choice per request', (v) => v === 1),
  logprobs: refused(LOGPROBS, (v) => v === false),
  top_logprobs: refused(LOGPROBS, (v) => v === 0),
  audio: refused('the provider produces no audio'),
  modalities: refused(
    'the provider produces text only',
    (v) => Array.isArray(v) && v.every((m) => m === 'text'),
  ),
  web_search_options: refused('built-in web search has no equivalent'),
  functions: refused(
    "the legacy 'functions' are answered as 'function_call', which has no equivalent: use 'tools'",
  ),
  function_call: refused("the legacy 'function_call' has no equivalent: use 'tool_choice'"),
};

/** The Responses API → Anthropic Messages. */
const RESPONSES: Record<string, FieldRule> = {
  model: T,
  input: T,
  instructions: T,
  max_output_tokens: T,
  stream: T,
  temperature: T,
  top_p: T,
  tools: T,
  tool_choice: T,
  parallel_tool_calls: M,
  reasoning: M,
  text: M,
  include: D,
  client_metadata: D,
  store: D,
  prompt_cache_key: D,
  prompt_cache_retention: D,
  safety_identifier: D,
  service_tier: D,
  user: D,
  metadata: D,
  stream_options: D,
  truncation: D,
  max_tool_calls: D,
  top_logprobs: refused(LOGPROBS, (v) => v === 0),
  previous_response_id: refused('stored responses cannot be continued on this provider'),
  conversation: refused('stored conversations cannot be continued on this provider'),
  prompt: refused('stored prompts have no equivalent'),
  background: refused('background responses have no equivalent', (v) => v === false),
};

/** Anthropic Messages → chat completions. */
const MESSAGES: Record<string, FieldRule> = {
  model: T,
  messages: M,
  system: T,
  max_tokens: T,
  stop_sequences: T,
  stream: T,
  temperature: T,
  top_p: T,
  tools: T,
  tool_choice: M,
  thinking: M,
  output_config: M,
  output_format: M,
  metadata: D,
  cache_control: D,
  context_management: D,
  service_tier: D,
  container: D,
  top_k: D,
  inference_geo: D,
  mcp_servers: refused('MCP servers have no equivalent'),
};

export const FIELD_POLICY: Readonly<Record<SourceFormat, Readonly<Record<string, FieldRule>>>> = {
  chat: CHAT,
  responses: RESPONSES,
  messages: MESSAGES,
};

/**
 * Hosted tools (run by the provider) with no equivalent at the other kind: refused, naming `tools[i].type`
 * (docs/reference.md §21 "Refused").
 */
export const HOSTED_TOOLS_REFUSED =
  /^(web_search|file_search|code_interpreter|computer|mcp|image_generation|local_shell|bash_|text_editor_|tool_search|apply_patch)/;

/** Notes the dropped fields of one request, in the order met (each name once). */
export class Dropped {
  private readonly names = new Set<string>();

  add(name: string): void {
    this.names.add(name);
  }

  get list(): string[] {
    return [...this.names];
  }

  /** The answer's header, or none when nothing was dropped. */
  header(): Record<string, string> {
    return this.names.size ? { 'x-paywall-dropped-fields': this.list.join(',') } : {};
  }
}

/**
 * Applies the table to a body: throws the 400 of a refused field; notes the dropped ones (and fields the
 * table does not know) in `dropped`. Null and undefined values count as absent.
 */
export function sortFields(format: SourceFormat, body: Json, dropped: Dropped): void {
  const table = FIELD_POLICY[format];
  for (const [key, value] of Object.entries(body)) {
    if (value === undefined || value === null) continue;
    const rule = table[key];
    if (!rule || rule.action === 'dropped') dropped.add(key);
    else if (rule.action === 'refused' && !rule.allows?.(value)) throw unsupported(key, rule.why);
  }
}

/** True when `cache_control` appears anywhere in the body (Anthropic's prompt caching marks). */
export function hasCacheControl(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasCacheControl);
  if (!isObject(v)) return false;
  for (const [k, x] of Object.entries(v)) if (k === 'cache_control' || hasCacheControl(x)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------------
// Thinking ↔ reasoning effort (docs/reference.md §21 "Mapped")

export type Effort = 'low' | 'medium' | 'high';

/** Anthropic's smallest thinking budget: a request that thinks needs a cap above it (docs/reference.md §20). */
export const MIN_THINKING_BUDGET = 1024;

/** A thinking budget as a reasoning effort: < 4,096 low, < 16,384 medium, else high. */
export const effortOfBudget = (budget: number): Effort =>
  budget < 4096 ? 'low' : budget < 16384 ? 'medium' : 'high';

/** The thinking budget of a reasoning effort. */
export const BUDGET_OF_EFFORT: Readonly<Record<Effort, number>> = { low: 2048, medium: 8192, high: 24576 };

/** An OpenAI effort value as one of the three (minimal → low, xhigh / max → high); null: no reasoning. */
export function effortOf(v: unknown): Effort | null {
  switch (v) {
    case 'minimal':
    case 'low':
      return 'low';
    case 'medium':
      return 'medium';
    case 'high':
    case 'xhigh':
    case 'max':
      return 'high';
    default:
      return null;
  }
}

/**
 * The Anthropic `thinking` for an OpenAI effort, its budget kept below `maxTokens`; null when the budget
 * would fall under Anthropic's minimum (then no thinking is asked for).
 */
export function thinkingFor(effort: Effort, maxTokens: number): Json | null {
  const budget = Math.min(BUDGET_OF_EFFORT[effort], maxTokens - 1);
  return budget >= MIN_THINKING_BUDGET ? { type: 'enabled', budget_tokens: budget } : null;
}

/** The OpenAI effort of an Anthropic `thinking` and `output_config.effort`, or null (none asked). */
export function effortOfThinking(thinking: unknown, outputConfig: unknown): Effort | null {
  if (isObject(outputConfig)) {
    const e = effortOf(outputConfig.effort);
    if (e) return e;
  }
  if (!isObject(thinking)) return null;
  if (thinking.type === 'adaptive') return 'medium';
  if (thinking.type === 'enabled' && typeof thinking.budget_tokens === 'number')
    return effortOfBudget(thinking.budget_tokens);
  return null;
}

// ---------------------------------------------------------------------------------------------------
// Tool names (Responses `namespace` tools, `custom` tools)

/** The separator of a namespace and a function name in the tool name the provider sees. */
export const NAMESPACE_SEPARATOR = '__';

/** How the provider's tool names map back to the client's tools. */
export interface ToolNames {
  /** provider tool name → the namespace and the function name the client knows. */
  namespaced: Map<string, { namespace: string; name: string }>;
  /** Names of the client's `custom` (free-form input) tools, sent as functions taking `{input}`. */
  custom: Set<string>;
  /** The forced tool a `json_schema` output format became (its input is the answer's text), or null. */
  jsonTool: string | null;
}

export const noToolNames = (): ToolNames => ({ namespaced: new Map(), custom: new Set(), jsonTool: null });

/** The name of the tool a `json_schema` format becomes. */
export const JSON_TOOL = 'json_answer';

/**
 * The schema a `json_object` format (JSON mode: any JSON object) becomes, as the forced tool's input
 * schema: the answer's text is then a JSON object, as the client parses it.
 */
export const ANY_JSON_OBJECT = { type: 'object' } as const;
