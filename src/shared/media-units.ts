import { BUCKETS, type UsageBuckets } from './usage-buckets.js';
import {
  bucketPico,
  ceilDiv,
  formatDecimal,
  MARKUP_DECIMALS,
  PRICE_DECIMALS,
  RAW_DECIMALS,
  type ModelPrice,
} from './money.js';

/**
 * Prices per unit beyond tokens (docs/reference.md §22): per image by size and quality, per second of
 * input audio, per 1,000 input characters. All in pico-USDC (10⁻¹² USDC), before markup.
 */
export interface ImagePrice {
  /** e.g. "1024x1024", or "*" for any size. */
  size: string;
  /** e.g. "standard", "hd", "low", "medium", "high", or "*" for any quality. */
  quality: string;
  /** pico-USDC per image. */
  pico: bigint;
}

export interface UnitPrices {
  imagePrices?: readonly ImagePrice[];
  audioSecondPico?: bigint | null;
  characters1kPico?: bigint | null;
}

/** What an answer is charged for besides its token buckets. */
export interface MediaUnits {
  /** Images returned, at the size and quality they were made at, and the price of one. */
  images?: { count: number; size: string; quality: string; pico: bigint };
  /** Seconds of input audio (whole seconds, rounded up). */
  audioSeconds?: number;
  /** Characters of speech input. */
  characters?: number;
}

export const ANY = '*';
/**
 * A size or quality left open (absent, or `auto`: the provider chooses). A request that leaves size or
 * quality to the provider may get any of them.
 */
export const isOpen = (v: string | undefined): v is undefined | 'auto' => v === undefined || v === 'auto';

/**
 * The image prices that can apply to a request for `size` and `quality` (undefined or `auto`: the
 * provider chooses, so every listed one can).
 */
export function matchingImagePrices(
  prices: readonly ImagePrice[] | undefined,
  size: string | undefined,
  quality: string | undefined,
): ImagePrice[] {
  return (prices ?? []).filter(
    (p) =>
      (p.size === ANY || isOpen(size) || p.size === size) &&
      (p.quality === ANY || isOpen(quality) || p.quality === quality),
  );
}

/** The dearest price that can apply (the hold's), or null when none does. */
export function highestImagePrice(
  prices: readonly ImagePrice[] | undefined,
  size: string | undefined,
  quality: string | undefined,
): bigint | null {
  let top: bigint | null = null;
  for (const p of matchingImagePrices(prices, size, quality)) if (top === null || p.pico > top) top = p.pico;
  return top;
}

/**
 * The price one image made at `size` and `quality` is charged: the most specific entry (exact size and
 * quality, then one of them exact, then `*` x `*`); where the size or quality is still open (neither the
 * request nor the answer says), the dearest that matches, as the hold assumed.
 */
export function imagePriceFor(
  prices: readonly ImagePrice[] | undefined,
  size: string | undefined,
  quality: string | undefined,
): bigint | null {
  const matching = matchingImagePrices(prices, size, quality);
  if (matching.length === 0) return null;
  if (isOpen(size) || isOpen(quality)) return highestImagePrice(prices, size, quality);
  const rank = (p: ImagePrice) => (p.size === size ? 2 : 0) + (p.quality === quality ? 1 : 0);
  const best = Math.max(...matching.map(rank));
  return matching.filter((p) => rank(p) === best).reduce((a, p) => (p.pico > a ? p.pico : a), 0n);
}

/** True when the model has a token price (any bucket or the prompt / completion price is above 0). */
export const hasTokenPrices = (price: ModelPrice): boolean => BUCKETS.some((b) => bucketPico(price, b) > 0n);

/** Σ units x unit price, in pico-USDC x 1000 (exact: characters are priced per 1,000). */
export function unitsMilliPico(price: UnitPrices, units: MediaUnits | null | undefined): bigint {
  if (!units) return 0n;
  let sum = 0n;
  if (units.images) sum += BigInt(units.images.count) * units.images.pico * 1000n;
  if (units.audioSeconds) sum += BigInt(units.audioSeconds) * (price.audioSecondPico ?? 0n) * 1000n;
  if (units.characters) sum += BigInt(units.characters) * (price.characters1kPico ?? 0n);
  return sum;
}

const PPM = 10n ** BigInt(MARKUP_DECIMALS);
const PICO_PER_RAW = 10n ** BigInt(PRICE_DECIMALS - RAW_DECIMALS);

/**
 * docs/reference.md §22: request + markup x (units x unit price + Σ bucket tokens x bucket price),
 * rounded up to a whole raw unit; exact (pico-USDC x ppm x 1000). Without units it is §13's usageCost.
 */
export function meteredCost(
  price: ModelPrice & UnitPrices,
  markupPpm: bigint,
  usage: UsageBuckets,
  units: MediaUnits | null | undefined,
): bigint {
  let tokens = 0n;
  for (const b of BUCKETS) if (usage[b] !== 0) tokens += BigInt(usage[b]) * bucketPico(price, b);
  const scaled =
    price.requestPico * PPM * 1000n + markupPpm * (tokens * 1000n + unitsMilliPico(price, units));
  return ceilDiv(scaled, PICO_PER_RAW * PPM * 1000n);
}

/** pico-USDC x ppm x 1000 → USDC decimal (at most 12 fraction digits, rounded up). */
const milliScaledToDecimal = (v: bigint): string =>
  v === 0n ? '0' : formatDecimal(ceilDiv(v, PPM * 1000n), PRICE_DECIMALS);

/**
 * The units' part of `cost_details` (and of the charge event): `images`, `audio_seconds`, `characters`,
 * each markup x units x price, exact USDC decimals; only the units the answer has.
 */
export function unitCostDetails(
  price: UnitPrices,
  markupPpm: bigint,
  units: MediaUnits | null | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (units?.images)
    out.images = milliScaledToDecimal(markupPpm * unitsMilliPico(price, { images: units.images }));
  if (units?.audioSeconds)
    out.audio_seconds = milliScaledToDecimal(
      markupPpm * unitsMilliPico(price, { audioSeconds: units.audioSeconds }),
    );
  if (units?.characters)
    out.characters = milliScaledToDecimal(
      markupPpm * unitsMilliPico(price, { characters: units.characters }),
    );
  return out;
}

const thousands = (n: number): string => n.toLocaleString('en-US');

/** The units in words, as receipts show them: "3 images 1024x1024 high", "94 s of audio", "1,820 characters". */
export function unitsLabel(units: MediaUnits): string {
  const parts: string[] = [];
  if (units.images) {
    const { count, size, quality } = units.images;
    parts.push(`${thousands(count)} ${count === 1 ? 'image' : 'images'} ${size} ${quality}`);
  }
  if (units.audioSeconds) parts.push(`${thousands(units.audioSeconds)} s of audio`);
  if (units.characters) parts.push(`${thousands(units.characters)} characters`);
  return parts.join('; ');
}

/** Units as stored on a charge (JSON: the image price as a decimal string), and back. */
export function storedUnits(units: MediaUnits): Record<string, unknown> {
  return {
    ...(units.images
      ? {
          images: units.images.count,
          imageSize: units.images.size,
          imageQuality: units.images.quality,
          imagePrice: formatDecimal(units.images.pico, PRICE_DECIMALS),
        }
      : {}),
    ...(units.audioSeconds ? { audioSeconds: units.audioSeconds } : {}),
    ...(units.characters ? { characters: units.characters } : {}),
  };
}

/** True when an answer is charged for some unit. */
export const hasUnits = (u: MediaUnits | null | undefined): u is MediaUnits =>
  !!u && (!!u.images?.count || !!u.audioSeconds || !!u.characters);
