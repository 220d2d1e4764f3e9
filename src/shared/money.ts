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
  const neg = value < 0n;
  const abs = neg ? -value : value;
  const base = 10n ** BigInt(decimals);
  const int = abs / base;
  const frac = (abs % base).toString().padStart(decimals, '0');
  return `${neg ? '-' : ''}${int}${decimals > 0 ? '.' + frac : ''}`;
}

/** Same as formatFixed, without trailing zeros ("0.000002", "1.5", "3"). */
export function formatDecimal(value: bigint, decimals: number): string {
  const s = formatFixed(value, decimals);
  return decimals > 0 ? s.replace(/\.?0+$/, '') : s;
}

/** Raw units → "1.500000" (balanceFormatted). */
export const formatUsdc = (raw: bigint): string => formatFixed(raw, RAW_DECIMALS);
/** Raw units → "1.5" (amounts in event data). */
export const usdcDecimal = (raw: bigint): string => formatDecimal(raw, RAW_DECIMALS);

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
}

const PICO_PER_RAW = 10n ** BigInt(PRICE_DECIMALS - RAW_DECIMALS);
const PPM = 10n ** BigInt(MARKUP_DECIMALS);

/**
 * docs/reference.md §5.2: request + markup x (promptTokens x prompt + completionTokens x completion),
 * rounded up to a whole raw unit. Computed exactly in pico-USDC x ppm.
 */
export function chatCost(
  price: ModelPrice,
  markupPpm: bigint,
  promptTokens: number,
  completionTokens: number,
): bigint {
  const tokens = BigInt(promptTokens) * price.promptPico + BigInt(completionTokens) * price.completionPico;
  const scaled = price.requestPico * PPM + markupPpm * tokens;
  return ceilDiv(scaled, PICO_PER_RAW * PPM);
}

/** End-user price per token (cost x markup) as a USDC decimal string, exact. */
export function endUserTokenPrice(pico: bigint, markupPpm: bigint): string {
  return formatDecimal(pico * markupPpm, PRICE_DECIMALS + MARKUP_DECIMALS);
}

/**
 * What a request costs at the provider's own prices (docs/reference.md §8, built-in provider): request +
 * promptTokens x prompt + completionTokens x completion, rounded up to a whole raw unit (no markup).
 */
export function providerCostRaw(cost: ModelPrice, promptTokens: number, completionTokens: number): bigint {
  return chatCost(cost, PPM, promptTokens, completionTokens);
}
