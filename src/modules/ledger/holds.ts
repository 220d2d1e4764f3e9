import type { Sql } from '../../db/database.js';
import type { UsageBuckets } from '../../shared/usage-buckets.js';
import { EVENT_VERSION } from '../events/event-catalog.js';
import { eventRows, type NewEvent } from '../events/event.service.js';
import { alertsOf, type AccountAlerts } from './low-balance.js';
import type { AllowancePeriod } from '../wallet/allowance.js';

/**
 * Holds for chat requests (docs/reference.md §5.3). Reserving and settling are ONE statement, for one
 * request or for a batch of concurrent ones (group commit): a call of `ledger_tick`, the database function
 * that holds the hold and settlement rules (their one implementation: migrations/sql/ledger-functions-v5.ts,
 * docs/ledger.md "Where the rules live"). The hot path costs one round trip to reserve and one to settle,
 * and the event rows are written in the same transaction (the statement) as the change they report. This
 * file encodes the items (`holdItem`, `settleItem`) and decodes the answers.
 *
 * Why batches: every event insert NOTIFYs (the `event_fanout` trigger), and PostgreSQL serialises the
 * commits of notifying transactions (a global lock held through the WAL flush), which caps one
 * statement per request near the disk's fsync rate. One statement for many requests shares that commit.
 *
 * A hold is a `charge` row (kind `usage`, status `held`, `hold_raw`, the `account_id` it reserves on)
 * plus `ledger_account.held_raw += hold` on the account the end user spends (its own in DEFAULT mode,
 * its wallet's in SHARED mode). Free balance = balance_raw − held_raw; the CHECK
 * `held_raw <= balance_raw` backs the rule up. Settlement is transfers from that account to the
 * paywall's earnings (and the platform's fees and provider accounts) and the release of the hold.
 */

/** pico-USDC x ppm per raw unit: the scale of `fixedScaled` / `perTokenScaled` (see money.chatCost). */
export const SCALE_PER_RAW = 10n ** 12n;

export interface ReserveInput {
  chargeId: string;
  paywallId: string;
  externalUserId: string;
  /** SHARED mode: only a connected user (wallet_user_id set) may be held against. */
  requireConnected: boolean;
  /** request x 1e6 + markup x promptEstimate x prompt, in pico-USDC x ppm. */
  fixedScaled: bigint;
  /** markup x completion price x choices, in pico-USDC x ppm per completion token (of each choice). */
  perTokenScaled: bigint;
  /** The completion cap before the balance is considered: min(client max, model max). */
  maxCap: number;
  /**
   * When the free balance cannot afford this many completion tokens the request is refused (16; docs/reference.md §5.3),
   * also when the client asked for fewer.
   */
  minCap: number;
  model: string;
  stream: boolean;
  /** Stored on the charge (e.g. the prompt estimate the hold was computed from). */
  metadata: Record<string, unknown>;
  /** The UTC day (YYYY-MM-DD) the request counts on for the daily limits (docs/reference.md §10). */
  day: string;
  /** Daily limits that apply (null = none): requests per end user, spend per end user, requests of the model. */
  requestLimit: number | null;
  spendLimitRaw: bigint | null;
  modelRequestLimit: number | null;
  /** The API rate limit (requests per minute per paywall key) and the minute this request counts in. */
  rateLimit: number | null;
  rateWindow: Date;
  /** Events to record with the hold (`started`, `deferred`); `walletUserId` is filled in by ledger_tick. */
  events: NewEvent[];
  /**
   * The most outstanding uncollected usage (`ledger_account.debt_raw`) the spending account may carry and
   * still be held against (MAX_UNCOLLECTED_PER_USER; default 0); above it the hold is refused (`indebted`).
   */
  maxDebtRaw?: bigint;
  /** The clock's time: the period of a SHARED connection's allowance it counts in (default: now). */
  at?: Date;
  /**
   * The end-user key the request came with (docs/reference.md §19): written on the charge, and its
   * spending limit, when it has one, is checked and counted like an allowance.
   */
  userKeyId?: string | null;
}

/** The end-user key's limit a hold was checked against, as the statement saw it. */
export interface HoldKeyLimit {
  amountRaw: bigint;
  period: AllowancePeriod;
  /** Spent with the key in the period before this hold. */
  spentRaw: bigint;
  /** The period's first day (YYYY-MM-DD). */
  periodStart: string;
}

/** The allowance a SHARED hold was checked against (docs/reference.md §16), as the statement saw it. */
export interface HoldAllowance {
  connectionId: string;
  amountRaw: bigint;
  period: AllowancePeriod;
  /** Spent in the period before this hold. */
  spentRaw: bigint;
  /** The period's first day (YYYY-MM-DD). */
  periodStart: string;
}

/** Which daily limit refused a request (docs/reference.md §10). */
export type DailyLimit = 'dailyRequestLimit' | 'dailySpendLimit' | 'modelDailyRequestLimit';

export interface ReserveResult {
  /** Set when a daily limit refused the request (nothing held). */
  limit: DailyLimit | null;
  /** With an API rate limit: this request's place in the minute's count (over the limit: refused). */
  ratePosition: number | null;
  userId: string;
  /** The wallet user of events: the hosted wallet in SHARED mode (null when not connected), the end user itself in DEFAULT mode. */
  walletUserId: string | null;
  connected: boolean;
  /** Free balance seen under the row lock (before this hold). */
  freeRaw: bigint;
  /** Completion cap per choice the balance affords (≤ maxCap; refused when the balance cannot afford minCap tokens). */
  cap: number;
  holdRaw: bigint;
  /** True when the hold was placed (charge row inserted, held_raw raised). */
  held: boolean;
  /** The spending account's outstanding uncollected usage is above `maxDebtRaw`: refused. */
  indebted: boolean;
  /** The spending account (null when the user has none: not connected). */
  accountId: string | null;
  /** The spending account's outstanding uncollected usage (0 when none). */
  debtRaw: bigint;
  /** Refused because the app's allowance (SHARED) has less left than the smallest request. */
  allowanceExceeded?: boolean;
  /** The connection's allowance, when it has one. */
  allowance?: HoldAllowance | null;
  /** Refused because the end-user key's limit has less left than the smallest request. */
  keyLimitExceeded?: boolean;
  /** The end-user key's limit, when the request came with a key that has one. */
  keyLimit?: HoldKeyLimit | null;
}

/**
 * The event rows of one operation (built by `buildEvent` and `eventRows`, the one home of payloads),
 * shipped compactly: what every event of a request repeats is sent once per operation (`ev_owner`,
 * `ev_trigger`) and left out of each event, and ledger_tick puts it back (its event insert): the paywall
 * and owner ids (top level and `data.paywallId` / `data.ownerUserId`), the trigger, the version, empty
 * metadata and the subject's id when it is the charge's. Only values equal to what ledger_tick puts
 * back are left out, so the stored rows are the very rows `eventRows` builds (jsonb keeps no key order),
 * but for the event id: a random UUID either way, drawn by the database (gen_random_uuid) instead.
 */
function compactEvents(events: NewEvent[], paywallId: string, chargeId: string) {
  const owner = events[0]?.ownerUserId ?? null;
  const trigger = events[0]?.trigger ?? null;
  const rows = eventRows(events).map((e, ord) => {
    const out: Record<string, unknown> = { type: e.type, ord };
    if (e.paywall_id !== paywallId) out.paywall_id = e.paywall_id;
    if (e.owner_user_id !== owner) out.owner_user_id = e.owner_user_id;
    if (e.version !== EVENT_VERSION) out.version = e.version;
    if (e.trigger !== trigger) out.trigger = e.trigger;
    const meta = e.metadata as Record<string, unknown>;
    if (Object.keys(meta).length > 0) out.metadata = meta;
    const { id: subjectId, ...subject } = e.subject as Record<string, unknown>;
    if (subjectId === chargeId) {
      out.subject = subject;
      out.s = true;
    } else out.subject = e.subject;
    const { paywallId: dp, ownerUserId: downer, ...data } = e.data as Record<string, unknown>;
    if (dp === e.paywall_id && downer === e.owner_user_id && dp !== undefined && downer !== undefined) {
      out.data = data;
      out.d = true;
    } else out.data = e.data;
    return out;
  });
  return { ev_owner: owner, ev_trigger: trigger, events: rows };
}

const holdItem = (h: ReserveInput, i: number) => ({
  i,
  charge_id: h.chargeId,
  paywall_id: h.paywallId,
  external_id: h.externalUserId,
  shared: h.requireConnected,
  fixed: h.fixedScaled.toString(),
  per_token: h.perTokenScaled.toString(),
  max_cap: h.maxCap,
  min_cap: h.minCap,
  model: h.model,
  stream: h.stream,
  metadata: { ...h.metadata, usageDay: h.day },
  ...compactEvents(h.events, h.paywallId, h.chargeId),
  day: h.day,
  req_limit: h.requestLimit,
  spend_limit: h.spendLimitRaw?.toString() ?? null,
  model_limit: h.modelRequestLimit,
  rate_limit: h.rateLimit,
  rate_window: h.rateWindow.toISOString(),
  max_debt: (h.maxDebtRaw ?? 0n).toString(),
  at: (h.at ?? new Date()).toISOString(),
  key_id: h.userKeyId ?? null,
});

const holdResult = (r: Record<string, any>): ReserveResult => ({
  userId: r.id,
  walletUserId: r.wallet_id,
  connected: r.connected,
  freeRaw: BigInt(r.free),
  cap: Number(r.cap),
  holdRaw: BigInt(r.hold),
  held: r.held,
  indebted: r.indebted === true,
  accountId: r.account_id ?? null,
  debtRaw: r.debt === null || r.debt === undefined ? 0n : BigInt(r.debt),
  limit: r.limit_hit ?? null,
  ratePosition: r.rate_position === null || r.rate_position === undefined ? null : Number(r.rate_position),
  allowanceExceeded: r.allowance_hit === true,
  allowance:
    r.allow_id === null || r.allow_id === undefined
      ? null
      : {
          connectionId: r.allow_id,
          amountRaw: BigInt(r.allowance),
          period: r.allow_period,
          spentRaw: BigInt(r.allow_spent),
          periodStart: String(r.allow_start).slice(0, 10),
        },
  keyLimitExceeded: r.key_hit === true,
  keyLimit:
    r.key_limit === null || r.key_limit === undefined
      ? null
      : {
          amountRaw: BigInt(r.key_limit),
          period: r.key_period,
          spentRaw: BigInt(r.key_spent),
          periodStart: String(r.key_start).slice(0, 10),
        },
});

export interface SettleInput {
  chargeId: string;
  paywallId: string;
  /** completed (something charged), released (nothing produced, nothing charged). */
  status: 'completed' | 'released';
  /** What is taken from the balance: min(cost, hold), or beyond the hold up to the free balance (settleBeyondHold). */
  capturedRaw: bigint;
  /** How the captured amount is shared out (accounts.splitCharge); the parts add up to capturedRaw. */
  earningsRaw: bigint;
  feeRaw: bigint;
  providerRaw: bigint;
  /** cost − captured: usage neither the hold nor the free balance covered; it becomes the account's debt. */
  uncollectedRaw: bigint;
  promptTokens: number | null;
  completionTokens: number | null;
  errorCode: string | null;
  ledgerEntryId: string;
  metadata: Record<string, unknown>;
  events: NewEvent[];
  /** A relayed Responses answer to remember (relayed_response), written in the settlement's statement. */
  relayedResponse?: RelayedRecord | null;
}

/** A Responses answer's id and context size (input + output tokens): what a continuation is held for. */
export interface RelayedRecord {
  id: string;
  tokens: bigint;
}

const settleItem = (s: SettleInput, i: number) => ({
  i,
  charge_id: s.chargeId,
  paywall_id: s.paywallId,
  status: s.status,
  captured: s.capturedRaw.toString(),
  earnings: s.earningsRaw.toString(),
  fee: s.feeRaw.toString(),
  provider: s.providerRaw.toString(),
  uncollected: s.uncollectedRaw.toString(),
  prompt_tokens: s.promptTokens,
  completion_tokens: s.completionTokens,
  error_code: s.errorCode,
  ledger_id: s.ledgerEntryId,
  metadata: s.metadata,
  expect: 'held',
  ...compactEvents(s.events, s.paywallId, s.chargeId),
  relayed_id: s.relayedResponse?.id ?? null,
  relayed_tokens: s.relayedResponse?.tokens.toString() ?? null,
});

/**
 * Places `holds` and settles `settlements` in one statement and one commit: `ledger_tick` in the database,
 * the one implementation of the hold and settlement rules (migrations/sql/ledger-functions-v5.ts;
 * docs/ledger.md, "Where the rules live"), for one operation alone and for a batch of the group commit
 * alike. Per hold: the result, or null when the user does not exist; per settlement: false when the
 * charge was already settled, and the free balance of its account after it (`freeAfter`) with its
 * low-balance alert state (`alerts`, low-balance.ts).
 */
export async function ledgerTick(
  sql: Sql,
  holds: ReserveInput[],
  settlements: SettleInput[],
): Promise<{
  holds: (ReserveResult | null)[];
  settlements: boolean[];
  freeAfter: (bigint | null)[];
  alerts: (AccountAlerts | null)[];
}> {
  const out = {
    holds: holds.map((): ReserveResult | null => null),
    settlements: settlements.map(() => false),
    freeAfter: settlements.map((): bigint | null => null),
    alerts: settlements.map((): AccountAlerts | null => null),
  };
  if (holds.length + settlements.length === 0) return out;
  // An empty side is null; a lone operation is its item itself, not an array: ledger_tick runs it on its
  // instance of the rules on plain variables and answers it alone (or null).
  const lone = holds.length + settlements.length === 1;
  const encode = <T>(items: T[], item: (x: T, i: number) => object) =>
    items.length === 0 ? null : JSON.stringify(lone ? item(items[0], 0) : items.map(item));
  const [row] = await sql.query<{ r: Record<string, any>[] | Record<string, any> | string | null }>(
    'select ledger_tick($1::jsonb, $2::jsonb, $3::text) as r',
    [encode(holds, holdItem), encode(settlements, settleItem), EVENT_VERSION],
    'proxy_ledger_tick',
  );
  const answer = typeof row.r === 'string' ? JSON.parse(row.r) : row.r;
  const answers: Record<string, any>[] = Array.isArray(answer) ? answer : answer ? [answer] : [];
  for (const r of answers) {
    if (r.kind === 's') {
      out.settlements[r.i] = true;
      // The spending account's free balance after the settlement (docs/reference.md §11 x-paywall-balance).
      out.freeAfter[r.i] = r.free === null || r.free === undefined ? null : BigInt(r.free);
      out.alerts[r.i] = alertsOf(r);
    } else out.holds[r.i] = holdResult(r);
  }
  return out;
}

/**
 * Reserves the maximum cost of chat requests against their users' free balances: the completion cap
 * is lowered to what the balance affords; holds, charge rows and events are written in one statement.
 */
export async function reserveHolds(sql: Sql, inputs: ReserveInput[]): Promise<(ReserveResult | null)[]> {
  return (await ledgerTick(sql, inputs, [])).holds;
}

/**
 * Settles holds to their exact cost: captures the amount given into a `usage` ledger entry (when > 0),
 * releases the hold, records what could not be collected, and writes the events, in one statement.
 */
export async function settleHolds(sql: Sql, inputs: SettleInput[]): Promise<boolean[]> {
  return (await ledgerTick(sql, [], inputs)).settlements;
}

/** What a stream produced so far, as its settlement would be (ProxyService.recordProgress). */
export interface HoldProgress {
  promptTokens: number;
  completionTokens: number;
  /** The usage per bucket, its cost details and the prices it was charged at (the receipt's record). */
  buckets: Partial<UsageBuckets>;
  costDetails: Record<string, string>;
  pricing: Record<string, string>;
  capturedRaw: bigint;
  earningsRaw: bigint;
  feeRaw: bigint;
  providerRaw: bigint;
  uncollectedRaw: bigint;
  /** What the settlement would record in the charge's metadata besides (the built-in provider's cost, an app's loss). */
  chargeMetadata?: Record<string, string>;
}

/**
 * Records a stream's progress on its hold (`charge.metadata.progress`), while it is still held: one
 * small UPDATE, no event, no NOTIFY. The settlement removes it.
 */
export async function recordHoldProgress(sql: Sql, chargeId: string, p: HoldProgress): Promise<void> {
  await sql.query(
    `update charge set metadata = metadata || jsonb_build_object('progress', $2::jsonb)
      where id = $1 and status = 'held'`,
    [
      chargeId,
      JSON.stringify({
        promptTokens: p.promptTokens,
        completionTokens: p.completionTokens,
        buckets: p.buckets,
        costDetails: p.costDetails,
        pricing: p.pricing,
        captured: p.capturedRaw.toString(),
        earnings: p.earningsRaw.toString(),
        fee: p.feeRaw.toString(),
        provider: p.providerRaw.toString(),
        uncollected: p.uncollectedRaw.toString(),
        ...(p.chargeMetadata ? { meta: p.chargeMetadata } : {}),
        at: new Date().toISOString(),
      }),
    ],
    'proxy_hold_progress',
  );
}
