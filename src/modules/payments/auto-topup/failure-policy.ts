import type { Database, Sql } from '../../../db/database.js';
import type { Logger } from '../../../shared/logger.js';
import type { Mailer } from '../../../shared/mailer.js';
import { usdcDecimal } from '../../../shared/money.js';
import { recordEvents, type NewEvent } from '../../events/event.service.js';
import { buildEvent } from '../../events/event-payloads.js';
import {
  CHANGED_CHANNEL,
  eventTargets,
  ROW_COLUMNS,
  type AfterCommit,
  type InFlight,
  type RowOf,
} from './auto-topup-rows.js';
import { MAX_FAILURES_IN_ROW } from './auto-topup-settings.js';

export interface AutoTopupFailuresDeps {
  db: Database;
  config: { PUBLIC_BASE_URL: string };
  mailer: Mailer;
  log: Logger;
  inFlight: InFlight;
}

/**
 * Failed payments count in a row; at {@link MAX_FAILURES_IN_ROW} auto top-up turns off (event, and
 * e-mail for a wallet).
 */
export class AutoTopupFailures {
  constructor(private readonly d: AutoTopupFailuresDeps) {}

  /** {@link recordFailure} in its own transaction, the e-mail after the commit. */
  async fail(attemptId: string, paymentIntentId: string | null, code: string, message: string) {
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
    for (const t of await eventTargets(tx, row)) {
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
    this.d.inFlight.track(
      send().catch((err) =>
        this.d.log.warn({ err, walletUserId }, 'auto top-up: the e-mail could not be sent'),
      ),
    );
  }
}
