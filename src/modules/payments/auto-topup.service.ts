import { createHash, randomUUID } from 'node:crypto';
import type { Database, Sql } from '../../db/database.js';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/logger.js';
import type { Mailer } from '../../shared/mailer.js';
import { formatDecimal, usdcDecimal } from '../../shared/money.js';
import { recordEvents, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { creditFromWorld } from '../ledger/credit-from-world.js';
import type { PaymentIntentAction, PaymentIntentOwnership } from './auto-topup-event-action.js';
import { NOT_AUTO_TOPUP } from './auto-topup-event-action.js';
import {
  describeSettings,
  MAX_FAILURES_IN_ROW,
  utcMonthStart,
  type AutoTopupSettings,
} from './auto-topup-settings.js';
import type { StripeGateway, VerifiedStripeEvent } from './stripe/stripe-gateway.js';
import { readIntegration, WALLET_ENDPOINT, type StripeSecrets } from './stripe/stripe-integration.store.js';

/** Whose auto top-up: an end user of a DEFAULT paywall (by the app's user id) or a hosted wallet. */
export type AutoTopupScope =
  | { kind: 'end_user'; paywallId: string; externalId: string }
  | { kind: 'wallet'; walletUserId: string; email?: string };

/** What the pages and GraphQL show of one auto top-up. */
export interface AutoTopupState {
  enabled: boolean;
  /** Null until a Checkout that saved the card was paid. */
  settings: AutoTopupSettings | null;
  /** What this UTC month's payments took or hold (succeeded and in flight), in cents. */
  spentThisMonthCents: number;
  failuresInRow: number;
  /** `failures` (turned off after three failures in a row), `user`, or null. */
  disabledReason: string | null;
  /** A payment is in flight (created, its outcome not known yet). */
  pending: boolean;
}

export interface AutoTopupDeps {
  db: Database;
  config: { PUBLIC_BASE_URL: string; STRIPE_SECRET_KEY?: string; STRIPE_WEBHOOK_SECRET?: string };
  gateway: StripeGateway;
  secrets: StripeSecrets;
  mailer: Mailer;
  clock: Clock;
  log: Logger;
}

interface RowOf {
  id: string;
  paywall_id: string | null;
  external_id: string | null;
  end_user_id: string | null;
  wallet_user_id: string | null;
  account_id: string | null;
  stripe_customer_id: string;
}

/** Work to do once a transaction committed (an e-mail). */
export type AfterCommit = () => void;

const SYSTEM: EventTrigger = { source: 'system', actorType: 'system', actorId: 'auto_topup' };
/** Off-session create calls at once per process (a burst of crossings waits its turn, never floods Stripe). */
const MAX_CONCURRENT_CALLS = 4;
/** A create call that could not reach Stripe is tried again after this long, with the same key. */
const RETRY_AFTER_MS = 30_000;
/** …at most this many times; then the attempt fails (a failure in a row). */
const MAX_TRIES = 3;

/**
 * Auto top-up (docs/reference.md §16 "Auto top-up", docs/stripe.md "Auto top-up"): the saved card of
 * an end user (DEFAULT, the paywall's Stripe) or of a wallet (the platform's Stripe) pays a chosen
 * amount when a charge takes the free balance below a chosen threshold.
 *
 * One payment per crossing: {@link afterCharge} claims the row's single `pending_attempt_id` slot with a
 * conditional UPDATE (whatever the number of concurrent charges, one of them wins) and writes the
 * attempt; the Stripe call happens afterwards, off the request path and outside any transaction, with
 * the attempt id as idempotency key. Only `payment_intent.succeeded` credits (once per PaymentIntent: the
 * attempt flips to `succeeded` under its row lock, and the PaymentIntent id is unique), and frees the
 * slot. Failures count in a row; at three, auto top-up turns off (event, and e-mail for a wallet).
 */
export class AutoTopupService {
  private timer?: NodeJS.Timeout;
  /**
   * The threshold of every account whose auto top-up is on, so a charge that cannot be due costs the
   * request path nothing (no statement). Loaded at start, kept fresh by NOTIFY `auto_topup_changed`
   * (payload: the account id, sent in the transaction that turns it on, off or changes it).
   */
  private readonly thresholds = new Map<string, bigint>();
  private unlisten?: () => void;
  private unReconnect?: () => void;
  private readonly running = new Set<string>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly d: AutoTopupDeps) {}

  /** Every 30 s (unref'd): create calls that could not reach Stripe are tried again. */
  async start(): Promise<void> {
    this.unlisten = await this.d.db.listen(CHANGED_CHANNEL, (accountId) => {
      void this.reload(accountId).catch((err) => this.d.log.warn({ err }, 'auto top-up reload failed'));
    });
    // Changes notified while LISTEN was down were missed: read them all again.
    this.unReconnect = this.d.db.onReconnect(() => {
      void this.reload(null).catch((err) => this.d.log.warn({ err }, 'auto top-up reload failed'));
    });
    await this.reload(null);
    this.timer = setInterval(() => {
      void this.sweep().catch((err) => this.d.log.warn({ err }, 'auto top-up sweep failed'));
    }, RETRY_AFTER_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.unlisten?.();
    this.unReconnect?.();
    await this.idle();
  }

  /** Resolves when no payment started by this process is still being created (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.allSettled([...this.inFlight]);
  }

  // Opt-in ------------------------------------------------------------------------------------------

  /**
   * The ONE Stripe customer of `scope` on the account of `secretKey` (created the first time, with an
   * idempotency key derived from the scope, so two concurrent first checkouts make one customer).
   */
  async customerFor(scope: AutoTopupScope, secretKey: string, description: string): Promise<string> {
    const known = await this.rowOf(this.d.db, scope);
    if (known) return known.stripe_customer_id;
    const key =
      scope.kind === 'wallet' ? `wallet:${scope.walletUserId}` : `${scope.paywallId}:${scope.externalId}`;
    const customer = await this.d.gateway.createCustomer(
      secretKey,
      {
        ...(scope.kind === 'wallet' && scope.email ? { email: scope.email } : {}),
        description,
        metadata:
          scope.kind === 'wallet'
            ? { kind: 'wallet', walletUserId: scope.walletUserId }
            : { paywallId: scope.paywallId, user: scope.externalId.slice(0, 500) },
      },
      `auto-topup-customer-${createHash('sha256').update(key).digest('hex').slice(0, 40)}`,
    );
    await this.d.db.query(
      scope.kind === 'wallet'
        ? `insert into auto_topup (id, wallet_user_id, stripe_customer_id) values ($1, $2, $3) on conflict do nothing`
        : `insert into auto_topup (id, paywall_id, external_id, stripe_customer_id) values ($1, $2, $4, $3)
           on conflict do nothing`,
      scope.kind === 'wallet'
        ? [randomUUID(), scope.walletUserId, customer]
        : [randomUUID(), scope.paywallId, customer, scope.externalId],
    );
    return (await this.rowOf(this.d.db, scope))!.stripe_customer_id;
  }

  /**
   * In the transaction that credits a paid Checkout Session: when the session asked for auto top-up
   * (its row names the customer and the settings), turn it on with those settings for the account the
   * session credited. Failures in a row start again from 0.
   */
  async enableFromCheckout(
    tx: Sql,
    sessionId: string,
    target: { accountId: string; endUserId: string | null },
  ): Promise<void> {
    await tx.query(
      `update auto_topup a set enabled = true, account_id = $2::uuid, end_user_id = coalesce($3::uuid, a.end_user_id),
              threshold_raw = (c.auto_topup->>'thresholdRaw')::bigint, amount_cents = (c.auto_topup->>'amountCents')::bigint,
              monthly_cap_cents = (c.auto_topup->>'monthlyCapCents')::bigint, failures_in_row = 0,
              disabled_reason = null, updated_at = now()
         from stripe_checkout c
        where c.session_id = $1 and c.auto_topup is not null and a.stripe_customer_id = c.stripe_customer_id
          and ((c.wallet_user_id is not null and a.wallet_user_id = c.wallet_user_id)
            or (c.paywall_id is not null and a.paywall_id = c.paywall_id and a.external_id = c.external_id))`,
      [sessionId, target.accountId, target.endUserId],
    );
    await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, target.accountId]);
  }

  /** The user turns auto top-up off (wallet page, hosted top-up page). Records the event when it was on. */
  async turnOff(scope: AutoTopupScope): Promise<void> {
    await this.d.db.transaction(async (tx) => {
      const [row] = await tx.query<RowOf & { failures_in_row: number }>(
        `update auto_topup set enabled = false, disabled_reason = 'user', updated_at = now()
          where id = (select id from auto_topup where ${scopeWhere(scope)}) and enabled
         returning ${ROW_COLUMNS}, failures_in_row`,
        scopeParams(scope),
      );
      if (!row) return;
      if (row.account_id) await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, row.account_id]);
      const trigger: EventTrigger =
        scope.kind === 'wallet'
          ? { source: 'page', actorType: 'end_user', actorId: scope.walletUserId }
          : {
              source: 'page',
              actorType: 'end_user',
              actorId: row.end_user_id ?? row.external_id ?? 'unknown',
            };
      const events = (await this.eventTargets(tx, row)).map((t) =>
        buildEvent(
          'paywall.balance.autotopup.disabled',
          { ...t.ctx, trigger },
          {
            walletUserId: t.walletUserId,
            externalUserId: t.externalId,
            reason: 'user',
            failuresInRow: row.failures_in_row,
            lastFailureCode: null,
          },
        ),
      );
      if (events.length) await recordEvents(tx, events);
    });
  }

  /** The wallet's auto top-up (null when it was never set up). */
  async walletState(walletUserId: string): Promise<AutoTopupState | null> {
    return (await this.states(`a.wallet_user_id = any($1::uuid[])`, [walletUserId]))[0] ?? null;
  }

  /** The auto top-up of DEFAULT end users, by end-user id, in the order asked (null when none). */
  async endUserStates(endUserIds: readonly string[]): Promise<(AutoTopupState | null)[]> {
    const rows = await this.states(`a.end_user_id = any($1::uuid[])`, [...endUserIds]);
    const by = new Map(rows.map((r) => [r.key, r]));
    return endUserIds.map((id) => by.get(id) ?? null);
  }

  private async states(where: string, ids: string[]): Promise<(AutoTopupState & { key: string })[]> {
    const rows = await this.d.db.query<any>(
      `select coalesce(a.end_user_id, a.wallet_user_id) as key, a.enabled, a.threshold_raw::text, a.amount_cents::text,
              a.monthly_cap_cents::text, a.failures_in_row, a.disabled_reason, a.pending_attempt_id,
              coalesce((select sum(x.amount_cents) from auto_topup_attempt x
                         where x.auto_topup_id = a.id and x.status <> 'failed' and x.created_at >= $2::timestamptz), 0)::text as spent
         from auto_topup a where ${where}`,
      [ids, utcMonthStart(this.d.clock.now()).toISOString()],
    );
    return rows.map((r) => ({
      key: r.key,
      enabled: r.enabled,
      settings:
        r.threshold_raw === null
          ? null
          : {
              thresholdRaw: BigInt(r.threshold_raw),
              amountCents: Number(r.amount_cents),
              monthlyCapCents: Number(r.monthly_cap_cents),
            },
      spentThisMonthCents: Number(r.spent),
      failuresInRow: r.failures_in_row,
      disabledReason: r.disabled_reason,
      pending: r.pending_attempt_id !== null,
    }));
  }

  // Trigger -----------------------------------------------------------------------------------------

  /**
   * After a charge (chat settlement, manual charge) left `freeAfterRaw` on the account the end user
   * spends: fire and forget. The caller's answer never waits for this or for Stripe.
   */
  /**
   * Reads every enabled threshold again (as after a reconnect). The NOTIFY of a change reaches this
   * instance a moment after its commit: a charge in between is not checked (the next one is).
   */
  refresh(): Promise<void> {
    return this.reload(null);
  }

  /** Reads the enabled thresholds of one account (or of all, `null`) into {@link thresholds}. */
  private async reload(accountId: string | null): Promise<void> {
    const rows = await this.d.db.query<{ account_id: string; threshold_raw: string }>(
      `select account_id, threshold_raw::text from auto_topup
        where enabled and account_id is not null and ($1::uuid is null or account_id = $1::uuid)`,
      [accountId],
    );
    if (accountId === null) this.thresholds.clear();
    else this.thresholds.delete(accountId);
    for (const r of rows) this.thresholds.set(r.account_id, BigInt(r.threshold_raw));
  }

  /**
   * A charge committed on `accountId` leaving `freeAfterRaw` free: starts a payment when it may be due
   * (a Map lookup otherwise). Never waited for.
   */
  afterCharge(endUserId: string, accountId: string | null, freeAfterRaw: bigint): void {
    const threshold = accountId === null ? undefined : this.thresholds.get(accountId);
    if (accountId !== null && (threshold === undefined || freeAfterRaw >= threshold)) return;
    const p = this.trigger(endUserId, freeAfterRaw).catch((err) =>
      this.d.log.warn({ err, endUserId }, 'auto top-up trigger failed'),
    );
    this.track(p);
  }

  /**
   * Claims the one payment slot when the free balance is below the threshold and the payment fits the
   * monthly cap, and writes the attempt, in ONE statement: concurrent charges of the same account
   * serialise on the row, and only the first finds the slot free. Then creates the payment (outside the
   * statement). Returns the attempt id, or null when nothing was due.
   */
  async trigger(endUserId: string, freeAfterRaw: bigint): Promise<string | null> {
    const attemptId = randomUUID();
    const now = this.d.clock.now();
    const rows = await this.d.db.query<{ id: string }>(
      `with due as (
         select a.id, a.amount_cents from auto_topup a
          where a.account_id = (select account_id from end_user where id = $1::uuid)
            and a.enabled and a.pending_attempt_id is null and $2::bigint < a.threshold_raw
            -- Still below now: a charge reported before an auto top-up was credited (its hook ran late)
            -- must not start another one.
            and (select l.balance_raw - l.held_raw from ledger_account l where l.id = a.account_id) < a.threshold_raw
            and coalesce((select sum(x.amount_cents) from auto_topup_attempt x
                           where x.auto_topup_id = a.id and x.status <> 'failed' and x.created_at >= $4::timestamptz), 0)
                + a.amount_cents <= a.monthly_cap_cents
       ), claimed as (
         update auto_topup a set pending_attempt_id = $3::uuid, updated_at = now()
           from due where a.id = due.id and a.pending_attempt_id is null and a.enabled
         returning a.id, due.amount_cents
       )
       insert into auto_topup_attempt (id, auto_topup_id, amount_cents, status, created_at, updated_at)
       select $3::uuid, id, amount_cents, 'pending', $5::timestamptz, now() from claimed
       returning id`,
      [endUserId, freeAfterRaw.toString(), attemptId, utcMonthStart(now).toISOString(), now.toISOString()],
    );
    if (rows.length === 0) return null;
    await this.run(attemptId);
    return attemptId;
  }

  /** Tries again the attempts whose create call could not reach Stripe (same idempotency key). */
  async sweep(): Promise<number> {
    const rows = await this.d.db.query<{ id: string }>(
      `update auto_topup_attempt set updated_at = now()
        where id in (select id from auto_topup_attempt
                      where status = 'pending' and payment_intent_id is null
                        and updated_at < now() - make_interval(secs => $1::int / 1000.0)
                      order by created_at limit 100 for update skip locked)
       returning id`,
      [RETRY_AFTER_MS],
    );
    for (const r of rows) this.track(this.run(r.id));
    return rows.length;
  }

  private track(p: Promise<unknown>): void {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  /**
   * Creates the off-session PaymentIntent of one attempt (idempotency key: the attempt id). Accepted:
   * its PaymentIntent id is noted and the `payment_intent.*` event decides. Refused for good: the
   * attempt fails. Stripe unreachable: tried again by the sweep, failing after {@link MAX_TRIES}.
   */
  async run(attemptId: string): Promise<void> {
    if (this.running.has(attemptId)) return;
    this.running.add(attemptId);
    await this.slot();
    try {
      const [a] = await this.d.db.query<RowOf & { amount_cents: string; status: string; tries: number }>(
        `select ${ROW_COLUMNS_A}, x.amount_cents::text, x.status, x.tries
           from auto_topup_attempt x join auto_topup a on a.id = x.auto_topup_id where x.id = $1`,
        [attemptId],
      );
      if (!a || a.status !== 'pending') return;
      const key = await this.secretKeyOf(a);
      if (!key)
        return await this.fail(
          attemptId,
          null,
          'stripe_not_connected',
          'Card payments are not set up any more.',
        );
      let outcome;
      try {
        const cards = await this.d.gateway.listCards(key, a.stripe_customer_id);
        if (cards.length === 0)
          return await this.fail(
            attemptId,
            null,
            'no_saved_card',
            'No saved card was found for this customer.',
          );
        outcome = await this.d.gateway.chargeOffSession(
          key,
          {
            amountCents: Number(a.amount_cents),
            customer: a.stripe_customer_id,
            paymentMethod: cards[0],
            description: 'Automatic balance top-up',
            metadata: {
              kind: 'auto_topup',
              autoTopupAttemptId: attemptId,
              ...(a.wallet_user_id ? { walletUserId: a.wallet_user_id } : { paywallId: a.paywall_id! }),
            },
          },
          attemptId,
        );
      } catch (err: any) {
        const [t] = await this.d.db.query<{ tries: number }>(
          `update auto_topup_attempt set tries = tries + 1, updated_at = now() where id = $1 and status = 'pending'
           returning tries`,
          [attemptId],
        );
        this.d.log.warn(
          { attemptId, status: err?.statusCode, type: err?.type, tries: t?.tries },
          'auto top-up: Stripe could not be reached; tried again later with the same idempotency key',
        );
        if (t && t.tries >= MAX_TRIES)
          await this.fail(attemptId, null, 'stripe_unreachable', 'Stripe could not be reached.');
        return;
      }
      if (outcome.kind === 'failed')
        return await this.fail(attemptId, outcome.paymentIntentId, outcome.code, outcome.message);
      // The event may have arrived first and set it already (then it is the same id).
      await this.d.db.query(
        `update auto_topup_attempt set payment_intent_id = $2, updated_at = now()
          where id = $1 and payment_intent_id is null`,
        [attemptId, outcome.paymentIntentId],
      );
    } finally {
      this.release();
      this.running.delete(attemptId);
    }
  }

  /** The key that pays: the platform's for a wallet, the paywall's (decrypted) for an end user; null: none. */
  private async secretKeyOf(a: RowOf): Promise<string | null> {
    if (a.wallet_user_id) {
      const { STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET } = this.d.config;
      return STRIPE_SECRET_KEY && STRIPE_WEBHOOK_SECRET ? STRIPE_SECRET_KEY : null;
    }
    const integration = a.paywall_id ? await readIntegration(this.d.db, a.paywall_id) : undefined;
    if (!integration) return null;
    try {
      return this.d.secrets.decrypt(a.paywall_id!, integration.secret_key_ciphertext);
    } catch {
      return null;
    }
  }

  private async slot(): Promise<void> {
    if (this.active < MAX_CONCURRENT_CALLS) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  private async fail(attemptId: string, paymentIntentId: string | null, code: string, message: string) {
    const after = await this.d.db.transaction((tx) =>
      this.recordFailure(tx, attemptId, paymentIntentId, code, message),
    );
    after?.();
  }

  /**
   * One failed payment, once (the attempt flips from `pending` under its row lock; the create call's
   * error and the `payment_intent.payment_failed` event of the same payment count once): the slot is
   * freed, the failure counted, and at {@link MAX_FAILURES_IN_ROW} auto top-up turns off. Records
   * `paywall.balance.autotopup.failed` (and `…disabled`). Returns what to do once the transaction
   * committed (the e-mail to a wallet whose auto top-up turned off), or null.
   */
  async recordFailure(
    tx: Sql,
    attemptId: string,
    paymentIntentId: string | null,
    code: string,
    message: string,
  ): Promise<AfterCommit | null> {
    const [flipped] = await tx.query<{
      auto_topup_id: string;
      amount_cents: string;
      payment_intent_id: string | null;
    }>(
      `update auto_topup_attempt set status = 'failed', failure_code = $2, failure_message = $3,
              payment_intent_id = coalesce(payment_intent_id, $4), updated_at = now()
        where id = $1 and status = 'pending'
       returning auto_topup_id, amount_cents::text, payment_intent_id`,
      [attemptId, code.slice(0, 100), message.slice(0, 500), paymentIntentId],
    );
    if (!flipped) return null;
    const [before] = await tx.query<{ enabled: boolean }>(
      `select enabled from auto_topup where id = $1 for update`,
      [flipped.auto_topup_id],
    );
    const [row] = await tx.query<RowOf & { failures_in_row: number; enabled: boolean }>(
      `update auto_topup set pending_attempt_id = case when pending_attempt_id = $2::uuid then null else pending_attempt_id end,
              failures_in_row = failures_in_row + 1,
              enabled = enabled and failures_in_row + 1 < $3,
              disabled_reason = case when enabled and failures_in_row + 1 >= $3 then 'failures' else disabled_reason end,
              updated_at = now()
        where id = $1
       returning ${ROW_COLUMNS}, failures_in_row, enabled`,
      [flipped.auto_topup_id, attemptId, MAX_FAILURES_IN_ROW],
    );
    const turnedOff = before.enabled && !row.enabled;
    if (turnedOff && row.account_id)
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, row.account_id]);
    const events: NewEvent[] = [];
    for (const t of await this.eventTargets(tx, row)) {
      events.push(
        buildEvent('paywall.balance.autotopup.failed', t.ctx, {
          walletUserId: t.walletUserId,
          externalUserId: t.externalId,
          paymentIntentId: flipped.payment_intent_id,
          amount: usdcDecimal(BigInt(flipped.amount_cents) * 10_000n),
          failureCode: code,
          failureMessage: message,
          failuresInRow: row.failures_in_row,
        }),
      );
      if (turnedOff)
        events.push(
          buildEvent('paywall.balance.autotopup.disabled', t.ctx, {
            walletUserId: t.walletUserId,
            externalUserId: t.externalId,
            reason: 'failures',
            failuresInRow: row.failures_in_row,
            lastFailureCode: code,
          }),
        );
    }
    if (events.length) await recordEvents(tx, events);
    this.d.log.info(
      { attemptId, code, failuresInRow: row.failures_in_row, turnedOff },
      turnedOff ? 'auto top-up turned off after failures in a row' : 'auto top-up payment failed',
    );
    const walletUserId = row.wallet_user_id;
    return turnedOff && walletUserId ? () => this.mailTurnedOff(walletUserId, message) : null;
  }

  /** The e-mail to the wallet user whose auto top-up turned off (after the commit; logged on failure). */
  private mailTurnedOff(walletUserId: string, lastFailure: string): void {
    const send = async () => {
      const [w] = await this.d.db.query<{ email: string }>(`select email from wallet_user where id = $1`, [
        walletUserId,
      ]);
      if (!w) return;
      await this.d.mailer.send({
        to: w.email,
        subject: 'Automatic top-up of your wallet was turned off',
        text:
          `Automatic top-up of your wallet was turned off because ${MAX_FAILURES_IN_ROW} card payments in a row failed ` +
          `(the last one: ${lastFailure}). No money was taken for these failed payments.\n\n` +
          `To turn it on again, top up your wallet with "Top up automatically" ticked: ` +
          `${this.d.config.PUBLIC_BASE_URL}/wallet/topup\n`,
      });
    };
    this.track(
      send().catch((err) =>
        this.d.log.warn({ err, walletUserId }, 'auto top-up: the e-mail could not be sent'),
      ),
    );
  }

  // Stripe events -----------------------------------------------------------------------------------

  /**
   * Stripe webhook ingest, in the event's transaction: does the endpoint (`endpointKey`: a paywall id,
   * or `wallet`) own the event's PaymentIntent? Only an auto top-up attempt it made does: named by the
   * PaymentIntent's metadata, of a user of that endpoint, and not another PaymentIntent than the one
   * the attempt already has. The attempt's row is locked (a concurrent delivery waits here).
   */
  async claimPaymentIntent(
    tx: Sql,
    endpointKey: string,
    pi: NonNullable<VerifiedStripeEvent['paymentIntent']>,
  ): Promise<PaymentIntentOwnership> {
    const attemptId = pi.metadata.autoTopupAttemptId;
    if (pi.metadata.kind !== 'auto_topup' || typeof attemptId !== 'string' || !UUID.test(attemptId))
      return { owned: false, reason: NOT_AUTO_TOPUP };
    const [a] = await tx.query<{
      paywall_id: string | null;
      wallet_user_id: string | null;
      payment_intent_id: string | null;
    }>(
      `select a.paywall_id, a.wallet_user_id, x.payment_intent_id
         from auto_topup_attempt x join auto_topup a on a.id = x.auto_topup_id where x.id = $1 for update of x`,
      [attemptId],
    );
    if (!a)
      return { owned: false, reason: 'the PaymentIntent names an auto top-up this server does not know' };
    const mine = endpointKey === WALLET_ENDPOINT ? a.wallet_user_id !== null : a.paywall_id === endpointKey;
    if (!mine)
      return {
        owned: false,
        reason: a.wallet_user_id
          ? 'the PaymentIntent is a wallet auto top-up (the platform endpoint credits it)'
          : "the PaymentIntent is another paywall's auto top-up (its own endpoint credits it)",
      };
    if (a.payment_intent_id && a.payment_intent_id !== pi.id)
      return { owned: false, reason: 'the auto top-up attempt belongs to another PaymentIntent' };
    return { owned: true, attemptId };
  }

  /**
   * Applies a `payment_intent.*` action in the event's transaction (after the event was deduplicated);
   * returns what to do once it committed, or null.
   */
  async applyPaymentIntent(tx: Sql, action: PaymentIntentAction): Promise<AfterCommit | null> {
    switch (action.kind) {
      case 'credit':
        await this.credit(tx, action);
        return null;
      case 'fail':
        return this.recordFailure(tx, action.attemptId, action.paymentIntentId, action.code, action.message);
      case 'pending':
        return null;
      case 'ignore':
        this.d.log.warn({ reason: action.reason }, action.reason);
        return null;
    }
  }

  /**
   * The credit of a succeeded PaymentIntent, once: the attempt flips to `succeeded` (from `pending`, or
   * from `failed` when the create call's answer was lost but Stripe took the money) and takes the
   * PaymentIntent id (unique), and only when this delivery flipped it, world → the account
   * (`creditFromWorld`, kind `deposit`, `metadata.source = "stripe"`, `paymentIntentId`), with the events
   * `paywall.balance.autotopup.succeeded` then `paywall.balance.deposit.created`. The slot is freed and
   * the failures in a row start again from 0.
   */
  private async credit(tx: Sql, action: Extract<PaymentIntentAction, { kind: 'credit' }>): Promise<void> {
    const transferId = randomUUID();
    const [flipped] = await tx.query<{ auto_topup_id: string }>(
      `update auto_topup_attempt set status = 'succeeded', payment_intent_id = $2, transfer_id = $3::uuid, updated_at = now()
        where id = $1 and status <> 'succeeded' and (payment_intent_id is null or payment_intent_id = $2)
       returning auto_topup_id`,
      [action.attemptId, action.paymentIntentId, transferId],
    );
    if (!flipped) return;
    const [row] = await tx.query<RowOf>(
      `update auto_topup set pending_attempt_id = case when pending_attempt_id = $2::uuid then null else pending_attempt_id end,
              failures_in_row = 0, updated_at = now()
        where id = $1 returning ${ROW_COLUMNS}`,
      [flipped.auto_topup_id, action.attemptId],
    );
    if (!row.account_id) return;
    const targets = await this.eventTargets(tx, row);
    const amount = usdcDecimal(action.amountRaw);
    const events = targets.flatMap((t) => [
      buildEvent('paywall.balance.autotopup.succeeded', t.ctx, {
        walletUserId: t.walletUserId,
        externalUserId: t.externalId,
        paymentIntentId: action.paymentIntentId,
        amount,
        currency: 'usd',
        activityId: transferId,
      }),
      buildEvent('paywall.balance.deposit.created', t.ctx, {
        walletUserId: t.walletUserId,
        externalUserId: t.externalId,
        amount,
        currency: 'USDC',
        source: 'stripe',
        activityId: transferId,
      }),
    ]);
    await creditFromWorld(tx, {
      account: row.account_id,
      kind: 'deposit',
      transferId,
      amountRaw: action.amountRaw,
      paywallId: row.wallet_user_id ? null : row.paywall_id,
      endUserId: row.wallet_user_id ? null : row.end_user_id,
      metadata: {
        source: 'stripe',
        autoTopup: true,
        paymentIntentId: action.paymentIntentId,
        ...(row.wallet_user_id ? { walletUserId: row.wallet_user_id } : {}),
      },
      events,
    });
  }

  // Helpers -----------------------------------------------------------------------------------------

  private async rowOf(sql: Sql, scope: AutoTopupScope): Promise<RowOf | undefined> {
    return (
      await sql.query<RowOf>(
        `select ${ROW_COLUMNS} from auto_topup where ${scopeWhere(scope)}`,
        scopeParams(scope),
      )
    )[0];
  }

  /**
   * Where the events of one auto top-up go: its paywall (DEFAULT), or every paywall the wallet is
   * connected to (the latest connection names the end user), as wallet top-ups do.
   */
  private async eventTargets(
    sql: Sql,
    row: RowOf,
  ): Promise<{ ctx: Parameters<typeof buildEvent>[1]; walletUserId: string | null; externalId: string }[]> {
    if (row.wallet_user_id) {
      const conns = await sql.query<{
        paywall_id: string;
        owner_id: string;
        end_user_id: string;
        external_id: string;
      }>(
        `select distinct on (c.paywall_id) c.paywall_id, p.owner_id, eu.id as end_user_id, eu.external_id
           from wallet_connection c join paywall p on p.id = c.paywall_id join end_user eu on eu.id = c.end_user_id
          where c.wallet_user_id = $1 and c.revoked_at is null
          order by c.paywall_id, c.created_at desc`,
        [row.wallet_user_id],
      );
      return conns.map((c) => ({
        ctx: {
          paywall: { id: c.paywall_id, ownerId: c.owner_id },
          trigger: SYSTEM,
          subject: { type: 'end_user' as const, id: c.end_user_id, externalId: c.external_id },
          metadata: { source: 'auto_topup' },
        },
        walletUserId: row.wallet_user_id,
        externalId: c.external_id,
      }));
    }
    if (!row.paywall_id || !row.end_user_id) return [];
    const [p] = await sql.query<{ owner_id: string }>(`select owner_id from paywall where id = $1`, [
      row.paywall_id,
    ]);
    if (!p) return [];
    return [
      {
        ctx: {
          paywall: { id: row.paywall_id, ownerId: p.owner_id },
          trigger: SYSTEM,
          subject: { type: 'end_user', id: row.end_user_id, externalId: row.external_id },
          metadata: { source: 'auto_topup' },
        },
        // DEFAULT mode: the end user is its own wallet (as in every balance event).
        walletUserId: row.end_user_id,
        externalId: row.external_id ?? '',
      },
    ];
  }
}

/** NOTIFY channel of auto top-up changes (payload: the account id). */
const CHANGED_CHANNEL = 'auto_topup_changed';
const ROW_COLUMNS =
  'id, paywall_id, external_id, end_user_id, wallet_user_id, account_id, stripe_customer_id';
const ROW_COLUMNS_A = ROW_COLUMNS.split(', ')
  .map((c) => `a.${c}`)
  .join(', ');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const scopeWhere = (scope: AutoTopupScope) =>
  scope.kind === 'wallet' ? `wallet_user_id = $1::uuid` : `paywall_id = $1::uuid and external_id = $2`;
const scopeParams = (scope: AutoTopupScope) =>
  scope.kind === 'wallet' ? [scope.walletUserId] : [scope.paywallId, scope.externalId];

/** "10 USD" for cents. */
export const usdText = (cents: number): string => `${formatDecimal(BigInt(cents), 2)} USD`;
export { describeSettings };
