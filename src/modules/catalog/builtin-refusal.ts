import { bucketPico, type ModelPrice } from '../../shared/money.js';
import type { Bucket } from '../../shared/usage-buckets.js';
import { BUILTIN_PROVIDER, DEFAULT_PROVIDER } from '../providers/provider-client.js';
import { formatPrice, ONE_PPM, type ModelPriceInfo } from './catalog-model.js';

/** A provider name that reaches the built-in provider (`default` does while it serves the paywall). */
export const isBuiltinName = (name: string, servedByBuiltin: boolean): boolean =>
  name === BUILTIN_PROVIDER || (servedByBuiltin && name === DEFAULT_PROVIDER);

/** The token prices checked against the built-in cost, each named as its setModelPricing field (the
 * prompt and completion prices first: an unset bucket follows one of them). Every bucket: one left out
 * would be sold below the operator's cost (the image buckets were, until they were listed here). */
const PRICED_BUCKETS: Bucket[] = [
  'prompt',
  'completion',
  'cacheRead',
  'cacheWrite',
  'audioPrompt',
  'imagePrompt',
  'reasoning',
  'audioCompletion',
  'imageCompletion',
];

/**
 * Why a model may not reach the built-in provider (docs/reference.md §8), or null when it may: it is
 * not one of the operator's models (`cost` undefined), it names another upstream model, it has a price
 * per unit (image, second, characters: the operator's costs are per token), or what the end user pays
 * for a request or a token of some bucket (the price, x the markup for tokens) is below what the
 * built-in provider costs the platform. So every built-in answer pays its cost leg in full.
 */
export function builtinRefusal(
  m: ModelPriceInfo,
  cost: ModelPrice | undefined,
  markupPpm: bigint,
): { message: string; param: string; code: 'invalid_value' | 'markup_below_cost' } | null {
  if (!cost)
    return {
      message: `only the platform's built-in models can be served by the built-in provider; ${m.modelId} is not one`,
      param: m.provider === BUILTIN_PROVIDER ? 'provider' : 'fallbacks',
      code: 'invalid_value',
    };
  if (m.upstreamModel !== null && m.upstreamModel !== m.modelId)
    return {
      message: `a built-in model is served under its own id: upstreamModel must be ${m.modelId} or null`,
      param: 'upstreamModel',
      code: 'invalid_value',
    };
  // The operator's costs are per token and per request: a price per image, second or 1,000 characters has
  // nothing to be checked against, and an answer charged by it would pay no provider leg for its units.
  const unit: [string, boolean][] = [
    ['imagePrices', (m.imagePrices?.length ?? 0) > 0],
    ['audioSecond', m.audioSecondPico != null],
    ['characters1k', m.characters1kPico != null],
  ];
  for (const [param, set] of unit)
    if (set)
      return {
        message: `the built-in provider is sold by the token: ${param} cannot be set for a built-in model`,
        param,
        code: 'invalid_value',
      };
  if (m.requestPico < cost.requestPico)
    return {
      message: `request is below the built-in provider's cost (${formatPrice(cost.requestPico)} USDC)`,
      param: 'request',
      code: 'markup_below_cost',
    };
  for (const bucket of PRICED_BUCKETS) {
    const floor = bucketPico(cost, bucket);
    if (bucketPico(m, bucket) * markupPpm < floor * ONE_PPM)
      return {
        message: `${bucket} x markup is below the built-in provider's cost (${formatPrice(floor)} USDC per token)`,
        param: bucket,
        code: 'markup_below_cost',
      };
  }
  return null;
}
