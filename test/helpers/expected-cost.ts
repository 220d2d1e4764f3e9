import { countTokens } from 'gpt-tokenizer';

/**
 * What a test expects a request to cost, computed here and not with the service's money code, so a wrong
 * formula in `src/` cannot agree with itself. Prices in pico-USDC (10⁻¹² USDC) per token or per request,
 * markup in parts per million. The rule (docs/reference.md §5.2): request + markup x Σ tokens x price,
 * rounded up to a whole raw unit (10⁻⁶ USDC = 10⁶ pico).
 */
export function expectedRaw(opts: {
  requestPico?: bigint;
  markupPpm: bigint;
  tokens: [count: number, pricePico: bigint][];
}): bigint {
  const tokensPico = opts.tokens.reduce((sum, [n, price]) => sum + BigInt(n) * price, 0n);
  // In pico x 10⁶ (the markup's ppm), so the sum is exact before the one rounding.
  const scaled = (opts.requestPico ?? 0n) * 1_000_000n + opts.markupPpm * tokensPico;
  const perRaw = 1_000_000n * 1_000_000n;
  return (scaled + perRaw - 1n) / perRaw;
}

/** A raw amount as the API writes USDC: a decimal with 6 fraction digits. */
export const usdc = (raw: bigint): string =>
  `${raw / 1_000_000n}.${(raw % 1_000_000n).toString().padStart(6, '0')}`;

/** Tokens of plain text in o200k_base (gpt-tokenizer's default), special-token strings counted as text. */
export const textTokens = (text: string): number =>
  text ? countTokens(text, { disallowedSpecial: new Set<string>() }) : 0;
