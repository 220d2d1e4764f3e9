import { randomUUID } from 'node:crypto';
import type { Database } from '../../db/database.js';
import { BUILTIN_PROVIDER } from '../providers/provider-client.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import {
  bucketPico,
  costDetails,
  formatDecimal,
  MARKUP_DECIMALS,
  PRICE_DECIMALS,
  providerCostRaw,
  usageCost,
  usdcDecimal,
} from '../../shared/money.js';
import {
  BUCKETS,
  type Bucket,
  inputTokens,
  outputTokens,
  splitUsage,
  type ReportedUsage,
  type UsageBuckets,
} from '../../shared/usage-buckets.js';
import { hasUnits, meteredCost, storedUnits, unitCostDetails, unitsLabel } from '../../shared/media-units.js';
import type { NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { splitCharge } from '../accounts/accounts.js';
import { recordHoldProgress, type RelayedRecord, type SettleInput } from '../ledger/holds.js';
import { settleBeyondHold } from '../ledger/settle-beyond-hold.js';
import type { AccountAlerts, LowBalanceAlerts } from '../ledger/low-balance.js';
import type { Flight, Outcome } from './flight.js';
import type { ProviderHealth } from '../providers/provider-health.js';
import type { LedgerBatch } from './ledger-batch.js';
import type { StreamRelay } from './wire-format.js';
import type { AudioProbe, MediaHold } from './media-format.js';

/** bigint's maximum (`uncollected_raw` is a bigint column). */
const INT8_MAX = 2n ** 63n - 1n;

/** cost − captured, within a bigint column (a provider reporting absurd usage cannot overflow it). */
const uncollectedOf = (cost: bigint, captured: bigint): bigint =>
  cost - captured > INT8_MAX ? INT8_MAX : cost - captured;

/**
 * Input tokens a provider may bill beyond what the request's bytes can make: its own framing (the system
 * prompt a provider adds for tool use, a chat template), and room for a provider that counts otherwise.
 * Generous on purpose: the bound stops impossible reports (millions of tokens), while an app's own
 * provider in SHARED mode is never paid beyond the hold anyway.
 */
export const INPUT_FRAMING_TOKENS = 8192;

/**
 * The most input a provider can bill for the request (docs/reference.md §5.7): the hold's prompt estimate
 * (which counts images, audio and files at their upper bounds) plus one token per UTF-8 byte of the body
 * (no tokenizer makes more than one token of a byte: a provider whose tokenizer differs from the one the
 * estimate uses stays within it) plus {@link INPUT_FRAMING_TOKENS}.
 */
export function inputBound(f: Flight): number {
  const media = mediaTokenBound(f);
  return (
    f.promptEstimate +
    Buffer.byteLength(JSON.stringify(f.req.body) ?? '', 'utf8') +
    INPUT_FRAMING_TOKENS +
    (media ? media.prompt + media.audioPrompt + media.imagePrompt : 0)
  );
}

/**
 * The most output the request can produce: the completion cap sent upstream, for each choice; for an
 * image or audio request, the token bound its hold was placed for (docs/reference.md §22).
 */
export const outputBound = (f: Flight): number => {
  const media = mediaTokenBound(f);
  return (
    f.hold.cap * f.req.n +
    (media ? media.completion + media.reasoning + media.audioCompletion + media.imageCompletion : 0)
  );
};

/** An image or audio request's token bound per bucket (absent buckets 0), or null for other formats. */
function mediaTokenBound(f: Flight): Record<Bucket, number> | null {
  const tokens = (f.req as { media?: { tokens?: Partial<UsageBuckets> } }).media?.tokens;
  if (!tokens) return null;
  return Object.fromEntries(BUCKETS.map((b) => [b, tokens[b] ?? 0])) as Record<Bucket, number>;
}

/**
 * The usage a request is charged for, per bucket: the upstream's totals and their itemised parts, else
 * the input estimate and the output counted here. Totals a provider reports beyond what the request
 * could produce ({@link inputBound}, {@link outputBound}) are clamped to the bound, and the excess is
 * kept on the flight (`overReported`) for the charge's record and provider health. Output counted here
 * (no usage) is clamped to the same bound.
 */
export function usageOf(
  f: Flight,
  reported: ReportedUsage | null,
  countCompletion: () => number,
): UsageBuckets {
  let input = reported?.input ?? f.req.promptEstimate;
  let output = reported?.output ?? countCompletion();
  let overInput = 0;
  let overOutput = 0;
  // The byte bound is computed only when the estimate alone does not cover the report (rare).
  if (reported?.input !== undefined && input > f.promptEstimate) {
    const bound = inputBound(f);
    if (input > bound) [overInput, input] = [input - bound, bound];
  }
  const maxOutput = outputBound(f);
  if (reported?.output !== undefined && output > maxOutput)
    [overOutput, output] = [output - maxOutput, maxOutput];
  // An answer without usage is counted here: what a provider relayed past the cap it was sent is not
  // the client's either (docs/reference.md §20). Not the provider's reported error, so not recorded
  // as one (a tokenizer may count a token more than the provider's).
  else if (reported?.output === undefined && output > maxOutput) output = maxOutput;
  f.overReported = overInput > 0 || overOutput > 0 ? { input: overInput, output: overOutput } : null;
  return splitUsage(input, output, reported ?? {});
}

/**
 * Images and seconds a provider says it made beyond what the request could produce (docs/reference.md
 * §5.7, §22): more images than the `n` asked for, more seconds than the uploaded file can play (its bytes
 * at its container's lowest bit rate). Clamped on the flight's units before the cost is computed; the
 * excess joins `overReported` (the charge's record, the provider's health), as tokens beyond the bounds do.
 */
export function clampUnits(f: Flight): void {
  const units = f.units;
  if (!units) return;
  const req = f.req as { media?: MediaHold; probe?: AudioProbe };
  let images = 0;
  let audioSeconds = 0;
  const asked = req.media?.images?.n;
  if (units.images && asked !== undefined && units.images.count > asked) {
    images = units.images.count - asked;
    units.images = { ...units.images, count: asked };
  }
  const maxSeconds = req.probe?.maxSeconds;
  if (units.audioSeconds !== undefined && maxSeconds !== undefined && units.audioSeconds > maxSeconds) {
    audioSeconds = units.audioSeconds - maxSeconds;
    units.audioSeconds = maxSeconds;
  }
  if (images > 0 || audioSeconds > 0)
    f.overReported = {
      ...(f.overReported ?? { input: 0, output: 0 }),
      ...(images > 0 ? { images } : {}),
      ...(audioSeconds > 0 ? { audioSeconds } : {}),
    };
}

/**
 * SHARED mode, an app's own provider (docs/reference.md §5.7): what the hold did not cover is the app's
 * loss, never the wallet's debt; nothing is taken beyond the hold.
 */
const appBearsShortfall = (f: Flight): boolean =>
  f.paywall.mode === 'SHARED' && f.upstream.name !== BUILTIN_PROVIDER;

/**
 * Who bears what a settlement of `cost` could not capture (docs/reference.md §5.7), and what the charge
 * keeps of it: the wallet's debt (`uncollectedRaw`), or the app's loss (`appLoss`); and, for an answer
 * of the built-in provider, what it cost the platform (a debt repaid later pays it first, and the ledger
 * proof checks the charge covered it). One rule for the progress record and the settlement.
 */
function shortfallOf(
  f: Flight,
  cost: bigint,
  captured: bigint,
  builtinCost: bigint,
  limitBound = false,
): { uncollectedRaw: bigint; record: Record<string, string> } {
  const rest = uncollectedOf(cost, captured);
  if (f.upstream.name === BUILTIN_PROVIDER)
    return {
      uncollectedRaw: rest,
      record: { provider: BUILTIN_PROVIDER, providerCost: builtinCost.toString() },
    };
  // An end-user key's limit stopped the capture (settleBeyondHold): the key's owner never agreed to more,
  // so the rest is the app's, as it is for SHARED.
  if (appBearsShortfall(f) || limitBound)
    return { uncollectedRaw: 0n, record: rest > 0n ? { appLoss: rest.toString() } : {} };
  return { uncollectedRaw: rest, record: {} };
}

/** The exact cost and what the hold can capture of it. */
function charge(f: Flight, usage: UsageBuckets): { cost: bigint; captured: bigint } {
  // docs/reference.md §22: images, seconds of audio and characters are charged besides the tokens.
  const cost = hasUnits(f.units)
    ? meteredCost(f.price, f.paywall.markupPpm, usage, f.units)
    : usageCost(f.price, f.paywall.markupPpm, usage);
  return { cost, captured: cost < f.hold.holdRaw ? cost : f.hold.holdRaw };
}

/**
 * What the built-in provider costs the platform for this usage (its cost prices per bucket, no markup,
 * rounded up); 0 when the paywall's own provider served the request.
 */
function providerCost(f: Flight, usage: UsageBuckets): bigint {
  // The built-in provider is paid only for what it answered (a fallback's answer is the developer's).
  const cost = f.upstream.name === BUILTIN_PROVIDER ? f.price.providerCost : null;
  return cost ? providerCostRaw(cost, usage) : 0n;
}

/** `usage.cost_details` of a settled answer (docs/reference.md §13). */
export const costDetailsOf = (f: Flight, usage: UsageBuckets): Record<string, string> => ({
  ...costDetails(f.price, f.paywall.markupPpm, usage),
  ...unitCostDetails(f.price, f.paywall.markupPpm, f.units),
});

/**
 * What a receipt needs kept with the charge (docs/reference.md §13): the buckets, and the markup and
 * cost prices of the request and of each bucket that has tokens, as they were when it was charged.
 */
function pricingOf(f: Flight, usage: UsageBuckets): Record<string, string> {
  const pricing: Record<string, string> = {
    markup: formatDecimal(f.paywall.markupPpm, MARKUP_DECIMALS),
    request: formatDecimal(f.price.requestPico, PRICE_DECIMALS),
  };
  for (const b of BUCKETS)
    if (usage[b] > 0) pricing[b] = formatDecimal(bucketPico(f.price, b), PRICE_DECIMALS);
  // The units' prices (the image price is kept with the units, as it depends on size and quality).
  if (f.units?.audioSeconds && f.price.audioSecondPico != null)
    pricing.audioSecond = formatDecimal(f.price.audioSecondPico, PRICE_DECIMALS);
  if (f.units?.characters && f.price.characters1kPico != null)
    pricing.characters1k = formatDecimal(f.price.characters1kPico, PRICE_DECIMALS);
  return pricing;
}

/** The buckets a charge keeps: the image buckets only when they have tokens (storedBuckets reads 0). */
function keptBuckets(usage: UsageBuckets): Partial<UsageBuckets> {
  if (usage.imagePrompt || usage.imageCompletion) return usage;
  const { imagePrompt: _p, imageCompletion: _c, ...rest } = usage;
  return rest;
}

/**
 * A settlement that fails (the database restarting, a pool hiccup) is tried again: at least
 * SETTLE_MIN_ATTEMPTS times, and for as long as SETTLE_RETRY_WINDOW_MS has not passed since it began
 * (a PostgreSQL restart is bridged), waiting a little longer before each new try. Bounded in time by
 * the database's own timeouts when it does not answer at all.
 */
const SETTLE_MIN_ATTEMPTS = 3;
const SETTLE_RETRY_WINDOW_MS = 3000;
const settleRetryDelayMs = (attempt: number) => Math.min(100 * attempt, 500);

/** What a settlement charged, for the answer's cost fields. */
export interface SettleOutcome {
  captured: bigint;
  freeAfterRaw: bigint | null;
  costDetails: Record<string, string> | null;
  /**
   * The error when the settlement could not be written at all (the hold stays for the sweeper, nothing
   * is charged): the answer must then not reach the client as a charged one. Null when it was written.
   */
  unsettled: unknown;
}

export interface SettlementDeps {
  db: Database;
  ledger: LedgerBatch;
  log: Logger;
  metrics: Metrics;
  /** The platform's fee on usage (PLATFORM_FEE_BPS). */
  platformFeeBps: number;
  /** Provider health: a provider that reported impossible usage is counted as failing. */
  health?: Pick<ProviderHealth, 'fault'>;
  /** docs/reference.md §16 "Low balance": checked after a charge (no statement when nothing can be due). */
  lowBalance?: Pick<LowBalanceAlerts, 'afterCharge'>;
  /** Auto top-up (docs/reference.md §16): told the free balance after a charge; never waited for. */
  autoTopup?: { afterCharge(endUserId: string, accountId: string | null, freeAfterRaw: bigint): void };
}

/** The last step of a metered call: the hold is posted (for what was produced) or voided. */
export class Settlement {
  constructor(private readonly d: SettlementDeps) {}

  /**
   * What settling `usage` in full captures and the spending account's free balance after it, for an
   * answer whose charge the request decides (binary speech: its characters, or its tokens at their
   * bound), so its headers can name them before the first byte (docs/reference.md §22). Only where the
   * hold covers the cost: the capture is then the cost, and the free balance after it is the free balance
   * now (this hold already taken from it) plus what the hold gives back. Null otherwise (nothing charged,
   * a cost beyond the hold: its capture is settleBeyondHold's to decide), or when the account cannot be
   * read; the settlement itself is unchanged.
   */
  async foretell(f: Flight, usage: UsageBuckets): Promise<{ captured: bigint; freeAfterRaw: bigint } | null> {
    const { cost } = charge(f, usage);
    if (cost <= 0n || cost > f.hold.holdRaw || !f.hold.accountId) return null;
    try {
      const [row] = await this.d.db.query<{ free: string }>(
        `select (balance_raw - held_raw)::text as free from ledger_account where id = $1`,
        [f.hold.accountId],
      );
      return row ? { captured: cost, freeAfterRaw: BigInt(row.free) + f.hold.holdRaw - cost } : null;
    } catch (err) {
      this.d.log.warn(
        { err, chargeId: f.chargeId },
        'reading the free balance for the answer headers failed',
      );
      return null;
    }
  }

  /**
   * Records on the hold what the stream produced so far, as the settlement it would be (tokens, the
   * amount min(cost, hold) and its split): if this instance dies, the sweeper settles the hold for it
   * instead of releasing it with nothing charged (output already delivered is paid for). Best effort:
   * a failed update only means the sweeper falls back to an older record, or to releasing.
   */
  async recordProgress(f: Flight, relay: StreamRelay): Promise<void> {
    if (f.settled) return;
    try {
      const reported = relay.usageTokens();
      const usage = usageOf(f, reported, () => relay.progressTokens());
      if (reported === null && outputTokens(usage) === 0) return;
      const { cost, captured } = charge(f, usage);
      const builtinCost = providerCost(f, usage);
      const split = splitCharge(f.paywall.mode, captured, builtinCost, this.d.platformFeeBps);
      const shortfall = shortfallOf(f, cost, captured, builtinCost);
      await recordHoldProgress(this.d.db, f.chargeId, {
        promptTokens: inputTokens(usage),
        completionTokens: outputTokens(usage),
        buckets: keptBuckets(usage),
        costDetails: costDetailsOf(f, usage),
        pricing: pricingOf(f, usage),
        capturedRaw: captured,
        ...split,
        uncollectedRaw: shortfall.uncollectedRaw,
        // What the settlement records too, so a sweeper's settlement keeps it (the ledger proof reads it).
        chargeMetadata: Object.keys(shortfall.record).length > 0 ? shortfall.record : undefined,
      });
    } catch (err) {
      this.d.log.warn({ err, chargeId: f.chargeId }, 'recording stream progress failed');
    }
  }

  /**
   * Settles the hold: `usage` null = nothing produced (voided, nothing charged). `relayedResponse`: a
   * Responses answer to remember (RelayedResponses.record), written by the settlement's own statement.
   * Records the terminal proxy event and, when something is charged, `paywall.usage.charge.created`. Returns the amount taken
   * from the balance and the free balance of the spending account after the settlement (null when
   * unknown: already settled, or the settlement failed).
   */
  async settle(
    f: Flight,
    outcome: Outcome,
    errorCode: string | null,
    usage: UsageBuckets | null,
    relayedResponse: RelayedRecord | null = null,
  ): Promise<SettleOutcome> {
    if (f.settled) return { captured: 0n, freeAfterRaw: null, costDetails: null, unsettled: null };
    f.settled = true;
    const cost = usage ? charge(f, usage).cost : 0n;
    const providerCostRaw = usage ? providerCost(f, usage) : 0n;
    // Once per request: the event and the answer's usage.cost_details share it.
    const details = usage && cost > 0n ? costDetailsOf(f, usage) : null;
    const walletUserId = f.hold.walletUserId;
    const model = f.req.model;
    const ctx = {
      paywall: f.paywall,
      trigger: f.trigger,
      subject: { type: 'request' as const, id: f.chargeId, externalId: f.externalUserId },
    };
    const data = { requestId: f.chargeId, walletUserId, model };
    const appBears = appBearsShortfall(f);
    const overReported = usage ? (f.overReported ?? null) : null;
    if (overReported) {
      // Counted as the provider's error (it answered, but its usage cannot be right) and measured.
      this.d.health?.fault(
        f.paywall.id,
        f.upstream.name,
        'reported usage beyond what the request could produce',
      );
      this.d.metrics.providerUsageClamped.inc();
      this.d.log.warn(
        { chargeId: f.chargeId, paywallId: f.paywall.id, provider: f.upstream.name, overReported },
        'provider reported usage beyond the request bounds: clamped',
      );
    }
    // The settlement for a captured amount (its split, uncollected rest and events depend on it).
    const build = (captured: bigint, limitBound = false): SettleInput => {
      // What the wallet owes (its debt) or the app bears; the event reports the wallet's part only.
      const shortfall = usage
        ? shortfallOf(f, cost, captured, providerCostRaw, limitBound)
        : { uncollectedRaw: 0n, record: {} };
      const uncollected = shortfall.uncollectedRaw;
      const events: NewEvent[] = [
        outcome === 'completed'
          ? buildEvent('paywall.proxy.request.completed', ctx, { ...data, provider: f.upstream.name })
          : outcome === 'canceled'
            ? buildEvent('paywall.proxy.request.canceled', ctx, data)
            : buildEvent('paywall.proxy.request.failed', ctx, { ...data, errorCode: errorCode ?? 'failed' }),
      ];
      if (cost > 0n)
        events.push(
          buildEvent(
            'paywall.usage.charge.created',
            { ...ctx, subject: { type: 'charge', id: f.chargeId, externalId: f.externalUserId } },
            {
              walletUserId,
              activityId: f.chargeId,
              model,
              promptTokens: inputTokens(usage!),
              completionTokens: outputTokens(usage!),
              cacheReadTokens: usage!.cacheRead,
              cacheWriteTokens: usage!.cacheWrite,
              audioPromptTokens: usage!.audioPrompt,
              reasoningTokens: usage!.reasoning,
              audioCompletionTokens: usage!.audioCompletion,
              ...(usage!.imagePrompt || usage!.imageCompletion
                ? { imagePromptTokens: usage!.imagePrompt, imageCompletionTokens: usage!.imageCompletion }
                : {}),
              // docs/reference.md §22: the units, and the same in words ("3 images 1024x1024 high").
              ...(hasUnits(f.units)
                ? { units: { ...storedUnits(f.units), label: unitsLabel(f.units) } }
                : {}),
              cost: usdcDecimal(captured),
              costDetails: details!,
              ...(uncollected > 0n ? { uncollected: usdcDecimal(uncollected) } : {}),
              ...(f.userKeyId ? { userKeyId: f.userKeyId } : {}),
            },
          ),
        );
      const split = splitCharge(f.paywall.mode, captured, providerCostRaw, this.d.platformFeeBps);
      return {
        chargeId: f.chargeId,
        paywallId: f.paywall.id,
        status: cost > 0n ? ('completed' as const) : ('released' as const),
        capturedRaw: captured,
        ...split,
        uncollectedRaw: uncollected,
        promptTokens: usage ? inputTokens(usage) : null,
        completionTokens: usage ? outputTokens(usage) : null,
        errorCode: outcome === 'completed' ? null : (errorCode ?? outcome),
        ledgerEntryId: randomUUID(),
        metadata: {
          model,
          outcome,
          ...(usage && cost > 0n ? { buckets: keptBuckets(usage), pricing: pricingOf(f, usage) } : {}),
          ...(usage && cost > 0n && hasUnits(f.units) ? { units: storedUnits(f.units) } : {}),
          ...shortfall.record,
          ...(overReported ? { overReported } : {}),
          // Whose answer it was: a later previous_response_id of another end user is refused (RelayedResponses).
          ...(relayedResponse ? { responseId: relayedResponse.id } : {}),
        },
        events,
        relayedResponse,
      };
    };
    // A failed settlement leaves the hold for the sweeper; retry briefly first (e.g. a pool hiccup).
    let captured = cost < f.hold.holdRaw ? cost : f.hold.holdRaw;
    let freeAfterRaw: bigint | null = null;
    let alerts: AccountAlerts | null = null;
    let unsettled: unknown = null;
    const began = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        let settled: boolean;
        if (cost > f.hold.holdRaw && !appBears) {
          // Beyond the hold (the estimate was short): the rest comes from the free balance, in its own
          // transaction (rare: never on the group-commit path).
          const r = await settleBeyondHold(this.d.db, f.chargeId, f.paywall.id, cost, build);
          settled = r.settled;
          captured = r.settled ? r.capturedRaw : 0n;
          freeAfterRaw = r.freeAfter;
          alerts = r.alerts;
        } else {
          const r = await this.d.ledger.settle(`${f.paywall.id}\n${f.externalUserId}`, build(captured));
          settled = r !== false;
          freeAfterRaw = r === false ? null : r.freeAfter;
          alerts = r === false ? null : r.alerts;
        }
        // Only a sweeper can have settled it first (the request outlived UPSTREAM_MAX_DURATION_MS + 5 min,
        // or its instance was presumed dead): the sweeper's settlement stands, nothing is charged twice.
        if (!settled)
          this.d.log.warn({ chargeId: f.chargeId }, 'chat hold was already settled (by the sweeper)');
        if (captured > 0n) {
          this.d.metrics.ledgerEntries.inc({ kind: 'usage' });
          this.d.metrics.ledgerAmountRaw.inc({ kind: 'usage' }, Number(captured));
        }
        break;
      } catch (err) {
        if (attempt >= SETTLE_MIN_ATTEMPTS && Date.now() - began >= SETTLE_RETRY_WINDOW_MS) {
          this.d.log.error(
            { err, chargeId: f.chargeId },
            'chat settlement failed; the sweeper will release the hold',
          );
          // Nothing was charged: the caller must not hand the answer out as charged (unsettled).
          unsettled = err;
          captured = 0n;
          break;
        }
        await new Promise((r) => setTimeout(r, settleRetryDelayMs(attempt)));
      }
    }
    // A charge that took money may have taken the free balance below a threshold (committed above).
    if (captured > 0n && freeAfterRaw !== null && alerts && f.hold.accountId && this.d.lowBalance)
      await this.d.lowBalance.afterCharge({
        paywall: f.paywall,
        accountId: f.hold.accountId,
        endUserId: f.hold.userId,
        externalUserId: f.externalUserId,
        walletUserId,
        freeAfterRaw,
        alerts,
        trigger: f.trigger,
      });
    if (captured > 0n && freeAfterRaw !== null)
      this.d.autoTopup?.afterCharge(f.hold.userId, f.hold.accountId ?? null, freeAfterRaw);
    return { captured, freeAfterRaw, costDetails: captured > 0n ? details : null, unsettled };
  }
}
