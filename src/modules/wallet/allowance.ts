import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import { MAX_AMOUNT_RAW, parseDecimal, RAW_DECIMALS, usdcDecimal } from '../../shared/money.js';
import { eventRows, insertEventsSql, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';

/**
 * Per-app allowances of a wallet (docs/reference.md §16 "Allowance (SHARED)", docs/wallet.md "Spending
 * limits"). The limit and what the app spent in the current period live on the connection
 * (`wallet_connection.allowance_*`); the statements that spend (the hold statement, a manual charge)
 * check and count it under the connection's row lock, and reset it when they see a later period.
 */

export const ALLOWANCE_PERIODS = ['day', 'week', 'month', 'total'] as const;
export type AllowancePeriod = (typeof ALLOWANCE_PERIODS)[number];

/** The start of a `total` allowance's one period (it never resets). */
export const TOTAL_PERIOD_START = '1970-01-01';

const day = (y: number, m: number, d: number) => new Date(Date.UTC(y, m, d));

/**
 * The first day (UTC) of the period of `period` that holds the instant `at`: days, weeks from Monday,
 * calendar months; a `total` allowance has one period. The rule is the database's `ledger_period_start`
 * (migrations/sql/ledger-functions-v5.ts), which every SQL path calls; this is its display twin (the
 * wallet page, GraphQL), checked against it by test/ledger-lean.test.ts.
 */
export function periodStart(period: AllowancePeriod, at: Date): Date {
  const [y, m, d] = [at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()];
  if (period === 'day') return day(y, m, d);
  if (period === 'week') return day(y, m, d - ((at.getUTCDay() + 6) % 7));
  if (period === 'month') return day(y, m, 1);
  return new Date(`${TOTAL_PERIOD_START}T00:00:00.000Z`);
}

/** When the period that starts on `start` ends (the next one starts); null for `total`. */
export function periodEnd(period: AllowancePeriod, start: Date): Date | null {
  const [y, m, d] = [start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate()];
  if (period === 'day') return day(y, m, d + 1);
  if (period === 'week') return day(y, m, d + 7);
  if (period === 'month') return day(y, m + 1, 1);
  return null;
}

/** `YYYY-MM-DD` of a UTC midnight. */
export const dateOnly = (d: Date): string => d.toISOString().slice(0, 10);

/** A connection's allowance as its owner and the wallet page see it. */
export interface AllowanceState {
  amountRaw: bigint;
  period: AllowancePeriod;
  /** Spent in the current period (0 when the stored count belongs to an earlier period). */
  spentRaw: bigint;
  /** When the current period ends; null for `total`. */
  resetsAt: Date | null;
}

/**
 * The allowance of a connection row (`allowance_raw`, `allowance_period`, `allowance_spent_raw`,
 * `allowance_period_start`) as of `now`: a count of an earlier period reads 0. Null when no limit.
 */
export function allowanceOf(
  r: {
    allowance_raw: string | null;
    allowance_period: string | null;
    allowance_spent_raw: string;
    allowance_period_start: string | Date | null;
  },
  now: Date,
): AllowanceState | null {
  if (r.allowance_raw === null || r.allowance_period === null) return null;
  const period = r.allowance_period as AllowancePeriod;
  const current = periodStart(period, now);
  const stored = r.allowance_period_start === null ? null : storedDate(r.allowance_period_start);
  // A count of a later period than the clock's (another instance's clock ran ahead) is still current.
  const start = stored !== null && stored >= current ? stored : current;
  return {
    amountRaw: BigInt(r.allowance_raw),
    period,
    spentRaw: stored !== null && stored >= current ? BigInt(r.allowance_spent_raw) : 0n,
    resetsAt: periodEnd(period, start),
  };
}

/** A `date` column as node-postgres or PGlite return it (a Date at local midnight, or a string). */
function storedDate(v: string | Date): Date {
  if (typeof v === 'string') return new Date(`${v.slice(0, 10)}T00:00:00.000Z`);
  return day(v.getFullYear(), v.getMonth(), v.getDate());
}

/** The SQL columns allowanceOf reads, of the connection aliased `w`. */
export const allowanceColumns = (
  w: string,
): string => `${w}.allowance_raw::text as allowance_raw, ${w}.allowance_period,
  ${w}.allowance_spent_raw::text as allowance_spent_raw, ${w}.allowance_period_start::text as allowance_period_start`;

/**
 * Parses the form's two fields: an empty amount is no limit; otherwise a USDC decimal ≥ 0 (at most 6
 * fraction digits and 1,000,000,000) and one of the periods. Errors name the field.
 */
export function parseAllowance(
  amount: unknown,
  period: unknown,
): { amountRaw: bigint; period: AllowancePeriod } | null {
  const text = typeof amount === 'string' ? amount.trim() : '';
  if (text === '') return null;
  const raw = parseDecimal(text, RAW_DECIMALS);
  if (raw === null || raw > MAX_AMOUNT_RAW)
    throw new DomainError(
      'invalid_request',
      'Enter the spending limit in USDC, like 5 or 0.25 (at most 6 decimals), or leave it empty for no limit.',
      'allowance',
    );
  const p = typeof period === 'string' && period !== '' ? period : 'month';
  if (!(ALLOWANCE_PERIODS as readonly string[]).includes(p))
    throw new DomainError(
      'invalid_request',
      'Choose a period: day, week, month or total.',
      'allowancePeriod',
    );
  return { amountRaw: raw, period: p as AllowancePeriod };
}

/**
 * Sets (or, with null, removes) a connection's allowance, in the caller's transaction; `connectionId`
 * must be the caller's. The connection is locked first. The same period keeps its count; a new period
 * kind counts what the app spent in the new kind's current period from its charges (usage charges still
 * held at their hold, which their settlement then no longer corrects: a conservative count until the
 * period ends). The `reached` mark is cleared: a new limit may be reached (and announced) again.
 */
export async function setAllowance(
  tx: Sql,
  connectionId: string,
  allowance: { amountRaw: bigint; period: AllowancePeriod } | null,
  now: Date,
): Promise<void> {
  const [w] = await tx.query(
    `select w.id, w.end_user_id, w.created_at, w.allowance_period, eu.account_id, ${allowanceColumns('w')}
       from wallet_connection w join end_user eu on eu.id = w.end_user_id
      where w.id = $1 for no key update of w`,
    [connectionId],
  );
  if (!w) return;
  if (allowance === null) {
    await tx.query(
      `update wallet_connection set allowance_raw = null, allowance_period = null, allowance_spent_raw = 0,
              allowance_period_start = null, allowance_reached_start = null where id = $1`,
      [connectionId],
    );
    return;
  }
  const current = allowanceOf(w as Parameters<typeof allowanceOf>[0], now);
  const start = dateOnly(periodStart(allowance.period, now));
  // The same period kind: the running count stays (exact, settlements keep correcting it).
  if (current && current.period === allowance.period) {
    await tx.query(
      `update wallet_connection set allowance_raw = $2, allowance_spent_raw = $3, allowance_period_start =
              greatest(coalesce(allowance_period_start, $4::date), $4::date), allowance_reached_start = null
        where id = $1`,
      [connectionId, allowance.amountRaw.toString(), current.spentRaw.toString(), start],
    );
    return;
  }
  // A new kind of period: what this connection's end user spent since the period began, from its
  // charges (this statement runs after the lock, so it sees every spending statement before it).
  await tx.query(
    `update wallet_connection w
        set allowance_raw = $2, allowance_period = $3, allowance_period_start = $4::date,
            allowance_reached_start = null,
            allowance_spent_raw = (
              select coalesce(sum(case when c.status = 'held' then c.hold_raw else c.amount_raw end), 0)
                from charge c
               where c.user_id = w.end_user_id and c.account_id = $5::uuid and c.status in ('held', 'completed')
                 and c.created_at >= w.created_at
                 and c.created_at >= ($4::date)::timestamp at time zone 'UTC')
      where w.id = $1`,
    [connectionId, allowance.amountRaw.toString(), allowance.period, start, w.account_id],
  );
}

/** What `paywall.allowance.reached` reports. */
export interface AllowanceReached {
  connectionId: string;
  paywall: { id: string; ownerId: string };
  walletUserId: string;
  endUserId: string;
  externalUserId: string;
  amountRaw: bigint;
  period: AllowancePeriod;
  spentRaw: bigint;
  /** The first day of the period the allowance was reached in (YYYY-MM-DD). */
  periodStart: string;
  resetsAt: Date | null;
  trigger: EventTrigger;
}

/**
 * Records `paywall.allowance.reached` once per period of a connection: the mark and the event in one
 * statement, so concurrent refusals record it once. Returns whether it was recorded now.
 */
export async function recordAllowanceReached(sql: Sql, r: AllowanceReached): Promise<boolean> {
  const event = buildEvent(
    'paywall.allowance.reached',
    {
      paywall: r.paywall,
      trigger: r.trigger,
      subject: { type: 'end_user', id: r.endUserId, externalId: r.externalUserId },
    },
    {
      walletUserId: r.walletUserId,
      externalUserId: r.externalUserId,
      connectionId: r.connectionId,
      amount: usdcDecimal(r.amountRaw),
      period: r.period,
      spent: usdcDecimal(r.spentRaw),
      resetsAt: r.resetsAt ? r.resetsAt.toISOString() : null,
    },
  );
  const rows = await sql.query(
    `with m as (
       update wallet_connection set allowance_reached_start = $2::date
        where id = $1::uuid and allowance_raw is not null
          and (allowance_reached_start is null or allowance_reached_start < $2::date)
       returning id
     ), e as (
       ${insertEventsSql(3)} where exists (select 1 from m)
     ) select id from m`,
    [r.connectionId, r.periodStart, JSON.stringify(eventRows([event]))],
  );
  return rows.length > 0;
}
