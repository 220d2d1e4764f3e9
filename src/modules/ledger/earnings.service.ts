import { randomUUID } from 'node:crypto';
import type { Database, Sql } from '../../db/database.js';
import { DomainError, invalid, notFound } from '../../shared/errors.js';
import { parseAmount, usdcDecimal } from '../../shared/money.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { earningsAccountOf, PAYOUTS_ACCOUNT_ID, WORLD_ACCOUNT_ID } from '../accounts/accounts.js';
import type { WithdrawalStatus } from '../accounts/account.entity.js';
import {
  encodeCursor,
  encodeSeqCursor,
  pageKeys,
  pageParams,
  seqPageKeys,
  seqPageParams,
  splitPages,
} from '../../shared/cursor.js';

export interface Earnings {
  /** What the developer may withdraw now (the earnings account's balance). */
  availableRaw: bigint;
  /** Requested and not yet paid or failed. */
  pendingRaw: bigint;
  /** Paid out. */
  withdrawnRaw: bigint;
  /** Platform fees taken from this paywall's charges. */
  feesRaw: bigint;
}

export interface EarningsEntry {
  id: string;
  /** `charge`, `usage` (money in), `withdrawal` (out), `withdrawal_return` (back), `fee`/`provider_cost` legs are not earnings. */
  kind: string;
  /** Signed change of the earnings account. */
  amountRaw: bigint;
  chargeId: string | null;
  withdrawalId: string | null;
  model: string | null;
  createdAt: Date;
  cursor: string;
}

export interface WithdrawalRow {
  id: string;
  paywallId: string;
  amountRaw: bigint;
  destination: string;
  status: WithdrawalStatus;
  failureReason: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const toWithdrawal = (r: any): WithdrawalRow => ({
  id: r.id,
  paywallId: r.paywall_id,
  amountRaw: BigInt(r.amount_raw),
  destination: r.destination,
  status: r.status,
  failureReason: r.failure_reason ?? null,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

/** One page of one paywall's list, as a DataLoader key. */
export interface PaywallPageKey {
  paywallId: string;
  first: number;
  after: string | null;
}

const WITHDRAWAL_COLUMNS = `id, paywall_id, amount_raw::text as amount_raw, destination, status, failure_reason, created_at, updated_at`;

const isUuid = (s: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s);

/**
 * A paywall's earnings (docs/reference.md §8) and withdrawals. Every movement is one statement: the transfer,
 * both balance updates and the withdrawal row's change commit together, and a withdrawal can never
 * take more than the available earnings (conditional update, CHECK behind it). The payout rail is out
 * of scope: the operator marks withdrawals paid or failed (`npm run admin -- withdrawals …`).
 */
export class EarningsService {
  constructor(
    private readonly db: Database,
    /** The lag-tolerant reads (history and withdrawal lists): the replica in a GraphQL query. */
    private readonly reads: Sql = db,
  ) {}

  /** Earnings of many paywalls (DataLoader batch). */
  async many(paywallIds: readonly string[]): Promise<Earnings[]> {
    const rows = await this.db.query(
      `select p.id,
              coalesce((select balance_raw from ledger_account a where a.kind = 'earnings' and a.paywall_id = p.id), 0)::text as available,
              coalesce((select sum(amount_raw) from withdrawal w where w.paywall_id = p.id and w.status = 'PENDING'), 0)::text as pending,
              coalesce((select sum(amount_raw) from withdrawal w where w.paywall_id = p.id and w.status = 'PAID'), 0)::text as withdrawn,
              coalesce((select sum(case when t.kind = 'fee' then amount_raw else -amount_raw end) from transfer t
                         where t.paywall_id = p.id and t.kind in ('fee', 'fee_refund')), 0)::text as fees
         from unnest($1::uuid[]) as p(id)`,
      [paywallIds as string[]],
    );
    const byId = new Map(rows.map((r) => [r.id as string, r]));
    return paywallIds.map((id) => {
      const r = byId.get(id);
      return {
        availableRaw: BigInt(r?.available ?? 0),
        pendingRaw: BigInt(r?.pending ?? 0),
        withdrawnRaw: BigInt(r?.withdrawn ?? 0),
        feesRaw: BigInt(r?.fees ?? 0),
      };
    });
  }

  /** The movements of a paywall's earnings account, newest first (cursor pagination). */
  async history(
    paywallId: string,
    first: number,
    after: string | null,
  ): Promise<{ rows: EarningsEntry[]; hasNextPage: boolean }> {
    return (await this.historyPages([{ paywallId, first, after }]))[0];
  }

  /**
   * Earnings history pages of many paywalls in one statement (DataLoader batch: `paywalls { earningsHistory }`
   * reads once, not once per paywall).
   */
  async historyPages(
    keys: readonly PaywallPageKey[],
  ): Promise<{ rows: EarningsEntry[]; hasNextPage: boolean }[]> {
    const rows = await this.reads.query<any>(
      `select k.idx, t.*
         from ${seqPageKeys('paywall_id')}
         cross join lateral (
           select t.id, t.seq as seq_n, t.seq::text as seq, t.kind, t.charge_id, t.withdrawal_id, t.created_at, c.model,
                  (case when t.credit_account_id = a.id then t.amount_raw else -t.amount_raw end)::text as amount
             from ledger_account a
             join transfer t on (t.credit_account_id = a.id or t.debit_account_id = a.id)
             left join charge c on c.id = t.charge_id
            where a.kind = 'earnings' and a.paywall_id = k.paywall_id and (k.after_seq is null or t.seq < k.after_seq)
            order by t.seq desc limit k.lim
         ) t
        order by k.idx, t.seq_n desc`,
      seqPageParams(
        keys.map((k) => k.paywallId),
        keys,
        'ea',
      ),
    );
    return splitPages(rows, keys, (r) => ({
      id: r.id,
      kind: r.kind,
      amountRaw: BigInt(r.amount),
      chargeId: r.charge_id ?? null,
      withdrawalId: r.withdrawal_id ?? null,
      model: r.model ?? null,
      createdAt: new Date(r.created_at),
      cursor: encodeSeqCursor('ea', r.seq),
    }));
  }

  /** Withdrawals of a paywall, newest first. */
  async withdrawals(
    paywallId: string,
    first: number,
    after: string | null,
  ): Promise<{ rows: (WithdrawalRow & { cursor: string })[]; hasNextPage: boolean }> {
    return (await this.withdrawalPages([{ paywallId, first, after }]))[0];
  }

  /** Withdrawal pages of many paywalls in one statement (DataLoader batch). */
  async withdrawalPages(
    keys: readonly PaywallPageKey[],
  ): Promise<{ rows: (WithdrawalRow & { cursor: string })[]; hasNextPage: boolean }[]> {
    const rows = await this.reads.query<any>(
      `select k.idx, w.*
         from ${pageKeys('paywall_id')}
         cross join lateral (
           select ${WITHDRAWAL_COLUMNS}, created_at::text as created_text from withdrawal x
            where x.paywall_id = k.paywall_id
              and (k.after_ts is null or (x.created_at, x.id) < (k.after_ts, k.after_id))
            order by x.created_at desc, x.id desc limit k.lim
         ) w
        order by k.idx, w.created_at desc, w.id desc`,
      pageParams(
        keys.map((k) => k.paywallId),
        keys,
        'w',
      ),
    );
    return splitPages(rows, keys, (r) => ({
      ...toWithdrawal(r),
      cursor: encodeCursor('w', r.created_text, r.id),
    }));
  }

  /**
   * Moves `amount` of the paywall's available earnings to payouts in flight: a PENDING withdrawal.
   * SHARED paywalls only (a DEFAULT paywall's users pay the developer directly).
   */
  async requestWithdrawal(
    paywall: PaywallInfo,
    input: { amount: unknown; destination: unknown },
  ): Promise<WithdrawalRow> {
    if (paywall.mode !== 'SHARED')
      throw new DomainError(
        'unsupported_in_mode',
        'Withdrawals apply to SHARED-mode paywalls; in DEFAULT mode your users pay you directly.',
        null,
        'unsupported_in_mode',
      );
    const amountRaw = parseAmount(input.amount);
    if (amountRaw === null)
      throw new DomainError(
        'invalid_amount',
        'amount must be a decimal string in USDC, > 0, with at most 6 fraction digits (e.g. "12.5")',
        'amount',
        'invalid_amount',
      );
    const destination = typeof input.destination === 'string' ? input.destination.trim() : '';
    if (!destination || destination.length > 500)
      throw invalid('destination must be 1 to 500 characters (where the payout goes)', 'destination');
    const id = randomUUID();
    const rows = await this.db.query(
      `with a as (
         update ledger_account set balance_raw = balance_raw - $2::bigint
          where id = ${earningsAccountOf('$1::uuid')} and balance_raw - held_raw >= $2::bigint
         returning id
       ), p as (
         update ledger_account set balance_raw = balance_raw + $2::bigint
          where id = '${PAYOUTS_ACCOUNT_ID}' and exists (select 1 from a)
       ), w as (
         insert into withdrawal (id, paywall_id, amount_raw, destination, status, created_at, updated_at)
         select $3::uuid, $1::uuid, $2::bigint, $4, 'PENDING', now(), now() from a
         returning ${WITHDRAWAL_COLUMNS}
       ), t as (
         insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, paywall_id, withdrawal_id, created_at)
         select gen_random_uuid(), 'withdrawal', a.id, '${PAYOUTS_ACCOUNT_ID}', $2::bigint, $1::uuid, $3::uuid, now() from a
       )
       select * from w`,
      [paywall.id, amountRaw.toString(), id, destination],
    );
    if (rows.length === 1) return toWithdrawal(rows[0]);
    const [earnings] = await this.many([paywall.id]);
    throw new DomainError(
      'invalid_amount',
      `Insufficient earnings: ${usdcDecimal(earnings.availableRaw)} USDC available, ${usdcDecimal(amountRaw)} USDC requested.`,
      'amount',
      'insufficient_earnings',
    );
  }

  /** The paywall a withdrawal belongs to (not found for unknown ids). */
  async paywallOf(withdrawalId: string): Promise<string> {
    if (!isUuid(withdrawalId)) throw notFound('withdrawal');
    const rows = await this.db.query(`select paywall_id from withdrawal where id = $1`, [withdrawalId]);
    if (!rows.length) throw notFound('withdrawal');
    return rows[0].paywall_id;
  }

  /** The developer cancels a PENDING withdrawal of their paywall: the funds return to earnings. */
  async cancelWithdrawal(paywall: PaywallInfo, withdrawalId: string): Promise<WithdrawalRow> {
    return this.finish(withdrawalId, 'CANCELED', null, paywall.id);
  }

  /** Operator: the payout was made (payouts → world). */
  async markPaid(withdrawalId: string): Promise<WithdrawalRow> {
    return this.finish(withdrawalId, 'PAID', null, null);
  }

  /** Operator: the payout failed; the funds return to the paywall's earnings. */
  async markFailed(withdrawalId: string, reason: string | null): Promise<WithdrawalRow> {
    return this.finish(withdrawalId, 'FAILED', reason, null);
  }

  /** PENDING withdrawals across paywalls, oldest first (the operator's queue), or all with `status`. */
  async list(status: WithdrawalStatus | null, limit = 100): Promise<WithdrawalRow[]> {
    const rows = await this.db.query(
      `select ${WITHDRAWAL_COLUMNS} from withdrawal where ($1::text is null or status = $1) order by created_at limit $2`,
      [status, limit],
    );
    return rows.map(toWithdrawal);
  }

  /**
   * Ends a PENDING withdrawal in one statement: the status change (only from PENDING: a second call
   * changes nothing) and its transfer out of payouts (to world when paid, back to earnings otherwise).
   */
  private async finish(
    withdrawalId: string,
    status: 'PAID' | 'FAILED' | 'CANCELED',
    reason: string | null,
    paywallId: string | null,
  ): Promise<WithdrawalRow> {
    if (!isUuid(withdrawalId)) throw notFound('withdrawal');
    const run = (sql: Sql) =>
      sql.query(
        `with w as (
           update withdrawal set status = $2, failure_reason = $3, updated_at = now()
            where id = $1::uuid and status = 'PENDING' and ($4::uuid is null or paywall_id = $4::uuid)
           returning ${WITHDRAWAL_COLUMNS}
         ), dest as (
           select case when $2 = 'PAID' then '${WORLD_ACCOUNT_ID}'::uuid else ${earningsAccountOf('w.paywall_id')} end as id,
                  w.amount_raw::bigint as amount, w.paywall_id, w.id as withdrawal_id
             from w
         ), p as (
           update ledger_account set balance_raw = balance_raw - dest.amount from dest where ledger_account.id = '${PAYOUTS_ACCOUNT_ID}'
         ), d as (
           update ledger_account set balance_raw = balance_raw + dest.amount from dest where ledger_account.id = dest.id
         ), t as (
           insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, paywall_id, withdrawal_id, created_at)
           select gen_random_uuid(), case when $2 = 'PAID' then 'payout' else 'withdrawal_return' end,
                  '${PAYOUTS_ACCOUNT_ID}', dest.id, dest.amount, dest.paywall_id, dest.withdrawal_id, now() from dest
         )
         select * from w`,
        [withdrawalId, status, reason, paywallId],
      );
    const rows = await run(this.db);
    if (rows.length === 1) return toWithdrawal(rows[0]);
    const now = await this.db.query(
      `select ${WITHDRAWAL_COLUMNS} from withdrawal where id = $1 and ($2::uuid is null or paywall_id = $2::uuid)`,
      [withdrawalId, paywallId],
    );
    if (!now.length) throw notFound('withdrawal');
    throw new DomainError(
      'conflict',
      `withdrawal ${withdrawalId} is ${now[0].status}; only a PENDING withdrawal can be ${status === 'CANCELED' ? 'canceled' : `marked ${status}`}`,
      null,
      'withdrawal_not_pending',
    );
  }
}
