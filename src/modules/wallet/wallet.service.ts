import { randomUUID } from 'node:crypto';
import { DomainError } from '../../shared/errors.js';
import { parseAmount, usdcDecimal } from '../../shared/money.js';
import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import { buildEvent } from '../events/event-payloads.js';
import { creditFromWorld } from '../accounts/credit-from-world.js';
import { receiptOf, type Receipt } from '../accounts/receipt.js';
import { pageTrigger } from './authorization.service.js';
import { allowanceColumns, allowanceOf, type AllowanceState } from './allowance.js';
import type { Clock } from '../../shared/clock.js';
import { sha256Hex } from '../../shared/ids.js';

/** Test funds are a development aid: one credit is at most this much (1000 USDC). */
export const MAX_TEST_FUNDS_RAW = 1000n * 1_000_000n;

/** A test-funds form's token: the hidden `formToken` each rendering of the form carries. */
const FORM_TOKEN = /^[A-Za-z0-9_-]{16,64}$/;

/**
 * The transfer id one submission of a test-funds form credits under: the same form posted again (a
 * double click, the browser's "resend") names the same transfer, so it credits once.
 */
export function testFundsTransferId(walletUserId: string, formToken: string): string {
  const h = sha256Hex(`test_funds\n${walletUserId}\n${formToken}`);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
export const ACTIVITY_ROWS = 20;
/** The largest low-balance alert a wallet may set (1,000,000 USDC). */
export const MAX_LOW_ALERT_RAW = 1_000_000n * 1_000_000n;

export interface ConnectedApp {
  connectionId: string;
  paywallId: string;
  paywallName: string;
  connectedAt: Date;
  /** The app's spending limit, what it spent in the period and when that resets (docs/reference.md §16). */
  allowance: AllowanceState | null;
}

export interface ActivityRow {
  id: string;
  createdAt: Date;
  /** The app's name, or null for movements of the wallet itself (test funds, card top-ups). */
  app: string | null;
  /** The model of a usage charge, else the charge's or transfer's description, else its kind. */
  description: string;
  /** Signed: positive when money came in. */
  amountRaw: bigint;
  /** A settled usage charge's itemised receipt (docs/reference.md §13), else null. */
  receipt: ActivityReceipt | null;
  /**
   * A refund (docs/reference.md §16 "Refunds"): the charge it gives money back for, and why. The charge is
   * named for people by what it was (its model or description) and when (`chargeWhat`, `chargeAt`).
   */
  refund: { chargeId: string; reason: string | null; chargeWhat: string; chargeAt: Date } | null;
}

/** A refund as the wallet shows it under the charge's receipt. */
export interface ActivityRefund {
  id: string;
  amountRaw: bigint;
  reason: string | null;
  createdAt: Date;
}

/** A receipt with what the wallet paid of its total, and what it still owes. */
export interface ActivityReceipt extends Receipt {
  /** The charge's id: the reference to quote when asking about it. */
  chargeId: string;
  /** Taken from the balance at settlement (the charge's amount). */
  paidRaw: bigint;
  /** The part of the total the balance could not pay at settlement. */
  uncollectedRaw: bigint;
  /** How much of it later top-ups repaid. */
  recoveredRaw: bigint;
  /** Money given back for this charge, oldest first (docs/reference.md §16 "Refunds"). */
  refunds: ActivityRefund[];
}

export interface WalletOverview {
  email: string;
  /** Free balance of the wallet account (settled − held). */
  balanceRaw: bigint;
  heldRaw: bigint;
  /** The wallet's own low-balance alert (docs/reference.md §16 "Low balance"); null = off. */
  lowAlertRaw: bigint | null;
  apps: ConnectedApp[];
  activity: ActivityRow[];
}

/** The legs of one charge (transfer kinds): shown as one activity row of the charge's amount. */
const CHARGE_LEG_KINDS = ['usage', 'charge', 'fee', 'provider_cost'].map((k) => `'${k}'`).join(', ');

/** Labels by charge kind (`manual`, `usage`), else by transfer kind. */
const KIND_LABELS: Record<string, string> = {
  deposit: 'Deposit',
  manual: 'Charge',
  charge: 'Charge',
  usage: 'Usage',
  refund: 'Refund',
};

/** The receipt of an activity row that is a charge (computed by receiptOf from what the charge kept). */
function activityReceipt(r: any): ActivityReceipt | null {
  const receipt = receiptOf({
    kind: r.charge_kind,
    model: r.model,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    metadata: r.charge_metadata ?? {},
  });
  if (!receipt) return null;
  return {
    ...receipt,
    chargeId: r.id,
    paidRaw: BigInt(r.charge_amount_raw),
    uncollectedRaw: BigInt(r.uncollected_raw),
    recoveredRaw: BigInt(r.recovered_raw),
    refunds: [],
  };
}

/** Port to the Stripe module: a checkout URL that tops up the signed-in wallet by `amount` USDC. */
/** `autoTopup`: the "Top up automatically" fields of the form, when sent (docs/reference.md §16). */
export type StartWalletCheckout = (
  walletUser: { id: string; email?: string },
  amount: unknown,
  autoTopup?: Record<string, string | undefined>,
) => Promise<string>;

/** What the hosted wallet needs; card checkout is the Stripe module's, reached through a port. */
export interface WalletServiceDeps {
  db: Database;
  config: Pick<Config, 'WALLET_TEST_FUNDS'>;
  /** Starts a Stripe checkout that tops up the signed-in wallet (port to the Stripe module). */
  stripe: { startWalletCheckout: StartWalletCheckout };
  /** The time allowance periods are read at; default the system's. */
  clock?: Clock;
}

/** The wallet page's data and the wallet's own money movements (test funds; card top-ups next). */
export class WalletService {
  constructor(private readonly deps: WalletServiceDeps) {}

  /** Balance, connected apps and the 20 latest movements across apps, newest first. */
  async overview(walletUser: { id: string; email: string; accountId: string }): Promise<WalletOverview> {
    const [acct] = await this.deps.db.query(
      `select balance_raw::text as balance_raw, held_raw::text as held_raw, low_alert_raw::text as low_alert
         from ledger_account where id = $1`,
      [walletUser.accountId],
    );
    const apps = await this.deps.db.query(
      `select c.id, c.paywall_id, p.name, c.created_at, ${allowanceColumns('c')}
         from wallet_connection c join paywall p on p.id = c.paywall_id
        where c.wallet_user_id = $1 and c.revoked_at is null order by c.created_at desc`,
      [walletUser.id],
    );
    // One row per charge: a charge leaves the wallet as up to three transfers (the paywall's earnings, the
    // platform fee, the built-in provider's cost), but the user paid one amount, the charge's. The window
    // holds at least ACTIVITY_ROWS charges (three legs at most each); the amount comes from the charge row,
    // so a charge whose older legs fall outside the window still shows in full.
    const activity = await this.deps.db.query(
      `with w as (
         select t.seq, t.id, t.created_at, t.kind, t.amount_raw, t.credit_account_id, t.paywall_id, t.charge_id,
                t.metadata, case when t.charge_id is not null and t.kind in (${CHARGE_LEG_KINDS})
                                 then t.charge_id else t.id end as entry
           from transfer t
          where t.debit_account_id = $1 or t.credit_account_id = $1
          order by t.seq desc limit $2::int * 3
       ), g as (
         select distinct on (entry) * from w order by entry, seq desc
       )
       select g.entry as id, g.created_at, g.kind, ch.kind as charge_kind,
              (case when g.entry = g.charge_id then ch.amount_raw else g.amount_raw end)::text as amount_raw,
              g.credit_account_id = $1 as incoming, p.name as app, ch.model,
              coalesce(g.metadata->>'description', ch.metadata->>'description') as description,
              g.metadata->>'source' as source, g.entry = g.charge_id as is_charge, ch.prompt_tokens,
              g.metadata->>'reason' as refund_reason, g.charge_id, ch.created_at as charge_created_at,
              ch.completion_tokens, ch.metadata as charge_metadata, ch.amount_raw::text as charge_amount_raw,
              ch.uncollected_raw::text as uncollected_raw, ch.recovered_raw::text as recovered_raw
         from g
         left join paywall p on p.id = g.paywall_id
         left join charge ch on ch.id = g.charge_id
        order by g.seq desc limit $2`,
      [walletUser.accountId, ACTIVITY_ROWS],
    );
    const balance = BigInt(acct?.balance_raw ?? 0);
    const held = BigInt(acct?.held_raw ?? 0);
    const now = this.deps.clock ? this.deps.clock.now() : new Date();
    const rows: ActivityRow[] = activity.map((r) => ({
      id: r.id,
      createdAt: new Date(r.created_at),
      app: r.app ?? null,
      description:
        r.kind === 'refund'
          ? 'Refund'
          : (r.model ??
            r.description ??
            (r.source === 'test_funds'
              ? 'Test funds'
              : r.source === 'stripe'
                ? 'Card top-up'
                : (KIND_LABELS[r.charge_kind ?? r.kind] ?? String(r.kind).replace(/_/g, ' ')))),
      amountRaw: r.incoming ? BigInt(r.amount_raw) : -BigInt(r.amount_raw),
      receipt: r.is_charge ? activityReceipt(r) : null,
      refund:
        r.kind === 'refund'
          ? {
              chargeId: r.charge_id,
              reason: r.refund_reason ?? null,
              chargeWhat: r.model ?? r.description ?? KIND_LABELS[r.charge_kind] ?? 'Charge',
              chargeAt: new Date(r.charge_created_at),
            }
          : null,
    }));
    // The refunds of the charges whose receipts are shown (one query).
    const receipts = new Map(rows.filter((a) => a.receipt).map((a) => [a.receipt!.chargeId, a.receipt!]));
    if (receipts.size > 0) {
      const refunds = await this.deps.db.query(
        `select id, charge_id, amount_raw::text as amount_raw, reason, created_at from refund
          where charge_id = any($1::uuid[]) order by created_at, id`,
        [[...receipts.keys()]],
      );
      for (const f of refunds)
        receipts.get(f.charge_id)?.refunds.push({
          id: f.id,
          amountRaw: BigInt(f.amount_raw),
          reason: f.reason ?? null,
          createdAt: new Date(f.created_at),
        });
    }
    return {
      email: walletUser.email,
      balanceRaw: balance - held,
      heldRaw: held,
      lowAlertRaw: acct?.low_alert ? BigInt(acct.low_alert) : null,
      apps: apps.map((a) => ({
        connectionId: a.id,
        paywallId: a.paywall_id,
        paywallName: a.name,
        connectedAt: new Date(a.created_at),
        allowance: allowanceOf(a as Parameters<typeof allowanceOf>[0], now),
      })),
      activity: rows,
    };
  }

  /**
   * Test funds (`WALLET_TEST_FUNDS=true` only): ONE transfer world → wallet (kind `deposit`,
   * `metadata.source = "test_funds"`), both balance updates, and `paywall.balance.deposit.created` for
   * each paywall the wallet is connected to — all in one transaction.
   */
  async addTestFunds(
    walletUser: { id: string; accountId: string },
    amountInput: unknown,
    formToken?: unknown,
  ): Promise<{ amountRaw: bigint; balanceRaw: bigint; repeated: boolean }> {
    if (!this.deps.config.WALLET_TEST_FUNDS)
      throw new DomainError(
        'forbidden',
        'Test funds are not enabled on this server.',
        null,
        'test_funds_disabled',
      );
    const amountRaw = parseAmount(amountInput);
    if (amountRaw === null || amountRaw > MAX_TEST_FUNDS_RAW)
      throw new DomainError(
        'invalid_amount',
        'Enter an amount in USDC greater than 0 and at most 1000, with at most 6 decimals (e.g. 10 or 2.5).',
        'amount',
        'invalid_amount',
      );
    // With the form's token, a repeated submission is the same transfer; without one (a hand-made post)
    // each post is its own.
    const transferId =
      typeof formToken === 'string' && FORM_TOKEN.test(formToken)
        ? testFundsTransferId(walletUser.id, formToken)
        : randomUUID();
    const trigger = pageTrigger(walletUser.id);
    return this.deps.db.transaction(async (tx) => {
      // The wallet's row lock (the one the credit below takes) orders two posts of one form: the second
      // finds the first's transfer and moves nothing.
      const [account] = await tx.query<{ balance_raw: string; held_raw: string }>(
        `select balance_raw::text as balance_raw, held_raw::text as held_raw from ledger_account
          where id = $1 for no key update`,
        [walletUser.accountId],
      );
      const [earlier] = await tx.query<{ amount_raw: string }>(
        `select amount_raw::text as amount_raw from transfer where id = $1 and credit_account_id = $2`,
        [transferId, walletUser.accountId],
      );
      if (account && earlier)
        return {
          amountRaw: BigInt(earlier.amount_raw),
          balanceRaw: BigInt(account.balance_raw) - BigInt(account.held_raw),
          repeated: true,
        };
      // One wallet's connections, one event per paywall (the latest connection names the end user).
      const conns = await tx.query(
        `select distinct on (c.paywall_id) c.paywall_id, p.owner_id, eu.id as end_user_id, eu.external_id
           from wallet_connection c join paywall p on p.id = c.paywall_id join end_user eu on eu.id = c.end_user_id
          where c.wallet_user_id = $1 and c.revoked_at is null
          order by c.paywall_id, c.created_at desc`,
        [walletUser.id],
      );
      const events = conns.map((c) =>
        buildEvent(
          'paywall.balance.deposit.created',
          {
            paywall: { id: c.paywall_id, ownerId: c.owner_id },
            trigger,
            subject: { type: 'end_user', id: c.end_user_id, externalId: c.external_id },
          },
          {
            walletUserId: walletUser.id,
            externalUserId: c.external_id,
            amount: usdcDecimal(amountRaw),
            currency: 'USDC',
            source: 'test_funds',
            activityId: transferId,
          },
        ),
      );
      const after = await creditFromWorld(tx, {
        account: walletUser.accountId,
        kind: 'deposit',
        transferId,
        amountRaw,
        paywallId: null,
        endUserId: null,
        metadata: { source: 'test_funds', walletUserId: walletUser.id },
        events,
      });
      if (!after) throw new Error('test funds: the wallet account is missing');
      return { amountRaw, balanceRaw: after.balanceRaw - after.heldRaw, repeated: false };
    });
  }

  /**
   * The wallet's own low-balance alert (docs/reference.md §16 "Low balance"): an amount in USDC, or empty
   * to turn it off. A charge that takes the free balance below it sends one e-mail (low-balance.ts). Set
   * while the balance is already below it, the dip counts as announced: the e-mail comes with the next
   * crossing, after the balance was at or above it again. Returns the threshold (null = off).
   */
  async setLowBalanceAlert(walletUser: { accountId: string }, input: unknown): Promise<bigint | null> {
    const text = typeof input === 'string' ? input.trim() : '';
    const raw = text === '' ? null : parseAmount(text);
    if (text !== '' && (raw === null || raw > MAX_LOW_ALERT_RAW))
      throw new DomainError(
        'invalid_amount',
        'Enter the alert in USDC, greater than 0 and at most 1000000, with at most 6 decimals (e.g. 5 or 2.5), or leave it empty to turn it off.',
        'lowBalanceAlert',
        'invalid_amount',
      );
    await this.deps.db.query(
      `update ledger_account set low_alert_raw = $2::bigint,
              low_alerted = $2::bigint is not null and balance_raw - held_raw < $2::bigint
        where id = $1`,
      [walletUser.accountId, raw === null ? null : raw.toString()],
    );
    return raw;
  }

  /**
   * Card top-ups (the platform's Stripe, `STRIPE_SECRET_KEY` + `STRIPE_WEBHOOK_SECRET`): the Checkout
   * URL to redirect to. Fulfilment is Stripe webhook ingest on the platform's endpoint
   * (StripeWebhookIngestService.receiveWallet).
   */
  async startCheckout(
    walletUser: { id: string; email?: string; accountId: string },
    amountInput: unknown,
    autoTopup?: Record<string, string | undefined>,
  ): Promise<string> {
    return this.deps.stripe.startWalletCheckout(walletUser, amountInput, autoTopup);
  }
}
