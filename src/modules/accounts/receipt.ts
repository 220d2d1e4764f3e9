import {
  bucketCharge,
  endUserTokenPrice,
  formatUsdc,
  MARKUP_DECIMALS,
  parseDecimal,
  PRICE_DECIMALS,
  usageCost,
  type ModelPrice,
} from '../../shared/money.js';
import { BUCKETS, storedBuckets, textUsage, type Bucket } from '../../shared/usage-buckets.js';
import {
  meteredCost,
  unitCostDetails,
  unitsLabel,
  type MediaUnits,
  type UnitPrices,
} from '../../shared/media-units.js';

/** One line of a receipt: a usage bucket's tokens at its end-user unit price. */
export interface ReceiptLine {
  bucket: Bucket;
  /** What the end user reads ("Cached input", "Reasoning", …). */
  label: string;
  tokens: number;
  /** End-user price per token (cost x markup), exact USDC decimal string. */
  unitPrice: string;
  /** tokens x unitPrice, as in the answer's `usage.cost_details` (USDC, up to 12 fraction digits). */
  amount: string;
}

/**
 * An itemised usage charge (docs/reference.md §13): what the end user was billed for and at which price,
 * with the same numbers as the charge. `total` is the cost (request + the lines, rounded up to a raw
 * unit); `charged` what the balance paid of it, `uncollected` the rest.
 */
export interface Receipt {
  model: string;
  /** Per-request price (never marked up). */
  requestPrice: string;
  lines: ReceiptLine[];
  /**
   * docs/reference.md §22: what the charge counted besides tokens, each in words ("3 images 1024x1024
   * high", "94 s of audio", "1,820 characters") with its amount (markup included, USDC).
   */
  units: { kind: string; label: string; amount: string }[];
  total: string;
  totalRaw: bigint;
}

export const BUCKET_LABELS: Record<Bucket, string> = {
  prompt: 'Input',
  cacheRead: 'Cached input',
  cacheWrite: 'Cache write',
  audioPrompt: 'Audio input',
  reasoning: 'Reasoning',
  audioCompletion: 'Audio output',
  imagePrompt: 'Image input',
  imageCompletion: 'Image output',
  completion: 'Output',
};

/** What a settled usage charge keeps (charge.metadata: `buckets`, `pricing`). */
export interface ReceiptSource {
  kind: string;
  model: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  metadata: Record<string, unknown>;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/**
 * The receipt of a usage charge, or null for other charges and for usage charged before the prices were
 * kept with it. Computed from what the settlement stored: the buckets and the prices of that moment.
 */
export function receiptOf(c: ReceiptSource): Receipt | null {
  if (c.kind !== 'usage' || !c.model) return null;
  const pricing = c.metadata.pricing;
  if (!isRecord(pricing)) return null;
  const markupPpm = parseDecimal(pricing.markup, MARKUP_DECIMALS);
  const requestPico = parseDecimal(pricing.request, PRICE_DECIMALS);
  if (markupPpm === null || requestPico === null) return null;
  const buckets =
    storedBuckets(c.metadata.buckets) ?? textUsage(c.promptTokens ?? 0, c.completionTokens ?? 0);
  const price: ModelPrice = { promptPico: 0n, completionPico: 0n, requestPico };
  const lines: ReceiptLine[] = [];
  for (const b of BUCKETS) {
    if (buckets[b] === 0) continue;
    const pico = parseDecimal(pricing[b], PRICE_DECIMALS);
    if (pico === null) return null;
    setPico(price, b, pico);
    lines.push({
      bucket: b,
      label: BUCKET_LABELS[b],
      tokens: buckets[b],
      unitPrice: endUserTokenPrice(pico, markupPpm),
      amount: bucketCharge(pico, markupPpm, buckets[b]),
    });
  }
  const stored = unitsOf(c.metadata.units, pricing);
  const totalRaw = stored
    ? meteredCost({ ...price, ...stored.prices }, markupPpm, buckets, stored.units)
    : usageCost(price, markupPpm, buckets);
  const details = stored ? unitCostDetails(stored.prices, markupPpm, stored.units) : {};
  const units = stored
    ? (
        [
          ['images', { images: stored.units.images }],
          ['audio_seconds', { audioSeconds: stored.units.audioSeconds }],
          ['characters', { characters: stored.units.characters }],
        ] as const
      )
        .filter(([kind]) => details[kind] !== undefined)
        .map(([kind, u]) => ({ kind, label: unitsLabel(u as MediaUnits), amount: details[kind] }))
    : [];
  return {
    model: c.model,
    requestPrice: pricing.request as string,
    lines,
    units,
    total: formatUsdc(totalRaw),
    totalRaw,
  };
}

/** The units a charge kept (metadata.units) and their cost prices (pricing), or null. */
function unitsOf(
  v: unknown,
  pricing: Record<string, unknown>,
): { units: MediaUnits; prices: UnitPrices } | null {
  if (!isRecord(v)) return null;
  const count = (x: unknown) => (typeof x === 'number' && Number.isInteger(x) && x > 0 ? x : undefined);
  const units: MediaUnits = {};
  const images = count(v.images);
  const imagePico = parseDecimal(v.imagePrice, PRICE_DECIMALS);
  if (images && imagePico !== null)
    units.images = {
      count: images,
      size: String(v.imageSize),
      quality: String(v.imageQuality),
      pico: imagePico,
    };
  units.audioSeconds = count(v.audioSeconds);
  units.characters = count(v.characters);
  return {
    units,
    prices: {
      audioSecondPico: parseDecimal(pricing.audioSecond, PRICE_DECIMALS),
      characters1kPico: parseDecimal(pricing.characters1k, PRICE_DECIMALS),
    },
  };
}

function setPico(price: ModelPrice, b: Bucket, pico: bigint): void {
  if (b === 'prompt') price.promptPico = pico;
  else if (b === 'completion') price.completionPico = pico;
  else price[`${b}Pico`] = pico;
}
