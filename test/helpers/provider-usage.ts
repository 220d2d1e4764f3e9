/**
 * Usage objects as providers send them, taken from their API references (field names, nesting, which
 * counts include which). The fake upstream sends one as is (`rawUsage`), so a charge is checked against
 * what a provider really reports rather than against the proxy's own idea of usage.
 */

/**
 * OpenAI chat completion (CompletionUsage): a reasoning model with a prompt-cache hit. `prompt_tokens`
 * includes `cached_tokens`; `completion_tokens` includes `reasoning_tokens` (OpenAI API reference, chat
 * object `usage`; the prompt-caching guide's example has 1920 of 2006 prompt tokens cached).
 */
export const OPENAI_CHAT_REASONING_CACHED = {
  prompt_tokens: 2006,
  completion_tokens: 300,
  total_tokens: 2306,
  prompt_tokens_details: { cached_tokens: 1920, audio_tokens: 0 },
  completion_tokens_details: {
    reasoning_tokens: 192,
    audio_tokens: 0,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0,
  },
};

/** OpenAI chat completion with audio in and out (gpt-4o-audio-preview): audio counted inside the totals. */
export const OPENAI_CHAT_AUDIO = {
  prompt_tokens: 120,
  completion_tokens: 90,
  total_tokens: 210,
  prompt_tokens_details: { cached_tokens: 0, audio_tokens: 80 },
  completion_tokens_details: {
    reasoning_tokens: 0,
    audio_tokens: 60,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0,
  },
};

/**
 * OpenAI Responses (ResponseUsage): `input_tokens` includes `input_tokens_details.cached_tokens`;
 * `output_tokens` includes `output_tokens_details.reasoning_tokens`.
 */
export const OPENAI_RESPONSES_REASONING_CACHED = {
  input_tokens: 1500,
  input_tokens_details: { cached_tokens: 1024 },
  output_tokens: 1186,
  output_tokens_details: { reasoning_tokens: 1024 },
  total_tokens: 2686,
};

/**
 * DeepSeek chat completion: cache hits in its own fields (`prompt_cache_hit_tokens` +
 * `prompt_cache_miss_tokens` = `prompt_tokens`), reasoning of deepseek-reasoner in
 * `completion_tokens_details`.
 */
export const DEEPSEEK_CHAT_CACHED = {
  prompt_tokens: 1500,
  completion_tokens: 400,
  total_tokens: 1900,
  prompt_cache_hit_tokens: 1024,
  prompt_cache_miss_tokens: 476,
  completion_tokens_details: { reasoning_tokens: 250 },
};

/**
 * OpenRouter-style usage: OpenAI's fields plus the gateway's own `cost` (a float in credits) and
 * `cost_details`, and `cache_write_tokens` for providers that bill cache writes. The proxy charges
 * from the tokens and replaces `cost` / `cost_details` with its own charge.
 */
export const OPENROUTER_CHAT_CACHE_WRITE = {
  prompt_tokens: 3000,
  completion_tokens: 50,
  total_tokens: 3050,
  cost: 0.0123,
  is_byok: false,
  prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 2800, audio_tokens: 0 },
  cost_details: { upstream_inference_cost: null },
  completion_tokens_details: { reasoning_tokens: 0 },
};
