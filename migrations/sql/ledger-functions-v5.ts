/**
 * The ledger's hold and settlement rules, version 5: the ONE implementation of them, in the database.
 *
 * VERSIONED AND FROZEN. This file is the SQL text that migration `Migration20261202100000_ledger_tick`
 * applies (`create or replace function`). Once that migration has run anywhere, the SQL it produces must
 * never change: migrations/frozen.sha256 guards this file like the migrations. A change to the rules is a
 * NEW file (`ledger-functions-v6.ts`, starting as a copy of this one) and a NEW migration that applies it;
 * the service calls `ledger_tick` by name and needs no change unless its signature does (docs/ledger.md,
 * "Where the rules live"). Nothing here may import from src/: the text must not change when the service's
 * code does. (Versions 1 to 4 were measured and reverted: docs/performance.md, rounds 8, 9 and 11.)
 *
 * Functions:
 *
 * - `ledger_period_start(period text, at timestamptz) returns date`: the first day (UTC) of the allowance
 *   or key-limit period (`day`, `week` from Monday, calendar `month`, `total`) holding the instant `at`.
 *   Every SQL path that counts a period calls it (an inlinable SQL function: no call overhead).
 * - `ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns jsonb`: places the holds and
 *   settles the settlements of one batch (a group commit of many requests, or one request alone) in one
 *   statement and one commit. Input: arrays of the items `holds.ts` encodes (`holdItem`, `settleItem`; `i`
 *   is an item's place in its array), null for an empty side; a lone operation passes its item itself (a
 *   JSON object, not an array). Output: a JSON array with one answer per hold that found its end user
 *   (`kind` 'h') and per settlement that settled a held charge (`kind` 's'); for a lone operation its
 *   answer itself, or null (no such end user; the charge is no longer held).
 *
 * ONE TEXT OF THE RULES, TWO INSTANCES. The rules of a hold (the free amount and every bound on it, the
 * completion cap, the daily limits, the API rate limit, debt, an allowance's and a key's period and rest,
 * what a placed hold changes, its answer) and of a settlement (the charge settled, the account legs, what
 * goes back to the day, allowance and key, the transfers, the events, its answer) are written once below,
 * as templates over the names of the values they read (`HoldVars`, `SettleVars`). `ledger_tick` holds
 * two instances of each:
 *
 * - a lone operation (the one hold, or the one settlement, of a statement: every statement at low
 *   concurrency) reads its rows into plain variables and writes each changed row by a one-row statement,
 *   evaluating no more than a procedural function written for one operation would (the PL/pgSQL cost of
 *   an operation is about one microsecond per expression it evaluates, once per transaction:
 *   docs/performance.md, rounds 11 and 12);
 * - a batch runs a few set-based steps, each its own small statement: 1. settle the charges still held;
 *   2. resolve the holds' end users, their accounts and (SHARED) allowances; 3. lock and read, class by
 *   class and in id order, the accounts, the usage counters, the allowances, the end-user keys' limits;
 *   4. decide each hold in turn (the template's array instance: positions in the arrays of rows read),
 *   against the rows as the holds before it left them; 5. write each changed row once, the charges, the
 *   transfers and all the batch's events in one insert (the `event_fanout` trigger runs once per batch).
 *
 * Both lock in the same order (accounts in id order, then counters, allowances, keys), so two statements
 * never deadlock. A batch runs with generic plans (`plan_cache_mode = force_generic_plan`: planning its
 * statements anew per call cost more than running them, docs/performance.md rounds 7 and 9) and without
 * hash joins, merge joins and sequential scans (each row found by its primary key), set for its statements only and put back after
 * them; a lone operation keeps the session's settings, as the functions for one operation did.
 */

/** pico-USDC x ppm per raw unit: the scale of `fixed` / `per_token` (see money.chatCost). */
const SCALE = '1000000000000';
/** The platform's fees and the built-in provider's cost accounts (src/modules/accounts/accounts.ts). */
const FEES_ACCOUNT_ID = '00000000-0000-4000-8000-000000000001';
const PROVIDER_ACCOUNT_ID = '00000000-0000-4000-8000-000000000002';

const EVENT_COLUMNS = `paywall_id uuid, owner_user_id uuid, type text, version text, trigger jsonb,
  subject jsonb, data jsonb, metadata jsonb, ord int, d boolean, s boolean`;

/** A hold item's columns (holds.holdItem) and a settlement item's (holds.settleItem). */
const HOLD_ITEM = `i int, charge_id uuid, paywall_id uuid, external_id text,
    shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
    stream boolean, metadata jsonb, events jsonb, ev_owner uuid, ev_trigger jsonb, day date,
    req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz, max_debt bigint,
    at timestamptz, key_id uuid`;
const SETTLE_ITEM = `i int, charge_id uuid, paywall_id uuid, status text,
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

// The rows a batch reads its holds and settled charges into, and the holds it placed. Dropped and created
// anew: a database that ran a reverted version (Migration20261201110000) may have types of these names
// with other columns.
const TYPES = [
  `drop function if exists ledger_tick(jsonb, jsonb, text);`,
  `drop function if exists ledger_tick(jsonb, jsonb);`,
  `drop type if exists ledger_hold_in;`,
  `drop type if exists ledger_settled;`,
  `drop type if exists ledger_placed;`,
  `drop type if exists ledger_tick_row;`,
  `create type ledger_hold_in as (i int, user_id uuid, account_id uuid, wallet_id uuid, allow_id uuid,
    paywall_id uuid, shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
    day date, req_limit int, spend_limit bigint, model_limit int, rate_limit int, rate_window timestamptz,
    max_debt bigint, at timestamptz, key_id uuid);`,
  `create type ledger_settled as (i int, user_id uuid, account_id uuid, hold bigint, usage_day date, allow_id uuid,
    allow_start date, key_id uuid, key_start date, captured bigint, uncollected bigint, earnings bigint, fee bigint,
    provider bigint, earn_id uuid);`,
  `create type ledger_placed as (n int, user_id uuid, account_id uuid, hold bigint, cap bigint, extra jsonb,
    wallet_id uuid);`,
];

// ---------------------------------------------------------------------------------------------------
// The hold's rules, written once.

/** The names a hold's rules read: a lone hold's plain variables, or a batch's positions in arrays. */
interface HoldVars {
  /** The hold item (its columns as in HOLD_ITEM / ledger_hold_in). */
  it: string;
  user: string;
  account: string;
  wallet: string;
  /** The spending account read (and locked): found, its free balance, its debt. */
  aFound: string;
  aFree: string;
  aDebt: string;
  /** The usage counter. */
  cFound: string;
  cDay: string;
  cReq: string;
  cSpend: string;
  cModels: string;
  /** The connection's allowance (SHARED). */
  wFound: string;
  wId: string;
  wRaw: string;
  wPeriod: string;
  wStart: string;
  wSpent: string;
  /** The end-user key's limit. */
  kFound: string;
  kRaw: string;
  kPeriod: string;
  kStart: string;
  kSpent: string;
  /** A batch decides several holds with the same variables: what a row not found leaves is set anew. */
  reset: boolean;
}

const LONE_HOLD: HoldVars = {
  it: 'it',
  user: 'u_id',
  account: 'u_account',
  wallet: 'u_wallet',
  aFound: 'a_found',
  aFree: 'a_balance - a_held',
  aDebt: 'a_debt',
  cFound: 'c_found',
  cDay: 'c_day',
  cReq: 'c_requests',
  cSpend: 'c_spend',
  cModels: 'c_models',
  wFound: 'w_found',
  wId: 'w_id',
  wRaw: 'w_raw',
  wPeriod: 'w_period',
  wStart: 'w_start',
  wSpent: 'w_spent',
  kFound: 'k_found',
  kRaw: 'k_raw',
  kPeriod: 'k_period',
  kStart: 'k_start',
  kSpent: 'k_spent',
  reset: false,
};

const BATCH_HOLD: HoldVars = {
  it: 'hr',
  user: 'hr.user_id',
  account: 'hr.account_id',
  wallet: 'hr.wallet_id',
  aFound: 'ai is not null',
  aFree: 'a_bal[ai] - a_held[ai] - a_dheld[ai]',
  aDebt: 'a_debt[ai]',
  cFound: 'ci is not null',
  cDay: 'c_day[ci]',
  cReq: 'c_req[ci]',
  cSpend: 'c_spend[ci]',
  cModels: 'c_models[ci]',
  wFound: 'wi is not null',
  wId: 'w_id[wi]',
  wRaw: 'w_raw[wi]',
  wPeriod: 'w_period[wi]',
  wStart: 'w_start[wi]',
  wSpent: 'w_spent[wi]',
  kFound: 'ki is not null',
  kRaw: 'k_raw[ki]',
  kPeriod: 'k_period[ki]',
  kStart: 'k_start[ki]',
  kSpent: 'k_spent[ki]',
  reset: true,
};

/** The variables of one hold's decision (declared by each instance). */
const HOLD_DECISION_VARS = `
  v_connected boolean; acct_free bigint := 0; acct_debt bigint := 0;
  day_models jsonb := '{}'::jsonb; used_requests int := 0; used_spend bigint := 0; used_model int := 0;
  allow_start date; allow_spent bigint; key_start date; key_spent bigint;
  v_free bigint; v_over text; rate_position bigint; rate_over boolean := false; rate_count int;
  v_cap bigint; affords_min boolean; v_hold bigint; v_hit boolean; k_hit boolean; v_limit text;
  v_indebted boolean; v_ok boolean;`;

/** SHARED: only a connected end user (a wallet and its account) is held against (docs/reference.md §16). */
const holdConnected = (v: HoldVars) =>
  `not ${v.it}.shared or (${v.wallet} is not null and ${v.account} is not null)`;

/** The wallet user of the hold's events and answer. */
const holdWallet = (v: HoldVars) => `case when ${v.it}.shared then ${v.wallet} else ${v.user} end`;

/**
 * The decision of one hold, on the rows read (and locked): sets v_free, v_cap, v_hold, v_limit, v_hit,
 * k_hit, v_indebted, rate_position, v_ok. The API rate limit's upsert is its one statement.
 */
const holdDecision = (v: HoldVars) => {
  const it = v.it;
  return `
    if ${v.aFound} then
      acct_free := ${v.aFree};
      acct_debt := ${v.aDebt};${
        v.reset
          ? `
    else
      acct_free := 0;
      acct_debt := 0;`
          : ''
      }
    end if;
    if ${v.cFound} and ${v.cDay} = ${it}.day then
      day_models := ${v.cModels};
      used_requests := ${v.cReq};
      used_spend := ${v.cSpend};
      used_model := coalesce((${v.cModels}->>${it}.model)::int, 0);${
        v.reset
          ? `
    else
      day_models := '{}'; used_requests := 0; used_spend := 0; used_model := 0;`
          : ''
      }
    end if;
    if ${v.wFound} then
      -- The allowance's period as of this request (never before the stored one: clocks differ).
      allow_start := greatest(${v.wStart}, ledger_period_start(${v.wPeriod}, ${it}.at));
      allow_spent := case when ${v.wStart} = allow_start then ${v.wSpent} else 0 end;
    end if;
    if ${v.kFound} then
      key_start := greatest(${v.kStart}, ledger_period_start(${v.kPeriod}, ${it}.at));
      key_spent := case when ${v.kStart} = key_start then ${v.kSpent} else 0 end;
    end if;

    v_free := least(acct_free, coalesce(${it}.spend_limit - used_spend, acct_free),
                    coalesce(case when ${v.wFound} then ${v.wRaw} - allow_spent end, acct_free),
                    coalesce(case when ${v.kFound} then ${v.kRaw} - key_spent end, acct_free));
    v_over := case when ${it}.req_limit is not null and used_requests >= ${it}.req_limit then 'dailyRequestLimit'
                   when ${it}.model_limit is not null and used_model >= ${it}.model_limit then 'modelDailyRequestLimit'
                   when ${it}.spend_limit is not null and used_spend >= ${it}.spend_limit then 'dailySpendLimit' end;

    -- The API rate limit: the minute's count of the paywall (every hold counts, placed or not).
    if ${it}.rate_limit is not null then
      insert into rate_window as rw (paywall_id, window_start, count) values (${it}.paywall_id, ${it}.rate_window, 1)
      on conflict (paywall_id) do update
         set count = case when rw.window_start = excluded.window_start then rw.count + excluded.count
                          else excluded.count end,
             window_start = greatest(rw.window_start, excluded.window_start)
      returning rw.count into rate_count;
      rate_position := rate_count;
      rate_over := rate_count > ${it}.rate_limit;
    end if;

    v_cap := case when ${it}.per_token = 0
                  then case when ${it}.fixed <= v_free::numeric * ${SCALE} then ${it}.max_cap else -1 end
                  else greatest(-1, least(${it}.max_cap::numeric,
                                          floor((v_free::numeric * ${SCALE} - ${it}.fixed) / ${it}.per_token)))::bigint end;
    affords_min := ${it}.fixed + ${it}.min_cap * ${it}.per_token <= v_free::numeric * ${SCALE};
    v_hold := ceil((${it}.fixed + v_cap * ${it}.per_token) / ${SCALE})::bigint;
    -- The allowance's rest is the bound that refused it (not the balance, not a daily spend limit).
    v_hit := coalesce(not affords_min and v_over is null and ${v.wFound} and ${v.wRaw} - allow_spent <= acct_free
                      and (${it}.spend_limit is null or ${v.wRaw} - allow_spent <= ${it}.spend_limit - used_spend), false);
    -- The key's rest is the bound that refused it (not the balance, a daily spend limit, an allowance).
    k_hit := coalesce(not affords_min and v_over is null and ${v.kFound} and ${v.kRaw} - key_spent <= acct_free
                      and (${it}.spend_limit is null or ${v.kRaw} - key_spent <= ${it}.spend_limit - used_spend)
                      and (not (${v.wFound}) or ${v.kRaw} - key_spent <= ${v.wRaw} - allow_spent), false);
    -- A spend limit that leaves less than the smallest request is a limit, not a short balance.
    v_limit := coalesce(v_over, case when not affords_min and not v_hit and not k_hit and ${it}.spend_limit is not null
                                      and ${it}.spend_limit - used_spend < acct_free then 'dailySpendLimit' end);
    v_indebted := acct_debt > ${it}.max_debt;
    v_ok := coalesce(v_connected and not rate_over and v_limit is null and affords_min and v_hold <= v_free
                     and not v_indebted, false);`;
};

/** What a placed hold changes: the counter's, the allowance's and the key's new values, the charge's extra metadata. */
const holdCounter = (v: HoldVars) => ({
  day: `${v.it}.day`,
  requests: 'used_requests + 1',
  spend: 'greatest(0, used_spend + v_hold)',
  models: `day_models || jsonb_build_object(${v.it}.model, used_model + 1)`,
});
const HOLD_ALLOW_SPENT = 'greatest(0, allow_spent + v_hold)';
const HOLD_KEY_SPENT = 'greatest(0, key_spent + v_hold)';
const holdChargeExtra = (v: HoldVars) => `case when not (${v.wFound}) then '{}'::jsonb
                                else jsonb_build_object('allowance', jsonb_build_object('id', ${v.wId}, 'start', allow_start)) end
                        || case when not (${v.kFound}) then '{}'::jsonb
                                else jsonb_build_object('keyLimitStart', key_start) end`;

/** The answer of a hold that found its end user (holds.holdResult reads it). */
const holdAnswer = (v: HoldVars) => `jsonb_build_object('kind', 'h', 'i', ${v.it}.i, 'id', ${v.user},
      'wallet_id', ${holdWallet(v)}, 'connected', v_connected,
      'free', v_free::text, 'cap', v_cap::text, 'hold', v_hold::text, 'held', v_ok, 'retry', false,
      'limit_hit', v_limit, 'rate_position', rate_position, 'indebted', v_indebted, 'account_id', ${v.account},
      'debt', acct_debt::text, 'allowance_hit', v_hit, 'allow_id', case when ${v.wFound} then ${v.wId} end,
      'allowance', case when ${v.wFound} then ${v.wRaw}::text end,
      'allow_period', case when ${v.wFound} then ${v.wPeriod} end,
      'allow_spent', case when ${v.wFound} then allow_spent::text end,
      'allow_start', case when ${v.wFound} then allow_start::text end,
      'key_hit', k_hit, 'key_limit', case when ${v.kFound} then ${v.kRaw}::text end,
      'key_period', case when ${v.kFound} then ${v.kPeriod} end,
      'key_spent', case when ${v.kFound} then key_spent::text end,
      'key_start', case when ${v.kFound} then key_start::text end)`;

/** The charge row of a placed hold (`user`, `account`, `hold`, `cap`, `extra`: its values). */
const holdChargeInsert = (
  it: string,
  user: string,
  account: string,
  hold: string,
  cap: string,
  extra: string,
) => `insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, max_completion_tokens,
                        stream, metadata, created_at, user_key_id)
    select ${it}.charge_id, ${it}.paywall_id, ${user}, ${account}, 'usage', 'held', ${hold}, ${it}.model, ${cap}, ${it}.stream,
           ${it}.metadata || ${extra}, now(), ${it}.key_id`;

// ---------------------------------------------------------------------------------------------------
// The settlement's rules, written once.

/** The settled charge's columns (the charge as the settlement found it). */
const SETTLED_CHARGE = `ch.user_id, ch.account_id, ch.hold_raw, (ch.metadata->>'usageDay')::date as usage_day,
              (ch.metadata->'allowance'->>'id')::uuid as allow_id,
              (ch.metadata->'allowance'->>'start')::date as allow_start,
              ch.user_key_id, (ch.metadata->>'keyLimitStart')::date as key_start`;

/** Only a held charge is settled (a sweeper and a late finisher cannot both settle it). */
const settleCharge = (from: string) => `update charge ch
       set status = it.status, amount_raw = it.captured, uncollected_raw = it.uncollected,
           prompt_tokens = it.prompt_tokens, completion_tokens = it.completion_tokens,
           error_code = it.error_code, settled_at = now(), metadata = (ch.metadata - 'progress') || it.metadata
      ${from}
     where ch.id = it.charge_id and ch.status = it.expect`;

/** The paywall's earnings account (credited when the settlement earns something). */
const earningsAccount = (paywall: string) =>
  `select a.id from ledger_account a where a.kind = 'earnings' and a.paywall_id = ${paywall}`;

/**
 * The accounts a settlement changes, as rows (id, bal, held, debt): the captured amount leaves the spending
 * account (its hold released; what it could not collect becomes its debt, repaid first: see collectDebt)
 * for the earnings, fee and provider accounts (those it credits nothing are left out).
 */
const settlementLegs = (s: {
  account: string;
  earn: string;
  captured: string;
  hold: string;
  uncollected: string;
  earnings: string;
  fee: string;
  provider: string;
}) => `(values (${s.account}, -${s.captured}, -${s.hold}, ${s.uncollected}),
                   (${s.earn}, ${s.earnings}, 0::bigint, 0::bigint),
                   ('${FEES_ACCOUNT_ID}'::uuid, ${s.fee}, 0::bigint, 0::bigint),
                   ('${PROVIDER_ACCOUNT_ID}'::uuid, ${s.provider}, 0::bigint, 0::bigint)) as d(id, bal, held, debt)
     where d.id = ${s.account} or (d.id is not null and d.bal > 0)`;

/** A settlement's transfers: up to three (earnings, fee, provider cost; zero parts are not written). */
const transferLegs = (earn: string, earnings: string, fee: string, provider: string) =>
  `(values (1, 'usage', ${earn}, ${earnings}),
                   (2, 'fee', '${FEES_ACCOUNT_ID}'::uuid, ${fee}),
                   (3, 'provider_cost', '${PROVIDER_ACCOUNT_ID}'::uuid, ${provider})) as v(n, kind, account, amount)
     where v.amount > 0`;
const TRANSFER_COLUMNS = `insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                          paywall_id, end_user_id, charge_id, metadata, created_at)`;
/** The first transfer carries the ledger entry's id (the settlement's own), the others a new one. */
const transferId = (ledgerId: string) => `case when v.n = 1 then ${ledgerId} else gen_random_uuid() end`;

/**
 * What a settled hold counted beyond what it captured goes back to the day, the allowance's period and the
 * key's period it counted in (a counter of another day, an allowance or key of another period is left as
 * it is): the updates' conditions, on the row `t` and the settled values.
 */
const giveBack = {
  counter: (t: string, user: string, day: string) => `${t}.end_user_id = ${user} and ${t}.day = ${day}`,
  allowance: (t: string, id: string, start: string) =>
    `${t}.id = ${id} and ${t}.allowance_raw is not null and ${t}.allowance_period_start = ${start}`,
  key: (t: string, id: string, start: string) =>
    `${t}.id = ${id} and ${t}.limit_raw is not null and ${t}.limit_period_start = ${start}`,
};

/** Responses API: the context size of a relayed answer, remembered whatever became of the charge. */
const RELAYED_UPSERT = `on conflict (paywall_id, id) do update set tokens = excluded.tokens`;

/** The answer of a settlement that settled: its spending account's free balance after it, its alert state. */
const settleAnswer = (
  i: string,
  bal: string,
  held: string,
  alert: string,
  alerted: string,
  paywalls: string,
) =>
  `jsonb_build_object('kind', 's', 'i', ${i}, 'free', (${bal} - ${held})::text,
      'low_alert', ${alert}::text, 'low_alerted', ${alerted}, 'low_alerted_paywalls', ${paywalls})`;

// ---------------------------------------------------------------------------------------------------
// Events, written once: the compact event rows `x` of an operation `op` (holds.compactEvents) put back.

const eventRow = (
  op: string,
  cid: string,
  extra: string,
) => `gen_random_uuid(), coalesce(x.paywall_id, ${op}.paywall_id),
           coalesce(x.owner_user_id, ${op}.ev_owner), x.type, coalesce(x.version, ev_version),
           coalesce(x.trigger, ${op}.ev_trigger),
           case when x.s then x.subject || jsonb_build_object('id', ${cid}) else x.subject end,
           case when x.d then jsonb_build_object('paywallId', coalesce(x.paywall_id, ${op}.paywall_id),
                                                 'ownerUserId', coalesce(x.owner_user_id, ${op}.ev_owner)) || x.data
                else x.data end || ${extra},
           coalesce(x.metadata, '{}'::jsonb)`;
const EVENT_INSERT = `insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)`;

// ---------------------------------------------------------------------------------------------------
// The lone hold: plain variables, one-row statements.

const LONE_HOLD_BLOCK = `
    declare
      it record;
      u_id uuid; u_account uuid; u_wallet uuid; allow_key uuid;
      a_found boolean := false; a_balance bigint; a_held bigint; a_debt bigint;
      c_found boolean := false; c_day date; c_requests int; c_spend bigint; c_models jsonb;
      w_found boolean := false; w_id uuid; w_raw bigint; w_period text; w_start date; w_spent bigint;
      k_found boolean := false; k_raw bigint; k_period text; k_start date; k_spent bigint;
      ${HOLD_DECISION_VARS}
    begin
      select * into it from jsonb_to_record(holds) as r(${HOLD_ITEM});

      select e.id, e.account_id, e.wallet_user_id into u_id, u_account, u_wallet
        from end_user e where e.paywall_id = it.paywall_id and e.external_id = it.external_id;
      if not found then
        return null;
      end if;
      v_connected := ${holdConnected(LONE_HOLD)};
      if it.shared then
        -- SHARED: the connection's allowance (docs/reference.md §16).
        select w.id into allow_key from wallet_connection w
         where w.end_user_id = u_id and w.revoked_at is null and w.allowance_raw is not null limit 1;
      end if;

      -- Locks: the spending account, the usage counter, the allowance, the key (the batch's order).
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
${holdDecision(LONE_HOLD)}

      if v_ok then
        if c_found then
          update usage_counter set day = ${holdCounter(LONE_HOLD).day}, requests = ${holdCounter(LONE_HOLD).requests},
                 spend_raw = ${holdCounter(LONE_HOLD).spend}, model_requests = ${holdCounter(LONE_HOLD).models}
           where end_user_id = u_id;
        end if;
        if w_found then
          update wallet_connection set allowance_period_start = allow_start, allowance_spent_raw = ${HOLD_ALLOW_SPENT}
           where id = w_id;
        end if;
        if k_found then
          update user_key set limit_period_start = key_start, limit_spent_raw = ${HOLD_KEY_SPENT}
           where id = it.key_id;
        end if;
        update ledger_account set held_raw = held_raw + v_hold where id = u_account;
        ${holdChargeInsert('it', 'u_id', 'u_account', 'v_hold', 'v_cap', holdChargeExtra(LONE_HOLD))};
        ${EVENT_INSERT}
        select ${eventRow('it', 'it.charge_id', `jsonb_build_object('walletUserId', ${holdWallet(LONE_HOLD)})`)}
          from jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
         order by x.ord;
      end if;

      return ${holdAnswer(LONE_HOLD)};
    end;`;

// ---------------------------------------------------------------------------------------------------
// The lone settlement: plain variables, one-row statements.

const LONE_SETTLE_BLOCK = `
    declare
      it record;
      c_id uuid; c_user uuid; c_account uuid; c_hold bigint; c_day date; c_allow uuid; c_allow_start date;
      c_key uuid; c_key_start date;
      earn_account uuid;
      acct record;
      adj bigint;
      sp_balance bigint; sp_held bigint; sp_low_alert bigint; sp_low_alerted boolean; sp_low_paywalls text[];
    begin
      select * into it from jsonb_to_record(settlements) as r(${SETTLE_ITEM});

      if it.relayed_id is not null then
        insert into relayed_response (paywall_id, id, tokens) values (it.paywall_id, it.relayed_id, it.relayed_tokens)
        ${RELAYED_UPSERT};
      end if;

      ${settleCharge('')}
      returning ch.id, ${SETTLED_CHARGE}
           into c_id, c_user, c_account, c_hold, c_day, c_allow, c_allow_start, c_key, c_key_start;
      if not found then
        return null;
      end if;
      if it.earnings > 0 then
        ${earningsAccount('it.paywall_id')} into earn_account;
      end if;

      -- Every account the settlement moves money between is updated in id order (each update locks its row:
      -- the batch's order, without a separate lock statement and its WAL records).
      for acct in
        select d.id, d.bal, d.held, d.debt
          from ${settlementLegs({ account: 'c_account', earn: 'earn_account', captured: 'it.captured', hold: 'c_hold', uncollected: 'it.uncollected', earnings: 'it.earnings', fee: 'it.fee', provider: 'it.provider' })}
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

      -- What the hold counted beyond what was captured goes back (after the accounts, as in a batch).
      adj := it.captured - c_hold;
      update usage_counter c set spend_raw = greatest(0, spend_raw + adj) where ${giveBack.counter('c', 'c_user', 'c_day')};
      if c_allow is not null then
        update wallet_connection w set allowance_spent_raw = greatest(0, allowance_spent_raw + adj)
         where ${giveBack.allowance('w', 'c_allow', 'c_allow_start')};
      end if;
      if c_key_start is not null then
        update user_key k set limit_spent_raw = greatest(0, limit_spent_raw + adj)
         where ${giveBack.key('k', 'c_key', 'c_key_start')};
      end if;
      ${TRANSFER_COLUMNS}
      select ${transferId('it.ledger_id')}, v.kind, c_account, v.account, v.amount,
             sp_balance, it.paywall_id, c_user, c_id, it.metadata, now()
        from ${transferLegs('earn_account', 'it.earnings', 'it.fee', 'it.provider')}
       order by v.n;
      ${EVENT_INSERT}
      select ${eventRow('it', 'c_id', "'{}'::jsonb")}
        from jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
       order by x.ord;

      return ${settleAnswer('it.i', 'sp_balance', 'sp_held', 'sp_low_alert', 'sp_low_alerted', 'sp_low_paywalls')};
    end;`;

// ---------------------------------------------------------------------------------------------------
// A batch: set-based steps, the hold's rules on positions in arrays of rows.

const BATCH_BLOCK = `
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
    -- 4. One hold's decision (positions of its rows in the arrays; null: not read).
    ai int; ci int; wi int; ki int;
    ${HOLD_DECISION_VARS}
    -- 5. The holds placed, in order (what their charges and events are written from).
    p ledger_placed[] := '{}';
    -- The answers: one per hold that found its end user, one per settlement that settled.
    answers jsonb[] := '{}';
    -- The planner settings of the caller, put back at the end.
    caller_settings text[] := array[current_setting('plan_cache_mode'), current_setting('enable_hashjoin'),
                                    current_setting('enable_mergejoin'), current_setting('enable_seqscan')];
  begin
    -- Generic plans (planning the batch's statements anew per call cost more than running them), and every
    -- row found by its primary key: the estimates of rows from arrays are guesses (10 to 100 per unnest),
    -- and on a small table the planner then prefers to read the whole of ledger_account for a few accounts
    -- (a hash join, or a nested loop over a sequential scan: about 2 million instructions more per batch
    -- statement on the bench database).
    perform set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_hashjoin', 'off', true),
            set_config('enable_mergejoin', 'off', true), set_config('enable_seqscan', 'off', true);
    -- 1. Settle the charges still held.
    if ns > 0 then
      with c as (
        ${settleCharge(`from jsonb_to_recordset(settlements) as it(${SETTLE_ITEM})`)}
        returning it.i, ${SETTLED_CHARGE},
                  it.captured, it.uncollected, it.earnings, it.fee, it.provider, it.paywall_id)
      select array_agg(row(c.i, c.user_id, c.account_id, c.hold_raw, c.usage_day, c.allow_id, c.allow_start,
                           c.user_key_id, c.key_start, c.captured, c.uncollected, c.earnings, c.fee, c.provider,
                           case when c.earnings > 0 then (${earningsAccount('c.paywall_id')}) end)::ledger_settled),
             array_agg(c.user_id), array_agg(c.account_id), array_agg(c.allow_id),
             array_agg(c.user_key_id) filter (where c.key_start is not null), bool_or(c.fee > 0), bool_or(c.provider > 0),
             bool_or(c.earnings > 0 or c.fee > 0 or c.provider > 0)
        into ss, s_user, s_acct, s_allow, s_key, s_fees, s_provider, legs
        from (select * from c order by c.i) c;
      ss := coalesce(ss, '{}');
      s_key := coalesce(s_key, '{}');
    end if;

    -- 2. The holds' end users, their accounts and (SHARED) the connection's allowance (docs/reference.md §16).
    if nh > 0 then
      select array_agg(row(h.i, e.id, e.account_id, e.wallet_user_id, null::uuid, h.paywall_id, h.shared, h.fixed,
                           h.per_token, h.max_cap, h.min_cap, h.model, h.day, h.req_limit, h.spend_limit,
                           h.model_limit, h.rate_limit, h.rate_window, h.max_debt, h.at, h.key_id)::ledger_hold_in),
             array_agg(e.id), array_agg(e.account_id), array_agg(h.key_id), bool_or(h.shared)
        into hs, h_user, h_acct, h_key, h_shared
        from jsonb_to_recordset(holds) as h(${HOLD_ITEM})
             left join lateral (
               select e.id, e.account_id, e.wallet_user_id from end_user e
                where e.paywall_id = h.paywall_id and e.external_id = h.external_id offset 0) e on true;
      if h_shared then
        select array_agg((select w.id from wallet_connection w
                           where u.shared and w.end_user_id = u.user_id and w.revoked_at is null
                             and w.allowance_raw is not null limit 1) order by u.ordinality)
          into h_allow
          from unnest(hs) with ordinality as u;
      end if;

      -- 3. Lock and read, class by class, in id order (holds only: a settlement decides nothing on what it
      -- reads, and its writes below take their locks in the same order). A class with no rows is skipped.
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

    -- 4. Each hold in turn, against the rows as the holds before it left them (the hold's rules above, on
    -- the positions of its rows in the arrays read).
    for h in 1 .. nh loop
      hr := hs[h];
      continue when hr.user_id is null;
      v_connected := ${holdConnected(BATCH_HOLD)};
      ai := case when v_connected then array_position(a_id, hr.account_id) end;
      ci := array_position(c_id, hr.user_id);
      wi := case when h_allow[h] is not null then array_position(w_id, h_allow[h]) end;
      ki := case when hr.key_id is not null then array_position(k_id, hr.key_id) end;
      rate_position := null;
      rate_over := false;
${holdDecision(BATCH_HOLD)}

      if v_ok then
        if ci is not null then
          c_day[ci] := ${holdCounter(BATCH_HOLD).day};
          c_req[ci] := ${holdCounter(BATCH_HOLD).requests};
          c_spend[ci] := ${holdCounter(BATCH_HOLD).spend};
          c_models[ci] := ${holdCounter(BATCH_HOLD).models};
        end if;
        if wi is not null then
          w_start[wi] := allow_start;
          w_spent[wi] := ${HOLD_ALLOW_SPENT};
        end if;
        if ki is not null then
          k_start[ki] := key_start;
          k_spent[ki] := ${HOLD_KEY_SPENT};
        end if;
        if ai is not null then
          a_dheld[ai] := a_dheld[ai] + v_hold;
        end if;
        p := array_append(p, row(hr.i, hr.user_id, hr.account_id, v_hold, v_cap, ${holdChargeExtra(BATCH_HOLD)},
                                 ${holdWallet(BATCH_HOLD)})::ledger_placed);
      end if;

      answers := array_append(answers, ${holdAnswer(BATCH_HOLD)});
    end loop;

    -- 5. Write: each changed row once. The accounts: the holds' hold, and each settlement's legs; each
    -- account once, in id order.
    if cardinality(p) > 0 or cardinality(ss) > 0 then
      with u as (
        update ledger_account a
           set balance_raw = a.balance_raw + v.dbal, held_raw = a.held_raw + v.dheld, debt_raw = a.debt_raw + v.ddebt
          from (select x.id, sum(x.bal)::bigint as dbal, sum(x.held)::bigint as dheld, sum(x.debt)::bigint as ddebt
                  from (select q.id, 0::bigint as bal, q.dheld as held, 0::bigint as debt
                          from unnest(a_id, a_dheld) as q(id, dheld) where q.dheld <> 0
                        union all
                        select d.id, d.bal, d.held, d.debt
                          from unnest(ss) as s
                               cross join lateral (select * from ${settlementLegs({ account: 's.account_id', earn: 's.earn_id', captured: 's.captured', hold: 's.hold', uncollected: 's.uncollected', earnings: 's.earnings', fee: 's.fee', provider: 's.provider' })}) d) x
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
      update usage_counter c set day = v.day, requests = v.req, spend_raw = v.spend, model_requests = v.models
        from unnest(c_id, c_day, c_req, c_spend, c_models) as v(id, day, req, spend, models)
       where c.end_user_id = v.id
         and (c.day, c.requests, c.spend_raw, c.model_requests) is distinct from (v.day, v.req, v.spend, v.models);
      if cardinality(w_id) > 0 then
        update wallet_connection w set allowance_period_start = v.start, allowance_spent_raw = v.spent
          from unnest(w_id, w_start, w_spent) as v(id, start, spent)
         where w.id = v.id and (w.allowance_period_start, w.allowance_spent_raw) is distinct from (v.start, v.spent);
      end if;
      if cardinality(k_id) > 0 then
        update user_key k set limit_period_start = v.start, limit_spent_raw = v.spent
          from unnest(k_id, k_start, k_spent) as v(id, start, spent)
         where k.id = v.id and (k.limit_period_start, k.limit_spent_raw) is distinct from (v.start, v.spent);
      end if;
    end if;
    -- What the settlements' holds counted beyond the captured amount goes back.
    if cardinality(ss) > 0 then
      update usage_counter c set spend_raw = greatest(0, c.spend_raw + v.adj)
        from (select s.user_id, s.usage_day, sum(s.captured - s.hold)::bigint as adj from unnest(ss) as s
               where s.captured <> s.hold group by s.user_id, s.usage_day order by s.user_id) v
       where ${giveBack.counter('c', 'v.user_id', 'v.usage_day')};
      if cardinality(array_remove(s_allow, null)) > 0 then
        update wallet_connection w set allowance_spent_raw = greatest(0, w.allowance_spent_raw + v.adj)
          from (select s.allow_id, s.allow_start, sum(s.captured - s.hold)::bigint as adj from unnest(ss) as s
                 where s.allow_id is not null and s.captured <> s.hold
                 group by s.allow_id, s.allow_start order by s.allow_id) v
         where ${giveBack.allowance('w', 'v.allow_id', 'v.allow_start')};
      end if;
      if cardinality(s_key) > 0 then
        update user_key k set limit_spent_raw = greatest(0, k.limit_spent_raw + v.adj)
          from (select s.key_id, s.key_start, sum(s.captured - s.hold)::bigint as adj from unnest(ss) as s
                 where s.key_start is not null and s.captured <> s.hold
                 group by s.key_id, s.key_start order by s.key_id) v
         where ${giveBack.key('k', 'v.key_id', 'v.key_start')};
      end if;
    end if;
    if cardinality(p) > 0 then
      ${holdChargeInsert('it', 'q.user_id', 'q.account_id', 'q.hold', 'q.cap', 'q.extra')}
        from unnest(p) as q
             cross join lateral jsonb_to_record(holds->q.n) as it(charge_id uuid, paywall_id uuid, model text,
                                                                 stream boolean, metadata jsonb, key_id uuid)
       order by q.n;
    end if;
    if legs then
      -- Each transfer records the spending account's balance after the batch.
      ${TRANSFER_COLUMNS}
      select ${transferId('it.ledger_id')}, v.kind, s.account_id, v.account, v.amount,
             r_bal[array_position(r_id, s.account_id)], it.paywall_id, s.user_id, it.charge_id, it.metadata, now()
        from unnest(ss) as s
             cross join lateral jsonb_to_record(settlements->s.i) as it(charge_id uuid, paywall_id uuid,
                                                                       ledger_id uuid, metadata jsonb)
             cross join lateral (select * from ${transferLegs('s.earn_id', 's.earnings', 's.fee', 's.provider')}) v
       order by s.i, v.n;
    end if;
    if ns > 0 and jsonb_path_exists(settlements, '$[*] ? (@.relayed_id != null)') then
      -- One row per id: the last settlement of it wins.
      insert into relayed_response (paywall_id, id, tokens)
      select distinct on (x.paywall_id, x.relayed_id) x.paywall_id, x.relayed_id, x.relayed_tokens
        from jsonb_to_recordset(settlements) as x(i int, paywall_id uuid, relayed_id text, relayed_tokens bigint)
       where x.relayed_id is not null
       order by x.paywall_id, x.relayed_id, x.i desc
      ${RELAYED_UPSERT};
    end if;
    -- Every event of the batch in one insert, in the order of the operations (the holds placed, then the
    -- settlements).
    if cardinality(p) + cardinality(ss) > 0 then
      ${EVENT_INSERT}
      select ${eventRow('it', 'it.charge_id', "case when d.h then jsonb_build_object('walletUserId', d.wallet) else '{}'::jsonb end")}
        from (select true as h, q.n, q.wallet_id as wallet from unnest(p) as q
              union all
              select false, s.i, null::uuid from unnest(ss) as s) d
             cross join lateral jsonb_to_record(case when d.h then holds->d.n else settlements->d.n end)
               as it(paywall_id uuid, ev_owner uuid, ev_trigger jsonb, charge_id uuid, events jsonb)
             cross join lateral jsonb_to_recordset(it.events) as x(${EVENT_COLUMNS})
       order by d.h desc, d.n, x.ord;
    end if;

    -- The settlements' answers: the spending account's free balance after the batch, its alert state.
    for m in 1 .. cardinality(ss) loop
      ai := array_position(r_id, (ss[m]).account_id);
      answers := array_append(answers, ${settleAnswer('(ss[m]).i', 'r_bal[ai]', 'r_held[ai]', 'r_low_alert[ai]', 'r_low_alerted[ai]', 'r_low_paywalls[ai]')});
    end loop;
    perform set_config('plan_cache_mode', caller_settings[1], true),
            set_config('enable_hashjoin', caller_settings[2], true),
            set_config('enable_mergejoin', caller_settings[3], true),
            set_config('enable_seqscan', caller_settings[4], true);
    return to_jsonb(answers);
  end;`;

const TICK = `
create or replace function ledger_tick(holds jsonb, settlements jsonb, ev_version text) returns jsonb
language plpgsql as $fn$
begin
  -- A lone operation (its item itself, not an array; null for the other side): the instances of the rules
  -- on plain variables.
  if jsonb_typeof(holds) = 'object' then
${LONE_HOLD_BLOCK}
  elsif jsonb_typeof(settlements) = 'object' then
${LONE_SETTLE_BLOCK}
  end if;
${BATCH_BLOCK}
end
$fn$;`;

/** The statements migration 20261202100000 runs, in order. */
export const LEDGER_FUNCTIONS_V5: string[] = [PERIOD_START, ...TYPES, TICK];
