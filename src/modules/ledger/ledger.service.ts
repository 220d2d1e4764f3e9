import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import { parseAmount, usdcDecimal } from '../../shared/money.js';
import { hasLoneSurrogate } from '../../shared/text.js';
import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import type { UserService } from '../users/user.service.js';
import { eventRows, insertEventsSql, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { checkExternalId, triggerOf, walletUserIdOf, type EnsuredUser } from '../users/user.service.js';
import { IdempotencyService, type Codec } from './idempotency.service.js';
import { creditFromWorld } from '../accounts/credit-from-world.js';
import { alertsOf, type ChargedAccount, type LowBalanceAlerts } from './low-balance.js';
import { decodeCursor, decodeSeqCursor, encodeCursor, encodeSeqCursor } from '../../shared/cursor.js';
import { earningsAccountOf, FEES_ACCOUNT_ID, splitCharge } from '../accounts/accounts.js';
import { systemClock, type Clock } from '../../shared/clock.js';
import {
  periodEnd,
  periodStartSql,
  recordAllowanceReached,
  type AllowancePeriod,
} from '../wallet/allowance.js';

export const MAX_METADATA_KEYS = 50;
export const MAX_METADATA_BYTES = 8 * 1024;

/** What deposit and charge take, as the client sent it (validated here, not in the transports). */
export interface MoneyInput {
  paywallId?: string | null;
  user: unknown;
  amount: unknown;
  metadata?: unknown;
}

export interface MoneyOptions {
  idempotencyKey?: string | null;
  /** Defaults to the caller's trigger as a REST call. */
  trigger?: EventTrigger;
}

export interface DepositResult {
  userId: string;
  externalId: string;
  ledgerEntryId: string;
  amountRaw: bigint;
  /** Free balance after the deposit (settled − held), what `balance` shows. */
  balanceRaw: bigint;
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

export interface LedgerEntryRow {
  id: string;
  seq: string;
  kind: string;
  amountRaw: bigint;
  balanceAfterRaw: bigint;
  chargeId: string | null;
  metadata: Record<string, unknown>;
  createdAt: Date;
  cursor: string;
}

export interface ChargeRow {
  id: string;
  kind: string;
  status: string;
  amountRaw: bigint;
  holdRaw: bigint;
  uncollectedRaw: bigint;
  /** How much of the uncollected amount later deposits repaid. */
  recoveredRaw: bigint;
  model: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  errorCode: string | null;
  metadata: Record<string, unknown>;
  createdAt: Date;
  settledAt: Date | null;
  /** The end-user key the request came with (docs/reference.md §19), or null. */
  userKeyId: string | null;
  cursor: string;
}

export interface PageKey {
  userId: string;
  first: number;
  after: string | null;
}

export interface Page<T> {
  rows: T[];
  hasNextPage: boolean;
}

/** Stored idempotent answers: bigints travel as strings. */
const depositCodec: Codec<DepositResult> = {
  encode: (r) => ({ ...r, amountRaw: r.amountRaw.toString(), balanceRaw: r.balanceRaw.toString() }),
  decode: (s: any) => ({ ...s, amountRaw: BigInt(s.amountRaw), balanceRaw: BigInt(s.balanceRaw) }),
};
const chargeCodec: Codec<ChargeResult> = {
  encode: (r) => ({ ...r, amountRaw: r.amountRaw.toString(), balanceRaw: r.balanceRaw.toString() }),
  decode: (s: any) => ({ ...s, amountRaw: BigInt(s.amountRaw), balanceRaw: BigInt(s.balanceRaw) }),
};

const invalidAmount = () =>
  new DomainError(
    'invalid_amount',
    'amount must be a decimal string in USDC, > 0, with at most 6 fraction digits and at most 1000000000 (e.g. "1.5")',
    'amount',
    'invalid_amount',
  );

/** Optional metadata: a JSON object of at most 50 keys and 8 KiB. */
export function checkMetadata(metadata: unknown): Record<string, unknown> {
  if (metadata === undefined || metadata === null) return {};
  if (typeof metadata !== 'object' || Array.isArray(metadata))
    throw new DomainError('invalid_request', 'metadata must be a JSON object', 'metadata');
  if (Object.keys(metadata).length > MAX_METADATA_KEYS)
    throw new DomainError(
      'invalid_request',
      `metadata may hold at most ${MAX_METADATA_KEYS} keys`,
      'metadata',
    );
  // NUL and lone surrogates cannot be stored in PostgreSQL's jsonb: refused here, not a 500 there.
  let unstorable = false;
  const json = JSON.stringify(metadata, (key, value) => {
    for (const text of [key, value])
      if (typeof text === 'string' && (text.includes('\u0000') || hasLoneSurrogate(text))) unstorable = true;
    return value;
  });
  if (unstorable)
    throw new DomainError(
      'invalid_request',
      'metadata strings must not contain NUL characters or unpaired surrogates',
      'metadata',
    );
  if (Buffer.byteLength(json) > MAX_METADATA_BYTES)
    throw new DomainError('invalid_request', 'metadata may be at most 8 KiB of JSON', 'metadata');
  return metadata as Record<string, unknown>;
}

/** PostgreSQL's "bigint out of range": a balance that would overflow is refused, not a 500. */
const isOverflow = (e: any) => e?.code === '22003' || e?.cause?.code === '22003';

/** What the ledger service needs: paywalls to authorize, end users to credit and charge. */
export interface LedgerServiceDeps {
  db: Database;
  /** The lag-tolerant reads (ledger and charge pages): the replica in a GraphQL query. */
  reads: Sql;
  log: Logger;
  config: Pick<Config, 'PLATFORM_FEE_BPS' | 'SHARED_MAX_MANUAL_CHARGE'>;
  metrics: Pick<Metrics, 'ledgerEntries' | 'ledgerAmountRaw' | 'chargesFailed'>;
  paywalls: Pick<PaywallService, 'resolve'>;
  users: Pick<UserService, 'ensureUser' | 'topupUrl' | 'topupLinkEvent' | 'connectRequest' | 'walletUrl'>;
  /** docs/reference.md §16 "Low balance": checked after a charge committed (no statement when nothing can be due). */
  lowBalance?: Pick<LowBalanceAlerts, 'afterCharge'>;
  /** The time the allowance's period is taken at (docs/reference.md §16); default the system's. */
  clock?: Clock;
  /** Auto top-up (docs/reference.md §16): told the free balance after each charge; never waited for. */
  autoTopup?: { afterCharge(endUserId: string, accountId: string | null, freeAfterRaw: bigint): void };
}

/** The allowance that refused a manual charge (SHARED, docs/reference.md §16). */
interface ChargeAllowance {
  connectionId: string;
  amountRaw: bigint;
  period: AllowancePeriod;
  spentRaw: bigint;
  periodStart: string;
}

/**
 * Deposits and manual charges. Each balance change is ONE data-modifying statement: the conditional
 * UPDATE of the balance, its ledger entry and its event rows commit together or not at all, and a
 * debit can never take more than the free balance however many run at once (the row lock serialises
 * them and each re-checks `balance_raw - held_raw >= amount`). No read-modify-write in the ORM.
 */
export class LedgerService {
  readonly idempotency: IdempotencyService;

  constructor(private readonly deps: LedgerServiceDeps) {
    this.idempotency = new IdempotencyService(deps);
  }

  async start(): Promise<void> {
    this.idempotency.start();
  }

  async stop(): Promise<void> {
    this.idempotency.stop();
  }

  private validate(input: MoneyInput) {
    const externalId = checkExternalId(input.user);
    const amountRaw = parseAmount(input.amount);
    if (amountRaw === null) throw invalidAmount();
    const metadata = checkMetadata(input.metadata);
    return {
      externalId,
      amountRaw,
      metadata,
      request: { user: externalId, amount: input.amount, metadata: input.metadata ?? null },
    };
  }

  /**
   * Credits a user's balance (DEFAULT mode only). Returns the new free balance. Replays the first answer
   * for a repeated Idempotency-Key.
   */
  async deposit(
    auth: Auth,
    input: MoneyInput,
    opts: MoneyOptions = {},
  ): Promise<{ result: DepositResult; replayed: boolean; paywall: PaywallInfo }> {
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId);
    const { externalId, amountRaw, metadata, request } = this.validate(input);
    const trigger = opts.trigger ?? triggerOf(auth);
    const out = await this.idempotency.run(
      { paywallId: paywall.id, endpoint: 'deposit', key: opts.idempotencyKey, request },
      depositCodec,
      (sql) => this.applyDeposit(sql, paywall, externalId, amountRaw, metadata, trigger),
    );
    if (!out.replayed) {
      this.deps.metrics.ledgerEntries.inc({ kind: 'deposit' });
      this.deps.metrics.ledgerAmountRaw.inc({ kind: 'deposit' }, Number(amountRaw));
    }
    return { ...out, paywall };
  }

  private async applyDeposit(
    sql: Sql,
    paywall: PaywallInfo,
    externalId: string,
    amountRaw: bigint,
    metadata: Record<string, unknown>,
    trigger: EventTrigger,
  ): Promise<DepositResult> {
    if (paywall.mode !== 'DEFAULT')
      throw new DomainError(
        'unsupported_in_mode',
        'Deposits apply only to DEFAULT-mode paywalls; SHARED-mode users top up their hosted wallet.',
        null,
        'unsupported_in_mode',
      );
    const user = await this.deps.users.ensureUser(sql, paywall, externalId, trigger);
    const ledgerEntryId = randomUUID();
    const event = buildEvent(
      'paywall.balance.deposit.created',
      { paywall, trigger, subject: { type: 'end_user', id: user.id, externalId }, metadata },
      {
        walletUserId: walletUserIdOf(paywall, user),
        externalUserId: externalId,
        amount: usdcDecimal(amountRaw),
        currency: 'USDC',
        source: 'api',
        activityId: ledgerEntryId,
      },
    );
    let after: Awaited<ReturnType<typeof creditFromWorld>>;
    try {
      // world → the user's account: one transfer, both balance updates and the event in one statement.
      after = user.accountId
        ? await creditFromWorld(sql, {
            account: user.accountId,
            kind: 'deposit',
            transferId: ledgerEntryId,
            amountRaw,
            paywallId: paywall.id,
            endUserId: user.id,
            metadata,
            events: [event],
          })
        : null;
    } catch (e) {
      if (isOverflow(e))
        throw new DomainError(
          'invalid_amount',
          'this deposit would overflow the balance',
          'amount',
          'invalid_amount',
        );
      throw e;
    }
    if (!after) throw new Error('end user vanished during a deposit');
    return {
      userId: user.id,
      externalId,
      ledgerEntryId,
      amountRaw,
      balanceRaw: after.balanceRaw - after.heldRaw,
    };
  }

  /**
   * A manual charge from the free balance. A refusal (not connected, short balance) is an answer, not an
   * error: `success: false`, a message, the link to render, a `failed` charge row and its events.
   */
  async charge(
    auth: Auth,
    input: MoneyInput,
    opts: MoneyOptions = {},
  ): Promise<{ result: ChargeResult; replayed: boolean; paywall: PaywallInfo }> {
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId);
    const { externalId, amountRaw, metadata, request } = this.validate(input);
    const trigger = opts.trigger ?? triggerOf(auth);
    let charged: ChargedAccount | null = null;
    const out = await this.idempotency.run(
      { paywallId: paywall.id, endpoint: 'charge', key: opts.idempotencyKey, request },
      chargeCodec,
      (sql) => this.applyCharge(sql, paywall, externalId, amountRaw, metadata, trigger, (c) => (charged = c)),
    );
    // After the charge committed (a replay charged nothing): did it cross a low-balance threshold?
    if (charged && !out.replayed && out.result.success) await this.deps.lowBalance?.afterCharge(charged);
    if (!out.replayed) {
      if (out.result.success) {
        this.deps.metrics.ledgerEntries.inc({ kind: 'charge' });
        this.deps.metrics.ledgerAmountRaw.inc({ kind: 'charge' }, Number(amountRaw));
        this.deps.autoTopup?.afterCharge(
          out.result.userId,
          (charged as ChargedAccount | null)?.accountId ?? null,
          out.result.balanceRaw,
        );
      } else {
        this.deps.metrics.chargesFailed.inc({ reason: out.result.errorCode ?? 'unknown' });
      }
    }
    return { ...out, paywall };
  }

  private async applyCharge(
    sql: Sql,
    paywall: PaywallInfo,
    externalId: string,
    amountRaw: bigint,
    metadata: Record<string, unknown>,
    trigger: EventTrigger,
    onCharged: (c: ChargedAccount) => void,
  ): Promise<ChargeResult> {
    const user = await this.deps.users.ensureUser(sql, paywall, externalId, trigger);
    const chargeId = randomUUID();
    if (!user.connected) return this.refuse(sql, paywall, user, chargeId, amountRaw, metadata, trigger, null);
    // A SHARED app charges a wallet that pays for other apps too: one manual charge is capped by the operator
    // (an operator's bound; the wallet user's own control is the app's allowance, checked below).
    if (paywall.mode === 'SHARED' && amountRaw > this.deps.config.SHARED_MAX_MANUAL_CHARGE)
      return this.refuse(sql, paywall, user, chargeId, amountRaw, metadata, trigger, null, true);

    const ledgerEntryId = randomUUID();
    const split = splitCharge(paywall.mode, amountRaw, 0n, this.deps.config.PLATFORM_FEE_BPS);
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
         -- (holds.ts): a charge and a settlement touching the same accounts can never deadlock.
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
                                         ${periodStartSql('w.allowance_period', '$11::timestamptz')}) as start) v
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
        (this.deps.clock ?? systemClock()).now().toISOString(),
      ],
    );
    if (rows.length === 1 && rows[0].allow_id)
      return this.refuse(sql, paywall, user, chargeId, amountRaw, metadata, trigger, null, false, {
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
    return this.refuse(sql, paywall, state, chargeId, amountRaw, metadata, trigger, available);
  }

  /** Records a refused charge: a `failed` charge row and its events, plus the link the caller renders. */
  private async refuse(
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
      url = this.deps.users.walletUrl();
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
        `A single manual charge of a shared-wallet user is limited to ${usdcDecimal(this.deps.config.SHARED_MAX_MANUAL_CHARGE)} USDC; ` +
        `${usdcDecimal(amountRaw)} USDC was requested. Nothing was charged.`;
    } else if (errorCode === 'insufficient_balance') {
      url = await this.deps.users.topupUrl(paywall, user.externalId, sql);
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
        this.deps.users.topupLinkEvent(paywall, user, url, trigger),
      );
    } else {
      const req = await this.deps.users.connectRequest(sql, paywall, user, trigger);
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

  /**
   * Ledger pages for many users at once (DataLoader batch): newest first by `seq`, one statement with a
   * LATERAL per requested page.
   */
  async ledgerPages(keys: readonly PageKey[]): Promise<Page<LedgerEntryRow>[]> {
    const afters = keys.map((k) => (k.after ? decodeSeqCursor(k.after, 'le') : null));
    const rows = await this.deps.reads.query(
      // A user's statement: the transfers they caused, the legs of one charge (earnings, fee, provider
      // cost) shown as one entry of the whole amount; money in is positive, money spent negative.
      `select k.idx, le.id, le.seq::text as seq, le.kind, le.amount_raw::text as amount_raw,
              le.balance_after_raw::text as balance_after_raw, le.charge_id, le.metadata, le.created_at
         from unnest($1::uuid[], $2::bigint[], $3::int[]) with ordinality as k(user_id, after_seq, lim, idx)
         cross join lateral (
           select (array_agg(x.id order by x.seq))[1] as id, min(x.seq) as seq,
                  (array_agg(x.kind order by x.seq))[1] as kind,
                  sum(case when x.kind in ('deposit', 'trial', 'refund') then x.amount_raw else -x.amount_raw end) as amount_raw,
                  coalesce(min(x.balance_after_raw), 0) as balance_after_raw, x.charge_id,
                  (array_agg(x.metadata order by x.seq))[1] as metadata, min(x.created_at) as created_at
             from transfer x
            where x.end_user_id = k.user_id
            -- A refund names its charge but is an entry of its own (docs/reference.md §16 "Refunds").
            group by case when x.kind in ('charge', 'usage', 'fee', 'provider_cost') then coalesce(x.charge_id, x.id) else x.id end,
                     x.charge_id
           having k.after_seq is null or min(x.seq) < k.after_seq
            order by min(x.seq) desc limit k.lim
         ) le
        order by k.idx, le.seq desc`,
      [keys.map((k) => k.userId), afters, keys.map((k) => k.first + 1)],
    );
    return keys.map((k, i) => {
      const mine = rows.filter((r) => Number(r.idx) === i + 1);
      return {
        hasNextPage: mine.length > k.first,
        rows: mine.slice(0, k.first).map((r) => ({
          id: r.id,
          seq: r.seq,
          kind: r.kind,
          amountRaw: BigInt(r.amount_raw),
          balanceAfterRaw: BigInt(r.balance_after_raw),
          chargeId: r.charge_id ?? null,
          metadata: typeof r.metadata === 'string' ? JSON.parse(r.metadata) : r.metadata,
          createdAt: new Date(r.created_at),
          cursor: encodeSeqCursor('le', r.seq),
        })),
      };
    });
  }

  /** Charge pages for many users at once (DataLoader batch): newest first. */
  async chargePages(keys: readonly PageKey[]): Promise<Page<ChargeRow>[]> {
    const afters = keys.map((k) => (k.after ? decodeCursor(k.after, 'c') : null));
    const rows = await this.deps.reads.query(
      `select k.idx, c.id, c.kind, c.status, c.amount_raw::text as amount_raw, c.hold_raw::text as hold_raw,
              c.uncollected_raw::text as uncollected_raw, c.recovered_raw::text as recovered_raw, c.model, c.prompt_tokens, c.completion_tokens,
              c.error_code, c.metadata, c.created_at, c.settled_at, c.user_key_id, c.created_at::text as created_text
         from unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::int[])
              with ordinality as k(user_id, after_ts, after_id, lim, idx)
         cross join lateral (
           select * from charge x
            where x.user_id = k.user_id and (k.after_ts is null or (x.created_at, x.id) < (k.after_ts, k.after_id))
            order by x.created_at desc, x.id desc limit k.lim
         ) c
        order by k.idx, c.created_at desc, c.id desc`,
      [
        keys.map((k) => k.userId),
        afters.map((a) => a?.ts ?? null),
        afters.map((a) => a?.id ?? null),
        keys.map((k) => k.first + 1),
      ],
    );
    return keys.map((k, i) => {
      const mine = rows.filter((r) => Number(r.idx) === i + 1);
      return {
        hasNextPage: mine.length > k.first,
        rows: mine.slice(0, k.first).map((r) => ({
          id: r.id,
          kind: r.kind,
          status: r.status,
          amountRaw: BigInt(r.amount_raw),
          holdRaw: BigInt(r.hold_raw),
          uncollectedRaw: BigInt(r.uncollected_raw),
          recoveredRaw: BigInt(r.recovered_raw),
          model: r.model ?? null,
          promptTokens: r.prompt_tokens ?? null,
          completionTokens: r.completion_tokens ?? null,
          errorCode: r.error_code ?? null,
          metadata: typeof r.metadata === 'string' ? JSON.parse(r.metadata) : r.metadata,
          createdAt: new Date(r.created_at),
          settledAt: r.settled_at ? new Date(r.settled_at) : null,
          userKeyId: r.user_key_id ?? null,
          cursor: encodeCursor('c', r.created_text, r.id),
        })),
      };
    });
  }
}
