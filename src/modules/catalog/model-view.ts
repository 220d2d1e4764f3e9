import { bucketPico, endUserTokenPrice, type ModelPrice } from '../../shared/money.js';
import type { Bucket } from '../../shared/usage-buckets.js';
import type { UnitPrices } from '../../shared/media-units.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { BUILTIN_PROVIDER, DEFAULT_PROVIDER } from '../providers/provider-client.js';
import { formatPrice, ONE_PPM, type CatalogModel } from './catalog-model.js';
import { maxOutputOf, reasoningOf, type MaxOutputSource } from './known-models.js';

/**
 * USDC decimal strings ("0.000003"): per token for prompt, completion and each usage bucket (docs/reference.md §13,
 * resolved: an unset bucket shows the price it follows), per request for request.
 */
export interface PricingStrings {
  prompt: string;
  completion: string;
  request: string;
  cacheRead: string;
  cacheWrite: string;
  audioPrompt: string;
  reasoning: string;
  audioCompletion: string;
  /** docs/reference.md §22: per image input / output token; per image (by size and quality); per unit. */
  imagePrompt: string;
  imageCompletion: string;
  image: { size: string; quality: string; price: string }[];
  audioSecond: string | null;
  characters1k: string | null;
}

/** A model as the API shows it. */
export interface ModelView {
  id: string;
  name: string;
  displayName: string;
  description: string;
  /** What the end user pays: token prices x markup; the request price as configured. */
  pricing: PricingStrings;
  /** What the provider costs the paywall (the configured prices). */
  costPricing: PricingStrings;
  /** The maximum output in force (docs/reference.md §20 "No cap") and where it comes from. */
  maxCompletionTokens: number;
  maxCompletionTokensSource: MaxOutputSource;
  /** The model reasons: the owner's setting, else the catalogue's; and which of them says so. */
  reasoningModel: boolean;
  reasoningModelSource: MaxOutputSource;
  dailyRequestLimit: number | null;
  /** docs/reference.md §15 "Routing". */
  provider: string;
  upstreamModel: string;
  fallbacks: readonly string[];
  /** Served by the platform's built-in provider (SHARED paywall without a provider of its own). */
  builtinProvider: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export function toView(m: CatalogModel, paywall: PaywallInfo, builtinProvider: boolean): ModelView {
  const name = m.displayName ?? m.modelId;
  const maxOut = maxOutputOf(m);
  const reasoning = reasoningOf(m);
  return {
    id: m.modelId,
    name,
    displayName: name,
    description: m.description ?? '',
    pricing: pricingOf(m, paywall.markupPpm),
    costPricing: pricingOf(m, ONE_PPM),
    maxCompletionTokens: maxOut.tokens,
    maxCompletionTokensSource: maxOut.source,
    reasoningModel: reasoning.reasons,
    reasoningModelSource: reasoning.source,
    dailyRequestLimit: m.dailyRequestLimit,
    provider: m.provider ?? (builtinProvider ? BUILTIN_PROVIDER : DEFAULT_PROVIDER),
    upstreamModel: m.upstreamModel ?? m.modelId,
    fallbacks: m.fallbacks,
    builtinProvider,
    createdAt: m.createdAt ?? paywall.createdAt,
    updatedAt: m.updatedAt ?? paywall.createdAt,
  };
}

/** Token prices per bucket (cost x `markupPpm`), the request price as is. */
function pricingOf(m: ModelPrice, markupPpm: bigint): PricingStrings {
  const token = (b: Bucket) => endUserTokenPrice(bucketPico(m, b), markupPpm);
  return {
    prompt: token('prompt'),
    completion: token('completion'),
    // docs/reference.md §5.2: charge = request + markup x tokens, so the request price is not marked up.
    request: formatPrice(m.requestPico),
    cacheRead: token('cacheRead'),
    cacheWrite: token('cacheWrite'),
    audioPrompt: token('audioPrompt'),
    reasoning: token('reasoning'),
    audioCompletion: token('audioCompletion'),
    ...unitPricing(m, markupPpm),
  };
}

/**
 * docs/reference.md §22: the image buckets per token, and the prices per unit (cost x `markupPpm`,
 * exact): per image, per second of audio, per 1,000 characters (null: the model is not priced so).
 */
function unitPricing(m: ModelPrice & UnitPrices, markupPpm: bigint) {
  const marked = (pico: bigint) => endUserTokenPrice(pico, markupPpm);
  return {
    imagePrompt: marked(bucketPico(m, 'imagePrompt')),
    imageCompletion: marked(bucketPico(m, 'imageCompletion')),
    image: (m.imagePrices ?? []).map((p) => ({ size: p.size, quality: p.quality, price: marked(p.pico) })),
    audioSecond: m.audioSecondPico == null ? null : marked(m.audioSecondPico),
    characters1k: m.characters1kPico == null ? null : marked(m.characters1kPico),
  };
}
