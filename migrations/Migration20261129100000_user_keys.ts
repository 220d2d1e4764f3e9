import { Migration } from '@mikro-orm/migrations';
import { Migration20261128100000_lean_ledger } from './Migration20261128100000_lean_ledger.js';

/**
 * End-user keys (docs/reference.md §19): `user_key` (the key's SHA-256 hash, never the key; its end user;
 * an optional spending limit counted like a wallet allowance: `limit_spent_raw` in the period starting on
 * `limit_period_start`), and `charge.user_key_id` (the key a request came with; no foreign key, so the
 * hot path's insert checks nothing more).
 *
 * The lean ledger functions of Migration20261128100000 are re-created with the key's limit, additively:
 * the hold takes `key_id`, locks the key's row after the allowance, bounds the free amount by the key's
 * rest, counts its hold on it, writes `user_key_id` and `metadata.keyLimitStart` on the charge, and answers
 * `key_hit`, `key_limit`, `key_period`, `key_spent`, `key_start`; the settlement corrects the key's count
 * to what it captured when it counted in the key's current period. Everything else is unchanged (the same
 * rules as holds.tickSql, which test/ledger-lean.test.ts compares them with).
 */
export class Migration20261129100000_user_keys extends Migration {
  override name = 'Migration20261129100000_user_keys';

  override up(): void {
    this
      .addSql(`create table "user_key" ("id" uuid not null, "paywall_id" uuid not null, "end_user_id" uuid not null,
      "name" varchar(200) not null, "key_hash" varchar(64) not null, "last_four" varchar(4) not null,
      "created_at" timestamptz not null default now(), "last_used_at" timestamptz null, "expires_at" timestamptz null,
      "revoked_at" timestamptz null, "limit_raw" bigint null, "limit_period" varchar(8) null,
      "limit_spent_raw" bigint not null default 0, "limit_period_start" date null, primary key ("id"));`);
    this.addSql(`alter table "user_key" add constraint "user_key_key_hash_unique" unique ("key_hash");`);
    this.addSql(
      `create index "user_key_paywall_id_end_user_id_index" on "user_key" ("paywall_id", "end_user_id");`,
    );
    this.addSql(
      `alter table "user_key" add constraint "user_key_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "user_key" add constraint "user_key_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id");`,
    );
    this
      .addSql(`alter table "user_key" add constraint "user_key_limit_check" check ((limit_raw is null and limit_period is null)
             or (limit_raw >= 0 and limit_period in ('day', 'week', 'month', 'total')));`);
    this.addSql(`alter table "charge" add "user_key_id" uuid null;`);
    this.addSql(HOLD_ONE);
    this.addSql(SETTLE_ONE);
  }

  override down(): void {
    // The functions as Migration20261128100000 made them (they write no key), then the key's column and table.
    Migration20261128100000_lean_ledger.prototype.up.call(this);
    this.addSql(`alter table "charge" drop column "user_key_id";`);
    this.addSql(`drop table if exists "user_key" cascade;`);
  }
}

/**
 * The event columns of a compact event row `x` of item `it`: holds.EVENT_ROW with the version passed in.
 * Copied, not imported: the SQL of an applied migration must not change when the service's code does.
 */
const eventRow = (cid: string, extra?: string) => `gen_random_uuid(), coalesce(x.paywall_id, it.paywall_id),
    coalesce(x.owner_user_id, it.ev_owner), x.type, coalesce(x.version, it.ev_version),
    coalesce(x.trigger, it.ev_trigger),
    case when x.s then x.subject || jsonb_build_object('id', ${cid}) else x.subject end,
    case when x.d then jsonb_build_object('paywallId', coalesce(x.paywall_id, it.paywall_id),
                                          'ownerUserId', coalesce(x.owner_user_id, it.ev_owner)) || x.data
         else x.data end${extra ? ` || ${extra}` : ''},
    coalesce(x.metadata, '{}'::jsonb)`;

const EVENT_COLUMNS = `paywall_id uuid, owner_user_id uuid, type text, version text, trigger jsonb,
  subject jsonb, data jsonb, metadata jsonb, ord int, d boolean, s boolean`;

const SCALE = '1000000000000';

const HOLD_ONE = `
create or replace function ledger_hold_one(x jsonb) returns jsonb language plpgsql as $fn$
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
  select * into it from jsonb_to_record(x) as r(i int, charge_id uuid, paywall_id uuid, external_id text,
    shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
    stream boolean, metadata jsonb, events jsonb, ev_owner uuid, ev_trigger jsonb, ev_version text, day date,
    req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz, max_debt bigint,
    at timestamptz, key_id uuid);

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

  -- Locks: the spending account, the usage counter, the allowance (the batch statement's order).
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
    allow_start := greatest(w_start, case w_period when 'day' then (it.at at time zone 'UTC')::date
      when 'week' then date_trunc('week', it.at at time zone 'UTC')::date
      when 'month' then date_trunc('month', it.at at time zone 'UTC')::date
      else date '1970-01-01' end);
    allow_spent := case when w_start = allow_start then w_spent else 0 end;
  end if;
  if k_found then
    key_start := greatest(k_start, case k_period when 'day' then (it.at at time zone 'UTC')::date
      when 'week' then date_trunc('week', it.at at time zone 'UTC')::date
      when 'month' then date_trunc('month', it.at at time zone 'UTC')::date
      else date '1970-01-01' end);
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
    insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
    select ${eventRow('it.charge_id', "jsonb_build_object('walletUserId', case when it.shared then u_wallet else u_id end)")}
      from jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
     order by x.ord;
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

const SETTLE_ONE = `
create or replace function ledger_settle_one(x jsonb) returns jsonb language plpgsql as $fn$
declare
  it record;
  c_id uuid; c_user uuid; c_account uuid; c_hold bigint; c_day date; c_allow uuid; c_allow_start date;
  c_key uuid; c_key_start date;
  earn_account uuid;
  acct record;
  adj bigint;
  sp_balance bigint; sp_held bigint; sp_low_alert bigint; sp_low_alerted boolean; sp_low_paywalls text[];
begin
  select * into it from jsonb_to_record(x) as r(i int, charge_id uuid, paywall_id uuid, status text,
    captured bigint, earnings bigint, fee bigint, provider bigint, uncollected bigint, prompt_tokens int,
    completion_tokens int, error_code text, ledger_id uuid, metadata jsonb, events jsonb, ev_owner uuid,
    ev_trigger jsonb, ev_version text, expect text, relayed_id text, relayed_tokens bigint);

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

  -- Every account the settlement moves money between is updated in id order (each update locks its row:
  -- the batch statement's order, without a separate lock statement and its WAL records). What the
  -- settlement could not collect becomes the spending account's debt (repaid first, see collectDebt).
  for acct in
    select d.id, d.bal, d.held, d.debt
      from (values (c_account, -it.captured, -c_hold, it.uncollected),
                   (earn_account, it.earnings, 0::bigint, 0::bigint),
                   ('00000000-0000-4000-8000-000000000001'::uuid, it.fee, 0::bigint, 0::bigint),
                   ('00000000-0000-4000-8000-000000000002'::uuid, it.provider, 0::bigint, 0::bigint)) d(id, bal, held, debt)
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
  -- (after the accounts, as in the batch statement; a counter of another day, an allowance of another
  -- period is left as it is).
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
                 (2, 'fee', '00000000-0000-4000-8000-000000000001'::uuid, it.fee),
                 (3, 'provider_cost', '00000000-0000-4000-8000-000000000002'::uuid, it.provider)) v(n, kind, account, amount)
   where v.amount > 0
   order by v.n;
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select ${eventRow('c_id')}
    from jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
   order by x.ord;

  return jsonb_build_object('kind', 's', 'i', it.i, 'free', (sp_balance - sp_held)::text,
    'low_alert', sp_low_alert::text, 'low_alerted', sp_low_alerted, 'low_alerted_paywalls', sp_low_paywalls);
end
$fn$;`;
