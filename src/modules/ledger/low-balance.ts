import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { Mailer } from '../../shared/mailer.js';
import { usdcDecimal, usdcText } from '../../shared/money.js';
import { eventRows, insertEventsSql, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';

/**
 * Low-balance alerts (docs/reference.md §16 "Low balance", docs/ledger.md "Low-balance alerts").
 *
 * A spending account carries, per dip below a threshold, a flag: `low_alerted_paywalls` (the paywalls
 * whose `paywall.balance.low` was recorded) and `low_alerted` (the wallet's own e-mail was sent). After a
 * charge, ONE conditional statement sets a flag that is not set yet while the free balance is below the
 * threshold, and records the event in the same statement: however many charges cross at once, the row
 * lock lets exactly one of them set it. Money entering the account (creditFromWorld) clears the flags
 * whose threshold the free balance reaches again.
 *
 * The charge statements answer the account's flags (the settlement statement returns its row), so the
 * check runs only when it can find something: a threshold is set, the free balance after the charge is
 * below it, and its flag was not set. Without a threshold no statement is added.
 */

/** A spending account's alert state as the charge statement left it. */
export interface AccountAlerts {
  /** The wallet's own threshold (`ledger_account.low_alert_raw`; null = off). */
  lowAlertRaw: bigint | null;
  /** The wallet's e-mail was sent for the current dip. */
  lowAlerted: boolean;
  /** Paywalls whose event was recorded for the current dip. */
  alertedPaywalls: readonly string[];
}

/** The alert state of a row with `low_alert`, `low_alerted`, `low_alerted_paywalls` (null when absent). */
export function alertsOf(r: {
  low_alert?: string | null;
  low_alerted?: boolean | null;
  low_alerted_paywalls?: string[] | string | null;
}): AccountAlerts | null {
  if (r.low_alerted === null || r.low_alerted === undefined) return null;
  const paywalls = r.low_alerted_paywalls;
  return {
    lowAlertRaw: r.low_alert === null || r.low_alert === undefined ? null : BigInt(r.low_alert),
    lowAlerted: r.low_alerted,
    // PGlite may hand a text[] over as its literal ('{a,b}').
    alertedPaywalls: Array.isArray(paywalls)
      ? paywalls
      : typeof paywalls === 'string' && paywalls.length > 2
        ? paywalls.slice(1, -1).split(',')
        : [],
  };
}

/** One charge that took money from a spending account. */
export interface ChargedAccount {
  paywall: { id: string; ownerId: string; lowBalanceThresholdRaw: bigint | null };
  accountId: string;
  endUserId: string;
  externalUserId: string;
  /** As the charge's events name it (the wallet in SHARED mode, the end user in DEFAULT mode). */
  walletUserId: string | null;
  /** The free balance the charge answered (after it). */
  freeAfterRaw: bigint;
  alerts: AccountAlerts;
  trigger: EventTrigger;
}

/** What a check can find, decided in memory: nothing to do means no statement. */
export function lowBalanceDue(c: Pick<ChargedAccount, 'paywall' | 'freeAfterRaw' | 'alerts'>): {
  paywall: boolean;
  wallet: boolean;
} {
  const t = c.paywall.lowBalanceThresholdRaw;
  const own = c.alerts.lowAlertRaw;
  return {
    paywall: t !== null && c.freeAfterRaw < t && !c.alerts.alertedPaywalls.includes(c.paywall.id),
    wallet: own !== null && !c.alerts.lowAlerted && c.freeAfterRaw < own,
  };
}

// The account row is locked first (its newest version: a concurrent check or credit has committed), a
// flag is set only when it is not set and the free balance is below its threshold NOW, and the event is
// written only with the paywall's flag. $1 account, $2 paywall (null: not checked), $3 its threshold,
// $4 check the wallet's own threshold, $5 the event.
const CHECK_SQL = `
with old as (
  select a.id, a.balance_raw - a.held_raw as free, a.low_alert_raw, a.low_alerted, a.low_alerted_paywalls
    from ledger_account a where a.id = $1::uuid for no key update
), f as (
  select old.id, old.free, old.low_alert_raw,
         coalesce($2::text is not null and not ($2::text = any(old.low_alerted_paywalls)) and old.free < $3::bigint, false) as fire_pw,
         coalesce($4::boolean and not old.low_alerted and old.free < old.low_alert_raw, false) as fire_wallet
    from old
), u as (
  update ledger_account a
     set low_alerted_paywalls = case when f.fire_pw then array_append(a.low_alerted_paywalls, $2::text)
                                     else a.low_alerted_paywalls end,
         low_alerted = a.low_alerted or f.fire_wallet
    from f where a.id = f.id and (f.fire_pw or f.fire_wallet)
), e as (
  ${insertEventsSql(5)} where exists (select 1 from f where f.fire_pw)
)
select f.fire_pw, f.fire_wallet, f.free::text as free, f.low_alert_raw::text as low_alert,
       case when f.fire_wallet then (select w.email from wallet_user w where w.account_id = f.id) end as email
  from f`;

/** The subject of the wallet's e-mail. */
export const LOW_BALANCE_SUBJECT = 'Your Paywall Proxy balance is low';

export interface LowBalanceDeps {
  db: Database;
  log: Logger;
  mailer: Mailer;
  /** Read when a message is written (links to the wallet). */
  config: { PUBLIC_BASE_URL: string };
}

/** The check after a charge, and the wallet's e-mail. */
export class LowBalanceAlerts {
  constructor(private readonly d: LowBalanceDeps) {}

  /**
   * After a charge committed: records `paywall.balance.low` and/or sends the wallet's e-mail when this
   * charge's account crossed a threshold whose flag is not set. No statement when nothing can be due.
   * Never throws (an alert must not fail the charge that was made): a failure is logged. Returns what
   * it did.
   */
  async afterCharge(c: ChargedAccount): Promise<{ event: boolean; mail: boolean }> {
    const due = lowBalanceDue(c);
    if (!due.paywall && !due.wallet) return { event: false, mail: false };
    try {
      const event = buildEvent(
        'paywall.balance.low',
        {
          paywall: c.paywall,
          trigger: c.trigger,
          subject: { type: 'end_user', id: c.endUserId, externalId: c.externalUserId },
        },
        {
          walletUserId: c.walletUserId,
          externalUserId: c.externalUserId,
          balance: usdcDecimal(c.freeAfterRaw),
          threshold: usdcDecimal(c.paywall.lowBalanceThresholdRaw ?? 0n),
        },
      );
      const [r] = await this.d.db.query(
        CHECK_SQL,
        [
          c.accountId,
          due.paywall ? c.paywall.id : null,
          due.paywall ? c.paywall.lowBalanceThresholdRaw!.toString() : null,
          due.wallet,
          JSON.stringify(due.paywall ? eventRows([event]) : []),
        ],
        'low_balance_check',
      );
      const mail = r?.fire_wallet === true && typeof r.email === 'string';
      if (mail) this.sendMail(r.email, BigInt(r.free), BigInt(r.low_alert));
      return { event: r?.fire_pw === true, mail };
    } catch (err) {
      this.d.log.error({ err, accountId: c.accountId }, 'low-balance check failed');
      return { event: false, mail: false };
    }
  }

  /** After the flag committed, outside any money transaction; a failure is logged (at most once). */
  private sendMail(to: string, freeRaw: bigint, thresholdRaw: bigint): void {
    const base = this.d.config.PUBLIC_BASE_URL;
    this.d.mailer
      .send({
        to,
        subject: LOW_BALANCE_SUBJECT,
        text:
          `Your Paywall Proxy wallet balance is ${usdcText(freeRaw)}, below the alert you set at ` +
          `${usdcText(thresholdRaw)}.\n\n` +
          `Top up here: ${base}/wallet/topup\n\n` +
          `You get this e-mail once each time your balance falls below the alert. Change or turn it off on ` +
          `your wallet page: ${base}/wallet\n`,
      })
      .catch((err) => this.d.log.error({ err }, 'low-balance e-mail could not be sent'));
  }
}
