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
import type { EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { checkExternalId, triggerOf, walletUserIdOf } from '../users/user.service.js';
import { IdempotencyService, type Codec } from './idempotency.service.js';
import { applyManualCharge, type ChargeResult } from './manual-charge.js';
import { creditFromWorld } from '../accounts/credit-from-world.js';
import type { ChargedAccount, LowBalanceAlerts } from './low-balance.js';
import {
  encodeCursor,
  encodeSeqCursor,
  pageKeys,
  pageParams,
  seqPageKeys,
  seqPageParams,
  splitPages,
} from '../../shared/cursor.js';
import type { Clock } from '../../shared/clock.js';

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

export type { ChargeResult };

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
      (sql) =>
        applyManualCharge(
          this.deps,
          sql,
          paywall,
          externalId,
          amountRaw,
          metadata,
          trigger,
          (c) => (charged = c),
        ),
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

  /**
   * Ledger pages for many users at once (DataLoader batch): newest first by `seq`, one statement with a
   * LATERAL per requested page.
   */
  async ledgerPages(keys: readonly PageKey[]): Promise<Page<LedgerEntryRow>[]> {
    const rows = await this.deps.reads.query<any>(
      // A user's statement: the transfers they caused, the legs of one charge (earnings, fee, provider
      // cost) shown as one entry of the whole amount; money in is positive, money spent negative.
      `select k.idx, le.id, le.seq::text as seq, le.kind, le.amount_raw::text as amount_raw,
              le.balance_after_raw::text as balance_after_raw, le.charge_id, le.metadata, le.created_at
         from ${seqPageKeys('user_id')}
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
      seqPageParams(
        keys.map((k) => k.userId),
        keys,
        'le',
      ),
    );
    return splitPages(rows, keys, (r) => ({
      id: r.id,
      seq: r.seq,
      kind: r.kind,
      amountRaw: BigInt(r.amount_raw),
      balanceAfterRaw: BigInt(r.balance_after_raw),
      chargeId: r.charge_id ?? null,
      metadata: typeof r.metadata === 'string' ? JSON.parse(r.metadata) : r.metadata,
      createdAt: new Date(r.created_at),
      cursor: encodeSeqCursor('le', r.seq),
    }));
  }

  /** Charge pages for many users at once (DataLoader batch): newest first. */
  async chargePages(keys: readonly PageKey[]): Promise<Page<ChargeRow>[]> {
    const rows = await this.deps.reads.query<any>(
      `select k.idx, c.id, c.kind, c.status, c.amount_raw::text as amount_raw, c.hold_raw::text as hold_raw,
              c.uncollected_raw::text as uncollected_raw, c.recovered_raw::text as recovered_raw, c.model, c.prompt_tokens, c.completion_tokens,
              c.error_code, c.metadata, c.created_at, c.settled_at, c.user_key_id, c.created_at::text as created_text
         from ${pageKeys('user_id')}
         cross join lateral (
           select * from charge x
            where x.user_id = k.user_id and (k.after_ts is null or (x.created_at, x.id) < (k.after_ts, k.after_id))
            order by x.created_at desc, x.id desc limit k.lim
         ) c
        order by k.idx, c.created_at desc, c.id desc`,
      pageParams(
        keys.map((k) => k.userId),
        keys,
        'c',
      ),
    );
    return splitPages(rows, keys, (r) => ({
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
    }));
  }
}
