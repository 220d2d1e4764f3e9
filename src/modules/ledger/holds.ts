import type { Sql } from '../../db/database.js';
import { eventRows, type NewEvent } from '../events/event.service.js';

/**
 * Holds for chat requests (CONTRACT §5.3). Reserving and settling are ONE data-modifying statement,
 * for one request or for a batch of concurrent ones (group commit): the hot path costs one round trip
 * to reserve and one to settle, and the event rows are written in the same transaction (the
 * statement) as the change they report.
 *
 * Why batches: every event insert NOTIFYs (the `event_fanout` trigger), and PostgreSQL serialises the
 * commits of notifying transactions (a global lock held through the WAL flush), which caps one
 * statement per request near the disk's fsync rate. One statement for many requests shares that commit.
 * A batch holds at most one item per end user (the caller guarantees it), so every user row is locked
 * and updated once per statement, and rows are locked in id order (no deadlock between batches).
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

const EVENT_COLUMNS = `id uuid, paywall_id uuid, owner_user_id uuid, type text, version text, trigger jsonb,
  subject jsonb, data jsonb, metadata jsonb, ord int`;

/** Event rows with their position, so a batch inserts each request's events in order. */
const orderedEvents = (events: NewEvent[]) => eventRows(events).map((e, ord) => ({ ...e, ord }));

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
  metadata: h.metadata,
  events: orderedEvents(h.events),
});

const holdResult = (r: Record<string, any>): ReserveResult => ({
  userId: r.id,
  walletUserId: r.wallet_id,
  connected: r.connected,
  freeRaw: BigInt(r.free),
  cap: Number(r.cap),
  holdRaw: BigInt(r.hold),
  held: r.held,
});

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

const settleItem = (s: SettleInput, i: number) => ({
  i,
  charge_id: s.chargeId,
  paywall_id: s.paywallId,
  status: s.status,
  captured: s.capturedRaw.toString(),
  uncollected: s.uncollectedRaw.toString(),
  prompt_tokens: s.promptTokens,
  completion_tokens: s.completionTokens,
  error_code: s.errorCode,
  ledger_id: s.ledgerEntryId,
  metadata: s.metadata,
  events: orderedEvents(s.events),
});

/**
 * One statement settles the holds of finished requests and places the holds of new ones (group
 * commit of both kinds: every request needs one of each, so sharing the commit halves the commits and
 * the WAL flushes that NOTIFY serialises). The holds and settlements of one statement concern distinct
 * end users (the caller guarantees it), so each user row is locked and updated once.
 *
 * Holds: the user rows are locked first (FOR NO KEY UPDATE, in id order: no deadlock between
 * statements, and foreign-key checks of other inserts are not blocked) so that the completion cap is
 * computed from the very balance the update then changes. Concurrent requests of one user queue on
 * that lock and each sees the holds before it, so together they can never reserve more than the free
 * balance; the UPDATE re-checks it. A request whose user does not exist yet gets no row (the caller
 * creates the user and retries); one that cannot afford `min_cap` tokens, or whose user is not
 * connected (SHARED), gets its row with `held = false`.
 *
 * Settlements are idempotent: only a `held` charge is settled (a sweeper and a late finisher cannot
 * both settle it). The balance never goes negative: captured ≤ hold ≤ held_raw ≤ balance_raw. A
 * ledger entry is written only when something is captured (`amount_raw <> 0`).
 */
const TICK_SQL = `
with hi as (
  select * from jsonb_to_recordset($1::jsonb) as x(i int, charge_id uuid, paywall_id uuid, external_id text,
    shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
    stream boolean, metadata jsonb, events jsonb)
),
si as (
  select * from jsonb_to_recordset($2::jsonb) as x(i int, charge_id uuid, paywall_id uuid, status text,
    captured bigint, uncollected bigint, prompt_tokens int, completion_tokens int, error_code text,
    ledger_id uuid, metadata jsonb, events jsonb)
),
c as (
  update charge ch
     set status = it.status, amount_raw = it.captured, uncollected_raw = it.uncollected,
         prompt_tokens = it.prompt_tokens, completion_tokens = it.completion_tokens, error_code = it.error_code,
         settled_at = now(), metadata = ch.metadata || it.metadata
    from si it
   where ch.id = it.charge_id and ch.status = 'held'
  returning ch.id, ch.user_id, ch.hold_raw, it.i, it.captured, it.paywall_id, it.ledger_id, it.metadata, it.events
),
lk as (
  select e.id, e.paywall_id, e.external_id, e.balance_raw, e.held_raw, e.wallet_user_id
    from end_user e
   where e.id in (select user_id from c)
      or (e.paywall_id, e.external_id) in (select paywall_id, external_id from hi)
   order by e.id
     for no key update
),
calc as (
  select hi.i, lk.id, case when hi.shared then lk.wallet_user_id else lk.id end as wallet_id,
         (not hi.shared or lk.wallet_user_id is not null) as connected,
         lk.balance_raw - lk.held_raw as free, k.cap, hi.min_cap,
         ceil((hi.fixed + k.cap * hi.per_token) / ${SCALE_PER_RAW})::bigint as hold
    from hi join lk on lk.paywall_id = hi.paywall_id and lk.external_id = hi.external_id,
    lateral (
      select case when hi.per_token = 0 then hi.max_cap
             else greatest(-1, least(hi.max_cap::numeric,
                    floor(((lk.balance_raw - lk.held_raw)::numeric * ${SCALE_PER_RAW} - hi.fixed) / hi.per_token)))::bigint
             end as cap
    ) k
),
ok as (
  select * from calc where connected and cap >= min_cap and hold <= free
),
delta as (
  select ok.id, ok.hold as held_delta, 0::bigint as balance_delta, ok.i as hold_i, null::int as settle_i from ok
  union all
  select c.user_id, -c.hold_raw, -c.captured, null, c.i from c
),
u as (
  update end_user e
     set held_raw = e.held_raw + d.held_delta, balance_raw = e.balance_raw + d.balance_delta
    from delta d
   where e.id = d.id and (d.hold_i is null or e.balance_raw - e.held_raw >= d.held_delta)
  returning e.id, e.balance_raw, d.hold_i, d.settle_i
),
ch as (
  insert into charge (id, paywall_id, user_id, kind, status, hold_raw, model, max_completion_tokens, stream,
                      metadata, created_at)
  select hi.charge_id, hi.paywall_id, u.id, 'usage', 'held', ok.hold, hi.model, ok.cap, hi.stream, hi.metadata, now()
    from u join hi on hi.i = u.hold_i join ok on ok.i = u.hold_i
),
hev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select x.id, x.paywall_id, x.owner_user_id, x.type, x.version, x.trigger, x.subject,
         x.data || jsonb_build_object('walletUserId', ok.wallet_id), x.metadata
    from u join hi on hi.i = u.hold_i join ok on ok.i = u.hold_i,
         jsonb_to_recordset(hi.events) as x(${EVENT_COLUMNS})
   order by u.hold_i, x.ord
),
l as (
  insert into ledger_entry (id, paywall_id, user_id, kind, amount_raw, balance_after_raw, charge_id, metadata, created_at)
  select c.ledger_id, c.paywall_id, u.id, 'usage', -c.captured, u.balance_raw, c.id, c.metadata, now()
    from c join u on u.settle_i = c.i
   where c.captured > 0
   order by c.i
),
sev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select x.id, x.paywall_id, x.owner_user_id, x.type, x.version, x.trigger, x.subject, x.data, x.metadata
    from c, jsonb_to_recordset(c.events) as x(${EVENT_COLUMNS})
   order by c.i, x.ord
)
select 'h' as kind, calc.i, calc.id, calc.wallet_id, calc.connected, calc.free::text as free,
       calc.cap::text as cap, calc.hold::text as hold, u.hold_i is not null as held
  from calc left join u on u.hold_i = calc.i
union all
select 's', c.i, null, null, null, null, null, null, true from c`;

/**
 * Places `holds` and settles `settlements` in one statement (see TICK_SQL). All inputs together
 * concern distinct end users. Per hold: the result, or null when the user does not exist; per
 * settlement: false when the charge was already settled.
 */
export async function ledgerTick(
  sql: Sql,
  holds: ReserveInput[],
  settlements: SettleInput[],
): Promise<{ holds: (ReserveResult | null)[]; settlements: boolean[] }> {
  const rows = await sql.query(
    TICK_SQL,
    [JSON.stringify(holds.map(holdItem)), JSON.stringify(settlements.map(settleItem))],
    'proxy_ledger_tick',
  );
  const out = {
    holds: holds.map((): ReserveResult | null => null),
    settlements: settlements.map(() => false),
  };
  for (const r of rows) {
    if (r.kind === 's') out.settlements[r.i] = true;
    else out.holds[r.i] = holdResult(r);
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
 * Settles holds to their exact cost: captures min(cost, hold) into a `usage` ledger entry (when > 0),
 * releases the hold, records what could not be collected, and writes the events, in one statement.
 */
export async function settleHolds(sql: Sql, inputs: SettleInput[]): Promise<boolean[]> {
  return (await ledgerTick(sql, [], inputs)).settlements;
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
lk as (
  select e.id from end_user e where e.id in (select user_id from per_user) order by e.id for no key update
),
u as (
  update end_user e set held_raw = e.held_raw - p.total
    from per_user p join lk on lk.id = p.user_id
   where e.id = p.user_id
  returning e.id, e.external_id, e.wallet_user_id
),
ev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select gen_random_uuid(), c.paywall_id, pw.owner_id, 'paywall.proxy.request.failed', '1.0',
         jsonb_build_object('source', 'system', 'actorType', 'system', 'actorId', 'hold-sweeper'),
         jsonb_build_object('type', 'request', 'id', c.id, 'externalId', u.external_id),
         jsonb_build_object('paywallId', c.paywall_id, 'ownerUserId', pw.owner_id, 'requestId', c.id,
                            'walletUserId', case when pw.mode = 'SHARED' then u.wallet_user_id else u.id end,
                            'model', c.model, 'errorCode', 'abandoned'),
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
