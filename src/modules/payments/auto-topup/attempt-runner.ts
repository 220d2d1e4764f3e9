import { randomUUID } from 'node:crypto';
import type { Database } from '../../../db/database.js';
import type { Clock } from '../../../shared/clock.js';
import type { Logger } from '../../../shared/logger.js';
import type { StripeGateway } from '../stripe/stripe-gateway.js';
import { readIntegration, type StripeSecrets } from '../stripe/stripe-integration.store.js';
import { ROW_COLUMNS_A, type InFlight, type RowOf } from './auto-topup-rows.js';
import { utcMonthStart } from './auto-topup-settings.js';
import type { AutoTopupThresholds } from './threshold-cache.js';
import type { AutoTopupFailures } from './failure-policy.js';

export interface AutoTopupAttemptsDeps {
  db: Database;
  config: { STRIPE_SECRET_KEY?: string; STRIPE_WEBHOOK_SECRET?: string };
  gateway: StripeGateway;
  secrets: StripeSecrets;
  clock: Clock;
  log: Logger;
  thresholds: AutoTopupThresholds;
  failures: AutoTopupFailures;
  inFlight: InFlight;
}

/** Off-session create calls at once per process (a burst of crossings waits its turn, never floods Stripe). */
const MAX_CONCURRENT_CALLS = 4;
/** A create call that could not reach Stripe is tried again after this long, with the same key. */
const RETRY_AFTER_MS = 30_000;
/** …at most this many times; then the attempt fails (a failure in a row). */
const MAX_TRIES = 3;

/**
 * Auto top-up's payments (docs/reference.md §16 "Auto top-up", docs/stripe.md "Auto top-up"): the saved
 * card of an end user (DEFAULT, the paywall's Stripe) or of a wallet (the platform's Stripe) pays a
 * chosen amount when a charge takes the free balance below a chosen threshold.
 *
 * One payment per crossing: {@link afterCharge} claims the row's single `pending_attempt_id` slot with a
 * conditional UPDATE (whatever the number of concurrent charges, one of them wins) and writes the
 * attempt; the Stripe call happens afterwards, off the request path and outside any transaction, with
 * the attempt id as idempotency key. Only `payment_intent.succeeded` credits (ingest-port.ts).
 */
export class AutoTopupAttempts {
  private timer?: NodeJS.Timeout;
  private readonly running = new Set<string>();
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly d: AutoTopupAttemptsDeps) {}

  /** Every 30 s (unref'd): create calls that could not reach Stripe are tried again. */
  async start(): Promise<void> {
    this.timer = setInterval(() => {
      void this.sweep().catch((err) => this.d.log.warn({ err }, 'auto top-up sweep failed'));
    }, RETRY_AFTER_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.idle();
  }

  /** Resolves when no payment started by this process is still being created (tests, shutdown). */
  idle(): Promise<void> {
    return this.d.inFlight.idle();
  }

  /**
   * A charge committed on `accountId` leaving `freeAfterRaw` free: starts a payment when it may be due
   * (a Map lookup otherwise). Never waited for: the caller's answer never waits for this or for Stripe.
   */
  afterCharge(endUserId: string, accountId: string | null, freeAfterRaw: bigint): void {
    const threshold = accountId === null ? undefined : this.d.thresholds.get(accountId);
    if (accountId !== null && (threshold === undefined || freeAfterRaw >= threshold)) return;
    const p = this.trigger(endUserId, freeAfterRaw).catch((err) =>
      this.d.log.warn({ err, endUserId }, 'auto top-up trigger failed'),
    );
    this.d.inFlight.track(p);
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
    for (const r of rows) this.d.inFlight.track(this.run(r.id));
    return rows.length;
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
        return await this.d.failures.fail(
          attemptId,
          null,
          'stripe_not_connected',
          'Card payments are not set up any more.',
        );
      let outcome;
      try {
        const cards = await this.d.gateway.listCards(key, a.stripe_customer_id);
        if (cards.length === 0)
          return await this.d.failures.fail(
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
          await this.d.failures.fail(attemptId, null, 'stripe_unreachable', 'Stripe could not be reached.');
        return;
      }
      if (outcome.kind === 'failed')
        return await this.d.failures.fail(attemptId, outcome.paymentIntentId, outcome.code, outcome.message);
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
}
