import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { usdcDecimal } from '../../shared/money.js';
import type { Config } from '../../config.js';
import type { UserService } from '../users/user.service.js';
import { eventRows, insertEventsSql, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { walletUserIdOf, type EnsuredUser } from '../users/user.service.js';
import { alertsOf, type ChargedAccount } from './low-balance.js';
import { earningsAccountOf, FEES_ACCOUNT_ID, splitCharge } from '../accounts/accounts.js';
import { systemClock, type Clock } from '../../shared/clock.js';
import { periodEnd, recordAllowanceReached, type AllowancePeriod } from '../wallet/allowance.js';

/**
 * Manual charges (one job): a charge of an amount from the free balance (LedgerService.charge), or its
 * refusal as an answer with a `failed` charge row and its events.
 */

/** What a manual charge needs of the ledger service's dependencies. */
export interface ManualChargeDeps {
  config: Pick<Config, 'PLATFORM_FEE_BPS' | 'SHARED_MAX_MANUAL_CHARGE'>;
  users: Pick<UserService, 'ensureUser' | 'topupUrl' | 'topupLinkEvent' | 'connectRequest' | 'walletUrl'>;
  /** The time the allowance's period is taken at (docs/reference.md §16); default the system's. */
  clock?: Clock;
}

export interface ChargeResult {
  success: boolean;
  message: string;
  /** The link to render when the charge failed: top-up (short balance) or connect (not connected). */
  url: string | null;
  chargeId: string;
  userId: string;
  externalId: string;
  amountRaw: bigint;
  status: 'completed' | 'failed';
  errorCode: 'insufficient_balance' | 'not_connected' | 'charge_limit_exceeded' | 'allowance_exceeded' | null;
  ledgerEntryId: string | null;
  /** Free balance after the attempt. */
  balanceRaw: bigint;
  metadata: Record<string, unknown>;
  /** ISO time the charge row was written. */
  createdAt: string;
}

/** The allowance that refused a manual charge (SHARED, docs/reference.md §16). */
interface ChargeAllowance {
  connectionId: string;
  amountRaw: bigint;
  period: AllowancePeriod;
  spentRaw: bigint;
  periodStart: string;
}

export async function applyManualCharge(
  d: ManualChargeDeps,
  sql: Sql,
  paywall: PaywallInfo,
  externalId: string,
  amountRaw: bigint,
  metadata: Record<string, unknown>,
  trigger: EventTrigger,
  onCharged: (c: ChargedAccount) => void,
): Promise<ChargeResult> {
  const user = await d.users.ensureUser(sql, paywall, externalId, trigger);
  const chargeId = randomUUID();
  if (!user.connected) return refuse(d, sql, paywall, user, chargeId, amountRaw, metadata, trigger, null);
  // A SHARED app charges a wallet that pays for other apps too: one manual charge is capped by the operator
  // (an operator's bound; the wallet user's own control is the app's allowance, checked below).
  if (paywall.mode === 'SHARED' && amountRaw > d.config.SHARED_MAX_MANUAL_CHARGE)
    return refuse(d, sql, paywall, user, chargeId, amountRaw, metadata, trigger, null, true);

  const ledgerEntryId = randomUUID();
  const split = splitCharge(paywall.mode, amountRaw, 0n, d.config.PLATFORM_FEE_BPS);
  const ctx = {
    paywall,
    trigger,
    metadata,
    subject: { type: 'charge' as const, id: chargeId, externalId },
  };
  const events: NewEvent[] = [
    buildEvent('paywall.balance.charge.created', ctx, {
      walletUserId: walletUserIdOf(paywall, user),
      activityId: chargeId,
      amount: usdcDecimal(amountRaw),
      processingFeeAmount: usdcDecimal(split.feeRaw),
    }),
    buildEvent('paywall.balance.charge.completed', ctx, {
      activityId: chargeId,
      settlementReference: ledgerEntryId,
    }),
  ];
  // One round trip. The WHERE is the whole rule: the user still spends an account at this instant
  // (SHARED: is connected), its free balance covers the amount, and (SHARED) the app's allowance has the
  // amount left in its period; the transfers to the paywall's earnings and the platform's fees only
  // happen when it returned a row.
  const rows = await sql.query(
    `with sp as (
       select account_id as id from end_user where id = $2::uuid and ($7::boolean or wallet_user_id is not null)
     ), lk as (
       -- Every account of the statement locked first, in id order, as the chat ledger statement does
       -- (ledger_tick): a charge and a settlement touching the same accounts can never deadlock.
       select a.id from ledger_account a
        where a.id in (select id from sp) or a.id = ${earningsAccountOf('$8::uuid')}
           or (a.id = '${FEES_ACCOUNT_ID}' and $10::bigint > 0)
        order by a.id
          for no key update
     ), al as (
       -- SHARED: the app's allowance (docs/reference.md §16), locked after the accounts (as the hold
       -- statement does), with its period as of $11 and what was spent in it.
       select w.id, w.allowance_raw, w.allowance_period, v.start,
              case when w.allowance_period_start = v.start then w.allowance_spent_raw else 0 end as spent
         from wallet_connection w,
              lateral (select greatest(w.allowance_period_start,
                                       ledger_period_start(w.allowance_period, $11::timestamptz)) as start) v
        where not $7::boolean and w.end_user_id = $2::uuid and w.revoked_at is null
          and w.allowance_raw is not null and (select count(*) from lk) >= 0
          for no key update of w
     ), s as (
       update ledger_account a set balance_raw = a.balance_raw - $1::bigint
         from lk
        where a.id = lk.id and a.id = (select id from sp) and a.balance_raw - a.held_raw >= $1::bigint
          and not exists (select 1 from al where al.spent + $1::bigint > al.allowance_raw)
       returning a.id, a.balance_raw, a.held_raw, a.low_alert_raw, a.low_alerted, a.low_alerted_paywalls
     ), au as (
       update wallet_connection w set allowance_spent_raw = al.spent + $1::bigint, allowance_period_start = al.start
         from al where w.id = al.id and exists (select 1 from s)
     ), legs as (
       select * from (values ($3::uuid, 'charge', ${earningsAccountOf('$8::uuid')}, $9::bigint),
                             (gen_random_uuid(), 'fee', '${FEES_ACCOUNT_ID}'::uuid, $10::bigint)) v(id, kind, account, amount)
        where v.amount > 0 and exists (select 1 from s)
     ), cr as (
       update ledger_account a set balance_raw = a.balance_raw + legs.amount
         from legs join lk on lk.id = legs.account where a.id = legs.account
     ), t as (
       insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                             paywall_id, end_user_id, charge_id, metadata, created_at)
       select legs.id, legs.kind, s.id, legs.account, legs.amount, s.balance_raw, $8::uuid, $2::uuid, $4::uuid,
              $5::jsonb, now() from s, legs
     ), c as (
       insert into charge (id, paywall_id, user_id, account_id, kind, status, amount_raw, metadata, created_at, settled_at)
       select $4::uuid, $8::uuid, $2::uuid, s.id, 'manual', 'completed', $1::bigint, $5::jsonb, now(), now() from s
       returning created_at
     ), e as (
       ${insertEventsSql(6)} where exists (select 1 from s)
     )
     select (s.balance_raw - s.held_raw)::text as free, c.created_at, s.id as account_id,
            s.low_alert_raw::text as low_alert, s.low_alerted, s.low_alerted_paywalls,
            null::uuid as allow_id, null::text as allowance, null::text as allow_period,
            null::text as allow_spent, null::text as allow_start from s, c
     union all
     select null, null, null, null, null, null, al.id, al.allowance_raw::text, al.allowance_period,
            al.spent::text, al.start::text
       from al where not exists (select 1 from s) and al.spent + $1::bigint > al.allowance_raw`,
    [
      amountRaw.toString(),
      user.id,
      ledgerEntryId,
      chargeId,
      JSON.stringify(metadata),
      JSON.stringify(eventRows(events)),
      paywall.mode === 'DEFAULT',
      paywall.id,
      split.earningsRaw.toString(),
      split.feeRaw.toString(),
      (d.clock ?? systemClock()).now().toISOString(),
    ],
  );
  if (rows.length === 1 && rows[0].allow_id)
    return refuse(d, sql, paywall, user, chargeId, amountRaw, metadata, trigger, null, false, {
      connectionId: rows[0].allow_id,
      amountRaw: BigInt(rows[0].allowance),
      period: rows[0].allow_period,
      spentRaw: BigInt(rows[0].allow_spent),
      periodStart: String(rows[0].allow_start).slice(0, 10),
    });
  const alerts = rows.length === 1 ? alertsOf(rows[0]) : null;
  if (rows.length === 1 && alerts)
    onCharged({
      paywall,
      accountId: rows[0].account_id,
      endUserId: user.id,
      externalUserId: externalId,
      walletUserId: walletUserIdOf(paywall, user),
      freeAfterRaw: BigInt(rows[0].free),
      alerts,
      trigger,
    });
  if (rows.length === 1)
    return {
      success: true,
      message: `Charged ${usdcDecimal(amountRaw)} USDC.`,
      url: null,
      chargeId,
      userId: user.id,
      externalId,
      amountRaw,
      status: 'completed',
      errorCode: null,
      ledgerEntryId,
      balanceRaw: BigInt(rows[0].free),
      metadata,
      createdAt: new Date(rows[0].created_at).toISOString(),
    };
  // Refused: read the state that refused it (for the message and the events).
  const now = await sql.query(
    `select coalesce(a.balance_raw, 0)::text as balance_raw, coalesce(a.held_raw, 0)::text as held_raw, e.wallet_user_id
       from end_user e left join ledger_account a on a.id = e.account_id where e.id = $1`,
    [user.id],
  );
  const state = {
    ...user,
    balanceRaw: BigInt(now[0].balance_raw),
    heldRaw: BigInt(now[0].held_raw),
    walletUserId: now[0].wallet_user_id ?? null,
  };
  state.connected = paywall.mode === 'DEFAULT' || state.walletUserId !== null;
  const available = state.balanceRaw - state.heldRaw;
  return refuse(d, sql, paywall, state, chargeId, amountRaw, metadata, trigger, available);
}

/** Records a refused charge: a `failed` charge row and its events, plus the link the caller renders. */
async function refuse(
  d: ManualChargeDeps,
  sql: Sql,
  paywall: PaywallInfo,
  user: EnsuredUser,
  chargeId: string,
  amountRaw: bigint,
  metadata: Record<string, unknown>,
  trigger: EventTrigger,
  availableRaw: bigint | null,
  overLimit = false,
  allowance: ChargeAllowance | null = null,
): Promise<ChargeResult> {
  const available = availableRaw ?? user.balanceRaw - user.heldRaw;
  const errorCode = allowance
    ? 'allowance_exceeded'
    : overLimit
      ? 'charge_limit_exceeded'
      : user.connected
        ? 'insufficient_balance'
        : 'not_connected';
  const walletUserId = walletUserIdOf(paywall, user);
  const events: NewEvent[] = [
    buildEvent(
      'paywall.balance.charge.failed',
      {
        paywall,
        trigger,
        metadata,
        subject: { type: 'charge', id: chargeId, externalId: user.externalId },
      },
      { walletUserId, activityId: chargeId, amount: usdcDecimal(amountRaw), errorCode },
    ),
  ];
  let url: string | null;
  let message: string;
  if (allowance) {
    // The wallet user's spending limit for this app (docs/reference.md §16): the wallet page changes it.
    url = d.users.walletUrl();
    const per = allowance.period === 'total' ? 'in total' : `per ${allowance.period}`;
    message =
      `This app has reached the spending limit of ${usdcDecimal(allowance.amountRaw)} USDC ${per} set in the user's wallet: ` +
      `${usdcDecimal(allowance.spentRaw)} USDC spent, ${usdcDecimal(amountRaw)} USDC requested. Nothing was charged. ` +
      `The user can raise the limit in their wallet: ${url}`;
    if (user.walletUserId)
      await recordAllowanceReached(sql, {
        ...allowance,
        paywall,
        walletUserId: user.walletUserId,
        endUserId: user.id,
        externalUserId: user.externalId,
        resetsAt: periodEnd(allowance.period, new Date(`${allowance.periodStart}T00:00:00.000Z`)),
        trigger,
      });
  } else if (errorCode === 'charge_limit_exceeded') {
    url = null;
    message =
      `A single manual charge of a shared-wallet user is limited to ${usdcDecimal(d.config.SHARED_MAX_MANUAL_CHARGE)} USDC; ` +
      `${usdcDecimal(amountRaw)} USDC was requested. Nothing was charged.`;
  } else if (errorCode === 'insufficient_balance') {
    url = await d.users.topupUrl(paywall, user.externalId, sql);
    message = `Insufficient balance: ${usdcDecimal(available)} USDC available, ${usdcDecimal(amountRaw)} USDC requested. Top up here: ${url}`;
    events.push(
      buildEvent(
        'paywall.balance.depleted',
        {
          paywall,
          trigger,
          metadata,
          subject: { type: 'end_user', id: user.id, externalId: user.externalId },
        },
        { walletUserId, requestedAmount: usdcDecimal(amountRaw), availableBalance: usdcDecimal(available) },
      ),
      d.users.topupLinkEvent(paywall, user, url, trigger),
    );
  } else {
    const req = await d.users.connectRequest(sql, paywall, user, trigger);
    url = req.url;
    message = `User is not connected to this paywall; nothing was charged. Connect here: ${url}`;
    events.push(req.event);
  }
  // The charge row and its events in one statement (atomic also outside a transaction).
  const rows = await sql.query(
    `with c as (
       insert into charge (id, paywall_id, user_id, kind, status, amount_raw, error_code, metadata, created_at, settled_at)
       values ($1::uuid, $2::uuid, $3::uuid, 'manual', 'failed', $4::bigint, $5, $6::jsonb, now(), now())
       returning created_at
     ), e as (
       ${insertEventsSql(7)} where exists (select 1 from c)
     ) select created_at from c`,
    [
      chargeId,
      paywall.id,
      user.id,
      amountRaw.toString(),
      errorCode,
      JSON.stringify(metadata),
      JSON.stringify(eventRows(events)),
    ],
  );
  return {
    success: false,
    message,
    url,
    chargeId,
    userId: user.id,
    externalId: user.externalId,
    amountRaw,
    status: 'failed',
    errorCode,
    ledgerEntryId: null,
    balanceRaw: available,
    metadata,
    createdAt: new Date(rows[0].created_at).toISOString(),
  };
}
