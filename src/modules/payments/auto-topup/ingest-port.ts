import { randomUUID } from 'node:crypto';
import type { Sql } from '../../../db/database.js';
import type { Logger } from '../../../shared/logger.js';
import { usdcDecimal } from '../../../shared/money.js';
import { buildEvent } from '../../events/event-payloads.js';
import { creditFromWorld } from '../../accounts/credit-from-world.js';
import type { VerifiedStripeEvent } from '../stripe/stripe-gateway.js';
import { WALLET_ENDPOINT } from '../stripe/stripe-integration.store.js';
import type { PaymentIntentAction, PaymentIntentOwnership } from './auto-topup-event-action.js';
import { NOT_AUTO_TOPUP } from './auto-topup-event-action.js';
import {
  CHANGED_CHANNEL,
  eventTargets,
  ROW_COLUMNS,
  type AfterCommit,
  type RowOf,
} from './auto-topup-rows.js';
import type { AutoTopupFailures } from './failure-policy.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * What the Stripe webhook ingest calls of auto top-up, in the event's transaction: turning it on at a
 * paid Checkout, whether a PaymentIntent is an attempt of this endpoint, and its outcome. Only
 * `payment_intent.succeeded` credits (once per PaymentIntent: the attempt flips to `succeeded` under its
 * row lock, and the PaymentIntent id is unique), and frees the slot.
 */
export class AutoTopupIngest {
  constructor(private readonly d: { log: Logger; failures: AutoTopupFailures }) {}

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
        return this.d.failures.recordFailure(
          tx,
          action.attemptId,
          action.paymentIntentId,
          action.code,
          action.message,
        );
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
    const targets = await eventTargets(tx, row);
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
}
