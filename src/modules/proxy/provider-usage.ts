import type { ReportedUsage } from '../../shared/usage-buckets.js';
import { isObject, tokenCount } from './wire-format.js';

/**
 * Reads the usage objects providers really send into reported totals and their itemised parts
 * (docs/reference.md §13). Each reader keeps only integer counts; a field a provider does not send is
 * absent (the input or output total is then counted by the proxy). Cost fields some gateways add
 * (OpenRouter's `cost`, `cost_details`) are left alone: the charge is computed from tokens.
 */

const count = (v: unknown): number | undefined => tokenCount(v) ?? undefined;
const detail = (details: unknown, key: string): number | undefined =>
  isObject(details) ? count(details[key]) : undefined;
const larger = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.max(a, b);

/**
 * Chat completions: `prompt_tokens` holds `prompt_tokens_details.cached_tokens` (cache read),
 * `…cache_write_tokens` (cache write, where a provider sends it) and `…audio_tokens`;
 * `completion_tokens` holds `completion_tokens_details.reasoning_tokens` and `…audio_tokens`. DeepSeek
 * reports its cache hits as `prompt_cache_hit_tokens` (the same tokens when both are sent: the larger
 * counts, once).
 */
export function chatUsage(u: unknown): ReportedUsage | null {
  if (!isObject(u)) return null;
  const pd = u.prompt_tokens_details;
  const cd = u.completion_tokens_details;
  return {
    input: count(u.prompt_tokens),
    output: count(u.completion_tokens),
    cacheRead: larger(detail(pd, 'cached_tokens'), count(u.prompt_cache_hit_tokens)),
    cacheWrite: detail(pd, 'cache_write_tokens'),
    audioPrompt: detail(pd, 'audio_tokens'),
    reasoning: detail(cd, 'reasoning_tokens'),
    audioCompletion: detail(cd, 'audio_tokens'),
  };
}

/**
 * Responses API: `input_tokens` holds `input_tokens_details.cached_tokens` (and `cache_write_tokens`
 * where sent); `output_tokens` holds `output_tokens_details.reasoning_tokens`.
 */
export function responsesUsage(u: unknown): ReportedUsage | null {
  if (!isObject(u)) return null;
  return {
    input: count(u.input_tokens),
    output: count(u.output_tokens),
    cacheRead: detail(u.input_tokens_details, 'cached_tokens'),
    cacheWrite: detail(u.input_tokens_details, 'cache_write_tokens'),
    reasoning: detail(u.output_tokens_details, 'reasoning_tokens'),
  };
}

/**
 * Anthropic Messages: `input_tokens` is the uncached input; `cache_read_input_tokens` and
 * `cache_creation_input_tokens` come on top of it; `output_tokens` is all output (thinking included),
 * and `output_tokens_details.thinking_tokens`, where sent, is the part spent thinking (reasoning).
 */
export function messagesUsage(u: unknown): ReportedUsage | null {
  if (!isObject(u)) return null;
  const uncached = count(u.input_tokens);
  const cacheRead = count(u.cache_read_input_tokens);
  const cacheWrite = count(u.cache_creation_input_tokens);
  return {
    input: uncached === undefined ? undefined : uncached + (cacheRead ?? 0) + (cacheWrite ?? 0),
    output: count(u.output_tokens),
    cacheRead,
    cacheWrite,
    reasoning: detail(u.output_tokens_details, 'thinking_tokens'),
  };
}
