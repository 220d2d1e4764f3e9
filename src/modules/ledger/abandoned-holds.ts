import { randomUUID } from 'node:crypto';
import type { Database } from '../../db/database.js';
import { usdcDecimal } from '../../shared/money.js';
import { storedBuckets, textUsage } from '../../shared/usage-buckets.js';
import { recordEvents, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { ledgerTick, type SettleInput } from './holds.js';

/**
 * The sweeper's part of the ledger (one job): holds an instance left `held` when it died are settled for
 * what their stream recorded, or released (sweepAbandonedHolds).
 */

// Holds left `held` by an instance that died (its requests can no longer settle), oldest first, locked
// (skip locked: two sweepers never take the same hold), with what their events need.
const ABANDONED_SQL = `
select c.id, c.paywall_id, c.user_id, c.account_id, c.model, c.hold_raw::text as hold,
       c.metadata->'progress' as progress, pw.owner_id, pw.mode, e.external_id,
       (select w.id from wallet_user w where w.account_id = c.account_id) as wallet_user_id
  from charge c join paywall pw on pw.id = c.paywall_id join end_user e on e.id = c.user_id
 where c.status = 'held' and c.kind = 'usage' and c.created_at < now() - ($1::bigint * interval '1 millisecond')
   and not (c.id = any($2::uuid[]))
 order by c.created_at
 limit 500
   for update of c skip locked`;

// Released without a charge (nothing recorded as produced). Accounts are locked in id order and each
// updated once with the sum of its released holds.
const RELEASE_SQL = `
with c as (
  update charge set status = 'released', error_code = 'abandoned', settled_at = now()
   where id = any($1::uuid[]) and status = 'held'
  returning id, account_id, hold_raw
),
per_account as (
  select account_id, sum(hold_raw)::bigint as total from c group by account_id
),
lk as (
  select a.id from ledger_account a where a.id in (select account_id from per_account) order by a.id
     for no key update
)
update ledger_account a set held_raw = a.held_raw - p.total
  from per_account p join lk on lk.id = p.account_id
 where a.id = p.account_id`;

const SWEEPER: EventTrigger = { source: 'system', actorType: 'system', actorId: 'hold-sweeper' };

/** A recorded token count as the int4 columns take it (a bad value must not fail the whole sweep). */
const isStringRecord = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' && v !== null && Object.values(v).every((x) => typeof x === 'string');

const storedTokens = (v: unknown): number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? Math.min(v, 2_147_483_647) : 0;

export const bigintOr0 = (v: unknown): bigint => {
  try {
    return typeof v === 'string' || typeof v === 'number' ? BigInt(v) : 0n;
  } catch {
    return 0n;
  }
};

/**
 * Settles holds older than `olderThanMs` that are not in flight here, in one transaction; returns how
 * many. A hold whose stream recorded progress (recordHoldProgress) is settled for it: the recorded
 * amount (never above the hold) is captured like any settlement, with `paywall.proxy.request.failed`
 * (errorCode `abandoned`) and `paywall.usage.charge.created`. The others are released with nothing
 * charged and a `failed` event.
 */
export async function sweepAbandonedHolds(
  db: Database,
  olderThanMs: number,
  inFlight: string[],
): Promise<number> {
  return db.transaction(async (tx) => {
    const rows = await tx.query(ABANDONED_SQL, [olderThanMs, inFlight]);
    const release: string[] = [];
    const settle: SettleInput[] = [];
    const releaseEvents: NewEvent[] = [];
    for (const r of rows) {
      const ctx = {
        paywall: { id: r.paywall_id, ownerId: r.owner_id },
        trigger: SWEEPER,
        subject: { type: 'request' as const, id: r.id, externalId: r.external_id },
      };
      const walletUserId = r.mode === 'SHARED' ? (r.wallet_user_id ?? null) : r.user_id;
      const failed = buildEvent('paywall.proxy.request.failed', ctx, {
        requestId: r.id,
        walletUserId,
        model: r.model,
        errorCode: 'abandoned',
      });
      const p = typeof r.progress === 'string' ? JSON.parse(r.progress) : r.progress;
      const hold = BigInt(r.hold);
      const parts = [p?.captured, p?.earnings, p?.fee, p?.provider].map(bigintOr0);
      const [captured, earnings, fee, provider] = parts;
      // Only a consistent record is applied (never above the hold; the parts add up): else released.
      const usable =
        p &&
        captured > 0n &&
        captured <= hold &&
        parts.every((x) => x >= 0n) &&
        earnings + fee + provider === captured;
      if (!usable) {
        release.push(r.id);
        releaseEvents.push(failed);
        continue;
      }
      const uncollected = bigintOr0(p.uncollected);
      const promptTokens = storedTokens(p.promptTokens);
      const completionTokens = storedTokens(p.completionTokens);
      // Progress recorded before usage buckets existed has none: all of it is text.
      const buckets = storedBuckets(p.buckets) ?? textUsage(promptTokens, completionTokens);
      const costDetails = isStringRecord(p.costDetails) ? p.costDetails : {};
      const receipt = isStringRecord(p.pricing) ? { pricing: p.pricing, buckets } : {};
      settle.push({
        chargeId: r.id,
        paywallId: r.paywall_id,
        status: 'completed',
        capturedRaw: captured,
        earningsRaw: earnings,
        feeRaw: fee,
        providerRaw: provider,
        uncollectedRaw: uncollected > 0n ? uncollected : 0n,
        promptTokens,
        completionTokens,
        errorCode: 'abandoned',
        ledgerEntryId: randomUUID(),
        metadata: {
          ...(isStringRecord(p.meta) ? p.meta : {}),
          model: r.model,
          outcome: 'abandoned',
          ...receipt,
        },
        events: [
          failed,
          buildEvent(
            'paywall.usage.charge.created',
            { ...ctx, subject: { type: 'charge', id: r.id, externalId: r.external_id } },
            {
              walletUserId,
              activityId: r.id,
              model: r.model,
              promptTokens,
              completionTokens,
              cacheReadTokens: buckets.cacheRead,
              cacheWriteTokens: buckets.cacheWrite,
              audioPromptTokens: buckets.audioPrompt,
              reasoningTokens: buckets.reasoning,
              audioCompletionTokens: buckets.audioCompletion,
              cost: usdcDecimal(captured),
              costDetails,
              ...(uncollected > 0n ? { uncollected: usdcDecimal(uncollected) } : {}),
            },
          ),
        ],
      });
    }
    if (release.length > 0) {
      await tx.query(RELEASE_SQL, [release]);
      await recordEvents(tx, releaseEvents);
    }
    // The sweeper settles at most one charge per end user and account per statement (a rare path: kept simple).
    let rest = settle.map((input) => ({ input, row: rows.find((r) => r.id === input.chargeId)! }));
    while (rest.length > 0) {
      const seen = new Set<string>();
      const batch: SettleInput[] = [];
      const later: typeof rest = [];
      for (const x of rest) {
        const keys = [`u${x.row.user_id}`, `a${x.row.account_id}`];
        if (keys.some((k) => seen.has(k))) later.push(x);
        else {
          keys.forEach((k) => seen.add(k));
          batch.push(x.input);
        }
      }
      await ledgerTick(tx, [], batch);
      rest = later;
    }
    return rows.length;
  });
}
