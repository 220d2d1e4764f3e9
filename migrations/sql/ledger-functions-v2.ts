/**
 * The ledger's hold and settlement rules, version 2: the ONE implementation of them, in the database.
 *
 * VERSIONED AND FROZEN. This file is the SQL text that migration `Migration20261201100000_ledger_functions`
 * applies (`create or replace function`). Once that migration has run anywhere, the SQL it produces must
 * never change: migrations/frozen.sha256 guards this file like the migrations. A change to the rules is a
 * NEW file (`ledger-functions-v3.ts`, starting as a copy of this one) and a NEW migration that applies it;
 * the service calls `ledger_tick` by name and needs no change unless its signature does (docs/ledger.md,
 * "Where the rules live"). Nothing here may import from src/: the text must not change when the service's
 * code does. (Version 1, a set-based `ledger_tick`, was reverted before it was kept: docs/performance.md,
 * round 8.)
 *
 * Functions:
 *
 * - `ledger_period_start(period text, at timestamptz) returns date`: the first day (UTC) of the allowance
 *   or key-limit period (`day`, `week` from Monday, calendar `month`, `total`) holding the instant `at`.
 *   Every SQL path that counts a period calls it (an inlinable SQL function: no call overhead).
 * - `ledger_hold_item(x jsonb) returns jsonb`: the hold rules for one hold (the item `holds.ts` encodes,
 *   `holdItem`): finds the end user, locks the spending account, the usage counter, the allowance and the
 *   key's limit, decides the completion cap against the free balance and every limit, and places the hold
 *   (charge row, counters). Null when the end user does not exist. It writes no event (ledger_tick does).
 * - `ledger_settle_item(x jsonb) returns jsonb`: the settlement rules for one settlement (`settleItem`):
 *   settles the charge if it is still held (else null), moves the captured amount to the earnings, fee and
 *   provider accounts, releases the hold, records what it could not collect as debt, gives back to the
 *   day's counter, the allowance and the key what the hold counted beyond the captured amount, writes the
 *   transfers and remembers a relayed Responses answer. It writes no event (ledger_tick does).
 * - `ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns setof jsonb`: one batch (a group
 *   commit of many requests, or one request alone): each hold, then each settlement, through the item
 *   functions, in one statement and one commit; then every event of the operations that took effect in
 *   ONE insert (the `event_fanout` trigger, one notification per statement, fires once per batch). One
 *   row per hold that found its end user (`kind` 'h') and per settlement that settled (`kind` 's'), `i`
 *   its place in its array, amounts as text.
 *
 * Locks. An operation alone takes its locks in the order every ledger path uses: the charge (a
 * settlement), then accounts in id order, then usage counters, allowances and end-user keys. A batch of
 * more than one operation first locks everything its items will lock, class by class and in id order
 * (charges, accounts, counters, allowances, keys; a class with no rows is skipped), so two batches, or a
 * batch and a lone operation, can never deadlock; each item then finds its rows locked already.
 *
 * Items are decided one after the other: a later hold of the same account, end user, allowance or key
 * sees what the earlier ones held (no retry), and holds are decided before the batch's settlements (which
 * only free money), as a lone hold is.
 */

/** pico-USDC x ppm per raw unit: the scale of `fixed` / `per_token` (see money.chatCost). */
const SCALE = '1000000000000';
/** The platform's fees and the built-in provider's cost accounts (src/modules/accounts/accounts.ts). */
const FEES_ACCOUNT_ID = '00000000-0000-4000-8000-000000000001';
const PROVIDER_ACCOUNT_ID = '00000000-0000-4000-8000-000000000002';

const EVENT_COLUMNS = `paywall_id uuid, owner_user_id uuid, type text, version text, trigger jsonb,
  subject jsonb, data jsonb, metadata jsonb, ord int, d boolean, s boolean`;

const HOLD_COLUMNS = `i int, charge_id uuid, paywall_id uuid, external_id text,
    shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
    stream boolean, metadata jsonb, events jsonb, ev_owner uuid, ev_trigger jsonb, day date,
    req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz, max_debt bigint,
    at timestamptz, key_id uuid`;

const SETTLE_COLUMNS = `i int, charge_id uuid, paywall_id uuid, status text,
    captured bigint, earnings bigint, fee bigint, provider bigint, uncollected bigint, prompt_tokens int,
    completion_tokens int, error_code text, ledger_id uuid, metadata jsonb, events jsonb, ev_owner uuid,
    ev_trigger jsonb, expect text, relayed_id text, relayed_tokens bigint`;

const PERIOD_START = `
create or replace function ledger_period_start(period text, at timestamptz) returns date
language sql immutable parallel safe as $fn$
  select case period when 'day' then (at at time zone 'UTC')::date
                     when 'week' then date_trunc('week', at at time zone 'UTC')::date
                     when 'month' then date_trunc('month', at at time zone 'UTC')::date
                     else date '1970-01-01' end
$fn$;`;

const HOLD_ITEM = `
create or replace function ledger_hold_item(x jsonb) returns jsonb language plpgsql as $fn$
declare
  it record;
  u_id uuid; u_account uuid; u_wallet uuid; v_connected boolean; allow_key uuid;
  a_found boolean := false; a_balance bigint; a_held bigint; a_debt bigint;
  c_found boolean := false; c_day date; c_requests int; c_spend bigint; c_models jsonb;
  w_found boolean := false; w_id uuid; w_raw bigint; w_period text; w_start date; w_spent bigint;
  acct_free bigint := 0; acct_debt bigint := 0;
  day_models jsonb := '{}'::jsonb; used_requests int := 0; used_spend bigint := 0; used_model int := 0;
  allow_start date; allow_spent bigint;
  v_free bigint; v_over text; rate_position bigint; rate_over boolean := false; rate_count int;
  v_cap bigint; affords_min boolean; v_hold bigint; v_hit boolean; v_limit text; v_indebted boolean; v_ok boolean;
  k_found boolean := false; k_raw bigint; k_period text; k_start date; k_spent bigint;
  key_start date; key_spent bigint; k_hit boolean;
begin
  select * into it from jsonb_to_record(x) as r(${HOLD_COLUMNS});

  select e.id, e.account_id, e.wallet_user_id into u_id, u_account, u_wallet
    from end_user e where e.paywall_id = it.paywall_id and e.external_id = it.external_id;
  if not found then
    return null;
  end if;
  v_connected := not it.shared or (u_wallet is not null and u_account is not null);
  if it.shared then
    -- SHARED: the connection's allowance (docs/reference.md §16).
    select w.id into allow_key from wallet_connection w
     where w.end_user_id = u_id and w.revoked_at is null and w.allowance_raw is not null limit 1;
  end if;

  -- Locks: the spending account, the usage counter, the allowance, the key's limit.
  if v_connected and u_account is not null then
    select a.balance_raw, a.held_raw, a.debt_raw into a_balance, a_held, a_debt
      from ledger_account a where a.id = u_account for no key update;
    a_found := found;
  end if;
  select c.day, c.requests, c.spend_raw, c.model_requests into c_day, c_requests, c_spend, c_models
    from usage_counter c where c.end_user_id = u_id for no key update;
  c_found := found;
  if allow_key is not null then
    select w.id, w.allowance_raw, w.allowance_period, w.allowance_period_start, w.allowance_spent_raw
      into w_id, w_raw, w_period, w_start, w_spent
      from wallet_connection w where w.id = allow_key and w.allowance_raw is not null for no key update;
    w_found := found;
  end if;
  -- The end-user key's limit (docs/reference.md §19), locked after the allowance.
  if it.key_id is not null then
    select k.limit_raw, k.limit_period, k.limit_period_start, k.limit_spent_raw into k_raw, k_period, k_start, k_spent
      from user_key k where k.id = it.key_id and k.limit_raw is not null for no key update;
    k_found := found;
  end if;

  if a_found then
    acct_free := a_balance - a_held;
    acct_debt := a_debt;
  end if;
  if c_found and c_day = it.day then
    day_models := c_models;
    used_requests := c_requests;
    used_spend := c_spend;
    used_model := coalesce((c_models->>it.model)::int, 0);
  end if;
  if w_found then
    -- The allowance's period as of this request (never before the stored one: clocks differ).
    allow_start := greatest(w_start, ledger_period_start(w_period, it.at));
    allow_spent := case when w_start = allow_start then w_spent else 0 end;
  end if;
  if k_found then
    key_start := greatest(k_start, ledger_period_start(k_period, it.at));
    key_spent := case when k_start = key_start then k_spent else 0 end;
  end if;

  v_free := least(acct_free, coalesce(it.spend_limit - used_spend, acct_free),
                  coalesce(case when w_found then w_raw - allow_spent end, acct_free),
                  coalesce(case when k_found then k_raw - key_spent end, acct_free));
  v_over := case when it.req_limit is not null and used_requests >= it.req_limit then 'dailyRequestLimit'
                 when it.model_limit is not null and used_model >= it.model_limit then 'modelDailyRequestLimit'
                 when it.spend_limit is not null and used_spend >= it.spend_limit then 'dailySpendLimit' end;

  if it.rate_limit is not null then
    insert into rate_window as rw (paywall_id, window_start, count) values (it.paywall_id, it.rate_window, 1)
    on conflict (paywall_id) do update
       set count = case when rw.window_start = excluded.window_start then rw.count + excluded.count
                        else excluded.count end,
           window_start = greatest(rw.window_start, excluded.window_start)
    returning rw.count into rate_count;
    rate_position := rate_count;
    rate_over := rate_count > it.rate_limit;
  end if;

  v_cap := case when it.per_token = 0 then case when it.fixed <= v_free::numeric * ${SCALE} then it.max_cap else -1 end
           else greatest(-1, least(it.max_cap::numeric, floor((v_free::numeric * ${SCALE} - it.fixed) / it.per_token)))::bigint end;
  affords_min := it.fixed + it.min_cap * it.per_token <= v_free::numeric * ${SCALE};
  v_hold := ceil((it.fixed + v_cap * it.per_token) / ${SCALE})::bigint;
  -- The allowance's rest is the bound that refused it (not the balance, not a daily spend limit).
  v_hit := coalesce(not affords_min and v_over is null and w_found and w_raw - allow_spent <= acct_free
                    and (it.spend_limit is null or w_raw - allow_spent <= it.spend_limit - used_spend), false);
  -- The key's rest is the bound that refused it (not the balance, a daily spend limit, an allowance).
  k_hit := coalesce(not affords_min and v_over is null and k_found and k_raw - key_spent <= acct_free
                    and (it.spend_limit is null or k_raw - key_spent <= it.spend_limit - used_spend)
                    and (not w_found or k_raw - key_spent <= w_raw - allow_spent), false);
  -- A spend limit that leaves less than the smallest request is a limit, not a short balance.
  v_limit := coalesce(v_over, case when not affords_min and not v_hit and not k_hit and it.spend_limit is not null
                                    and it.spend_limit - used_spend < acct_free then 'dailySpendLimit' end);
  v_indebted := acct_debt > it.max_debt;
  v_ok := coalesce(v_connected and not rate_over and v_limit is null and affords_min and v_hold <= v_free
                   and not v_indebted, false);

  if v_ok then
    if c_found then
      update usage_counter set day = it.day, requests = used_requests + 1,
             spend_raw = greatest(0, used_spend + v_hold),
             model_requests = day_models || jsonb_build_object(it.model, used_model + 1)
       where end_user_id = u_id;
    end if;
    if w_found then
      update wallet_connection set allowance_period_start = allow_start,
             allowance_spent_raw = greatest(0, allow_spent + v_hold)
       where id = w_id;
    end if;
    if k_found then
      update user_key set limit_period_start = key_start, limit_spent_raw = greatest(0, key_spent + v_hold)
       where id = it.key_id;
    end if;
    update ledger_account set held_raw = held_raw + v_hold where id = u_account;
    insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, max_completion_tokens,
                        stream, metadata, created_at, user_key_id)
    values (it.charge_id, it.paywall_id, u_id, u_account, 'usage', 'held', v_hold, it.model, v_cap, it.stream,
            it.metadata || case when not w_found then '{}'::jsonb
                                else jsonb_build_object('allowance', jsonb_build_object('id', w_id, 'start', allow_start)) end
                        || case when not k_found then '{}'::jsonb
                                else jsonb_build_object('keyLimitStart', key_start) end,
            now(), it.key_id);
  end if;

  return jsonb_build_object('kind', 'h', 'i', it.i, 'id', u_id,
    'wallet_id', case when it.shared then u_wallet else u_id end, 'connected', v_connected,
    'free', v_free::text, 'cap', v_cap::text, 'hold', v_hold::text, 'held', v_ok, 'retry', false,
    'limit_hit', v_limit, 'rate_position', rate_position, 'indebted', v_indebted, 'account_id', u_account,
    'debt', acct_debt::text, 'allowance_hit', v_hit, 'allow_id', case when w_found then w_id end,
    'allowance', case when w_found then w_raw::text end, 'allow_period', case when w_found then w_period end,
    'allow_spent', case when w_found then allow_spent::text end,
    'allow_start', case when w_found then allow_start::text end,
    'key_hit', k_hit, 'key_limit', case when k_found then k_raw::text end,
    'key_period', case when k_found then k_period end, 'key_spent', case when k_found then key_spent::text end,
    'key_start', case when k_found then key_start::text end);
end
$fn$;`;

const SETTLE_ITEM = `
create or replace function ledger_settle_item(x jsonb) returns jsonb language plpgsql as $fn$
declare
  it record;
  c_id uuid; c_user uuid; c_account uuid; c_hold bigint; c_day date; c_allow uuid; c_allow_start date;
  c_key uuid; c_key_start date;
  earn_account uuid;
  acct record;
  adj bigint;
  sp_balance bigint; sp_held bigint; sp_low_alert bigint; sp_low_alerted boolean; sp_low_paywalls text[];
begin
  select * into it from jsonb_to_record(x) as r(${SETTLE_COLUMNS});

  -- Responses API: the context size of a relayed answer, remembered whatever became of the charge.
  if it.relayed_id is not null then
    insert into relayed_response (paywall_id, id, tokens) values (it.paywall_id, it.relayed_id, it.relayed_tokens)
    on conflict (paywall_id, id) do update set tokens = excluded.tokens;
  end if;

  -- Only a held charge is settled (a sweeper and a late finisher cannot both settle it).
  update charge ch
     set status = it.status, amount_raw = it.captured, uncollected_raw = it.uncollected,
         prompt_tokens = it.prompt_tokens, completion_tokens = it.completion_tokens, error_code = it.error_code,
         settled_at = now(), metadata = (ch.metadata - 'progress') || it.metadata
   where ch.id = it.charge_id and ch.status = it.expect
  returning ch.id, ch.user_id, ch.account_id, ch.hold_raw, (ch.metadata->>'usageDay')::date,
            (ch.metadata->'allowance'->>'id')::uuid, (ch.metadata->'allowance'->>'start')::date,
            ch.user_key_id, (ch.metadata->>'keyLimitStart')::date
       into c_id, c_user, c_account, c_hold, c_day, c_allow, c_allow_start, c_key, c_key_start;
  if not found then
    return null;
  end if;
  if it.earnings > 0 then
    select id into earn_account from ledger_account where kind = 'earnings' and paywall_id = it.paywall_id;
  end if;

  -- Every account the settlement moves money between is updated in id order (each update locks its row).
  -- What the settlement could not collect becomes the spending account's debt (repaid first, see collectDebt).
  for acct in
    select d.id, d.bal, d.held, d.debt
      from (values (c_account, -it.captured, -c_hold, it.uncollected),
                   (earn_account, it.earnings, 0::bigint, 0::bigint),
                   ('${FEES_ACCOUNT_ID}'::uuid, it.fee, 0::bigint, 0::bigint),
                   ('${PROVIDER_ACCOUNT_ID}'::uuid, it.provider, 0::bigint, 0::bigint)) d(id, bal, held, debt)
     where d.id = c_account or (d.id is not null and d.bal > 0)
     order by d.id
  loop
    if acct.id = c_account then
      update ledger_account
         set held_raw = held_raw + acct.held, balance_raw = balance_raw + acct.bal, debt_raw = debt_raw + acct.debt
       where id = acct.id
      returning balance_raw, held_raw, low_alert_raw, low_alerted, low_alerted_paywalls
           into sp_balance, sp_held, sp_low_alert, sp_low_alerted, sp_low_paywalls;
    else
      update ledger_account set balance_raw = balance_raw + acct.bal where id = acct.id;
    end if;
  end loop;

  -- What the hold counted beyond what was captured goes back to the day and the period it counted in
  -- (after the accounts; a counter of another day, an allowance of another period is left as it is).
  adj := it.captured - c_hold;
  update usage_counter set spend_raw = greatest(0, spend_raw + adj) where end_user_id = c_user and day = c_day;
  if c_allow is not null then
    update wallet_connection set allowance_spent_raw = greatest(0, allowance_spent_raw + adj)
     where id = c_allow and allowance_raw is not null and allowance_period_start = c_allow_start;
  end if;
  if c_key_start is not null then
    update user_key set limit_spent_raw = greatest(0, limit_spent_raw + adj)
     where id = c_key and limit_raw is not null and limit_period_start = c_key_start;
  end if;
  insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw, paywall_id,
                        end_user_id, charge_id, metadata, created_at)
  select case when v.n = 1 then it.ledger_id else gen_random_uuid() end, v.kind, c_account, v.account, v.amount,
         sp_balance, it.paywall_id, c_user, c_id, it.metadata, now()
    from (values (1, 'usage', earn_account, it.earnings),
                 (2, 'fee', '${FEES_ACCOUNT_ID}'::uuid, it.fee),
                 (3, 'provider_cost', '${PROVIDER_ACCOUNT_ID}'::uuid, it.provider)) v(n, kind, account, amount)
   where v.amount > 0
   order by v.n;

  return jsonb_build_object('kind', 's', 'i', it.i, 'free', (sp_balance - sp_held)::text,
    'low_alert', sp_low_alert::text, 'low_alerted', sp_low_alerted, 'low_alerted_paywalls', sp_low_paywalls);
end
$fn$;`;

const TICK = `
create or replace function ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns setof jsonb
language plpgsql set plan_cache_mode = force_generic_plan as $fn$
declare
  nh int := coalesce(jsonb_array_length(holds), 0);
  ns int := coalesce(jsonb_array_length(settlements), 0);
  item jsonb;
  res jsonb;
  -- The operations that took effect: what their events need (the item, its charge, the hold's wallet user).
  done jsonb[] := '{}';
  accts uuid[]; users uuid[]; allows uuid[]; keys uuid[];
  s_accts uuid[]; s_users uuid[]; s_allows uuid[]; s_keys uuid[];
begin
  if nh + ns > 1 then
    -- A batch: everything its items will lock, locked first, class by class, in id order (a class with no
    -- rows is skipped). Charges first: a sweeper or a settlement beyond the hold locks the charge first.
    if ns > 0 then
      select array_agg(c.account_id), array_agg(c.user_id), array_agg(c.allow_id), array_agg(c.key_id)
        into s_accts, s_users, s_allows, s_keys
        from (select distinct s.charge_id from jsonb_to_recordset(settlements) as s(charge_id uuid)
               order by s.charge_id) k
             cross join lateral (
               select c.account_id, c.user_id, (c.metadata->'allowance'->>'id')::uuid as allow_id,
                      case when c.metadata ? 'keyLimitStart' then c.user_key_id end as key_id
                 from charge c where c.id = k.charge_id and c.status = 'held' for no key update) c;
      -- The accounts the settlements credit: the paywalls' earnings, the platform's fees and provider.
      select s_accts || array_agg(l.id) into s_accts
        from jsonb_to_recordset(settlements) as s(paywall_id uuid, earnings bigint, fee bigint, provider bigint)
             cross join lateral (
               select a.id from ledger_account a
                where s.earnings > 0 and a.kind = 'earnings' and a.paywall_id = s.paywall_id
               union all select '${FEES_ACCOUNT_ID}'::uuid where s.fee > 0
               union all select '${PROVIDER_ACCOUNT_ID}'::uuid where s.provider > 0) l;
    end if;
    if nh > 0 then
      select array_agg(e.account_id) filter (where not h.shared or e.wallet_user_id is not null),
             array_agg(e.id), array_agg(w.id), array_agg(h.key_id)
        into accts, users, allows, keys
        from jsonb_to_recordset(holds) as h(paywall_id uuid, external_id text, shared boolean, key_id uuid)
             cross join lateral (
               select e.id, e.account_id, e.wallet_user_id from end_user e
                where e.paywall_id = h.paywall_id and e.external_id = h.external_id offset 0) e
             left join lateral (
               select w.id from wallet_connection w
                where h.shared and w.end_user_id = e.id and w.revoked_at is null and w.allowance_raw is not null
               offset 0) w on true;
    end if;
    accts := coalesce(accts, '{}') || coalesce(s_accts, '{}');
    users := coalesce(users, '{}') || coalesce(s_users, '{}');
    allows := array_remove(coalesce(allows, '{}') || coalesce(s_allows, '{}'), null);
    keys := array_remove(coalesce(keys, '{}') || coalesce(s_keys, '{}'), null);
    perform 1 from (select distinct k.id from unnest(accts) as k(id) where k.id is not null order by k.id) k
                   cross join lateral (select a.id from ledger_account a where a.id = k.id for no key update) a;
    perform 1 from (select distinct k.id from unnest(users) as k(id) where k.id is not null order by k.id) k
                   cross join lateral (
                     select c.end_user_id from usage_counter c where c.end_user_id = k.id for no key update) c;
    if cardinality(allows) > 0 then
      perform 1 from (select distinct k.id from unnest(allows) as k(id) order by k.id) k
                     cross join lateral (
                       select w.id from wallet_connection w where w.id = k.id for no key update) w;
    end if;
    if cardinality(keys) > 0 then
      perform 1 from (select distinct k.id from unnest(keys) as k(id) order by k.id) k
                     cross join lateral (select u.id from user_key u where u.id = k.id for no key update) u;
    end if;
  end if;

  -- The holds, one after the other, then the settlements.
  for n in 0 .. nh - 1 loop
    item := holds->n;
    res := ledger_hold_item(item);
    if res is not null then
      if (res->>'held')::boolean then
        done := array_append(done, jsonb_build_object('h', true, 'paywall_id', item->'paywall_id',
          'ev_owner', item->'ev_owner', 'ev_trigger', item->'ev_trigger', 'cid', item->'charge_id',
          'wallet', res->'wallet_id', 'events', item->'events'));
      end if;
      return next res;
    end if;
  end loop;
  for n in 0 .. ns - 1 loop
    item := settlements->n;
    res := ledger_settle_item(item);
    if res is not null then
      done := array_append(done, jsonb_build_object('h', false, 'paywall_id', item->'paywall_id',
        'ev_owner', item->'ev_owner', 'ev_trigger', item->'ev_trigger', 'cid', item->'charge_id',
        'events', item->'events'));
      return next res;
    end if;
  end loop;

  -- Every event of the batch in one insert, in the order of the operations.
  if cardinality(done) > 0 then
    insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
    select gen_random_uuid(), coalesce(x.paywall_id, it.paywall_id),
           coalesce(x.owner_user_id, it.ev_owner), x.type, coalesce(x.version, ev_version),
           coalesce(x.trigger, it.ev_trigger),
           case when x.s then x.subject || jsonb_build_object('id', it.cid) else x.subject end,
           case when x.d then jsonb_build_object('paywallId', coalesce(x.paywall_id, it.paywall_id),
                                                 'ownerUserId', coalesce(x.owner_user_id, it.ev_owner)) || x.data
                else x.data end
           || case when it.h then jsonb_build_object('walletUserId', it.wallet) else '{}'::jsonb end,
           coalesce(x.metadata, '{}'::jsonb)
      from unnest(done) with ordinality as d(o, n)
           cross join lateral jsonb_to_record(d.o) as it(h boolean, paywall_id uuid, ev_owner uuid,
                                                         ev_trigger jsonb, cid uuid, wallet uuid, events jsonb)
           cross join lateral jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
     order by d.n, x.ord;
  end if;
  return;
end
$fn$;`;

/** The statements migration 20261201100000 runs, in order. */
export const LEDGER_FUNCTIONS_V2: string[] = [PERIOD_START, HOLD_ITEM, SETTLE_ITEM, TICK];
