import type { Database, Sql } from '../../db/database.js';
import { ConcurrencyGate } from '../../shared/concurrency-gate.js';
import { invalid } from '../../shared/errors.js';

export type UsageGroupBy = 'DAY' | 'MODEL' | 'USER';

export interface UsageRow {
  /** DAY: `YYYY-MM-DD` (UTC); MODEL: the model id ('' for manual charges); USER: the external id. */
  key: string;
  /** USER: the end user's id. */
  userId: string | null;
  requests: number;
  revenueRaw: bigint;
  costRaw: bigint;
  /** All input tokens (cache read, cache write and audio prompt included). */
  promptTokens: number;
  /** All output tokens (reasoning and audio completion included). */
  completionTokens: number;
  /** Parts of promptTokens / completionTokens by usage bucket (docs/reference.md §13). */
  cacheReadTokens: number;
  cacheWriteTokens: number;
  audioPromptTokens: number;
  reasoningTokens: number;
  audioCompletionTokens: number;
  /** docs/reference.md §22: image input / output tokens (parts of the totals), and the units charged. */
  imagePromptTokens: number;
  imageCompletionTokens: number;
  images: number;
  audioSeconds: number;
  characters: number;
}

export interface UsageReport {
  from: string;
  to: string;
  groupBy: UsageGroupBy;
  totals: UsageRow;
  buckets: UsageRow[];
}

/** At most this many days per query (a year and a month: the dashboard's year view, with room). */
export const MAX_USAGE_DAYS = 400;
/** A day is rolled up once it has been over for this long (settlements in flight have committed). */
const SETTLE_MARGIN = `interval '10 minutes'`;

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const dayNumber = (s: string, name: string): number => {
  const t = DATE.test(s) ? Date.parse(`${s}T00:00:00Z`) : NaN;
  if (!Number.isFinite(t) || new Date(t).toISOString().slice(0, 10) !== s)
    throw invalid(`${name} must be a date YYYY-MM-DD`, name);
  return t / 86_400_000;
};

/**
 * The roll-up mark as the statement's own snapshot sees it (on a replica it may trail the primary's): in the
 * totals row, so a report can tell that it read roll-ups older than the mark it was given.
 */
const SEEN_THROUGH = `(select to_char(rolled_through, 'YYYY-MM-DD') from usage_rollup where paywall_id = $1)`;

/**
 * The token sums of a group: [alias, roll-up column, key of a usage charge's `metadata.buckets`]. pt and
 * ct are the input and output totals (`charge.prompt_tokens` / `completion_tokens`); the others the usage
 * buckets they include (docs/reference.md §13). A charge without buckets (settled before them, a manual
 * charge) counts all its input as prompt and all its output as completion.
 */
const TOKENS = [
  ['pt', 'prompt_tokens', null],
  ['ct', 'completion_tokens', null],
  ['cr', 'cache_read_tokens', 'cacheRead'],
  ['cw', 'cache_write_tokens', 'cacheWrite'],
  ['ap', 'audio_prompt_tokens', 'audioPrompt'],
  ['rt', 'reasoning_tokens', 'reasoning'],
  ['ac', 'audio_completion_tokens', 'audioCompletion'],
  ['ip', 'image_prompt_tokens', 'imagePrompt'],
  ['ic', 'image_completion_tokens', 'imageCompletion'],
  // docs/reference.md §22: the units of a charge (`metadata.units`), not tokens but summed alike.
  ['im', 'images', 'units.images'],
  ['au', 'audio_seconds', 'units.audioSeconds'],
  ['ch', 'characters', 'units.characters'],
] as const;
type TokenAlias = (typeof TOKENS)[number][0];
/** `each(alias, column)` for every token sum, comma-separated, in TOKENS order. */
const tokens = (each: (alias: TokenAlias, column: string) => string): string =>
  TOKENS.map(([a, col]) => each(a, col)).join(', ');
/** Roll-up columns of the token sums. */
const TOKEN_COLUMNS = tokens((_, col) => col);
/**
 * Per charge `c`: the token sums of its rows. Bucket counts are read only from usage charges (their
 * metadata is the settlement's; a manual charge's is the caller's own JSON) and only where they are numbers.
 */
const RAW_TOKENS =
  TOKENS.map(([a, col, key]) => {
    if (key === null) return `sum(coalesce(c.${col}, 0)) as ${a}`;
    const [obj, field] = key.startsWith('units.') ? ['units', key.slice(6)] : ['buckets', key];
    return `sum(case when c.kind = 'usage' and jsonb_typeof(c.metadata->'${obj}'->'${field}') = 'number'
                then (c.metadata->'${obj}'->>'${field}')::bigint else 0 end) as ${a}`;
  }).join(', ') +
  // The images' cost, per charge at the price per image it kept (pico-USDC x 10^6, for TOKEN_COST).
  `, sum(case when c.kind = 'usage' and jsonb_typeof(c.metadata->'units'->'images') = 'number'
              then (c.metadata->'units'->>'images')::numeric * (c.metadata->'units'->>'imagePrice')::numeric
                   * 1000000000000000000 else 0 end) as imc`;

/**
 * Token-cost of a group `g` at the model's configured cost prices (pico-USDC per token), rounded up to raw
 * units: each bucket at its own price where it has one, else at the prompt or completion price it follows
 * (docs/reference.md §13); the rest of the input at the prompt price, of the output at the completion price.
 */
const TOKEN_COST = (g: string) =>
  `ceil((
     (${g}.pt - ${g}.cr - ${g}.cw - ${g}.ap - ${g}.ip)::numeric * coalesce(mp.prompt_pico, 0)
     + ${g}.ip::numeric * coalesce(mp.image_prompt_pico, mp.prompt_pico, 0)
     + ${g}.ic::numeric * coalesce(mp.image_completion_pico, mp.completion_pico, 0)
     + ${g}.au::numeric * coalesce(mp.audio_second_pico, 0)
     + ${g}.ch::numeric * coalesce(mp.characters_1k_pico, 0) / 1000
     + ${g}.imc / 1000000
     + ${g}.cr::numeric * coalesce(mp.cache_read_pico, mp.prompt_pico, 0)
     + ${g}.cw::numeric * coalesce(mp.cache_write_pico, mp.prompt_pico, 0)
     + ${g}.ap::numeric * coalesce(mp.audio_prompt_pico, mp.prompt_pico, 0)
     + (${g}.ct - ${g}.rt - ${g}.ac - ${g}.ic)::numeric * coalesce(mp.completion_pico, 0)
     + ${g}.rt::numeric * coalesce(mp.reasoning_pico, mp.completion_pico, 0)
     + ${g}.ac::numeric * coalesce(mp.audio_completion_pico, mp.completion_pico, 0)
   ) / 1000000)::bigint`;
/**
 * Provider cost of a group of charges `g` (grouped by {@link PAID}): what the ledger paid the built-in
 * provider for them where it did (the `provider_cost` leg of a SHARED charge's split, exact), else the
 * tokens at the model's configured cost prices.
 */
const COST = (g: string) => `(case when ${g}.paid then ${g}.paid_cost else ${TOKEN_COST(g)} end)`;
/** Per charge `c`: the built-in provider's leg of its split, if any (index transfer_provider_cost_index). */
const PAID_JOIN = `left join lateral (select sum(t.amount_raw) as amount from transfer t
             where t.charge_id = c.id and t.kind = 'provider_cost') pc on true`;
/** Group columns of {@link COST}: whether the group's charges had a provider leg, and its sum. */
const PAID = `pc.amount is not null`;
const PAID_COLUMNS = `${PAID} as paid, coalesce(sum(pc.amount), 0) as paid_cost`;

/**
 * Revenue, provider cost, margin, requests and tokens of a paywall's completed charges, aggregated in SQL
 * by UTC day, model or end user. Days that are over are read from daily roll-ups (written here, lazily, the
 * first time a query needs them); the rest from `charge` through a partial index. Provider cost is what
 * the ledger paid the built-in provider for a charge where it did (a SHARED paywall served by it), else the
 * tokens at the model's configured cost prices per usage bucket (no markup, no request price).
 */
export class UsageService {
  /**
   * Usage reads are the expensive ones of the API (aggregates over many rows): only a few run at once,
   * in the process and per tenant, so a burst of them waits its turn instead of taking every pooled
   * connection from everybody's balance reads and charges.
   */
  private readonly gate: ConcurrencyGate;

  constructor(
    private readonly db: Database,
    limits: { total: number; perTenant: number } = { total: 4, perTenant: 2 },
    /** The report's read (lag-tolerant): the replica in a GraphQL query. Roll-ups are written on `db`. */
    private readonly reads: Sql = db,
  ) {
    this.gate = new ConcurrencyGate(limits.total, limits.perTenant);
  }

  /** Usage reads running now (tests and diagnostics). */
  get activeReads(): number {
    return this.gate.active;
  }

  /** `tenant` shares the per-tenant bound (the paywall's owner). */
  async usage(
    paywallId: string,
    from: string,
    to: string,
    groupBy: UsageGroupBy,
    limit: number,
    tenant: string = paywallId,
  ): Promise<UsageReport> {
    const f = dayNumber(from, 'from');
    const t = dayNumber(to, 'to');
    if (t < f) throw invalid('to must not be before from', 'to');
    if (t - f + 1 > MAX_USAGE_DAYS) throw invalid(`at most ${MAX_USAGE_DAYS} days per query`, 'to');
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw invalid('limit must be 1 to 1000', 'limit');
    return this.gate.run(tenant, () => this.read(paywallId, from, to, f, t, groupBy, limit));
  }

  private async read(
    paywallId: string,
    from: string,
    to: string,
    f: number,
    t: number,
    groupBy: UsageGroupBy,
    limit: number,
  ): Promise<UsageReport> {
    const rolledThrough = await this.rollUp(paywallId);
    // Rolled-up days: [from, min(to, rolledThrough)]; raw charges: settled from max(from, rolledThrough+1).
    const params = [paywallId, from, to, rolledThrough];
    const rawWhere = `c.paywall_id = $1 and c.status = 'completed'
        and c.settled_at >= (greatest($2::date, coalesce($4::date + 1, $2::date)))::timestamp at time zone 'UTC'
        and c.settled_at < ($3::date + 1)::timestamp at time zone 'UTC'`;
    const rolledWhere = `r.paywall_id = $1 and r.day >= $2::date and r.day <= least($3::date, $4::date)`;
    let text: string;
    if (groupBy === 'USER') {
      // Rolled-up part per user: running total at min(to, rolledThrough) minus running total before from.
      const cum = (cmp: string, bound: string) => `left join lateral (
             select requests, revenue_raw, cost_raw, ${TOKEN_COLUMNS} from usage_day_user c
              where c.paywall_id = $1 and c.end_user_id = u.id and c.day ${cmp} ${bound}
              order by c.day desc limit 1) `;
      text = `with raw as (
           select c.user_id, coalesce(c.model, '') as model, count(*) as requests, sum(c.amount_raw) as revenue,
                  ${RAW_TOKENS}, ${PAID_COLUMNS}
             from charge c ${PAID_JOIN} where ${rawWhere} group by 1, 2, ${PAID}
         ), combined as (
           select raw.user_id, raw.requests, raw.revenue, ${COST('raw')} as cost, ${tokens((a) => `raw.${a}`)}
             from raw left join model_price mp on mp.paywall_id = $1 and mp.model_id = raw.model
           union all
           select u.id, coalesce(hi.requests, 0) - coalesce(lo.requests, 0),
                  coalesce(hi.revenue_raw, 0) - coalesce(lo.revenue_raw, 0),
                  coalesce(hi.cost_raw, 0) - coalesce(lo.cost_raw, 0),
                  ${tokens((_, col) => `coalesce(hi.${col}, 0) - coalesce(lo.${col}, 0)`)}
             from end_user u
             ${cum('<=', 'least($3::date, $4::date)')} hi on true
             ${cum('<', '$2::date')} lo on true
            where u.paywall_id = $1 and $4::date >= $2::date and hi.requests is not null
         ), grouped as (
           select user_id, sum(requests) as requests, sum(revenue) as revenue, sum(cost) as cost,
                  ${tokens((a) => `sum(${a}) as ${a}`)}
             from combined group by user_id having sum(requests) > 0
         ), totals as (
           select sum(requests) as requests, sum(revenue) as revenue, sum(cost) as cost,
                  ${tokens((a) => `sum(${a}) as ${a}`)}
             from grouped
         )
         select * from (
           select g.user_id, u.external_id as key, g.requests::text, g.revenue::text, g.cost::text,
                  ${tokens((a) => `g.${a}::text`)}, false as total, null as seen_through
             from grouped g join end_user u on u.id = g.user_id
            order by g.revenue desc, u.external_id limit ${limit}
         ) top
         union all
         select null, '', coalesce(requests, 0)::text, coalesce(revenue, 0)::text, coalesce(cost, 0)::text,
                ${tokens((a) => `coalesce(${a}, 0)::text`)}, true, ${SEEN_THROUGH} from totals`;
    } else {
      const key = groupBy === 'DAY' ? 'day' : 'model';
      text = `with raw as (
           select (c.settled_at at time zone 'UTC')::date as day, coalesce(c.model, '') as model, count(*) as requests,
                  sum(c.amount_raw) as revenue, ${RAW_TOKENS}, ${PAID_COLUMNS}
             from charge c ${PAID_JOIN} where ${rawWhere} group by 1, 2, ${PAID}
         ), combined as (
           select raw.day, raw.model, raw.requests, raw.revenue, ${COST('raw')} as cost, ${tokens((a) => `raw.${a}`)}
             from raw left join model_price mp on mp.paywall_id = $1 and mp.model_id = raw.model
           union all
           select r.day, r.model, r.requests, r.revenue_raw, r.cost_raw, ${tokens((_, col) => `r.${col}`)}
             from usage_day_model r where ${rolledWhere}
         )
         select ${key === 'day' ? `to_char(day, 'YYYY-MM-DD')` : 'model'} as key, null as user_id,
                sum(requests)::text as requests, sum(revenue)::text as revenue, sum(cost)::text as cost,
                ${tokens((a) => `sum(${a})::text as ${a}`)}, false as total, null as seen_through
           from combined group by 1
         union all
         select '', null, coalesce(sum(requests), 0)::text, coalesce(sum(revenue), 0)::text,
                coalesce(sum(cost), 0)::text, ${tokens((a) => `coalesce(sum(${a}), 0)::text`)}, true,
                ${SEEN_THROUGH}
           from combined`;
    }
    let rows = await this.reads.query(text, params);
    // A replica that has not replayed the roll-up just written on the primary has neither its rows nor its
    // mark: the days in between would count nothing. Such a report is read again on the primary.
    const seen: string | null = rows.find((r) => r.total)?.seen_through ?? null;
    if (rolledThrough !== null && (seen === null || seen < rolledThrough))
      rows = await this.db.query(text, params);
    const toRow = (r: any): UsageRow => ({
      key: r.key,
      userId: r.user_id ?? null,
      requests: Number(r.requests),
      revenueRaw: BigInt(r.revenue),
      costRaw: BigInt(r.cost),
      promptTokens: Number(r.pt),
      completionTokens: Number(r.ct),
      cacheReadTokens: Number(r.cr),
      cacheWriteTokens: Number(r.cw),
      audioPromptTokens: Number(r.ap),
      reasoningTokens: Number(r.rt),
      audioCompletionTokens: Number(r.ac),
      imagePromptTokens: Number(r.ip),
      imageCompletionTokens: Number(r.ic),
      images: Number(r.im),
      audioSeconds: Number(r.au),
      characters: Number(r.ch),
    });
    const totals = toRow(rows.find((r) => r.total));
    let buckets = rows.filter((r) => !r.total).map(toRow);
    if (groupBy === 'DAY') {
      // Every day of the range, zeros included (a chart's x axis).
      const byDay = new Map(buckets.map((b) => [b.key, b]));
      buckets = [];
      for (let d = f; d <= t; d++) {
        const key = new Date(d * 86_400_000).toISOString().slice(0, 10);
        buckets.push(byDay.get(key) ?? { ...zero(), key });
      }
    } else if (groupBy === 'MODEL') {
      buckets.sort((a, b) =>
        a.revenueRaw === b.revenueRaw ? a.key.localeCompare(b.key) : a.revenueRaw > b.revenueRaw ? -1 : 1,
      );
      buckets = buckets.slice(0, limit);
    }
    return { from, to, groupBy, totals, buckets };
  }

  /**
   * Rolls up every day of the paywall that is over and not rolled up yet, once (concurrent callers wait
   * on the paywall's `usage_rollup` row). Returns the last rolled-up day, or null when there is none.
   */
  async rollUp(paywallId: string): Promise<string | null> {
    const [state] = await this.db.query<{ through: string | null; closed: string }>(
      `select (select to_char(rolled_through, 'YYYY-MM-DD') from usage_rollup where paywall_id = $1) as through,
              to_char(((now() at time zone 'UTC') - ${SETTLE_MARGIN})::date - 1, 'YYYY-MM-DD') as closed`,
      [paywallId],
    );
    if (state.through !== null && state.through >= state.closed) return state.through;
    return this.db.transaction(async (tx) => {
      await tx.query(
        `insert into usage_rollup (paywall_id, rolled_through)
         select $1, coalesce(min((settled_at at time zone 'UTC')::date) - 1, $2::date)
           from charge where paywall_id = $1 and status = 'completed'
         on conflict (paywall_id) do nothing`,
        [paywallId, state.closed],
      );
      const [locked] = await tx.query<{ through: string }>(
        `select to_char(rolled_through, 'YYYY-MM-DD') as through from usage_rollup where paywall_id = $1 for update`,
        [paywallId],
      );
      if (locked.through >= state.closed) return locked.through;
      await this.rollDays(tx, paywallId, locked.through, state.closed);
      await tx.query(
        `update usage_rollup set rolled_through = $2::date, updated_at = now() where paywall_id = $1`,
        [paywallId, state.closed],
      );
      return state.closed;
    });
  }

  /** Roll-up rows for the days after `after` up to and including `through`. */
  private async rollDays(tx: Sql, paywallId: string, after: string, through: string): Promise<void> {
    const where = `c.paywall_id = $1 and c.status = 'completed'
        and c.settled_at >= ($2::date + 1)::timestamp at time zone 'UTC'
        and c.settled_at < ($3::date + 1)::timestamp at time zone 'UTC'`;
    await tx.query(
      `insert into usage_day_model (paywall_id, day, model, requests, revenue_raw, cost_raw, ${TOKEN_COLUMNS})
       select $1, g.day, g.model, sum(g.requests), sum(g.revenue), sum(${COST('g')}), ${tokens((a) => `sum(g.${a})`)}
         from (select (c.settled_at at time zone 'UTC')::date as day, coalesce(c.model, '') as model,
                      count(*) as requests, sum(c.amount_raw) as revenue, ${RAW_TOKENS}, ${PAID_COLUMNS}
                 from charge c ${PAID_JOIN} where ${where} group by 1, 2, ${PAID}) g
         left join model_price mp on mp.paywall_id = $1 and mp.model_id = g.model
        group by g.day, g.model
       on conflict do nothing`,
      [paywallId, after, through],
    );
    // Running totals: the user's latest row before these days plus the days' sums in order.
    await tx.query(
      `insert into usage_day_user (paywall_id, end_user_id, day, requests, revenue_raw, cost_raw, ${TOKEN_COLUMNS})
       select $1, d.user_id, d.day,
              coalesce(prev.requests, 0) + sum(d.requests) over w,
              coalesce(prev.revenue_raw, 0) + sum(d.revenue) over w,
              coalesce(prev.cost_raw, 0) + sum(d.cost) over w,
              ${tokens((a, col) => `coalesce(prev.${col}, 0) + sum(d.${a}) over w`)}
         from (select g.day, g.user_id, sum(g.requests) as requests, sum(g.revenue) as revenue,
                      sum(${COST('g')}) as cost, ${tokens((a) => `sum(g.${a}) as ${a}`)}
                 from (select (c.settled_at at time zone 'UTC')::date as day, c.user_id, coalesce(c.model, '') as model,
                              count(*) as requests, sum(c.amount_raw) as revenue, ${RAW_TOKENS}, ${PAID_COLUMNS}
                         from charge c ${PAID_JOIN} where ${where} group by 1, 2, 3, ${PAID}) g
                 left join model_price mp on mp.paywall_id = $1 and mp.model_id = g.model
                group by g.day, g.user_id) d
         left join lateral (
           select p.requests, p.revenue_raw, p.cost_raw, ${tokens((_, col) => `p.${col}`)} from usage_day_user p
            where p.paywall_id = $1 and p.end_user_id = d.user_id and p.day <= $2::date
            order by p.day desc limit 1) prev on true
       window w as (partition by d.user_id order by d.day)
       on conflict do nothing`,
      [paywallId, after, through],
    );
  }
}

const zero = (): UsageRow => ({
  key: '',
  userId: null,
  requests: 0,
  revenueRaw: 0n,
  costRaw: 0n,
  promptTokens: 0,
  completionTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  audioPromptTokens: 0,
  reasoningTokens: 0,
  audioCompletionTokens: 0,
  imagePromptTokens: 0,
  imageCompletionTokens: 0,
  images: 0,
  audioSeconds: 0,
  characters: 0,
});
