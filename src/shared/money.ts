import { BUCKETS, IMAGE_BUCKETS, textUsage, type Bucket, type UsageBuckets } from './usage-buckets.js';

/**
 * Money is integer raw units of 10⁻⁶ USDC, held as `bigint`. Prices per token can be finer than a raw
 * unit, so they are held in pico-USDC (10⁻¹² USDC); markup is held in millionths (ppm). No floats anywhere.
 */
export const RAW_DECIMALS = 6;
export const PRICE_DECIMALS = 12;
export const MARKUP_DECIMALS = 6;
export const MAX_AMOUNT_RAW = 1_000_000_000n * 1_000_000n;

const DECIMAL = /^(0|[1-9]\d*)(\.(\d+))?$/;

/** Parses a decimal string to an integer with `decimals` fraction digits; null when not a plain decimal or too precise. */
export function parseDecimal(input: unknown, decimals: number): bigint | null {
  if (typeof input !== 'string') return null;
  const m = DECIMAL.exec(input.trim() === input ? input : '');
  if (!m) return null;
  const frac = m[3] ?? '';
  if (frac.length > decimals) return null;
  return BigInt(m[1]) * 10n ** BigInt(decimals) + BigInt(frac.padEnd(decimals, '0') || '0');
}

/** Formats an integer with `decimals` fraction digits as a decimal string with exactly that many digits. */
export function formatFixed(value: bigint, decimals: number): string {
  // String slicing, not bigint division: this runs several times per settled request (cost_details).
  const neg = value < 0n;
  const digits = (neg ? -value : value).toString().padStart(decimals + 1, '0');
  const cut = digits.length - decimals;
  return `${neg ? '-' : ''}${digits.slice(0, cut)}${decimals > 0 ? '.' + digits.slice(cut) : ''}`;
}

/** Same as formatFixed, without trailing zeros ("0.000002", "1.5", "3"). */
export function formatDecimal(value: bigint, decimals: number): string {
  const s = formatFixed(value, decimals);
  if (decimals === 0) return s;
  let end = s.length;
  while (s.charCodeAt(end - 1) === 48 /* 0 */) end--;
  if (s.charCodeAt(end - 1) === 46 /* . */) end--;
  return s.slice(0, end);
}

/** Raw units → "1.500000" (balanceFormatted). */
export const formatUsdc = (raw: bigint): string => formatFixed(raw, RAW_DECIMALS);
/** Raw units → "1.5" (amounts in event data). */
export const usdcDecimal = (raw: bigint): string => formatDecimal(raw, RAW_DECIMALS);

/**
 * Money shown to people (hosted pages, e-mails): the one rule, docs/wallet.md "How amounts are written".
 * Raw units → "12.50 USDC", "0.000109 USDC", "1,250.00 USDC", "−0.30 USDC": at least two decimals, more
 * only when the amount has them (up to 6: never rounded, so it is the amount to the raw unit), thousands
 * grouped with commas, a true minus sign, the unit after a space.
 */
export function usdcText(raw: bigint): string {
  const [int, frac] = formatUsdc(raw < 0n ? -raw : raw).split('.');
  const trimmed = frac.replace(/0+$/, '');
  const digits = trimmed.length <= 2 ? frac.slice(0, 2) : trimmed;
  return `${raw < 0n ? '−' : ''}${int.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${digits} USDC`;
}

/** A request amount: decimal string > 0, ≤ 6 fraction digits, ≤ 1,000,000,000 USDC. */
export function parseAmount(input: unknown): bigint | null {
  const raw = parseDecimal(input, RAW_DECIMALS);
  if (raw === null || raw <= 0n || raw > MAX_AMOUNT_RAW) return null;
  return raw;
}

export const ceilDiv = (a: bigint, b: bigint): bigint => (a <= 0n ? 0n : (a + b - 1n) / b);

export interface ModelPrice {
  /** pico-USDC per prompt token */
  promptPico: bigint;
  /** pico-USDC per completion token */
  completionPico: bigint;
  /** pico-USDC per request */
  requestPico: bigint;
  /** pico-USDC per bucket token (docs/reference.md §13); unset (or null) = the default of bucketPico. */
  cacheReadPico?: bigint | null;
  cacheWritePico?: bigint | null;
  audioPromptPico?: bigint | null;
  reasoningPico?: bigint | null;
  audioCompletionPico?: bigint | null;
  /** pico-USDC per image input / image output token (docs/reference.md §22); unset = prompt / completion. */
  imagePromptPico?: bigint | null;
  imageCompletionPico?: bigint | null;
}

/**
 * A model's cost prices as stored (a pricing row, a built-in model): every text bucket present, null where
 * it follows the prompt or completion price (docs/reference.md §13).
 */
export interface CostPrices {
  /** pico-USDC (10⁻¹² USDC) per prompt token, before markup */
  promptPico: bigint;
  /** pico-USDC per completion token, before markup */
  completionPico: bigint;
  /** pico-USDC per request (never marked up, docs/reference.md §5.2) */
  requestPico: bigint;
  /** pico-USDC per bucket token (docs/reference.md §13); null = the prompt / completion price. */
  cacheReadPico: bigint | null;
  cacheWritePico: bigint | null;
  audioPromptPico: bigint | null;
  reasoningPico: bigint | null;
  audioCompletionPico: bigint | null;
}

const PICO_PER_RAW = 10n ** BigInt(PRICE_DECIMALS - RAW_DECIMALS);
const PPM = 10n ** BigInt(MARKUP_DECIMALS);

/**
 * The price of one token of a bucket: its own price, else the default of docs/reference.md §13 (cache
 * read, cache write and audio prompt cost what prompt costs; reasoning and audio completion what
 * completion costs).
 */
export function bucketPico(price: ModelPrice, bucket: Bucket): bigint {
  switch (bucket) {
    case 'prompt':
      return price.promptPico;
    case 'completion':
      return price.completionPico;
    case 'cacheRead':
      return price.cacheReadPico ?? price.promptPico;
    case 'cacheWrite':
      return price.cacheWritePico ?? price.promptPico;
    case 'audioPrompt':
      return price.audioPromptPico ?? price.promptPico;
    case 'reasoning':
      return price.reasoningPico ?? price.completionPico;
    case 'audioCompletion':
      return price.audioCompletionPico ?? price.completionPico;
    case 'imagePrompt':
      return price.imagePromptPico ?? price.promptPico;
    case 'imageCompletion':
      return price.imageCompletionPico ?? price.completionPico;
  }
}

/** Σ bucket tokens x bucket price, in pico-USDC (before markup). */
function tokensPico(price: ModelPrice, usage: UsageBuckets): bigint {
  let sum = 0n;
  for (const b of BUCKETS) if (usage[b] !== 0) sum += BigInt(usage[b]) * bucketPico(price, b);
  return sum;
}

/**
 * docs/reference.md §13: request + markup x Σ(bucket tokens x bucket price), rounded up to a whole raw
 * unit. Computed exactly in pico-USDC x ppm.
 */
export function usageCost(price: ModelPrice, markupPpm: bigint, usage: UsageBuckets): bigint {
  const scaled = price.requestPico * PPM + markupPpm * tokensPico(price, usage);
  return ceilDiv(scaled, PICO_PER_RAW * PPM);
}

/** docs/reference.md §5.2: the charge with two buckets (prompt and completion). */
export function chatCost(
  price: ModelPrice,
  markupPpm: bigint,
  promptTokens: number,
  completionTokens: number,
): bigint {
  return usageCost(price, markupPpm, textUsage(promptTokens, completionTokens));
}

/** The keys of `usage.cost_details` (docs/reference.md §13), by bucket. */
export const COST_DETAIL_KEYS: Record<Bucket, string> = {
  prompt: 'prompt',
  cacheRead: 'cache_read',
  cacheWrite: 'cache_write',
  audioPrompt: 'audio_prompt',
  reasoning: 'reasoning',
  audioCompletion: 'audio_completion',
  imagePrompt: 'image_prompt',
  imageCompletion: 'image_completion',
  completion: 'completion',
};

/** The buckets `usage.cost_details` always names; the image buckets only when they have tokens. */
const ALWAYS_DETAILED = BUCKETS.filter((b) => !IMAGE_BUCKETS.includes(b));

/** `usage.cost_details` of an answer charged nothing (a blocked reply, an empty answer). */
export const ZERO_COST_DETAILS: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(['request', ...ALWAYS_DETAILED.map((b) => COST_DETAIL_KEYS[b])].map((k) => [k, '0'])),
);

/** pico-USDC x ppm → USDC decimal with at most 12 fraction digits, rounded up where it needs more. */
const scaledToPriceDecimal = (scaled: bigint): string => formatDecimal(ceilDiv(scaled, PPM), PRICE_DECIMALS);

/**
 * `usage.cost_details`: the charge per bucket (markup x tokens x price; the request price as is), exact
 * USDC decimal strings. A part that needs more than 12 fraction digits (a markup with many digits) is
 * rounded up to 12; `usage.cost` is the exact sum rounded up to a raw unit (usageCost).
 */
export function costDetails(
  price: ModelPrice,
  markupPpm: bigint,
  usage: UsageBuckets,
): Record<string, string> {
  const out: Record<string, string> = { request: formatDecimal(price.requestPico, PRICE_DECIMALS) };
  for (const b of BUCKETS)
    if (usage[b] > 0 || !IMAGE_BUCKETS.includes(b))
      out[COST_DETAIL_KEYS[b]] = bucketCharge(bucketPico(price, b), markupPpm, usage[b]);
  return out;
}

/** One bucket's part of a charge: markup x tokens x price, as in `usage.cost_details` (and receipts). */
export const bucketCharge = (pico: bigint, markupPpm: bigint, tokens: number): string =>
  tokens === 0 || pico === 0n ? '0' : scaledToPriceDecimal(markupPpm * BigInt(tokens) * pico);

/** End-user price per token (cost x markup) as a USDC decimal string, exact. */
export function endUserTokenPrice(pico: bigint, markupPpm: bigint): string {
  return formatDecimal(pico * markupPpm, PRICE_DECIMALS + MARKUP_DECIMALS);
}

/**
 * What a request costs at the provider's own prices (docs/reference.md §8, built-in provider): request +
 * Σ bucket tokens x bucket price, rounded up to a whole raw unit (no markup).
 */
export function providerCostRaw(cost: ModelPrice, usage: UsageBuckets): bigint {
  return usageCost(cost, PPM, usage);
}
