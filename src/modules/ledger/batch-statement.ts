import { EVENT_VERSION } from '../events/event-catalog.js';
import { earningsAccountOf, FEES_ACCOUNT_ID, PROVIDER_ACCOUNT_ID } from '../accounts/accounts.js';
import { RATE_WINDOW_UPSERT } from '../limits/rate-limit.js';
import { periodStartSql } from '../wallet/allowance.js';

/**
 * The batch statement (one job): the hold and settlement rules as one set-based statement for a batch of
 * operations (the group commit), built by tickSql; holds.ledgerTick runs it.
 */

/** pico-USDC x ppm per raw unit: the scale of `fixedScaled` / `perTokenScaled` (see money.chatCost). */
export const SCALE_PER_RAW = 10n ** 12n;

const EVENT_COLUMNS = `paywall_id uuid, owner_user_id uuid, type text, version text, trigger jsonb,
  subject jsonb, data jsonb, metadata jsonb, ord int, d boolean, s boolean`;

/**
 * The event columns of `x` (a compact row) of operation `op` (its paywall_id, ev_owner, ev_trigger; `cid`
 * its charge id), with `extra` merged into the data.
 */
const EVENT_ROW = (
  op: string,
  cid: string,
  extra?: string,
) => `gen_random_uuid(), coalesce(x.paywall_id, ${op}.paywall_id),
    coalesce(x.owner_user_id, ${op}.ev_owner), x.type, coalesce(x.version, '${EVENT_VERSION}'),
    coalesce(x.trigger, ${op}.ev_trigger),
    case when x.s then x.subject || jsonb_build_object('id', ${cid}) else x.subject end,
    case when x.d then jsonb_build_object('paywallId', coalesce(x.paywall_id, ${op}.paywall_id),
                                          'ownerUserId', coalesce(x.owner_user_id, ${op}.ev_owner)) || x.data
         else x.data end${extra ? ` || ${extra}` : ''},
    coalesce(x.metadata, '{}'::jsonb)`;

/** Which parts a tick statement carries (see tickSql). */
export interface TickShape {
  /** Holds to place ($1). */
  h: boolean;
  /** Settlements ($1, or $2 with holds). */
  s: boolean;
  /** Some hold counts against an API rate limit (the rate_window upsert). */
  r: boolean;
  /** Exactly one hold: it is the first of its account and its user, so no running sums (window functions). */
  o?: boolean;
}

/**
 * One statement settles the holds of finished requests and places the holds of new ones (group
 * commit of both kinds: every request needs one of each, so sharing the commit halves the commits and
 * the WAL flushes that NOTIFY serialises).
 *
 * Rows are found by index probes: end users, ledger accounts and usage counters by `lateral` subqueries
 * per key (a generic plan, the one a prepared statement keeps, chose to scan these tables whole for
 * `= any(array(…))` of unknown length, a cost that grows with the number of users: 1,006 ledger accounts
 * read for each statement of the bench).
 *
 * Every account the statement touches (spending accounts, earnings, fees, provider) is locked first,
 * in id order (FOR NO KEY UPDATE: no deadlock between statements, and foreign-key checks of other
 * inserts are not blocked), and updated ONCE with the sum of its changes ("batched by account").
 *
 * Holds: the completion cap is computed from the very balance the update then changes. Several holds
 * of one account (a hot end user, or end users sharing a wallet) or of one end user share a statement:
 * the first (lowest `i`) is decided against the balance and daily counters as locked; a later one is
 * placed, at its full cap, when all the holds before it on the account and the user, each counted at its
 * full cap (a running sum in `pre`), and itself fit the free balance and every daily limit; it is refused
 * when the answer cannot depend on the ones before it (it cannot fit the free balance even alone and no
 * daily limit applies, or a daily limit is already reached); otherwise it comes back with `retry` and is
 * decided first in a later statement. So the holds of a statement never reserve more than the free
 * balance (each later one only when the running sum fits), and the daily counters count every placed
 * hold (aggregated per user in `hagg`/`magg`). A hold is computed against the free balance before this
 * statement's settlements (which only free money), so concurrent requests can never reserve more than
 * the free balance. A request whose user does not exist yet gets no row (the caller creates the user
 * and retries); one that cannot afford `min_cap` tokens, or whose user is not connected (SHARED), gets
 * its row with `held = false`.
 *
 * Settlements are idempotent: only a `held` charge is settled (a sweeper and a late finisher cannot
 * both settle it). The balance never goes negative: captured ≤ hold ≤ held_raw ≤ balance_raw. The
 * captured amount leaves the spending account as up to three transfers (earnings, fee, provider cost;
 * zero parts are not written).
 *
 * Shapes: PostgreSQL initialises the executor state of every node of a plan on each execution, which
 * made the fixed cost of the full statement (~100 plan nodes) most of a batch of one. A batch of holds
 * only, or of settlements only, or with no rate-limited hold, runs a statement without the parts it has
 * no rows for (each shape is its own prepared statement). Same rules, same locks in the same order.
 */
export function tickSql({ h, s, r, o = false }: TickShape): string {
  const both = h && s;
  const union = (...parts: (string | false)[]) => parts.filter(Boolean).join(' union all ');
  return `
with ${
    h
      ? `hi as (
  select * from jsonb_to_recordset($1::jsonb) as x(i int, charge_id uuid, paywall_id uuid, external_id text,
    shared boolean, fixed numeric, per_token numeric, max_cap bigint, min_cap bigint, model text,
    stream boolean, metadata jsonb, events jsonb, ev_owner uuid, ev_trigger jsonb, day date, req_limit int, spend_limit bigint, model_limit int,
    rate_limit int, rate_window timestamptz, max_debt bigint, at timestamptz, key_id uuid)
),`
      : ''
  }
${
  s
    ? `si as (
  select * from jsonb_to_recordset(${both ? '$2' : '$1'}::jsonb) as x(i int, charge_id uuid, paywall_id uuid, status text,
    captured bigint, earnings bigint, fee bigint, provider bigint, uncollected bigint, prompt_tokens int,
    completion_tokens int, error_code text, ledger_id uuid, metadata jsonb, events jsonb, ev_owner uuid, ev_trigger jsonb,
    expect text, relayed_id text, relayed_tokens bigint)
   -- Always true (i is the item's place in the batch). The planner takes a range on a column it has no
   -- statistics for as matching 0.5 % of rows: the settlements are estimated at one row instead of the
   -- function's 100, so each charge is found by its primary key (see c).
   where x.i >= 0 and x.i <= 2147483647
),
c as (
  update charge ch
     set status = it.status, amount_raw = it.captured, uncollected_raw = it.uncollected,
         prompt_tokens = it.prompt_tokens, completion_tokens = it.completion_tokens, error_code = it.error_code,
         settled_at = now(), metadata = (ch.metadata - 'progress') || it.metadata
    from si it
   -- it.expect is 'held'. Compared with the item's value rather than a constant, the condition does not
   -- match the predicate of charge_open_holds_index: that index held an entry for every hold placed since
   -- the last vacuum, and a plan that scanned it for the batch read more of it with every request. Under
   -- a concurrent update the condition is checked again on the newest row version (a settlement only
   -- settles a charge still held).
   where ch.id = it.charge_id and ch.status = it.expect
  returning ch.id, ch.user_id, ch.account_id, ch.hold_raw, (ch.metadata->>'usageDay')::date as usage_day,
            (ch.metadata->'allowance'->>'id')::uuid as allow_id, (ch.metadata->'allowance'->>'start')::date as allow_start,
            ch.user_key_id as key_id, (ch.metadata->>'keyLimitStart')::date as key_start, it.i, it.captured, it.uncollected, it.earnings, it.fee, it.provider,
            it.paywall_id, it.ledger_id, it.metadata, it.events, it.ev_owner, it.ev_trigger
),
legs as (
  select c.i, v.n, case when v.n = 1 then c.ledger_id else gen_random_uuid() end as id, v.kind, v.account,
         v.amount, c.account_id as debit, c.paywall_id, c.user_id, c.id as charge_id, c.metadata
    from c, lateral (values (1, 'usage', ${earningsAccountOf('c.paywall_id')}, c.earnings),
                            (2, 'fee', '${FEES_ACCOUNT_ID}'::uuid, c.fee),
                            (3, 'provider_cost', '${PROVIDER_ACCOUNT_ID}'::uuid, c.provider)) v(n, kind, account, amount)
   where v.amount > 0
),
rr as (
  -- Responses API: the context size of a relayed answer (RelayedResponses), in the settlement's commit.
  -- Whatever became of the charge (a sweeper may have settled it): the answer was relayed. One row per id.
  insert into relayed_response (paywall_id, id, tokens)
  select distinct on (x.paywall_id, x.relayed_id) x.paywall_id, x.relayed_id, x.relayed_tokens
    from si x where x.relayed_id is not null
   order by x.paywall_id, x.relayed_id, x.i desc
  on conflict (paywall_id, id) do update set tokens = excluded.tokens
),`
    : ''
}
${
  h
    ? `hu as (
  select hi.*, e.id as user_id, e.account_id, e.wallet_user_id,
         (not hi.shared or (e.wallet_user_id is not null and e.account_id is not null)) as connected,
         w.id as allow_key
    from hi cross join lateral (
           select e.id, e.account_id, e.wallet_user_id from end_user e
            where e.paywall_id = hi.paywall_id and e.external_id = hi.external_id offset 0) e
         -- SHARED: the connection's allowance (docs/reference.md §16), locked in ak.
         left join lateral (
           select w.id from wallet_connection w
            where hi.shared and w.end_user_id = e.id and w.revoked_at is null and w.allowance_raw is not null
           offset 0) w on true
),`
    : ''
}
lk as (
  select a.id, a.balance_raw, a.held_raw, a.debt_raw
    from (select distinct k.id from (${union(s && 'select account_id from c union all select account from legs', h && 'select account_id from hu where connected')}) k(id)
           order by k.id) k
         cross join lateral (
           select a.id, a.balance_raw, a.held_raw, a.debt_raw from ledger_account a
            where a.id = k.id for no key update) a
),
uk as (
  select x.end_user_id, x.day, x.requests, x.spend_raw, x.model_requests
    from (select distinct k.id from (${union(h && 'select user_id as id from hu', s && 'select user_id as id from c')}) k
           order by k.id) k
         cross join lateral (
           select x.end_user_id, x.day, x.requests, x.spend_raw, x.model_requests from usage_counter x
            where x.end_user_id = k.id for no key update) x
),
ak as (
  -- Allowances of the connections the statement counts on, locked after the accounts and counters (the
  -- subquery makes sure those are locked first), in id order.
  select w.id, w.allowance_raw, w.allowance_period, w.allowance_spent_raw, w.allowance_period_start
    from (select distinct k.id from (${union(h && 'select allow_key from hu', s && 'select allow_id from c')}) k(id)
           where k.id is not null order by k.id) k
         cross join lateral (
           select w.id, w.allowance_raw, w.allowance_period, w.allowance_spent_raw, w.allowance_period_start
             from wallet_connection w
            where w.id = k.id and w.allowance_raw is not null
              and (select count(*) from lk) + (select count(*) from uk) >= 0
              for no key update) w
),
kl as (
  -- End-user keys' limits (docs/reference.md §19) the statement counts on, locked after the allowances
  -- (the subquery makes sure those are locked first), in id order.
  select k.id, k.limit_raw, k.limit_period, k.limit_spent_raw, k.limit_period_start
    from (select distinct x.id from (${union(h && 'select key_id from hu', s && 'select key_id from c where c.key_start is not null')}) x(id)
           where x.id is not null order by x.id) x
         cross join lateral (
           select k.id, k.limit_raw, k.limit_period, k.limit_spent_raw, k.limit_period_start
             from user_key k
            where k.id = x.id and k.limit_raw is not null and (select count(*) from ak) >= 0
              for no key update) k
),
${
  h
    ? `pre as (
  select hu.*, al.*, kq.*, coalesce(lk.balance_raw - lk.held_raw, 0) as acct_free, coalesce(lk.debt_raw, 0) as acct_debt,
         case when uk.day = hu.day then uk.model_requests else '{}'::jsonb end as day_models,
         coalesce(case when uk.day = hu.day then uk.requests end, 0) as used_requests,
         coalesce(case when uk.day = hu.day then uk.spend_raw end, 0) as used_spend,
         coalesce(case when uk.day = hu.day then (uk.model_requests->>hu.model)::int end, 0) as used_model,
         -- Several holds of one account (or one end user) in a statement: their place among them, and the
         -- running sum of what they would hold at their full cap.
         ${
           o
             ? `1::bigint as ark, 1::bigint as urk, 1::bigint as mrk, hu.day as first_day,
         ceil((hu.fixed + hu.max_cap * hu.per_token) / ${SCALE_PER_RAW}) as acct_full,
         ceil((hu.fixed + hu.max_cap * hu.per_token) / ${SCALE_PER_RAW}) as user_full, al.allow_start as first_allow_start,
         kq.key_start as first_key_start`
             : `row_number() over (partition by hu.account_id order by hu.i) as ark,
         row_number() over (partition by hu.user_id order by hu.i) as urk,
         row_number() over (partition by hu.user_id, hu.model order by hu.i) as mrk,
         first_value(hu.day) over (partition by hu.user_id order by hu.i) as first_day,
         sum(ceil((hu.fixed + hu.max_cap * hu.per_token) / ${SCALE_PER_RAW})) over (partition by hu.account_id order by hu.i) as acct_full,
         sum(ceil((hu.fixed + hu.max_cap * hu.per_token) / ${SCALE_PER_RAW})) over (partition by hu.user_id order by hu.i) as user_full,
         first_value(al.allow_start) over (partition by hu.user_id order by hu.i) as first_allow_start,
         first_value(kq.key_start) over (partition by hu.user_id order by hu.i) as first_key_start`
         }
    from hu left join lk on lk.id = hu.account_id left join uk on uk.end_user_id = hu.user_id
         left join lateral (
           -- The allowance's period as of this request (never before the stored one: clocks differ),
           -- and what was spent in it.
           select ak.id as allow_id, ak.allowance_raw as allowance, ak.allowance_period as allow_period, v.start as allow_start,
                  case when ak.allowance_period_start = v.start then ak.allowance_spent_raw else 0 end as allow_spent
             from ak, lateral (select greatest(ak.allowance_period_start, ${periodStartSql('ak.allowance_period', 'hu.at')}) as start) v
            where ak.id = hu.allow_key) al on true
         left join lateral (
           -- The key's limit period as of this request (never before the stored one), and what the key
           -- spent in it.
           select kl.limit_raw as key_limit, kl.limit_period as key_period, v.start as key_start,
                  case when kl.limit_period_start = v.start then kl.limit_spent_raw else 0 end as key_spent
             from kl, lateral (select greatest(kl.limit_period_start, ${periodStartSql('kl.limit_period', 'hu.at')}) as start) v
            where kl.id = hu.key_id) kq on true
),
lim0 as (
  select pre.*, least(acct_free, coalesce(spend_limit - used_spend, acct_free),
                      coalesce(allowance - allow_spent, acct_free), coalesce(key_limit - key_spent, acct_free)) as free,
         case when req_limit is not null and used_requests >= req_limit then 'dailyRequestLimit'
              when model_limit is not null and used_model >= model_limit then 'modelDailyRequestLimit'
              when spend_limit is not null and used_spend >= spend_limit then 'dailySpendLimit' end as over
    from pre
),
lim as (
  select lim0.*,
         -- The first hold of an account and of an end user is decided against the balance and counters as
         -- locked. A later one is decided here only when the answer does not depend on the ones before it:
         -- it is placed at its full cap when all of them (at their full cap) and it fit the free balance and
         -- every daily limit; with no daily limit it is refused when it cannot fit even alone. Otherwise it
         -- comes back with retry and is decided first in a later statement.
         connected and (ark > 1 or urk > 1) and not coalesce(
           (acct_full <= acct_free and day = first_day
            and (spend_limit is null or used_spend + user_full <= spend_limit)
            and (req_limit is null or used_requests + urk <= req_limit)
            and (model_limit is null or used_model + mrk <= model_limit)
            and (allowance is null or (allow_spent + user_full <= allowance
                                       and allow_start = first_allow_start))
            and (key_limit is null or (key_spent + user_full <= key_limit and key_start = first_key_start)))
           or (req_limit is null and model_limit is null and spend_limit is null and allowance is null
               and key_limit is null and fixed + min_cap * per_token > acct_free::numeric * ${SCALE_PER_RAW})
           -- Or the key's limit is used up (holds before it only spend more of it).
           or (key_limit is not null and key_spent >= key_limit and fixed + min_cap * per_token > 0
               and req_limit is null and model_limit is null)
           -- Or the app's allowance is used up (holds before it only spend more of it).
           or (allowance is not null and allow_spent >= allowance and fixed + min_cap * per_token > 0
               and req_limit is null and model_limit is null)
           -- Or it is over a daily limit already, and no limit checked before that one applies.
           or over = 'dailyRequestLimit' or (over = 'modelDailyRequestLimit' and req_limit is null)
           or (over = 'dailySpendLimit' and req_limit is null and model_limit is null),
           false) as retry
    from lim0
),
${
  r
    ? `hr as (
  -- Requests the API rate limit counts: every hold of this statement but those that come back to retry.
  select lim.i, lim.paywall_id, lim.rate_window, lim.rate_limit,
         row_number() over (partition by lim.paywall_id order by lim.i) as pos
    from lim where lim.rate_limit is not null and not lim.retry
),
rq as (
  select paywall_id, max(rate_window) as w, count(*)::int as n from hr group by paywall_id
),
rw as (${RATE_WINDOW_UPSERT('select paywall_id, w, n from rq')}
),
rate as (
  select hr.i, rw.count - rq.n + hr.pos as position, rw.count - rq.n + hr.pos > hr.rate_limit as over
    from hr join rq on rq.paywall_id = hr.paywall_id join rw on rw.paywall_id = hr.paywall_id
),`
    : ''
}
calc as (
  select lim.i, lim.user_id as id, lim.account_id, lim.day, lim.model, lim.day_models,
         lim.used_requests, lim.used_spend, lim.used_model, ${r ? 'rate.position' : 'null::int'} as rate_position,
         ${r ? 'coalesce(rate.over, false)' : 'false'} as rate_over,
         case when lim.shared then lim.wallet_user_id else lim.user_id end as wallet_id,
         lim.connected, lim.retry, lim.acct_debt, lim.acct_debt > lim.max_debt as indebted,
         lim.free, k.cap, k.affords_min,
         ceil((lim.fixed + k.cap * lim.per_token) / ${SCALE_PER_RAW})::bigint as hold,
         lim.allow_id, lim.allowance, lim.allow_period, lim.allow_spent, lim.allow_start, a.hit as allowance_hit,
         lim.key_id, lim.key_limit, lim.key_period, lim.key_spent, lim.key_start, kh.hit as key_hit,
         -- A spend limit that leaves less than the smallest request is a limit, not a short balance.
         coalesce(lim.over, case when not k.affords_min and not a.hit and not kh.hit and lim.spend_limit is not null
                                  and lim.spend_limit - lim.used_spend < lim.acct_free then 'dailySpendLimit' end) as limit_hit
    from lim ${r ? 'left join rate on rate.i = lim.i' : ''},
    lateral (
      select case when lim.per_token = 0 then case when lim.fixed <= lim.free::numeric * ${SCALE_PER_RAW} then lim.max_cap else -1 end
             else greatest(-1, least(lim.max_cap::numeric,
                    floor((lim.free::numeric * ${SCALE_PER_RAW} - lim.fixed) / lim.per_token)))::bigint
             end as cap,
           lim.fixed + lim.min_cap * lim.per_token <= lim.free::numeric * ${SCALE_PER_RAW} as affords_min
    ) k,
    lateral (
      -- The allowance's rest is the bound that refused it (not the balance, not a daily spend limit).
      select coalesce(not k.affords_min and lim.over is null and lim.allowance is not null
                      and lim.allowance - lim.allow_spent <= lim.acct_free
                      and (lim.spend_limit is null or lim.allowance - lim.allow_spent <= lim.spend_limit - lim.used_spend),
                      false) as hit
    ) a,
    lateral (
      -- The key's rest is the bound that refused it (not the balance, a daily spend limit, an allowance).
      select coalesce(not k.affords_min and lim.over is null and lim.key_limit is not null
                      and lim.key_limit - lim.key_spent <= lim.acct_free
                      and (lim.spend_limit is null or lim.key_limit - lim.key_spent <= lim.spend_limit - lim.used_spend)
                      and (lim.allowance is null or lim.key_limit - lim.key_spent <= lim.allowance - lim.allow_spent),
                      false) as hit
    ) kh
),
ok as (
  select * from calc
   where connected and not retry and not rate_over and limit_hit is null and affords_min and hold <= free
     and not indebted
),
-- Per end user: its holds of this statement (all on one day: see lim) count once each; its settlements
-- give back what their holds reserved beyond what they captured, on the day they were counted.
hagg as (
  select ok.id, min(ok.day) as day, count(*)::int as n, sum(ok.hold)::bigint as spend,
         min(ok.used_requests) as used_requests, min(ok.used_spend) as used_spend,
         (array_agg(ok.day_models))[1] as day_models
    from ok group by ok.id
),
magg as (
  select m.id, jsonb_object_agg(m.model, m.n) as models
    from (select ok.id, ok.model, min(ok.used_model) + count(*)::int as n from ok group by ok.id, ok.model) m
   group by m.id
),
aagg as (
  -- Per allowance: what its placed holds reserve (all in one period: see lim).
  select ok.allow_id as id, min(ok.allow_start) as start, sum(ok.hold)::bigint as spend
    from ok where ok.allow_id is not null group by ok.allow_id
),
kagg as (
  -- Per end-user key with a limit: what its placed holds reserve (all in one period: see lim).
  select ok.key_id as id, min(ok.key_start) as start, sum(ok.hold)::bigint as spend
    from ok where ok.key_limit is not null group by ok.key_id
),`
    : ''
}
${
  s
    ? `sagg as (
  select c.user_id as id, sum(c.captured - c.hold_raw)::bigint as adj
    from c join uk on uk.end_user_id = c.user_id and uk.day = c.usage_day
   group by c.user_id
),
sallow as (
  -- What settled holds counted on an allowance beyond what they captured, per allowance and period.
  select c.allow_id as id, c.allow_start as start, sum(c.captured - c.hold_raw)::bigint as adj
    from c where c.allow_id is not null group by c.allow_id, c.allow_start
),
skey as (
  -- The same for end-user keys' limits.
  select c.key_id as id, c.key_start as start, sum(c.captured - c.hold_raw)::bigint as adj
    from c where c.key_start is not null group by c.key_id, c.key_start
),`
    : ''
}
cnt as (
  update usage_counter x
     set day = v.day, requests = v.requests, spend_raw = v.spend, model_requests = v.models
    from (
      select uk.end_user_id as id, ${h ? 'coalesce(h.day, uk.day)' : 'uk.day'} as day,
             ${h ? 'coalesce(h.used_requests + h.n, uk.requests)' : 'uk.requests'} as requests,
             greatest(0, ${h ? 'coalesce(h.used_spend + h.spend, uk.spend_raw)' : 'uk.spend_raw'}
                         ${s ? `+ case when ${h ? 'coalesce(h.day, uk.day)' : 'uk.day'} = uk.day then coalesce(s.adj, 0) else 0 end` : ''}) as spend,
             ${h ? 'coalesce(h.day_models || m.models, uk.model_requests)' : 'uk.model_requests'} as models
        from uk ${h ? 'left join hagg h on h.id = uk.end_user_id left join magg m on m.id = uk.end_user_id' : ''}
             ${s ? 'left join sagg s on s.id = uk.end_user_id' : ''}
       where ${[h && 'h.id is not null', s && 's.id is not null'].filter(Boolean).join(' or ')}
    ) v
   where x.end_user_id = v.id
),
acnt as (
  -- The allowances' spending: a later period starts from 0; holds add what they reserve; settlements
  -- correct it to what they captured, when they counted in the period it now holds.
  update wallet_connection w
     set allowance_period_start = v.start,
         allowance_spent_raw = greatest(0, case when v.start = ak.allowance_period_start then ak.allowance_spent_raw else 0 end
                                           ${h ? '+ coalesce(a.spend, 0)' : ''} ${s ? '+ coalesce(sa.adj, 0)' : ''})
    from ak ${h ? 'left join aagg a on a.id = ak.id' : ''}
         cross join lateral (select ${h ? 'coalesce(a.start, ak.allowance_period_start)' : 'ak.allowance_period_start'} as start) v
         ${s ? 'left join sallow sa on sa.id = ak.id and sa.start = v.start' : ''}
   where w.id = ak.id and (${[h && 'a.id is not null', s && 'sa.id is not null'].filter(Boolean).join(' or ')})
),
kcnt as (
  -- The end-user keys' spending, counted as the allowances' is.
  update user_key k
     set limit_period_start = v.start,
         limit_spent_raw = greatest(0, case when v.start = kl.limit_period_start then kl.limit_spent_raw else 0 end
                                       ${h ? '+ coalesce(ka.spend, 0)' : ''} ${s ? '+ coalesce(sk.adj, 0)' : ''})
    from kl ${h ? 'left join kagg ka on ka.id = kl.id' : ''}
         cross join lateral (select ${h ? 'coalesce(ka.start, kl.limit_period_start)' : 'kl.limit_period_start'} as start) v
         ${s ? 'left join skey sk on sk.id = kl.id and sk.start = v.start' : ''}
   where k.id = kl.id and (${[h && 'ka.id is not null', s && 'sk.id is not null'].filter(Boolean).join(' or ')})
),
delta as (
  select id, sum(held_delta)::bigint as held_delta, sum(balance_delta)::bigint as balance_delta,
         sum(debt_delta)::bigint as debt_delta
    from (
      ${union(h && 'select ok.account_id as id, ok.hold as held_delta, 0::bigint as balance_delta, 0::bigint as debt_delta from ok', s && 'select c.account_id as id, -c.hold_raw as held_delta, -c.captured as balance_delta, c.uncollected as debt_delta from c union all select legs.account, 0, legs.amount, 0 from legs')}
    ) d
   group by id
),
u as (
  -- What a settlement could not collect becomes the spending account's debt (repaid first, see collectDebt).
  update ledger_account a
     set held_raw = a.held_raw + d.held_delta, balance_raw = a.balance_raw + d.balance_delta,
         debt_raw = a.debt_raw + d.debt_delta
    from delta d join lk on lk.id = d.id
   where a.id = d.id
  returning a.id, a.balance_raw, a.held_raw, a.low_alert_raw, a.low_alerted, a.low_alerted_paywalls
)${
    h
      ? `,
ch as (
  insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, max_completion_tokens,
                      stream, metadata, created_at, user_key_id)
  select hi.charge_id, hi.paywall_id, ok.id, ok.account_id, 'usage', 'held', ok.hold, hi.model, ok.cap, hi.stream,
         hi.metadata || case when ok.allow_id is null then '{}'::jsonb
                             else jsonb_build_object('allowance', jsonb_build_object('id', ok.allow_id, 'start', ok.allow_start)) end
                     || case when ok.key_limit is null then '{}'::jsonb
                             else jsonb_build_object('keyLimitStart', ok.key_start) end,
         now(), hi.key_id
    from ok join hi on hi.i = ok.i
),
hev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select ${EVENT_ROW('hi', 'hi.charge_id', "jsonb_build_object('walletUserId', ok.wallet_id)")}
    from ok join hi on hi.i = ok.i,
         jsonb_to_recordset(hi.events) as x(${EVENT_COLUMNS})
   order by ok.i, x.ord
)`
      : ''
  }${
    s
      ? `,
tr as (
  insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw, paywall_id,
                        end_user_id, charge_id, metadata, created_at)
  select legs.id, legs.kind, legs.debit, legs.account, legs.amount, u.balance_raw, legs.paywall_id, legs.user_id,
         legs.charge_id, legs.metadata, now()
    from legs join u on u.id = legs.debit
   order by legs.i, legs.n
),
sev as (
  insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
  select ${EVENT_ROW('c', 'c.id')}
    from c, jsonb_to_recordset(c.events) as x(${EVENT_COLUMNS})
   order by c.i, x.ord
)`
      : ''
  }
${union(
  h &&
    `select 'h' as kind, calc.i, calc.id, calc.wallet_id, calc.connected, calc.free::text as free,
       calc.cap::text as cap, calc.hold::text as hold, ok.i is not null as held, calc.retry, calc.limit_hit,
       calc.rate_position, calc.indebted, calc.account_id, calc.acct_debt::text as debt,
       null::text as low_alert, null::boolean as low_alerted, null::text[] as low_alerted_paywalls,
       calc.allowance_hit, calc.allow_id, calc.allowance::text as allowance, calc.allow_period,
       calc.allow_spent::text as allow_spent, calc.allow_start::text as allow_start,
       calc.key_hit, calc.key_limit::text as key_limit, calc.key_period, calc.key_spent::text as key_spent,
       calc.key_start::text as key_start
  from calc left join ok on ok.i = calc.i`,
  s &&
    `select 's' as kind, c.i, null::uuid as id, null::uuid as wallet_id, null::boolean as connected,
       -- The account as updated by u (every settlement's account is in it: its hold is released).
       (u.balance_raw - u.held_raw)::text as free,
       null::text as cap, null::text as hold, true as held, false as retry, null::text as limit_hit,
       null::bigint as rate_position, null::boolean as indebted, null::uuid as account_id, null::text as debt,
       -- Its low-balance alert state (low-balance.ts decides in memory whether a check is due).
       u.low_alert_raw::text as low_alert, u.low_alerted, u.low_alerted_paywalls,
       null::boolean as allowance_hit, null::uuid as allow_id, null::text as allowance, null::text as allow_period,
       null::text as allow_spent, null::text as allow_start,
       null::boolean as key_hit, null::text as key_limit, null::text as key_period, null::text as key_spent,
       null::text as key_start
  from c left join u on u.id = c.account_id`,
)}`;
}

const tickStatements = new Map<string, { text: string; name: string }>();

/** The prepared statement of a shape, built once (its name says its parts, e.g. proxy_ledger_tick_hs). */
export function tickStatement(shape: TickShape): { text: string; name: string } {
  const [r, o] = [shape.h && shape.r, shape.h && !!shape.o];
  const key = `${shape.h ? 'h' : ''}${shape.s ? 's' : ''}${r ? 'r' : ''}${o ? 'o' : ''}`;
  let st = tickStatements.get(key);
  if (!st)
    tickStatements.set(key, (st = { text: tickSql({ ...shape, r, o }), name: `proxy_ledger_tick_${key}` }));
  return st;
}
