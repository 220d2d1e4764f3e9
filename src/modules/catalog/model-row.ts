import type { BuiltinModel } from '../../config.js';
import type { ModelPrice } from '../../shared/money.js';
import type { CatalogModel } from './catalog-model.js';

/** The per-bucket prices setModelPricing takes, and their columns. */
export const BUCKET_PRICES = [
  ['cacheRead', 'cache_read_pico'],
  ['cacheWrite', 'cache_write_pico'],
  ['audioPrompt', 'audio_prompt_pico'],
  ['reasoning', 'reasoning_pico'],
  ['audioCompletion', 'audio_completion_pico'],
] as const;

/** A `model_price` row as the catalogue's queries return it (COLUMNS). */
export interface Row {
  model_id: string;
  display_name: string | null;
  description: string | null;
  prompt_pico: string | bigint;
  completion_pico: string | bigint;
  request_pico: string | bigint;
  cache_read_pico: string | bigint | null;
  cache_write_pico: string | bigint | null;
  audio_prompt_pico: string | bigint | null;
  reasoning_pico: string | bigint | null;
  audio_completion_pico: string | bigint | null;
  max_completion_tokens: number | null;
  reasoning_model: boolean | null;
  daily_request_limit: number | null;
  provider: string | null;
  upstream_model: string | null;
  fallbacks: string[];
  created_at: string | Date;
  updated_at: string | Date;
  image_prompt_pico: string | bigint | null;
  image_completion_pico: string | bigint | null;
  image_prices: { size: string; quality: string; pico: string }[] | string | null;
  audio_second_pico: string | bigint | null;
  characters_1k_pico: string | bigint | null;
}

/** docs/reference.md §22: the image buckets' and the units' prices. */
const UNIT_COLUMNS =
  'image_prompt_pico, image_completion_pico, image_prices, audio_second_pico, characters_1k_pico';

export const COLUMNS = `model_id, display_name, description, prompt_pico, completion_pico, request_pico,
  cache_read_pico, cache_write_pico, audio_prompt_pico, reasoning_pico, audio_completion_pico,
  max_completion_tokens, reasoning_model, daily_request_limit, provider, upstream_model, fallbacks, created_at,
  updated_at, ${UNIT_COLUMNS}`;

const picoOrNull = (v: string | bigint | null): bigint | null => (v === null ? null : BigInt(v));

/** A row's image-bucket and unit prices (docs/reference.md §22). */
function unitPricesOf(r: Row) {
  const list = typeof r.image_prices === 'string' ? JSON.parse(r.image_prices) : (r.image_prices ?? []);
  return {
    imagePromptPico: picoOrNull(r.image_prompt_pico ?? null),
    imageCompletionPico: picoOrNull(r.image_completion_pico ?? null),
    imagePrices: Object.freeze(
      (list as { size: string; quality: string; pico: string }[]).map((p) =>
        Object.freeze({ size: p.size, quality: p.quality, pico: BigInt(p.pico) }),
      ),
    ),
    audioSecondPico: picoOrNull(r.audio_second_pico ?? null),
    characters1kPico: picoOrNull(r.characters_1k_pico ?? null),
  };
}

/** A built-in model's cost prices, every bucket included (null: follows prompt / completion). */
const pricesOf = (b: BuiltinModel) => ({
  promptPico: b.promptPico,
  completionPico: b.completionPico,
  requestPico: b.requestPico,
  cacheReadPico: b.cacheReadPico,
  cacheWritePico: b.cacheWritePico,
  audioPromptPico: b.audioPromptPico,
  reasoningPico: b.reasoningPico,
  audioCompletionPico: b.audioCompletionPico,
});

export const costOf = (b: BuiltinModel): ModelPrice => Object.freeze(pricesOf(b));

/** A built-in model at the operator's cost prices (the paywall's markup applies on top). */
export const fromBuiltin = (b: BuiltinModel): CatalogModel =>
  Object.freeze({
    modelId: b.id,
    ...pricesOf(b),
    maxCompletionTokens: b.maxCompletionTokens,
    reasoningModel: null,
    dailyRequestLimit: null,
    providerCost: costOf(b),
    provider: null,
    upstreamModel: null,
    fallbacks: [],
    displayName: b.displayName,
    description: b.description,
    createdAt: null,
    updatedAt: null,
  });

export const byId = (a: { modelId: string }, b: { modelId: string }) =>
  a.modelId < b.modelId ? -1 : a.modelId > b.modelId ? 1 : 0;

export const toModel = (r: Row): CatalogModel =>
  Object.freeze({
    modelId: r.model_id,
    promptPico: BigInt(r.prompt_pico),
    completionPico: BigInt(r.completion_pico),
    requestPico: BigInt(r.request_pico),
    cacheReadPico: picoOrNull(r.cache_read_pico),
    cacheWritePico: picoOrNull(r.cache_write_pico),
    audioPromptPico: picoOrNull(r.audio_prompt_pico),
    reasoningPico: picoOrNull(r.reasoning_pico),
    audioCompletionPico: picoOrNull(r.audio_completion_pico),
    maxCompletionTokens: r.max_completion_tokens === null ? null : Number(r.max_completion_tokens),
    reasoningModel: r.reasoning_model ?? null,
    dailyRequestLimit: r.daily_request_limit === null ? null : Number(r.daily_request_limit),
    providerCost: null,
    provider: r.provider,
    upstreamModel: r.upstream_model,
    fallbacks: Object.freeze([...(r.fallbacks ?? [])]),
    ...unitPricesOf(r),
    displayName: r.display_name,
    description: r.description,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });
