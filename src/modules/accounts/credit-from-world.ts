import type { Sql } from '../../db/database.js';
import { eventRows, insertEventsSql, type NewEvent } from '../events/event.service.js';
import { WORLD_ACCOUNT_ID } from './accounts.js';

/**
 * Money entering from the world: a deposit through the API, wallet test funds, a paid Stripe Checkout
 * Session, an app's trial credits. Each is one transfer world → account with its events; the SQL that
 * writes it lives here once (docs/accounts.md "Money entering from the world").
 */
export interface WorldCredit {
  /** `deposit` (money paid in: API, Stripe, test funds) or `trial` (credits an app grants a new user). */
  kind: 'deposit' | 'trial';
  /** The transfer's id (events name it as their `activityId`, so the caller picks it). */
  transferId: string;
  /** > 0; raw units (10⁻⁶ USDC). */
  amountRaw: bigint;
  /** The transfer's paywall and end user; null for a hosted wallet (it serves every app). */
  paywallId: string | null;
  endUserId: string | null;
  metadata?: Record<string, unknown>;
  /** Recorded in the same statement (their outbox rows come with them). */
  events?: NewEvent[];
}

/** How many parameters {@link worldCreditCtes} uses (see {@link worldCreditParams}). */
export const WORLD_CREDIT_PARAMS = 7;

/**
 * The data-modifying CTEs `w` (world debited), `t` (the transfer) and `e` (the events) of a world
 * credit, to follow a CTE named `credited` returning the credited account's `id` and its `balance_raw`
 * AFTER the credit (an update that added the amount, or the insert of a new account holding it).
 * Nothing is written when `credited` returns no row. Parameters `$first` … `$first+6` are
 * {@link worldCreditParams}, in order.
 */
export function worldCreditCtes(credited: string, first: number): string {
  const [amount, transferId, kind, paywallId, endUserId, metadata, events] = Array.from(
    { length: WORLD_CREDIT_PARAMS },
    (_, i) => `$${first + i}`,
  );
  return `w as (
       update ledger_account set balance_raw = balance_raw - ${amount}::bigint
        where id = '${WORLD_ACCOUNT_ID}' and ${amount}::bigint > 0 and exists (select 1 from ${credited})
     ), t as (
       insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                             paywall_id, end_user_id, metadata, created_at)
       select ${transferId}::uuid, ${kind}::varchar, '${WORLD_ACCOUNT_ID}', ${credited}.id, ${amount}::bigint,
              ${credited}.balance_raw, ${paywallId}::uuid, ${endUserId}::uuid, ${metadata}::jsonb, now()
         from ${credited} where ${amount}::bigint > 0
     ), e as (
       ${insertEventsSql(Number(events.slice(1)))} where exists (select 1 from ${credited})
     )`;
}

/** The parameters of {@link worldCreditCtes}, in its order. */
export function worldCreditParams(c: WorldCredit): unknown[] {
  return [
    c.amountRaw.toString(),
    c.transferId,
    c.kind,
    c.paywallId,
    c.endUserId,
    JSON.stringify(c.metadata ?? {}),
    JSON.stringify(eventRows(c.events ?? [])),
  ];
}

/**
 * Low-balance alerts (low-balance.ts) start again for a threshold once money entering lifts the free
 * balance to it or above: the flags whose threshold the credited free balance reaches are cleared, in
 * the credit's own update (the same row lock the alert check takes). In a SET, the columns are the row
 * before the credit of $1.
 */
const LOW_BALANCE_REARM = `low_alerted = low_alerted and balance_raw + $1::bigint - held_raw < coalesce(low_alert_raw, 0),
         low_alerted_paywalls = case when cardinality(low_alerted_paywalls) = 0 then low_alerted_paywalls
           else array(select x.id from unnest(low_alerted_paywalls) x(id) join paywall p on p.id = x.id::uuid
                       where balance_raw + $1::bigint - held_raw < p.low_balance_threshold_raw) end`;

/**
 * Credits an existing account from the world in ONE statement: the account's balance, the world's,
 * the transfer and the events commit together (in the caller's transaction, or on their own when `sql`
 * is the pool). Returns the account's balance and held amount after the credit, or null when the
 * account does not exist (then nothing was written). An amount past the bigint range throws the
 * database's overflow error (callers turn it into `invalid_amount`).
 */
export async function creditFromWorld(
  sql: Sql,
  credit: WorldCredit & { account: string },
): Promise<{ balanceRaw: bigint; heldRaw: bigint } | null> {
  const rows = await sql.query<{ balance_raw: string; held_raw: string }>(
    `with credited as (
       update ledger_account set balance_raw = balance_raw + $1::bigint, ${LOW_BALANCE_REARM}
        where id = $8::uuid
       returning id, balance_raw, held_raw
     ), ${worldCreditCtes('credited', 1)}
     select balance_raw::text as balance_raw, held_raw::text as held_raw from credited`,
    [...worldCreditParams(credit), credit.account],
  );
  return rows.length === 1
    ? { balanceRaw: BigInt(rows[0].balance_raw), heldRaw: BigInt(rows[0].held_raw) }
    : null;
}
