import { invalid } from '../../../shared/errors.js';
import { formatDecimal, parseDecimal } from '../../../shared/money.js';

/** 1 US cent = 10,000 raw units (10⁻⁶ USDC). */
export const RAW_PER_CENT = 10_000n;
export const DEFAULT_TOPUP_AMOUNTS = ['5', '10', '20'];
/** What the hosted wallet's top-up page offers with the platform's Stripe (USD). */
export const WALLET_TOPUP_AMOUNTS = DEFAULT_TOPUP_AMOUNTS;
const MAX_TOPUP_AMOUNTS = 10;
/** Stripe's own ceiling for one Checkout payment in USD is 999,999.99; we stay well below. */
const MAX_TOPUP_CENTS = 10_000_00n;

/** USD decimal for cents: 500 → "5", 1050 → "10.5". */
export const usdOfCents = (cents: bigint | number): string => formatDecimal(BigInt(cents), 2);

/** `topupAmounts`: USD decimal strings, > 0, at most 2 fraction digits, at most 10000, distinct. */
export function parseTopupAmounts(input: unknown): number[] {
  const list = input === undefined || input === null ? DEFAULT_TOPUP_AMOUNTS : input;
  const fail = () =>
    invalid(
      `topupAmounts must be 1 to ${MAX_TOPUP_AMOUNTS} distinct USD decimal strings, each > 0 and at most 10000 with at most 2 fraction digits (e.g. ["5", "10", "20"])`,
      'topupAmounts',
      'invalid_amount',
    );
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_TOPUP_AMOUNTS) throw fail();
  const cents = list.map((a) => {
    const c = parseDecimal(a, 2);
    if (c === null || c <= 0n || c > MAX_TOPUP_CENTS) throw fail();
    return Number(c);
  });
  if (new Set(cents).size !== cents.length) throw fail();
  return cents;
}

export const WALLET_TOPUP_CENTS = parseTopupAmounts(WALLET_TOPUP_AMOUNTS);
