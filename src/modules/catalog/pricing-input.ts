import { invalid } from '../../shared/errors.js';
import { PRICE_DECIMALS, parseDecimal } from '../../shared/money.js';
import { checkProviderName } from '../providers/provider-name.js';
import { BUCKET_PRICES } from './model-row.js';

export interface SetModelPricingInput {
  paywallId?: string | null;
  modelId: string;
  displayName?: string | null;
  description?: string | null;
  prompt?: string | null;
  completion?: string | null;
  request?: string | null;
  cacheRead?: string | null;
  cacheWrite?: string | null;
  audioPrompt?: string | null;
  /** A price, or true / false: whether the model reasons (as reasoningModel). */
  reasoning?: string | boolean | null;
  audioCompletion?: string | null;
  maxCompletionTokens?: number | null;
  /** Omitted: unchanged; null: the catalogue decides. */
  reasoningModel?: boolean | null;
  dailyRequestLimit?: number | null;
  /** Omitted: unchanged (new: `default`); null: `default`. */
  provider?: string | null;
  /** Omitted: unchanged; null: the model id. */
  upstreamModel?: string | null;
  /** Omitted: unchanged (new: none); null or []: none. */
  fallbacks?: readonly string[] | null;
  /** docs/reference.md §22. Omitted: unchanged; null: follows prompt / completion (buckets), none (units). */
  imagePrompt?: string | null;
  imageCompletion?: string | null;
  imagePrices?: readonly { size: string; quality: string; price: string }[] | null;
  audioSecond?: string | null;
  characters1k?: string | null;
}

export const MAX_MODELS_PER_PAYWALL = 1000;
const MAX_FALLBACKS = 5;
const MAX_PRICE_PICO = 1000n * 10n ** BigInt(PRICE_DECIMALS);
const MODEL_ID = /^[A-Za-z0-9._:/@-]{1,200}$/;
const MIN_COMPLETION_TOKENS = 16;
const MAX_COMPLETION_TOKENS = 1_000_000;
const MAX_DISPLAY_NAME = 200;
const MAX_DESCRIPTION = 4000;

/** setModelPricing's input, checked: undefined = leave as is (on update), null = clear. */
export interface PricingChange {
  modelId: string;
  prompt: bigint | undefined;
  completion: bigint | undefined;
  request: bigint | undefined;
  /** The per-bucket prices in BUCKET_PRICES order, as bigint strings; null = not given or cleared. */
  buckets: (string | null)[];
  /** Per bucket (BUCKET_PRICES order): whether the input gave its price (null included: cleared). */
  bucketsGiven: boolean[];
  displayName: string | null | undefined;
  description: string | null | undefined;
  maxTokens: number | null | undefined;
  reasoningModel: boolean | null | undefined;
  dailyLimit: number | null | undefined;
  provider: string | undefined;
  upstreamModel: string | null | undefined;
  fallbacks: string[] | undefined;
  units: UnitPriceInput | null;
}

/** Checks setModelPricing's input field by field (the first bad field throws `invalid`). */
export function checkPricingInput(input: SetModelPricingInput): PricingChange {
  const modelId = checkModelId(input.modelId);
  const prompt = parsePrice(input.prompt, 'prompt');
  const completion = parsePrice(input.completion, 'completion');
  const request = parsePrice(input.request, 'request');
  // `reasoning: true | false` says whether the model reasons (as reasoningModel) and leaves its price be.
  const reasoningFlag = typeof input.reasoning === 'boolean' ? input.reasoning : undefined;
  const prices = {
    ...input,
    reasoning: reasoningFlag === undefined ? (input.reasoning as string | null | undefined) : undefined,
  };
  const buckets = BUCKET_PRICES.map(([field]) => parsePrice(prices[field], field)?.toString() ?? null);
  const bucketsGiven = BUCKET_PRICES.map(([field]) => prices[field] !== undefined);
  const displayName = optionalText(input.displayName, 'displayName', MAX_DISPLAY_NAME);
  const description = optionalText(input.description, 'description', MAX_DESCRIPTION);
  const maxTokens = input.maxCompletionTokens;
  if (
    maxTokens !== undefined &&
    maxTokens !== null &&
    (!Number.isInteger(maxTokens) || maxTokens < MIN_COMPLETION_TOKENS || maxTokens > MAX_COMPLETION_TOKENS)
  )
    throw invalid(
      `maxCompletionTokens must be an integer from ${MIN_COMPLETION_TOKENS} to ${MAX_COMPLETION_TOKENS}`,
      'maxCompletionTokens',
    );

  let reasoningModel = input.reasoningModel;
  if (reasoningModel !== undefined && reasoningModel !== null && typeof reasoningModel !== 'boolean')
    throw invalid('reasoningModel must be true, false or null', 'reasoningModel');
  if (reasoningFlag !== undefined) {
    if (reasoningModel !== undefined && reasoningModel !== null && reasoningModel !== reasoningFlag)
      throw invalid(
        `reasoning is ${reasoningFlag} and reasoningModel ${reasoningModel}: give one of them`,
        'reasoning',
      );
    reasoningModel = reasoningFlag;
  }

  const dailyLimit = input.dailyRequestLimit;
  if (
    dailyLimit !== undefined &&
    dailyLimit !== null &&
    (!Number.isInteger(dailyLimit) || dailyLimit < 0 || dailyLimit > 1_000_000_000)
  )
    throw invalid(
      'dailyRequestLimit must be an integer from 0 to 1000000000, or null for none',
      'dailyRequestLimit',
    );

  const provider =
    input.provider === undefined ? undefined : checkProviderName(input.provider ?? null, 'provider', true);
  const upstreamModel =
    input.upstreamModel === undefined || input.upstreamModel === null
      ? input.upstreamModel
      : checkModelId(input.upstreamModel, 'upstreamModel');
  const fallbacks = input.fallbacks === undefined ? undefined : checkFallbacks(input.fallbacks, provider);
  const units = unitPriceInput(input);
  return {
    modelId,
    prompt,
    completion,
    request,
    buckets,
    bucketsGiven,
    displayName,
    description,
    maxTokens,
    reasoningModel,
    dailyLimit,
    provider,
    upstreamModel,
    fallbacks,
    units,
  };
}

/** A model id as the catalogue stores it (removeModelPricing answers false for anything else). */
export const isModelId = (modelId: unknown): modelId is string =>
  typeof modelId === 'string' && MODEL_ID.test(modelId);

export interface UnitPriceInput {
  imagePrompt?: bigint | null;
  imageCompletion?: bigint | null;
  imagePrices?: { size: string; quality: string; pico: string }[];
  audioSecond?: bigint | null;
  characters1k?: bigint | null;
}

const MAX_IMAGE_PRICES = 50;
const IMAGE_SIZE = /^(\*|\d{1,5}x\d{1,5}|[a-z]{1,20})$/;
const IMAGE_QUALITY = /^(\*|[a-z]{1,20})$/;

/** The §22 fields of setModelPricing, checked; null when none was given (nothing to write). */
function unitPriceInput(input: SetModelPricingInput): UnitPriceInput | null {
  const out: UnitPriceInput = {};
  const nullable = (field: 'imagePrompt' | 'imageCompletion' | 'audioSecond' | 'characters1k') => {
    const v = input[field];
    if (v === undefined) return;
    out[field] = v === null ? null : parsePrice(v, field)!;
  };
  nullable('imagePrompt');
  nullable('imageCompletion');
  nullable('audioSecond');
  nullable('characters1k');
  if (input.imagePrices !== undefined) {
    const list = input.imagePrices ?? [];
    if (!Array.isArray(list) || list.length > MAX_IMAGE_PRICES)
      throw invalid(`imagePrices must be a list of at most ${MAX_IMAGE_PRICES} prices`, 'imagePrices');
    const seen = new Set<string>();
    out.imagePrices = list.map((p, i) => {
      const at = `imagePrices[${i}]`;
      if (typeof p?.size !== 'string' || !IMAGE_SIZE.test(p.size))
        throw invalid(`${at}.size must be a size such as "1024x1024", or "*" for any`, `${at}.size`);
      if (typeof p.quality !== 'string' || !IMAGE_QUALITY.test(p.quality))
        throw invalid(
          `${at}.quality must be a quality such as "high" or "hd", or "*" for any`,
          `${at}.quality`,
        );
      const key = `${p.size} ${p.quality}`;
      if (seen.has(key)) throw invalid(`${at} repeats size ${p.size} and quality ${p.quality}`, at);
      seen.add(key);
      return { size: p.size, quality: p.quality, pico: parsePrice(p.price ?? '', `${at}.price`)!.toString() };
    });
  }
  return Object.keys(out).length > 0 ? out : null;
}

function checkModelId(input: unknown, param = 'modelId'): string {
  if (typeof input !== 'string' || !MODEL_ID.test(input))
    throw invalid(`${param} must be 1 to 200 characters of letters, digits and . _ : / @ -`, param);
  return input;
}

/** At most 5 distinct provider names, none of them the model's own provider. */
function checkFallbacks(input: readonly string[] | null, provider: string | undefined): string[] {
  if (input === null) return [];
  if (!Array.isArray(input) || input.length > MAX_FALLBACKS)
    throw invalid(`fallbacks must be a list of at most ${MAX_FALLBACKS} provider names`, 'fallbacks');
  const names = input.map((n) => checkProviderName(n, 'fallbacks', true));
  if (new Set(names).size !== names.length)
    throw invalid('fallbacks must not repeat a provider', 'fallbacks');
  if (provider !== undefined && names.includes(provider))
    throw invalid("fallbacks must not include the model's own provider", 'fallbacks');
  return names;
}

/** A price in USDC: decimal string ≥ 0, ≤ 1000, at most 12 fraction digits → pico-USDC. */
function parsePrice(input: string | null | undefined, param: string): bigint | undefined {
  if (input === undefined || input === null) return undefined;
  const pico = parseDecimal(input, PRICE_DECIMALS);
  if (pico === null || pico > MAX_PRICE_PICO)
    throw invalid(
      `${param} must be a USDC decimal string from 0 to 1000 with at most ${PRICE_DECIMALS} fraction digits (e.g. "0.000002")`,
      param,
      'invalid_price',
    );
  return pico;
}

/** undefined = leave as is; null or blank = clear; otherwise trimmed and length-checked. */
function optionalText(
  input: string | null | undefined,
  param: string,
  max: number,
): string | null | undefined {
  if (input === undefined) return undefined;
  if (input === null) return null;
  const t = input.trim();
  if (t.length > max) throw invalid(`${param} must be at most ${max} characters`, param);
  return t === '' ? null : t;
}
