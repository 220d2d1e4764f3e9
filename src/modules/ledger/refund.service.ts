import { randomUUID } from 'node:crypto';
import type { Database, Sql } from '../../db/database.js';
import { DomainError, notFound } from '../../shared/errors.js';
import { parseAmount, usdcDecimal } from '../../shared/money.js';
import { isUnstorableText } from '../../shared/text.js';
import { recordEvents, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { triggerOf } from '../users/user.service.js';
import { FEES_ACCOUNT_ID } from '../accounts/accounts.js';
import { writeOffOwed } from '../accounts/debt-write-off.js';
import type { Codec, IdempotencyService } from './idempotency.service.js';
import type { Metrics } from '../../shared/metrics.js';

/** A refund's reason: optional, at most this many characters. */
export const MAX_REFUND_REASON = 500;

/** The transfer kinds that carry a charge's money out of the account that paid (its legs). */
export const CHARGE_LEG_KINDS = ['charge', 'usage', 'fee', 'provider_cost'] as const;

/** What `refundCharge` takes, as the client sent it (validated here, not in the transports). */
export interface RefundInput {
  paywallId?: string | null;
  chargeId: unknown;
  /** USDC decimal string; omitted (or null): the whole refundable rest of the charge. */
  amount?: unknown;
  reason?: unknown;
}

export interface RefundOptions {
  idempotencyKey?: string | null;
  /** Defaults to the caller's trigger as a REST call. */
  trigger?: EventTrigger;
}

/** A refund as written (also what an Idempotency-Key replays). */
export interface RefundResult {
  id: string;
  paywallId: string;
  chargeId: string;
  /** The end user the charge belongs to. */
  userId: string;
  externalId: string;
  /** The hosted wallet that paid (SHARED), or the end user itself (DEFAULT), as in the charge events. */
  walletUserId: string | null;
  /** The account credited: the one the charge took the money from. */
  accountId: string;
  amountRaw: bigint;
  /** Given back by the paywall's earnings (the amount less the fee part). */
  earningsRaw: bigint;
  /** Given back by the platform's fee account (SHARED, in proportion; 0 in DEFAULT mode). */
  feeRaw: bigint;
  reason: string | null;
  /** Free balance of the credited account after the refund. */
  balanceRaw: bigint;
  createdAt: string;
}

/** A refund as listed under its charge. */
export interface RefundRow {
  id: string;
  chargeId: string;
  amountRaw: bigint;
  earningsRaw: bigint;
  feeRaw: bigint;
  reason: string | null;
  createdAt: Date;
}

const codec: Codec<RefundResult> = {
  encode: (r) => ({
    ...r,
    amountRaw: r.amountRaw.toString(),
    earningsRaw: r.earningsRaw.toString(),
    feeRaw: r.feeRaw.toString(),
    balanceRaw: r.balanceRaw.toString(),
  }),
  decode: (s: any) => ({
    ...s,
    amountRaw: BigInt(s.amountRaw),
    earningsRaw: BigInt(s.earningsRaw),
    feeRaw: BigInt(s.feeRaw),
    balanceRaw: BigInt(s.balanceRaw),
  }),
};

/**
 * A refund asked for without an Idempotency-Key is recognised by what it asks for: the same charge, the
 * same amount (or again "the whole rest" once nothing is left) and the same reason within this window
 * answer the first refund again instead of giving the money back twice (a double click, a retried
 * request). A second partial refund of the same amount is made with an Idempotency-Key of its own or a
 * reason of its own.
 */
export const REPEAT_REFUND_WINDOW_HOURS = 24;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const LEGS = CHARGE_LEG_KINDS.map((k) => `'${k}'`).join(', ');

/**
 * The fee part of a refund (docs/ledger.md "Refunds"): the platform gives back its fee in proportion to
 * what is refunded, counted on the charge's refunds so far, so that the fee parts of any sequence of
 * refunds add up to floor(refunded x fee / paid) and a refund of the whole charge gives back the whole
 * fee, to the raw unit. Rounding goes down: the earnings part takes the remainder.
 */
export function refundFeePart(
  paidRaw: bigint,
  feeRaw: bigint,
  refundedBeforeRaw: bigint,
  feeRefundedBeforeRaw: bigint,
  amountRaw: bigint,
): bigint {
  if (paidRaw <= 0n || feeRaw <= 0n) return 0n;
  const due = ((refundedBeforeRaw + amountRaw) * feeRaw) / paidRaw - feeRefundedBeforeRaw;
  const left = feeRaw - feeRefundedBeforeRaw;
  const cap = left < amountRaw ? left : amountRaw;
  return due <= 0n ? 0n : due < cap ? due : cap;
}

/** What the refund service needs: paywalls to authorize, the idempotency keys deposits and charges use. */
export interface RefundServiceDeps {
  db: Database;
  paywalls: Pick<PaywallService, 'resolve'>;
  idempotency: Pick<IdempotencyService, 'run'>;
  /** `ledger_entries_total` / `ledger_amount_raw_total` with `kind="refund"`. */
  metrics?: Pick<Metrics, 'ledgerEntries' | 'ledgerAmountRaw'>;
}

/** What a charge took, what was refunded of it, and what may still be refunded. */
export interface RefundState {
  paidRaw: bigint;
  refundedRaw: bigint;
  refundableRaw: bigint;
}

/** What may still be refunded of a charge: what it took (its legs and later debt repayments) less its refunds. */
const refundableRest = (paidRaw: bigint, refundedRaw: bigint): bigint =>
  paidRaw > refundedRaw ? paidRaw - refundedRaw : 0n;

/**
 * Refunds of completed charges (docs/reference.md §16 "Refunds"). A refund is one transaction: the
 * accounts it touches are locked in id order (as every ledger statement does), then the charge, whose
 * row lock serialises refunds of one charge, so however many run at once they never give back more
 * than the charge took. The earnings account is debited only when it holds the earnings part.
 */
export class RefundService {
  constructor(private readonly deps: RefundServiceDeps) {}

  /** Gives back (part of) a charge to the account that paid it. Idempotent with an Idempotency-Key. */
  async refund(
    auth: Auth,
    input: RefundInput,
    opts: RefundOptions = {},
  ): Promise<{ result: RefundResult; replayed: boolean; paywall: PaywallInfo }> {
    // An owner may refund the charges of an archived paywall (its key no longer works).
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId, { allowArchived: true });
    const chargeId = typeof input.chargeId === 'string' && UUID.test(input.chargeId) ? input.chargeId : null;
    if (!chargeId) throw notFound('charge');
    let amountRaw: bigint | null = null;
    if (input.amount !== undefined && input.amount !== null) {
      amountRaw = parseAmount(input.amount);
      if (amountRaw === null)
        throw new DomainError(
          'invalid_amount',
          'amount must be a decimal string in USDC, > 0, with at most 6 fraction digits (e.g. "1.5"), or left out to refund the whole rest',
          'amount',
          'invalid_amount',
        );
    }
    const reason = checkReason(input.reason);
    const trigger = opts.trigger ?? triggerOf(auth);
    const request = { chargeId, amount: input.amount ?? null, reason };
    const keyless = opts.idempotencyKey === undefined || opts.idempotencyKey === null;
    let repeated = false;
    const out = await this.deps.idempotency.run(
      { paywallId: paywall.id, endpoint: 'refund', key: opts.idempotencyKey, request },
      codec,
      // Without a key the idempotency store runs the effect on the pool: it needs its own transaction.
      async (sql) => {
        const run = (tx: Sql) => this.apply(tx, paywall, chargeId, amountRaw, reason, trigger, keyless);
        const r = sql === this.deps.db ? await this.deps.db.transaction(run) : await run(sql);
        repeated = r.repeated;
        return r.refund;
      },
    );
    const replayed = out.replayed || repeated;
    if (!replayed) {
      this.deps.metrics?.ledgerEntries.inc({ kind: 'refund' });
      this.deps.metrics?.ledgerAmountRaw.inc({ kind: 'refund' }, Number(out.result.amountRaw));
    }
    return { result: out.result, replayed, paywall };
  }

  /**
   * The refund a keyless request repeats (REPEAT_REFUND_WINDOW_HOURS), read under the charge's lock:
   * the same amount and reason, or for "the whole rest" the same reason once nothing is left.
   */
  private async repeatOf(
    tx: Sql,
    chargeId: string,
    requestedRaw: bigint | null,
    reason: string | null,
    nothingLeft: boolean,
  ): Promise<any | null> {
    if (requestedRaw === null && !nothingLeft) return null;
    const [row] = await tx.query(
      `select r.id, r.account_id, r.amount_raw::text as amount_raw, r.earnings_raw::text as earnings_raw,
              r.fee_raw::text as fee_raw, r.reason, r.created_at
         from refund r
        where r.charge_id = $1 and r.reason is not distinct from $2
          and ($3::bigint is null or r.amount_raw = $3::bigint)
          and r.created_at > now() - make_interval(hours => $4)
        order by r.created_at desc, r.id desc limit 1`,
      [chargeId, reason, requestedRaw?.toString() ?? null, REPEAT_REFUND_WINDOW_HOURS],
    );
    return row ?? null;
  }

  private async apply(
    tx: Sql,
    paywall: PaywallInfo,
    chargeId: string,
    requestedRaw: bigint | null,
    reason: string | null,
    trigger: EventTrigger,
    keyless: boolean,
  ): Promise<{ refund: RefundResult; repeated: boolean }> {
    const [charge] = await tx.query(
      `select c.id, c.paywall_id, c.user_id, c.status, e.external_id,
              (select t.debit_account_id from transfer t where t.charge_id = c.id and t.kind in (${LEGS}) limit 1) as payer,
              (select a.id from ledger_account a where a.kind = 'earnings' and a.paywall_id = c.paywall_id) as earnings
         from charge c join end_user e on e.id = c.user_id where c.id = $1`,
      [chargeId],
    );
    if (!charge || charge.paywall_id !== paywall.id) throw notFound('charge');
    if (charge.status !== 'completed' || !charge.payer || !charge.earnings)
      throw new DomainError(
        'invalid_request',
        `This charge collected nothing (it is ${charge.status}): there is nothing to refund.`,
        'chargeId',
        'charge_not_refundable',
      );
    const payer: string = charge.payer;
    const earnings: string = charge.earnings;
    // Accounts first, in id order (the order of every ledger statement: no deadlock with a settlement or
    // the debt collector, which lock accounts before charges), then the charge.
    const ids = [payer, earnings, ...(paywall.mode === 'SHARED' ? [FEES_ACCOUNT_ID] : [])].sort();
    const locked = await tx.query(
      `select id, balance_raw::text as balance_raw, held_raw::text as held_raw from ledger_account
        where id = any($1::uuid[]) order by id for no key update`,
      [ids],
    );
    const acct = new Map(locked.map((a: any) => [a.id as string, a]));
    await tx.query(`select 1 from charge where id = $1 for update`, [chargeId]);
    // Under the charge's lock: what it took (its legs, later debt repayments included) and what was
    // already given back.
    const [sums] = await tx.query(
      `select coalesce((select sum(amount_raw) from transfer where charge_id = $1 and kind in (${LEGS})), 0)::text as paid,
              coalesce((select sum(amount_raw) from transfer where charge_id = $1 and kind = 'fee'), 0)::text as fee,
              coalesce((select sum(amount_raw) from refund where charge_id = $1), 0)::text as refunded,
              coalesce((select sum(fee_raw) from refund where charge_id = $1), 0)::text as fee_refunded`,
      [chargeId],
    );
    const paid = BigInt(sums.paid);
    const refunded = BigInt(sums.refunded);
    const rest = refundableRest(paid, refunded);
    const walletUserIdOf = async () =>
      paywall.mode === 'DEFAULT'
        ? (charge.user_id as string)
        : (((await tx.query(`select id from wallet_user where account_id = $1`, [payer]))[0]?.id as
            string | undefined) ?? null);
    const repeat = keyless ? await this.repeatOf(tx, chargeId, requestedRaw, reason, rest <= 0n) : null;
    if (repeat) {
      // The same request again: the first refund's answer, nothing moved, no event.
      const p = acct.get(payer);
      return {
        repeated: true,
        refund: {
          id: repeat.id,
          paywallId: paywall.id,
          chargeId,
          userId: charge.user_id,
          externalId: charge.external_id,
          walletUserId: await walletUserIdOf(),
          accountId: payer,
          amountRaw: BigInt(repeat.amount_raw),
          earningsRaw: BigInt(repeat.earnings_raw),
          feeRaw: BigInt(repeat.fee_raw),
          reason: repeat.reason ?? null,
          balanceRaw: p ? BigInt(p.balance_raw) - BigInt(p.held_raw) : 0n,
          createdAt: new Date(repeat.created_at).toISOString(),
        },
      };
    }
    if (paid <= 0n)
      throw new DomainError(
        'invalid_request',
        'This charge collected nothing: there is nothing to refund.',
        'chargeId',
        'charge_not_refundable',
      );
    if (rest <= 0n)
      throw new DomainError(
        'invalid_request',
        `This charge was already refunded in full (${usdcDecimal(paid)} USDC).`,
        'chargeId',
        'charge_already_refunded',
      );
    const amountRaw = requestedRaw ?? rest;
    if (amountRaw > rest)
      throw new DomainError(
        'invalid_amount',
        `At most ${usdcDecimal(rest)} USDC of this charge can be refunded (it took ${usdcDecimal(paid)} USDC, ` +
          `${usdcDecimal(refunded)} USDC already refunded); ${usdcDecimal(amountRaw)} USDC was requested.`,
        'amount',
        'refund_exceeds_charge',
      );
    const feeRaw = refundFeePart(paid, BigInt(sums.fee), refunded, BigInt(sums.fee_refunded), amountRaw);
    const earningsRaw = amountRaw - feeRaw;
    const e = acct.get(earnings);
    const available = e ? BigInt(e.balance_raw) - BigInt(e.held_raw) : 0n;
    if (available < earningsRaw)
      throw new DomainError(
        'invalid_amount',
        `Insufficient earnings: this refund takes ${usdcDecimal(earningsRaw)} USDC from the paywall's earnings, ` +
          `which hold ${usdcDecimal(available)} USDC available. Nothing was refunded.`,
        'amount',
        'insufficient_earnings',
      );

    const id = randomUUID();
    const walletUserId = await walletUserIdOf();
    // The movement: earnings → payer (the whole amount, the transfer the payer's statement shows) and
    // fees → earnings (the fee part); the earnings account changes once, by the earnings part. The
    // debits are conditional: a row missing from `d` would mean a balance that cannot pay, and then the
    // statement writes nothing (checked below).
    const rows = await tx.query(
      `with d as (
         update ledger_account a set balance_raw = a.balance_raw + v.delta,
                -- Low-balance alerts start again for the payer's thresholds its refunded free balance
                -- reaches (as accounts/credit-from-world.ts does for money entering).
                low_alerted = case when a.id <> $1::uuid then a.low_alerted
                  else a.low_alerted and a.balance_raw + v.delta - a.held_raw < coalesce(a.low_alert_raw, 0) end,
                low_alerted_paywalls = case when a.id <> $1::uuid or cardinality(a.low_alerted_paywalls) = 0
                  then a.low_alerted_paywalls
                  else array(select x.id from unnest(a.low_alerted_paywalls) x(id) join paywall p on p.id = x.id::uuid
                              where a.balance_raw + v.delta - a.held_raw < p.low_balance_threshold_raw) end
           from (values ($1::uuid, $4::bigint), ($2::uuid, -$5::bigint), ($3::uuid, -$6::bigint)) v(id, delta)
          where a.id = v.id and (v.delta <> 0 or a.id = $1::uuid) and a.balance_raw - a.held_raw + least(v.delta, 0) >= 0
         returning a.id, a.balance_raw, a.held_raw
       ) select id, balance_raw::text as balance_raw, held_raw::text as held_raw from d`,
      [payer, earnings, FEES_ACCOUNT_ID, amountRaw.toString(), earningsRaw.toString(), feeRaw.toString()],
    );
    const expected = 1 + (earningsRaw > 0n ? 1 : 0) + (feeRaw > 0n ? 1 : 0);
    if (rows.length !== expected) throw new Error('refund: an account could not pay its part under lock');
    const after = rows.find((r: any) => r.id === payer)!;
    // Refunded in full: what the charge still owes (usage its hold and balance did not cover) is
    // forgiven with it. A user is not left repaying, from a later deposit, a charge the app gave back.
    if (amountRaw === rest) await writeOffOwed(tx, payer, { chargeId });
    const balanceAfter = BigInt(after.balance_raw);
    const metadata = { refundId: id, chargeId, reason };
    const [written] = await tx.query(
      `with r as (
         insert into refund (id, paywall_id, charge_id, user_id, account_id, amount_raw, earnings_raw, fee_raw, reason, created_at)
         values ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::uuid, $6::bigint, $7::bigint, $8::bigint, $9, now())
         returning created_at
       ), t as (
         insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                               paywall_id, end_user_id, charge_id, metadata, created_at)
         select v.id, v.kind, v.debit, v.credit, v.amount, v.after, $2::uuid, v.end_user, $3::uuid, $12::jsonb, now()
           from (values (gen_random_uuid(), 'fee_refund', '${FEES_ACCOUNT_ID}'::uuid, $10::uuid, $8::bigint, null::bigint, null::uuid),
                        ($1::uuid, 'refund', $10::uuid, $5::uuid, $6::bigint, $11::bigint, $4::uuid)) v(id, kind, debit, credit, amount, after, end_user)
          where v.amount > 0
       ) select created_at from r`,
      [
        id,
        paywall.id,
        chargeId,
        charge.user_id,
        payer,
        amountRaw.toString(),
        earningsRaw.toString(),
        feeRaw.toString(),
        reason,
        earnings,
        balanceAfter.toString(),
        JSON.stringify(metadata),
      ],
    );
    await recordEvents(tx, [
      buildEvent(
        'paywall.balance.refund.created',
        { paywall, trigger, subject: { type: 'charge', id: chargeId, externalId: charge.external_id } },
        {
          activityId: id,
          chargeId,
          amount: usdcDecimal(amountRaw),
          walletUserId,
          externalUserId: charge.external_id,
          reason,
        },
      ),
    ]);
    const refund: RefundResult = {
      id,
      paywallId: paywall.id,
      chargeId,
      userId: charge.user_id,
      externalId: charge.external_id,
      walletUserId,
      accountId: payer,
      amountRaw,
      earningsRaw,
      feeRaw,
      reason,
      balanceRaw: balanceAfter - BigInt(after.held_raw),
      createdAt: new Date(written.created_at).toISOString(),
    };
    return { refund, repeated: false };
  }

  /** What each charge took from the account that paid, and what was refunded of it (DataLoader batch). */
  async states(chargeIds: readonly string[]): Promise<RefundState[]> {
    const rows = await this.deps.db.query(
      `select k.id,
              (select coalesce(sum(t.amount_raw), 0) from transfer t where t.charge_id = k.id and t.kind in (${LEGS}))::text as paid,
              (select coalesce(sum(r.amount_raw), 0) from refund r where r.charge_id = k.id)::text as refunded
         from unnest($1::uuid[]) as k(id)`,
      [chargeIds as string[]],
    );
    const by = new Map(rows.map((r: any) => [r.id as string, r]));
    return chargeIds.map((id) => {
      const paidRaw = BigInt(by.get(id)?.paid ?? 0);
      const refundedRaw = BigInt(by.get(id)?.refunded ?? 0);
      return { paidRaw, refundedRaw, refundableRaw: refundableRest(paidRaw, refundedRaw) };
    });
  }

  /** The refunds of many charges (DataLoader batch), oldest first under each charge. */
  async ofCharges(chargeIds: readonly string[]): Promise<RefundRow[][]> {
    const rows = await this.deps.db.query(
      `select id, charge_id, amount_raw::text as amount_raw, earnings_raw::text as earnings_raw,
              fee_raw::text as fee_raw, reason, created_at
         from refund where charge_id = any($1::uuid[]) order by created_at, id`,
      [chargeIds as string[]],
    );
    const by = new Map<string, RefundRow[]>();
    for (const r of rows) {
      const list = by.get(r.charge_id) ?? [];
      list.push(toRow(r));
      by.set(r.charge_id, list);
    }
    return chargeIds.map((id) => by.get(id) ?? []);
  }
}

export const toRow = (r: any): RefundRow => ({
  id: r.id,
  chargeId: r.charge_id,
  amountRaw: BigInt(r.amount_raw),
  earningsRaw: BigInt(r.earnings_raw ?? 0),
  feeRaw: BigInt(r.fee_raw ?? 0),
  reason: r.reason ?? null,
  createdAt: new Date(r.created_at),
});

/** Optional reason: a string of 1 to 500 characters (trimmed), storable in PostgreSQL. */
function checkReason(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  if (typeof reason !== 'string' || isUnstorableText(reason))
    throw new DomainError('invalid_request', 'reason must be a string', 'reason');
  const text = reason.trim();
  if (text === '') return null;
  if (text.length > MAX_REFUND_REASON)
    throw new DomainError(
      'invalid_request',
      `reason may be at most ${MAX_REFUND_REASON} characters`,
      'reason',
    );
  return text;
}
