/**
 * The ledger's hold and settlement rules, version 3: the ONE implementation of them, in the database.
 *
 * VERSIONED AND FROZEN. This file is the SQL text that migration `Migration20261201110000_ledger_tick`
 * applies (`create or replace function`). Once that migration has run anywhere, the SQL it produces must
 * never change: migrations/frozen.sha256 guards this file like the migrations. A change to the rules is a
 * NEW file (`ledger-functions-v4.ts`, starting as a copy of this one) and a NEW migration that applies it;
 * the service calls `ledger_tick` by name and needs no change unless its signature does (docs/ledger.md,
 * "Where the rules live"). Nothing here may import from src/: the text must not change when the service's
 * code does. (Versions 1 and 2 were measured and reverted before they were applied anywhere:
 * docs/performance.md, rounds 8 and 9.)
 *
 * Functions:
 *
 * - `ledger_period_start(period text, at timestamptz) returns date`: the first day (UTC) of the allowance
 *   or key-limit period (`day`, `week` from Monday, calendar `month`, `total`) holding the instant `at`.
 *   Every SQL path that counts a period calls it (an inlinable SQL function: no call overhead).
 * - `ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns setof jsonb`: places the holds
 *   and settles the settlements of one batch (a group commit of many requests, or one request alone: a
 *   one-item array) in one statement and one commit. Input: arrays of the items `holds.ts` encodes
 *   (`holdItem`, `settleItem`; `i` is an item's place in its array). Output: one row per hold that found
 *   its end user (`kind` 'h') and per settlement that settled a held charge (`kind` 's'), amounts as text.
 *
 * How `ledger_tick` runs: a few set-based steps, each its own small statement, and the decisions in
 * between in PL/pgSQL, on the rows the steps read (no statement per item):
 *
 *  1. settle: the settlements' charges still `held` are marked settled (this locks them: a sweeper or a
 *     settlement beyond the hold locks a charge before its accounts too);
 *  2. resolve: the holds' end users, their accounts and (SHARED) their allowance;
 *  3. lock and read, class by class and in id order: the accounts (spending, earnings, fees, provider),
 *     the usage counters, the allowances, the end-user keys' limits; a class with no rows is skipped, so
 *     two batches, or a batch and anything else that locks in this order, never deadlock;
 *  4. decide, in memory: each hold in turn against the account, counter, allowance and key as the holds
 *     before it left them (a later hold of the same account, user, allowance or key sees what the earlier
 *     ones held), then each settlement (holds are decided before the batch's settlements, which only free
 *     money); the API rate limit's upsert is the one statement per (rate-limited) hold;
 *  5. write: each changed account, counter, allowance and key once, the new charges, the transfers, the
 *     relayed Responses answers, and every event of the batch in ONE insert (the `event_fanout` trigger
 *     and its notification run once per batch); a write with no rows is skipped.
 *
 * A lone operation runs the same steps, so it needs as few statements as the procedural functions it
 * replaced (ledger_hold_one, ledger_settle_one), and a batch as few as one operation. The function keeps
 * generic plans (`plan_cache_mode = force_generic_plan`): planning its statements anew per call cost more
 * than running them (docs/performance.md, rounds 7 and 9).
 */

/** pico-USDC x ppm per raw unit: the scale of `fixed` / `per_token` (see money.chatCost). */
const SCALE = '1000000000000';
/** The platform's fees and the built-in provider's cost accounts (src/modules/accounts/accounts.ts). */
const FEES_ACCOUNT_ID = '00000000-0000-4000-8000-000000000001';
const PROVIDER_ACCOUNT_ID = '00000000-0000-4000-8000-000000000002';

const EVENT_COLUMNS = `paywall_id uuid, owner_user_id uuid, type text, version text, trigger jsonb,
  subject jsonb, data jsonb, metadata jsonb, ord int, d boolean, s boolean`;

const PERIOD_START = `
create or replace function ledger_period_start(period text, at timestamptz) returns date
language sql immutable parallel safe as $fn$
  select case period when 'day' then (at at time zone 'UTC')::date
                     when 'week' then date_trunc('week', at at time zone 'UTC')::date
                     when 'month' then date_trunc('month', at at time zone 'UTC')::date
                     else date '1970-01-01' end
$fn$;`;

// The rows ledger_tick reads its holds and settled charges into (created when missing: a later version that
// changes one creates a new type).
const TYPES = `
do $do$ begin
  if to_regtype('ledger_hold_in') is null then
    create type ledger_hold_in as (i int, user_id uuid, account_id uuid, wallet_id uuid, allow_id uuid,
      paywall_id uuid, shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
      day date, req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz,
      max_debt bigint, at timestamptz, key_id uuid);
  end if;
  if to_regtype('ledger_settled') is null then
    create type ledger_settled as (i int, user_id uuid, account_id uuid, hold bigint, usage_day date, allow_id uuid,
      allow_start date, key_id uuid, key_start date, captured bigint, uncollected bigint, earnings bigint, fee bigint,
      provider bigint, earn_id uuid);
  end if;
  if to_regtype('ledger_placed') is null then
    create type ledger_placed as (n int, user_id uuid, account_id uuid, hold bigint, cap bigint, extra jsonb,
      wallet_id uuid);
  end if;
end $do$;`;

// The one-row forms of steps 1 and 2, used by a lone operation and by a batch of one hold or one settlement.
const SETTLE_ONE_CHARGE = `    update charge ch
       set status = it.status, amount_raw = it.captured, uncollected_raw = it.uncollected,
           prompt_tokens = it.prompt_tokens, completion_tokens = it.completion_tokens,
           error_code = it.error_code, settled_at = now(), metadata = (ch.metadata - 'progress') || it.metadata
      from jsonb_to_record(settlements->0) as it(i int, charge_id uuid, paywall_id uuid, status text,
             captured bigint, earnings bigint, fee bigint, provider bigint, uncollected bigint,
             prompt_tokens int, completion_tokens int, error_code text, metadata jsonb, expect text)
     where ch.id = it.charge_id and ch.status = it.expect
    returning it.i, ch.user_id, ch.account_id, ch.hold_raw, (ch.metadata->>'usageDay')::date,
              (ch.metadata->'allowance'->>'id')::uuid, (ch.metadata->'allowance'->>'start')::date,
              ch.user_key_id, (ch.metadata->>'keyLimitStart')::date,
              it.captured, it.uncollected, it.earnings, it.fee, it.provider,
              (select a.id from ledger_account a
                where it.earnings > 0 and a.kind = 'earnings' and a.paywall_id = it.paywall_id)
         into sr;`;
const HOLD_ONE_RESOLVE = `    select h.i, e.id, e.account_id, e.wallet_user_id, null::uuid, h.paywall_id, h.shared, h.fixed, h.per_token, h.max_cap,
           h.min_cap, h.model, h.day, h.req_limit, h.spend_limit, h.model_limit, h.rate_limit, h.rate_window,
           h.max_debt, h.at, h.key_id
      into hr
      from jsonb_to_record(holds->0) as h(i int, paywall_id uuid, external_id text, shared boolean,
             fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text, day date,
             req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz,
             max_debt bigint, at timestamptz, key_id uuid)
           left join end_user e on e.paywall_id = h.paywall_id and e.external_id = h.external_id;`;
// Statements of the write step used by a lone operation and by a batch alike (each written once).
const SETTLE_ONE_ACCOUNTS = `    with u as (
      update ledger_account a
         set balance_raw = a.balance_raw + v.dbal, held_raw = a.held_raw + v.dheld, debt_raw = a.debt_raw + v.ddebt
        from (select * from (values (sr.account_id, -sr.captured, -sr.hold, sr.uncollected),
                                    (sr.earn_id, sr.earnings, 0::bigint, 0::bigint),
                                    ('${FEES_ACCOUNT_ID}'::uuid, sr.fee, 0::bigint, 0::bigint),
                                    ('${PROVIDER_ACCOUNT_ID}'::uuid, sr.provider, 0::bigint, 0::bigint))
                             as v(id, dbal, dheld, ddebt)
               where v.id = sr.account_id or (v.id is not null and v.dbal > 0) order by v.id) v
       where a.id = v.id
      returning a.id, a.balance_raw, a.held_raw, a.low_alert_raw, a.low_alerted, a.low_alerted_paywalls)
    select array[u.id], array[u.balance_raw], array[u.held_raw], array[u.low_alert_raw], array[u.low_alerted],
           array[to_jsonb(u.low_alerted_paywalls)]
      into r_id, r_bal, r_held, r_low_alert, r_low_alerted, r_low_paywalls
      from u where u.id = sr.account_id;`;
const HOLD_ONE_COUNTER = `      update usage_counter set day = c_day[1], requests = c_req[1], spend_raw = c_spend[1], model_requests = c_models[1]
       where end_user_id = c_id[1];`;
const HOLD_ALLOWANCES = `    if cardinality(w_id) > 0 then
      update wallet_connection w set allowance_period_start = v.start, allowance_spent_raw = v.spent
        from unnest(w_id, w_start, w_spent) as v(id, start, spent)
       where w.id = v.id and (w.allowance_period_start, w.allowance_spent_raw) is distinct from (v.start, v.spent);
    end if;`;
const HOLD_KEYS = `    if cardinality(k_id) > 0 then
      update user_key k set limit_period_start = v.start, limit_spent_raw = v.spent
        from unnest(k_id, k_start, k_spent) as v(id, start, spent)
       where k.id = v.id and (k.limit_period_start, k.limit_spent_raw) is distinct from (v.start, v.spent);
    end if;`;
const SETTLE_ONE_GIVE_BACK = `    if sr.captured <> sr.hold then
      update usage_counter set spend_raw = greatest(0, spend_raw + (sr.captured - sr.hold))
       where end_user_id = sr.user_id and day = sr.usage_day;
      if sr.allow_id is not null then
        update wallet_connection set allowance_spent_raw = greatest(0, allowance_spent_raw + (sr.captured - sr.hold))
         where id = sr.allow_id and allowance_raw is not null and allowance_period_start = sr.allow_start;
      end if;
      if sr.key_start is not null then
        update user_key set limit_spent_raw = greatest(0, limit_spent_raw + (sr.captured - sr.hold))
         where id = sr.key_id and limit_raw is not null and limit_period_start = sr.key_start;
      end if;
    end if;`;
const HOLD_ONE_CHARGE = `    insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, max_completion_tokens,
                        stream, metadata, created_at, user_key_id)
    select it.charge_id, it.paywall_id, (p[1]).user_id, (p[1]).account_id, 'usage', 'held', (p[1]).hold, it.model,
           (p[1]).cap, it.stream, it.metadata || (p[1]).extra, now(), it.key_id
      from jsonb_to_record(holds->(p[1]).n) as it(charge_id uuid, paywall_id uuid, model text, stream boolean,
                                                  metadata jsonb, key_id uuid);`;
const SETTLE_ONE_TRANSFERS = `    insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw, paywall_id,
                          end_user_id, charge_id, metadata, created_at)
    select case when v.n = 1 then (settlements->sr.i->>'ledger_id')::uuid else gen_random_uuid() end, v.kind,
           sr.account_id, v.account, v.amount, r_bal[array_position(r_id, sr.account_id)],
           (settlements->sr.i->>'paywall_id')::uuid, sr.user_id, (settlements->sr.i->>'charge_id')::uuid,
           settlements->sr.i->'metadata', now()
      from (values (1, 'usage', sr.earn_id, sr.earnings),
                   (2, 'fee', '${FEES_ACCOUNT_ID}'::uuid, sr.fee),
                   (3, 'provider_cost', '${PROVIDER_ACCOUNT_ID}'::uuid, sr.provider)) as v(n, kind, account, amount)
     where v.amount > 0
     order by v.n;`;
const RELAYED = `  if ns > 0 and jsonb_path_exists(settlements, '$[*] ? (@.relayed_id != null)') then
    -- Responses API: the context size of a relayed answer, remembered whatever became of the charge (one
    -- row per id: the last settlement of it wins).
    insert into relayed_response (paywall_id, id, tokens)
    select distinct on (x.paywall_id, x.relayed_id) x.paywall_id, x.relayed_id, x.relayed_tokens
      from jsonb_to_recordset(settlements) as x(i int, paywall_id uuid, relayed_id text, relayed_tokens bigint)
     where x.relayed_id is not null
     order by x.paywall_id, x.relayed_id, x.i desc
    on conflict (paywall_id, id) do update set tokens = excluded.tokens;
  end if;`;
/** The events of one operation, straight from its item (`item`: an expression of the item). */
const oneOperationEvents = (
  item: string,
  wallet: string,
) => `    insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
    select gen_random_uuid(), coalesce(x.paywall_id, (${item}->>'paywall_id')::uuid),
           coalesce(x.owner_user_id, (${item}->>'ev_owner')::uuid), x.type, coalesce(x.version, ev_version),
           coalesce(x.trigger, ${item}->'ev_trigger'),
           case when x.s then x.subject || jsonb_build_object('id', ${item}->'charge_id') else x.subject end,
           case when x.d then jsonb_build_object('paywallId', coalesce(x.paywall_id, (${item}->>'paywall_id')::uuid),
                                                 'ownerUserId', coalesce(x.owner_user_id, (${item}->>'ev_owner')::uuid)) || x.data
                else x.data end
           || ${wallet},
           coalesce(x.metadata, '{}'::jsonb)
      from jsonb_to_recordset(${item}->'events') as x(${EVENT_COLUMNS})
     order by x.ord;`;

const TICK = `
create or replace function ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns jsonb
language plpgsql set plan_cache_mode = force_generic_plan as $fn$
declare
  nh int := coalesce(jsonb_array_length(holds), 0);
  ns int := coalesce(jsonb_array_length(settlements), 0);
  -- 1. The settled charges (one entry per charge settled; sr: the one when there is one).
  ss ledger_settled[] := '{}'; sr ledger_settled;
  s_user uuid[]; s_acct uuid[]; s_allow uuid[]; s_key uuid[]; s_fees boolean; s_provider boolean;
  legs boolean;
  -- 2. The holds (one entry per hold item).
  hs ledger_hold_in[] := '{}'; hr ledger_hold_in;
  h_user uuid[]; h_acct uuid[]; h_allow uuid[]; h_key uuid[]; h_shared boolean;
  -- 3. What is locked, as read (and as the holds change it).
  a_id uuid[]; a_bal bigint[]; a_held bigint[]; a_debt bigint[]; a_dheld bigint[];
  c_id uuid[]; c_day date[]; c_req int[]; c_spend bigint[]; c_models jsonb[];
  w_id uuid[]; w_raw bigint[]; w_period text[]; w_start date[]; w_spent bigint[];
  k_id uuid[]; k_raw bigint[]; k_period text[]; k_start date[]; k_spent bigint[];
  ids uuid[];
  -- The accounts as written (their free balance and low-balance alert state after the batch).
  r_id uuid[]; r_bal bigint[]; r_held bigint[]; r_low_alert bigint[]; r_low_alerted boolean[];
  r_low_paywalls jsonb[];
  -- 4. One hold's decision.
  ai int; ci int; wi int; ki int; v_connected boolean;
  acct_free bigint; acct_debt bigint;
  day_models jsonb; used_requests int; used_spend bigint; used_model int;
  allow_start date; allow_spent bigint; key_start date; key_spent bigint;
  v_free bigint; v_over text; rate_position bigint;
  v_cap bigint; affords_min boolean; v_hold bigint; v_hit boolean; k_hit boolean; v_limit text;
  v_indebted boolean; v_ok boolean;
  -- 5. The holds placed, in order (what their charges and events are written from).
  p ledger_placed[] := '{}';
  -- The answers: one per hold that found its end user, one per settlement that settled.
  answers jsonb[];
  item jsonb;
begin
  if nh = 1 and ns = 0 then
    -- A lone hold: its end user, (SHARED) its allowance, and its rows, each class at most one row read by a
    -- plain statement (the one-row forms of steps 2 and 3 below).
${HOLD_ONE_RESOLVE}
    hs := array[hr];
    if hr.shared then
      select array[w.id] into h_allow from wallet_connection w
       where w.end_user_id = hr.user_id and w.revoked_at is null and w.allowance_raw is not null limit 1;
    end if;
    select array[a.id], array[a.balance_raw], array[a.held_raw], array[a.debt_raw]
      into a_id, a_bal, a_held, a_debt
      from ledger_account a where a.id = hr.account_id for no key update;
    select array[c.end_user_id], array[c.day], array[c.requests], array[c.spend_raw], array[c.model_requests]
      into c_id, c_day, c_req, c_spend, c_models
      from usage_counter c where c.end_user_id = hr.user_id for no key update;
    if h_allow[1] is not null then
      select array[w.id], array[w.allowance_raw], array[w.allowance_period], array[w.allowance_period_start],
             array[w.allowance_spent_raw]
        into w_id, w_raw, w_period, w_start, w_spent
        from wallet_connection w where w.id = h_allow[1] and w.allowance_raw is not null for no key update;
    end if;
    if hr.key_id is not null then
      select array[k.id], array[k.limit_raw], array[k.limit_period], array[k.limit_period_start],
             array[k.limit_spent_raw]
        into k_id, k_raw, k_period, k_start, k_spent
        from user_key k where k.id = hr.key_id and k.limit_raw is not null for no key update;
    end if;
    a_dheld := array[0::bigint];
  elsif nh = 0 and ns = 1 then
    -- A lone settlement: its charge (step 1's one-row form; a settlement reads nothing more).
${SETTLE_ONE_CHARGE}
    if found then
      ss := array[sr];
      legs := sr.earnings > 0 or sr.fee > 0 or sr.provider > 0;
    end if;
  else
    -- 1. Settle the charges still held (only a held charge is settled: a sweeper and a late finisher
    -- cannot both settle it).
    if ns = 1 then
      -- (One settlement: the same, without the aggregate of several.)
  ${SETTLE_ONE_CHARGE}
      if found then
        ss := array[sr];
        legs := sr.earnings > 0 or sr.fee > 0 or sr.provider > 0;
        if nh > 0 then
          s_user := array[sr.user_id];
          s_acct := array[sr.account_id];
          s_allow := array[sr.allow_id];
          s_key := case when sr.key_start is not null then array[sr.key_id] else '{}' end;
          s_fees := sr.fee > 0;
          s_provider := sr.provider > 0;
        end if;
      end if;
    elsif ns > 1 then
      with c as (
        update charge ch
           set status = it.status, amount_raw = it.captured, uncollected_raw = it.uncollected,
               prompt_tokens = it.prompt_tokens, completion_tokens = it.completion_tokens,
               error_code = it.error_code, settled_at = now(), metadata = (ch.metadata - 'progress') || it.metadata
          from jsonb_to_recordset(settlements) as it(i int, charge_id uuid, paywall_id uuid, status text,
                 captured bigint, earnings bigint, fee bigint, provider bigint, uncollected bigint,
                 prompt_tokens int, completion_tokens int, error_code text, metadata jsonb, expect text)
         where ch.id = it.charge_id and ch.status = it.expect
        returning it.i, ch.user_id, ch.account_id, ch.hold_raw, (ch.metadata->>'usageDay')::date as usage_day,
                  (ch.metadata->'allowance'->>'id')::uuid as allow_id,
                  (ch.metadata->'allowance'->>'start')::date as allow_start,
                  ch.user_key_id, (ch.metadata->>'keyLimitStart')::date as key_start,
                  it.captured, it.uncollected, it.earnings, it.fee, it.provider, it.paywall_id)
      select array_agg(row(c.i, c.user_id, c.account_id, c.hold_raw, c.usage_day, c.allow_id, c.allow_start,
                           c.user_key_id, c.key_start, c.captured, c.uncollected, c.earnings, c.fee, c.provider,
                           (select a.id from ledger_account a
                             where c.earnings > 0 and a.kind = 'earnings' and a.paywall_id = c.paywall_id))::ledger_settled),
             array_agg(c.user_id), array_agg(c.account_id), array_agg(c.allow_id),
             array_agg(c.user_key_id) filter (where c.key_start is not null), bool_or(c.fee > 0), bool_or(c.provider > 0),
             bool_or(c.earnings > 0 or c.fee > 0 or c.provider > 0)
        into ss, s_user, s_acct, s_allow, s_key, s_fees, s_provider, legs
        from (select * from c order by c.i) c;
      ss := coalesce(ss, '{}');
      if cardinality(ss) = 1 then
        sr := ss[1];
      end if;
    end if;

    -- 2. The holds' end users, their accounts and (SHARED) the connection's allowance (docs/reference.md §16).
    if nh = 1 then
      -- (One hold: the same, without the aggregate of several.)
  ${HOLD_ONE_RESOLVE}
      hs := array[hr];
      h_shared := hr.shared;
      if ns > 0 then
        h_user := array[hr.user_id];
        h_acct := array[hr.account_id];
        h_key := array[hr.key_id];
      end if;
    elsif nh > 1 then
      select array_agg(row(h.i, e.id, e.account_id, e.wallet_user_id, null::uuid, h.paywall_id, h.shared, h.fixed,
                           h.per_token, h.max_cap, h.min_cap, h.model, h.day, h.req_limit, h.spend_limit,
                           h.model_limit, h.rate_limit, h.rate_window, h.max_debt, h.at, h.key_id)::ledger_hold_in),
             array_agg(e.id), array_agg(e.account_id), array_agg(h.key_id), bool_or(h.shared)
        into hs, h_user, h_acct, h_key, h_shared
        from jsonb_to_recordset(holds) as h(i int, paywall_id uuid, external_id text, shared boolean,
               fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text, day date,
               req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz,
               max_debt bigint, at timestamptz, key_id uuid)
             left join lateral (
               select e.id, e.account_id, e.wallet_user_id from end_user e
                where e.paywall_id = h.paywall_id and e.external_id = h.external_id offset 0) e on true;
    end if;
    if h_shared then
      -- SHARED: the connection's allowance, per hold (null: none).
        select array_agg((select w.id from wallet_connection w
                           where u.shared and w.end_user_id = u.user_id and w.revoked_at is null
                             and w.allowance_raw is not null limit 1) order by u.ordinality)
        into h_allow
        from unnest(hs) with ordinality as u;
    end if;

    -- 3. Lock and read, class by class, in id order (holds only: a settlement decides nothing on what it
    -- reads, and its writes below take their locks in the same order). A class with no rows is skipped.
    if nh > 0 then
      ids := h_acct || s_acct;
      for m in 1 .. cardinality(ss) loop
        ids := ids || (ss[m]).earn_id;
      end loop;
      ids := array_remove(ids || case when s_fees then '{${FEES_ACCOUNT_ID}}'::uuid[] else '{}' end
                              || case when s_provider then '{${PROVIDER_ACCOUNT_ID}}'::uuid[] else '{}' end, null);
      select array_agg(a.id), array_agg(a.balance_raw), array_agg(a.held_raw), array_agg(a.debt_raw)
        into a_id, a_bal, a_held, a_debt
        from (select distinct k.id from unnest(ids) as k(id) order by k.id) k
             cross join lateral (
               select a.id, a.balance_raw, a.held_raw, a.debt_raw
                 from ledger_account a where a.id = k.id for no key update) a;
      ids := array_remove(h_user || s_user, null);
      select array_agg(c.end_user_id), array_agg(c.day), array_agg(c.requests), array_agg(c.spend_raw),
             array_agg(c.model_requests)
        into c_id, c_day, c_req, c_spend, c_models
        from (select distinct k.id from unnest(ids) as k(id) order by k.id) k
             cross join lateral (
               select c.end_user_id, c.day, c.requests, c.spend_raw, c.model_requests
                 from usage_counter c where c.end_user_id = k.id for no key update) c;
      ids := array_remove(h_allow || s_allow, null);
      if cardinality(ids) > 0 then
        select array_agg(w.id), array_agg(w.allowance_raw), array_agg(w.allowance_period),
               array_agg(w.allowance_period_start), array_agg(w.allowance_spent_raw)
          into w_id, w_raw, w_period, w_start, w_spent
          from (select distinct k.id from unnest(ids) as k(id) order by k.id) k
               cross join lateral (
                 select w.id, w.allowance_raw, w.allowance_period, w.allowance_period_start, w.allowance_spent_raw
                   from wallet_connection w where w.id = k.id and w.allowance_raw is not null for no key update) w;
      end if;
      -- End-user keys' limits (docs/reference.md §19): the holds' keys, and the settlements' that counted.
      ids := array_remove(h_key || s_key, null);
      if cardinality(ids) > 0 then
        select array_agg(k.id), array_agg(k.limit_raw), array_agg(k.limit_period), array_agg(k.limit_period_start),
               array_agg(k.limit_spent_raw)
          into k_id, k_raw, k_period, k_start, k_spent
          from (select distinct x.id from unnest(ids) as x(id) order by x.id) x
               cross join lateral (
                 select k.id, k.limit_raw, k.limit_period, k.limit_period_start, k.limit_spent_raw
                   from user_key k where k.id = x.id and k.limit_raw is not null for no key update) k;
      end if;
      a_dheld := array_fill(0::bigint, array[coalesce(cardinality(a_id), 0)]);
    end if;
  end if;

  -- 4. Each hold in turn, against the rows as the holds before it left them (a row not read: null
  -- positions, null values).
  for h in 1 .. nh loop
    hr := hs[h];
    continue when hr.user_id is null;
    v_connected := not hr.shared or (hr.wallet_id is not null and hr.account_id is not null);
    ai := case when v_connected then array_position(a_id, hr.account_id) end;
    ci := array_position(c_id, hr.user_id);
    if h > 1 then
      -- (What the hold before left; a lone hold starts with nothing.)
      wi := null; ki := null; allow_start := null; allow_spent := null; key_start := null; key_spent := null;
      rate_position := null;
    end if;
    acct_free := coalesce(a_bal[ai] - a_held[ai] - a_dheld[ai], 0);
    acct_debt := coalesce(a_debt[ai], 0);
    if c_day[ci] = hr.day then
      day_models := c_models[ci];
      used_requests := c_req[ci];
      used_spend := c_spend[ci];
      used_model := coalesce((c_models[ci]->>hr.model)::int, 0);
    else
      day_models := '{}'; used_requests := 0; used_spend := 0; used_model := 0;
    end if;
    -- The allowance's and the key's period as of this request (never before the stored one: clocks differ).
    if h_allow[h] is not null then
      wi := array_position(w_id, h_allow[h]);
      allow_start := case when wi is not null then greatest(w_start[wi], ledger_period_start(w_period[wi], hr.at)) end;
      allow_spent := case when wi is null then null when w_start[wi] = allow_start then w_spent[wi] else 0 end;
    end if;
    if hr.key_id is not null then
      ki := array_position(k_id, hr.key_id);
      key_start := case when ki is not null then greatest(k_start[ki], ledger_period_start(k_period[ki], hr.at)) end;
      key_spent := case when ki is null then null when k_start[ki] = key_start then k_spent[ki] else 0 end;
    end if;

    v_free := least(acct_free, coalesce(hr.spend_limit - used_spend, acct_free),
                    coalesce(w_raw[wi] - allow_spent, acct_free), coalesce(k_raw[ki] - key_spent, acct_free));
    v_over := case when hr.req_limit is not null and used_requests >= hr.req_limit then 'dailyRequestLimit'
                   when hr.model_limit is not null and used_model >= hr.model_limit then 'modelDailyRequestLimit'
                   when hr.spend_limit is not null and used_spend >= hr.spend_limit then 'dailySpendLimit' end;

    -- The API rate limit: the minute's count of the paywall (every hold counts, placed or not).
    if hr.rate_limit is not null then
      insert into rate_window as rw (paywall_id, window_start, count) values (hr.paywall_id, hr.rate_window, 1)
      on conflict (paywall_id) do update
         set count = case when rw.window_start = excluded.window_start then rw.count + excluded.count
                          else excluded.count end,
             window_start = greatest(rw.window_start, excluded.window_start)
      returning rw.count into rate_position;
    end if;

    v_cap := case when hr.per_token = 0
                  then case when hr.fixed <= v_free::numeric * ${SCALE} then hr.max_cap else -1 end
                  else greatest(-1, least(hr.max_cap::numeric,
                                          floor((v_free::numeric * ${SCALE} - hr.fixed) / hr.per_token)))::bigint end;
    affords_min := hr.fixed + hr.min_cap * hr.per_token <= v_free::numeric * ${SCALE};
    v_hold := ceil((hr.fixed + v_cap * hr.per_token) / ${SCALE})::bigint;
    -- The allowance's rest is the bound that refused it (not the balance, not a daily spend limit).
    v_hit := coalesce(not affords_min and v_over is null and wi is not null and w_raw[wi] - allow_spent <= acct_free
                      and (hr.spend_limit is null or w_raw[wi] - allow_spent <= hr.spend_limit - used_spend),
                      false);
    -- The key's rest is the bound that refused it (not the balance, a daily spend limit, an allowance).
    k_hit := coalesce(not affords_min and v_over is null and ki is not null and k_raw[ki] - key_spent <= acct_free
                      and (hr.spend_limit is null or k_raw[ki] - key_spent <= hr.spend_limit - used_spend)
                      and (wi is null or k_raw[ki] - key_spent <= w_raw[wi] - allow_spent), false);
    -- A spend limit that leaves less than the smallest request is a limit, not a short balance.
    v_limit := coalesce(v_over, case when not affords_min and not v_hit and not k_hit
                                      and hr.spend_limit is not null and hr.spend_limit - used_spend < acct_free
                                     then 'dailySpendLimit' end);
    v_indebted := acct_debt > hr.max_debt;
    v_ok := coalesce(v_connected and not coalesce(rate_position > hr.rate_limit, false) and v_limit is null
                     and affords_min and v_hold <= v_free and not v_indebted, false);

    if v_ok then
      if ci is not null then
        c_day[ci] := hr.day;
        c_req[ci] := used_requests + 1;
        c_spend[ci] := greatest(0, used_spend + v_hold);
        c_models[ci] := day_models || jsonb_build_object(hr.model, used_model + 1);
      end if;
      if wi is not null then
        w_start[wi] := allow_start;
        w_spent[wi] := greatest(0, allow_spent + v_hold);
      end if;
      if ki is not null then
        k_start[ki] := key_start;
        k_spent[ki] := greatest(0, key_spent + v_hold);
      end if;
      if ai is not null then
        a_dheld[ai] := a_dheld[ai] + v_hold;
      end if;
      p := array_append(p, row(hr.i, hr.user_id, hr.account_id, v_hold, v_cap,
                               case when wi is null then '{}'::jsonb
                                    else jsonb_build_object('allowance', jsonb_build_object('id', h_allow[h], 'start', allow_start)) end
                               || case when ki is null then '{}'::jsonb else jsonb_build_object('keyLimitStart', key_start) end,
                               case when hr.shared then hr.wallet_id else hr.user_id end)::ledger_placed);
    end if;

    answers := array_append(answers, jsonb_build_object('kind', 'h', 'i', hr.i, 'id', hr.user_id,
      'wallet_id', case when hr.shared then hr.wallet_id else hr.user_id end, 'connected', v_connected,
      'free', v_free::text, 'cap', v_cap::text, 'hold', v_hold::text, 'held', v_ok, 'retry', false,
      'limit_hit', v_limit, 'rate_position', rate_position, 'indebted', v_indebted, 'account_id', hr.account_id,
      'debt', acct_debt::text, 'allowance_hit', v_hit, 'allow_id', case when wi is not null then h_allow[h] end,
      'allowance', w_raw[wi]::text, 'allow_period', w_period[wi],
      'allow_spent', allow_spent::text, 'allow_start', allow_start::text,
      'key_hit', k_hit, 'key_limit', k_raw[ki]::text, 'key_period', k_period[ki], 'key_spent', key_spent::text,
      'key_start', key_start::text));
  end loop;

  -- 5. Write: each changed row once (a lone operation by one-row forms of the batch's statements, and only
  -- when it took effect).
  if nh = 1 and ns = 0 then
    -- (A lone hold, when placed: its rows by one-row statements.)
    if cardinality(p) = 1 then
      update ledger_account set held_raw = held_raw + a_dheld[1] where id = a_id[1] and a_dheld[1] <> 0;
      if cardinality(c_id) = 1 then
  ${HOLD_ONE_COUNTER}
      end if;
  ${HOLD_ALLOWANCES}
  ${HOLD_KEYS}
  ${HOLD_ONE_CHARGE}
  ${oneOperationEvents('holds->0', "jsonb_build_object('walletUserId', (p[1]).wallet_id)")}
    end if;
  elsif nh = 0 and ns = 1 then
    -- (A lone settlement, when it settled: its rows by one-row statements.)
    if cardinality(ss) = 1 then
  ${SETTLE_ONE_ACCOUNTS}
  ${SETTLE_ONE_GIVE_BACK}
      if legs then
  ${SETTLE_ONE_TRANSFERS}
      end if;
  ${oneOperationEvents('settlements->0', "'{}'::jsonb")}
    end if;
  ${RELAYED}
  else
    -- A batch. The accounts: the holds' hold, and each settlement's captured amount leaving the spending
    -- account (its hold released, what it could not collect its debt, repaid first: see collectDebt) to the
    -- earnings, fee and provider accounts; each account once, in id order.
    if nh = 0 and cardinality(ss) = 1 then
      -- (One settlement settled: its accounts from its one row.)
  ${SETTLE_ONE_ACCOUNTS}
    elsif cardinality(p) > 0 or cardinality(ss) > 0 then
      with u as (
        update ledger_account a
           set balance_raw = a.balance_raw + v.dbal, held_raw = a.held_raw + v.dheld, debt_raw = a.debt_raw + v.ddebt
          from (select x.id, sum(x.dbal)::bigint as dbal, sum(x.dheld)::bigint as dheld, sum(x.ddebt)::bigint as ddebt
                  from (select h.id, 0::bigint as dbal, h.dheld, 0::bigint as ddebt
                          from unnest(a_id, a_dheld) as h(id, dheld) where h.dheld <> 0
                        union all
                        select l.id, l.dbal, l.dheld, l.ddebt
                          from unnest(ss) as s
                               cross join lateral (values (s.account_id, -s.captured, -s.hold, s.uncollected),
                                                          (s.earn_id, s.earnings, 0::bigint, 0::bigint),
                                                          ('${FEES_ACCOUNT_ID}'::uuid, s.fee, 0::bigint, 0::bigint),
                                                          ('${PROVIDER_ACCOUNT_ID}'::uuid, s.provider, 0::bigint, 0::bigint))
                                 as l(id, dbal, dheld, ddebt)
                         where l.id = s.account_id or (l.id is not null and l.dbal > 0)) x
                 group by x.id order by x.id) v
         where a.id = v.id
        returning a.id, a.balance_raw, a.held_raw, a.low_alert_raw, a.low_alerted, a.low_alerted_paywalls)
      select array_agg(u.id), array_agg(u.balance_raw), array_agg(u.held_raw), array_agg(u.low_alert_raw),
             array_agg(u.low_alerted), array_agg(to_jsonb(u.low_alerted_paywalls))
        into r_id, r_bal, r_held, r_low_alert, r_low_alerted, r_low_paywalls
        from u;
    end if;
    -- The holds' counters, allowances and keys as the decisions left them.
    if cardinality(p) > 0 then
      if cardinality(c_id) = 1 then
  ${HOLD_ONE_COUNTER}
      elsif cardinality(c_id) > 1 then
        update usage_counter c set day = v.day, requests = v.req, spend_raw = v.spend, model_requests = v.models
          from unnest(c_id, c_day, c_req, c_spend, c_models) as v(id, day, req, spend, models)
         where c.end_user_id = v.id
           and (c.day, c.requests, c.spend_raw, c.model_requests) is distinct from (v.day, v.req, v.spend, v.models);
      end if;
  ${HOLD_ALLOWANCES}
  ${HOLD_KEYS}
    end if;
    -- What the settlements' holds counted beyond the captured amount goes back to the day, the allowance's
    -- period and the key's period it counted in (one of another day or period is left as it is).
    if cardinality(ss) = 1 then
  ${SETTLE_ONE_GIVE_BACK}
    elsif cardinality(ss) > 1 then
      update usage_counter c set spend_raw = greatest(0, c.spend_raw + v.adj)
        from (select s.user_id, s.usage_day, sum(s.captured - s.hold)::bigint as adj from unnest(ss) as s
               where s.captured <> s.hold group by s.user_id, s.usage_day order by s.user_id) v
       where c.end_user_id = v.user_id and c.day = v.usage_day;
      if cardinality(array_remove(s_allow, null)) > 0 then
        update wallet_connection w set allowance_spent_raw = greatest(0, w.allowance_spent_raw + v.adj)
          from (select s.allow_id, s.allow_start, sum(s.captured - s.hold)::bigint as adj from unnest(ss) as s
                 where s.allow_id is not null and s.captured <> s.hold
                 group by s.allow_id, s.allow_start order by s.allow_id) v
         where w.id = v.allow_id and w.allowance_raw is not null and w.allowance_period_start = v.allow_start;
      end if;
      if cardinality(s_key) > 0 then
        update user_key k set limit_spent_raw = greatest(0, k.limit_spent_raw + v.adj)
          from (select s.key_id, s.key_start, sum(s.captured - s.hold)::bigint as adj from unnest(ss) as s
                 where s.key_start is not null and s.captured <> s.hold
                 group by s.key_id, s.key_start order by s.key_id) v
         where k.id = v.key_id and k.limit_raw is not null and k.limit_period_start = v.key_start;
      end if;
    end if;
    if cardinality(p) = 1 then
  ${HOLD_ONE_CHARGE}
    elsif cardinality(p) > 1 then
      insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, max_completion_tokens,
                          stream, metadata, created_at, user_key_id)
      select it.charge_id, it.paywall_id, q.user_id, q.account_id, 'usage', 'held', q.hold, it.model, q.cap, it.stream,
             it.metadata || q.extra, now(), it.key_id
        from unnest(p) as q
             cross join lateral jsonb_to_record(holds->q.n) as it(charge_id uuid, paywall_id uuid, model text,
                                                                 stream boolean, metadata jsonb, key_id uuid)
       order by q.n;
    end if;
    if legs and cardinality(ss) = 1 then
  ${SETTLE_ONE_TRANSFERS}
    elsif legs then
      -- Each transfer records the spending account's balance after the batch.
      insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw, paywall_id,
                            end_user_id, charge_id, metadata, created_at)
      select case when v.n = 1 then it.ledger_id else gen_random_uuid() end, v.kind, s.account_id, v.account, v.amount,
             r_bal[array_position(r_id, s.account_id)], it.paywall_id, s.user_id, it.charge_id, it.metadata, now()
        from unnest(ss) as s
             cross join lateral jsonb_to_record(settlements->s.i) as it(charge_id uuid, paywall_id uuid,
                                                                       ledger_id uuid, metadata jsonb)
             cross join lateral (values (1, 'usage', s.earn_id, s.earnings),
                                        (2, 'fee', '${FEES_ACCOUNT_ID}'::uuid, s.fee),
                                        (3, 'provider_cost', '${PROVIDER_ACCOUNT_ID}'::uuid, s.provider))
               as v(n, kind, account, amount)
       where v.amount > 0
       order by s.i, v.n;
    end if;
  ${RELAYED}
    -- Every event of the batch in one insert, in the order of the operations (the holds placed, then the
    -- settlements).
    if coalesce(cardinality(p), 0) + cardinality(ss) = 1 then
      -- (One operation: its events straight from its item.)
      item := case when cardinality(p) = 1 then holds->(p[1]).n else settlements->sr.i end;
  ${oneOperationEvents('item', "case when cardinality(p) = 1 then jsonb_build_object('walletUserId', (p[1]).wallet_id) else '{}'::jsonb end")}
    elsif coalesce(cardinality(p), 0) + cardinality(ss) > 1 then
      insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
      select gen_random_uuid(), coalesce(x.paywall_id, it.paywall_id),
             coalesce(x.owner_user_id, it.ev_owner), x.type, coalesce(x.version, ev_version),
             coalesce(x.trigger, it.ev_trigger),
             case when x.s then x.subject || jsonb_build_object('id', it.charge_id) else x.subject end,
             case when x.d then jsonb_build_object('paywallId', coalesce(x.paywall_id, it.paywall_id),
                                                   'ownerUserId', coalesce(x.owner_user_id, it.ev_owner)) || x.data
                  else x.data end
             || case when d.h then jsonb_build_object('walletUserId', d.wallet) else '{}'::jsonb end,
             coalesce(x.metadata, '{}'::jsonb)
        from (select true as h, q.n, q.wallet_id as wallet from unnest(p) as q
              union all
              select false, s.i, null::uuid from unnest(ss) as s) d
             cross join lateral jsonb_to_record(case when d.h then holds->d.n else settlements->d.n end)
               as it(paywall_id uuid, ev_owner uuid, ev_trigger jsonb, charge_id uuid, events jsonb)
             cross join lateral jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
       order by d.h desc, d.n, x.ord;
    end if;
  end if;

  -- The settlements' answers: the spending account's free balance after the batch, its alert state.
  for m in 1 .. cardinality(ss) loop
    ai := array_position(r_id, (ss[m]).account_id);
    answers := array_append(answers, jsonb_build_object('kind', 's', 'i', (ss[m]).i, 'free', (r_bal[ai] - r_held[ai])::text,
      'low_alert', r_low_alert[ai]::text, 'low_alerted', r_low_alerted[ai],
      'low_alerted_paywalls', r_low_paywalls[ai]));
  end loop;
  return coalesce(to_jsonb(answers), '[]');
end
$fn$;`;

/** The statements migration 20261201110000 runs, in order. */
export const LEDGER_FUNCTIONS_V3: string[] = [PERIOD_START, TYPES, TICK];
