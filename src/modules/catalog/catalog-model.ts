import { DomainError } from '../../shared/errors.js';
import { PRICE_DECIMALS, formatDecimal, type CostPrices, type ModelPrice } from '../../shared/money.js';
import type { ImagePrice } from '../../shared/media-units.js';

/** The cost prices of one model of a paywall, as the request path needs them. */
export interface ModelPriceInfo extends CostPrices {
  modelId: string;
  /** docs/reference.md §10: requests of this model per end user per UTC day; null = no limit. */
  dailyRequestLimit: number | null;
  /** the owner's cap on completion tokens; null = the catalogue's maximum, else 4096 (known-models.ts) */
  maxCompletionTokens: number | null;
  /** docs/reference.md §21 "Mapped": the owner marked the model as reasoning (true) or not; null = the catalogue's. */
  reasoningModel: boolean | null;
  /**
   * The built-in provider's cost prices when it serves this request (docs/reference.md §8): the settlement
   * moves `providerCostRaw(providerCost, tokens)` (request + tokens x these, rounded up, no markup) to
   * the platform's provider account and the rest of the charge to the paywall's earnings. null when the
   * paywall's own provider serves it (the whole charge is the developer's).
   */
  providerCost: ModelPrice | null;
  /** docs/reference.md §15 "Routing": the provider's name; null = `default` (then the built-in one). */
  provider: string | null;
  /** The model id sent to the provider; null = the model id. */
  upstreamModel: string | null;
  /** Provider names tried in order when the provider fails before answering. */
  fallbacks: readonly string[];
  /** docs/reference.md §22: image token prices (null = prompt / completion) and prices per unit. */
  imagePromptPico?: bigint | null;
  imageCompletionPico?: bigint | null;
  imagePrices?: readonly ImagePrice[];
  audioSecondPico?: bigint | null;
  characters1kPico?: bigint | null;
}

/** A catalogue row: the prices plus what the listing shows. */
export interface CatalogModel extends ModelPriceInfo {
  displayName: string | null;
  description: string | null;
  /** null for a built-in model the paywall does not price itself: the listing shows the paywall's dates. */
  createdAt: Date | null;
  updatedAt: Date | null;
}

/** OpenAI's answer for a model the paywall does not sell (chat requests and GET /v1/models/{id}). */
export const modelNotFound = (modelId: string): DomainError =>
  new DomainError(
    'model_not_found',
    `The model \`${modelId.slice(0, 200)}\` does not exist or you do not have access to it.`,
    'model',
    'model_not_found',
  );

/** A cost price in USDC (pico-USDC → exact decimal string). */
export const formatPrice = (pico: bigint): string => formatDecimal(pico, PRICE_DECIMALS);

/** A markup of x1 (parts per million). */
export const ONE_PPM = 1_000_000n;
