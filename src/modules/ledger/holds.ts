import type { Sql } from '../../db/database.js';
import { eventRows, insertEventsSql, type NewEvent } from '../events/event.service.js';

/**
 * Holds for chat requests (CONTRACT §5.3): each is ONE data-modifying statement, so the hot path costs
 * one round trip to reserve and one to settle, with the event rows written in the same transaction
 * (the statement) as the change they report.
 *
 * A hold is a `charge` row (kind `usage`, status `held`, `hold_raw`) plus `end_user.held_raw += hold`.
 * Free balance = balance_raw − held_raw; the CHECK `held_raw <= balance_raw` backs the rule up.
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
  /** Below this affordable cap the request is refused (16 tokens, or less when the client asked for less). */
  minCap: number;
  model: string;
  stream: boolean;
  /** Stored on the charge (e.g. the prompt estimate the hold was computed from). */
  metadata: Record<string, unknown>;
  /** Events to record with the hold (`started`, `deferred`); `walletUserId` is filled in by the statement. */
  events: NewEvent[];
}

export interface ReserveResult {
  userId: string;
  /** The wallet user of events: the hosted wallet in SHARED mode (null when not connected), the end user itself in DEFAULT mode. */
  walletUserId: string | null;
  connected: boolean;
  /** Free balance seen under the row lock (before this hold). */
  freeRaw: bigint;
  /** Completion cap per choice the balance affords (≤ maxCap; < minCap when refused). */
  cap: number;
  holdRaw: bigint;
  /** True when the hold was placed (charge row inserted, held_raw raised). */
  held: boolean;
}

// The row is locked first (FOR UPDATE) so that the cap is computed from the very balance the update
// then changes: concurrent requests of one user queue on that lock and each sees the holds before it,
// so together they can never reserve more than the balance.
const RESERVE_SQL = `
with u0 as (
  select id, balance_raw, held_raw, wallet_user_id
    from end_user
   where paywall_id = $1 and external_id = $2
     for update
),
calc as (
  select u0.id, case when $3::boolean then u0.wallet_user_id else u0.id end as wallet_id,
         (not $3::boolean or u0.wallet_user_id is not null) as connected,
         u0.balance_raw - u0.held_raw as free, c.cap,
         ceil(($4::numeric + c.cap * $5::numeric) / ${SCALE_PER_RAW})::bigint as hold
    from u0, lateral (
      select case when $5::numeric = 0 then $6::bigint
             else greatest(-1, least($6::numeric,
                    floor(((u0.balance_raw - u0.held_raw)::numeric * ${SCALE_PER_RAW} - $4::numeric) / $5::numeric)))::bigint
             end as cap
    ) c
),
ok as (
  select * from calc where connected and cap >= $7::bigint and hold <= free
),
u as (
  update end_user e set held_raw = e.held_raw + ok.hold
    from ok
   where e.id = ok.id and e.balance_raw - e.held_raw >= ok.hold
  returning e.id
),
ch as (
  insert into charge (id, paywall_id, user_id, kind, status, hold_raw, model, max_completion_tokens, stream, metadata, created_at)
  select $8::uuid, $1, ok.id, 'usage', 'held', ok.hold, $9, ok.cap, $10, $12::jsonb, now()
    from ok join u on u.id = ok.id
  returning id
),
ev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select x.id, x.paywall_id, x.owner_user_id, x.type, x.version, x.trigger, x.subject,
         x.data || jsonb_build_object('walletUserId', ok.wallet_id), x.metadata
    from jsonb_to_recordset($11::jsonb) as x(id uuid, paywall_id uuid, owner_user_id uuid, type text,
         version text, trigger jsonb, subject jsonb, data jsonb, metadata jsonb)
    join ok on true
   where exists (select 1 from ch)
)
select calc.id, calc.wallet_id, calc.connected, calc.free::text as free, calc.cap::text as cap,
       calc.hold::text as hold, exists (select 1 from ch) as held
  from calc`;

/**
 * Reserves the maximum cost of a chat request against the user's free balance: the completion cap is
 * lowered to what the balance affords, and the hold, the charge row and the events are written in one
 * statement. Returns null when the user does not exist yet (the caller creates it and retries).
 */
export async function reserveHold(sql: Sql, input: ReserveInput): Promise<ReserveResult | null> {
  const rows = await sql.query(
    RESERVE_SQL,
    [
      input.paywallId,
      input.externalUserId,
      input.requireConnected,
      input.fixedScaled.toString(),
      input.perTokenScaled.toString(),
      input.maxCap,
      input.minCap,
      input.chargeId,
      input.model,
      input.stream,
      JSON.stringify(eventRows(input.events)),
      JSON.stringify(input.metadata),
    ],
    'proxy_reserve_hold',
  );
  if (rows.length === 0) return null;
  const r = rows[0];
  return {
    userId: r.id,
    walletUserId: r.wallet_id,
    connected: r.connected,
    freeRaw: BigInt(r.free),
    cap: Number(r.cap),
    holdRaw: BigInt(r.hold),
    held: r.held,
  };
}

export interface SettleInput {
  chargeId: string;
  paywallId: string;
  /** completed (something charged), released (nothing produced, nothing charged). */
  status: 'completed' | 'released';
  /** min(cost, hold): what is taken from the balance. */
  capturedRaw: bigint;
  /** cost − captured: usage the hold did not cover (CONTRACT §5.6). */
  uncollectedRaw: bigint;
  promptTokens: number | null;
  completionTokens: number | null;
  errorCode: string | null;
  ledgerEntryId: string;
  metadata: Record<string, unknown>;
  events: NewEvent[];
}

// Settlement is idempotent: only a `held` charge is settled (a sweeper and a late finisher cannot both
// settle it). The balance never goes negative: captured ≤ hold ≤ held_raw ≤ balance_raw.
const SETTLE_SQL = `
with c as (
  update charge
     set status = $3, amount_raw = $4::bigint, uncollected_raw = $5::bigint, prompt_tokens = $6,
         completion_tokens = $7, error_code = $8, settled_at = now(), metadata = metadata || $10::jsonb
   where id = $1::uuid and status = 'held'
  returning id, user_id, hold_raw
),
u as (
  update end_user e
     set held_raw = e.held_raw - c.hold_raw, balance_raw = e.balance_raw - $4::bigint
    from c
   where e.id = c.user_id
  returning e.id, e.balance_raw, e.held_raw
),
l as (
  insert into ledger_entry (id, paywall_id, user_id, kind, amount_raw, balance_after_raw, charge_id, metadata, created_at)
  select $9::uuid, $2::uuid, u.id, 'usage', -($4::bigint), u.balance_raw, c.id, $10::jsonb, now()
    from u, c
   where $4::bigint > 0
),
ev as (
  ${insertEventsSql(11)}
   where exists (select 1 from u)
)
select u.balance_raw::text as balance, u.held_raw::text as held from u`;

/**
 * Settles a hold to the exact cost: captures min(cost, hold) into a `usage` ledger entry (when > 0),
 * releases the hold, records what could not be collected, and writes the events, in one statement.
 * Returns false when the charge was already settled.
 */
export async function settleHold(sql: Sql, input: SettleInput): Promise<boolean> {
  const rows = await sql.query(
    SETTLE_SQL,
    [
      input.chargeId,
      input.paywallId,
      input.status,
      input.capturedRaw.toString(),
      input.uncollectedRaw.toString(),
      input.promptTokens,
      input.completionTokens,
      input.errorCode,
      input.ledgerEntryId,
      JSON.stringify(input.metadata),
      JSON.stringify(eventRows(input.events)),
    ],
    'proxy_settle_hold',
  );
  return rows.length > 0;
}

// Holds left `held` by an instance that died (its requests can no longer settle). Released without a
// charge (the usage is unknown), with a `paywall.proxy.request.failed` event each.
const SWEEP_SQL = `
with c as (
  update charge set status = 'released', error_code = 'abandoned', settled_at = now()
   where id in (
     select id from charge
      where status = 'held' and kind = 'usage' and created_at < now() - ($1::bigint * interval '1 millisecond')
        and not (id = any($2::uuid[]))
      order by created_at
      limit 500
      for update skip locked)
  returning id, paywall_id, user_id, hold_raw, model
),
per_user as (
  select user_id, sum(hold_raw)::bigint as total from c group by user_id
),
u as (
  update end_user e set held_raw = e.held_raw - p.total from per_user p where e.id = p.user_id
  returning e.id, e.external_id, e.wallet_user_id
),
ev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select gen_random_uuid(), c.paywall_id, pw.owner_id, 'paywall.proxy.request.failed', '1.0',
         jsonb_build_object('source', 'system', 'actorType', 'system', 'actorId', 'hold-sweeper'),
         jsonb_build_object('type', 'request', 'id', c.id, 'externalId', u.external_id),
         jsonb_build_object('paywallId', c.paywall_id, 'ownerUserId', pw.owner_id, 'requestId', c.id,
                            'walletUserId', case when pw.mode = 'SHARED' then u.wallet_user_id else u.id end, 'model', c.model,
                            'errorCode', 'abandoned'),
         '{}'::jsonb
    from c join paywall pw on pw.id = c.paywall_id join u on u.id = c.user_id
)
select count(*)::int as n from c`;

/** Releases holds older than `olderThanMs` that are not in flight here; returns how many. */
export async function sweepAbandonedHolds(
  sql: Sql,
  olderThanMs: number,
  inFlight: string[],
): Promise<number> {
  const rows = await sql.query(SWEEP_SQL, [olderThanMs, inFlight], 'proxy_sweep_holds');
  return rows[0]?.n ?? 0;
}
