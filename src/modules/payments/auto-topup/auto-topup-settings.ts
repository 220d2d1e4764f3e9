import { invalid } from '../../../shared/errors.js';
import { formatDecimal, parseDecimal, usdcDecimal } from '../../../shared/money.js';

/**
 * What a user chose with "Top up automatically" (docs/reference.md §16 "Auto top-up"): below
 * `thresholdRaw` (raw units of USDC), add `amountCents` (one of the amounts offered), at most
 * `monthlyCapCents` per UTC calendar month.
 */
export interface AutoTopupSettings {
  thresholdRaw: bigint;
  amountCents: number;
  monthlyCapCents: number;
}

/** The form fields of the opt-in (hosted top-up page and wallet top-up). */
export const AUTO_TOPUP_FIELDS = {
  enabled: 'autoTopup',
  threshold: 'autoTopupThreshold',
  amount: 'autoTopupAmount',
  monthlyCap: 'autoTopupMonthlyCap',
} as const;

/** A threshold is > 0 and at most 10000 USDC. */
const MAX_THRESHOLD_RAW = 10_000_000_000n;
/** The monthly cap left empty: 5 times the amount added. */
export const DEFAULT_CAP_MULTIPLE = 5;
/** A monthly cap is at most 100000 USD. */
const MAX_CAP_CENTS = 10_000_000n;
/** Three failed payments in a row turn auto top-up off. */
export const MAX_FAILURES_IN_ROW = 3;

/**
 * The opt-in as posted: null when "Top up automatically" is not ticked; otherwise the settings, or a
 * 400 (`invalid_amount`) naming the field. `offeredCents`: the amounts the page offers.
 */
export function parseAutoTopup(
  form: Record<string, string | undefined>,
  offeredCents: readonly number[],
): AutoTopupSettings | null {
  if (!form[AUTO_TOPUP_FIELDS.enabled]) return null;
  const threshold = parseDecimal(form[AUTO_TOPUP_FIELDS.threshold]?.trim(), 6);
  if (threshold === null || threshold <= 0n || threshold > MAX_THRESHOLD_RAW)
    throw invalid(
      'The balance below which to top up must be a USDC amount above 0 and at most 10,000, e.g. 2 or 2.5.',
      AUTO_TOPUP_FIELDS.threshold,
      'invalid_amount',
    );
  const amount = parseDecimal(form[AUTO_TOPUP_FIELDS.amount]?.trim(), 2);
  if (amount === null || !offeredCents.includes(Number(amount)))
    throw invalid(
      'Choose one of the amounts offered to add automatically.',
      AUTO_TOPUP_FIELDS.amount,
      'invalid_amount',
    );
  const capText = form[AUTO_TOPUP_FIELDS.monthlyCap]?.trim() ?? '';
  const cap = capText === '' ? amount * BigInt(DEFAULT_CAP_MULTIPLE) : parseDecimal(capText, 2);
  if (cap === null || cap < amount || cap > MAX_CAP_CENTS)
    throw invalid(
      `The monthly limit must be a USD amount of at least ${formatDecimal(amount, 2)} USD (the amount added) and at most 100,000 USD.`,
      AUTO_TOPUP_FIELDS.monthlyCap,
      'invalid_amount',
    );
  return { thresholdRaw: threshold, amountCents: Number(amount), monthlyCapCents: Number(cap) };
}

/** The settings as stored on a Checkout Session row (`stripe_checkout.auto_topup`, JSON). */
export const settingsJson = (s: AutoTopupSettings) => ({
  thresholdRaw: s.thresholdRaw.toString(),
  amountCents: s.amountCents,
  monthlyCapCents: s.monthlyCapCents,
});

/** "below 2 USDC, add 10 USD, at most 50 USD a month" — what the pages and the e-mail say. */
export const describeSettings = (s: AutoTopupSettings): string =>
  `when the balance falls below ${usdcDecimal(s.thresholdRaw)} USDC, ${formatDecimal(BigInt(s.amountCents), 2)} USD is added (at most ${formatDecimal(BigInt(s.monthlyCapCents), 2)} USD a month)`;

/** The first instant of the UTC calendar month of `at` (the monthly cap counts from there). */
export const utcMonthStart = (at: Date): Date => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
