import { Migration } from '@mikro-orm/migrations';

/**
 * Low-balance alerts (docs/reference.md §16 "Low balance", docs/ledger.md "Low-balance alerts"):
 * - `paywall.low_balance_threshold_raw`: the owner's threshold (null = off);
 * - `ledger_account.low_alert_raw`: a wallet user's own threshold on their wallet account (null = off);
 * - `ledger_account.low_alerted`: the wallet's e-mail was sent for the current dip below it;
 * - `ledger_account.low_alerted_paywalls`: the paywalls whose `paywall.balance.low` was recorded for the
 *   current dip of this spending account below their threshold.
 * The flags are set by one conditional statement (exactly once per crossing) and cleared when money
 * entering the account lifts its free balance back to the threshold or above.
 */
export class Migration20261127300000_low_balance extends Migration {
  override name = 'Migration20261127300000_low_balance';

  override up(): void {
    this.addSql(`alter table "paywall" add "low_balance_threshold_raw" bigint null;`);
    this.addSql(
      `alter table "paywall" add constraint "paywall_low_balance_threshold_raw_check" check (low_balance_threshold_raw > 0);`,
    );
    this.addSql(`alter table "ledger_account" add "low_alert_raw" bigint null;`);
    this.addSql(
      `alter table "ledger_account" add constraint "ledger_account_low_alert_raw_check" check (low_alert_raw > 0);`,
    );
    this.addSql(`alter table "ledger_account" add "low_alerted" boolean not null default false;`);
    this.addSql(`alter table "ledger_account" add "low_alerted_paywalls" text[] not null default '{}';`);
  }

  override down(): void {
    this.addSql(`alter table "ledger_account" drop column "low_alerted_paywalls";`);
    this.addSql(`alter table "ledger_account" drop column "low_alerted";`);
    this.addSql(`alter table "ledger_account" drop constraint "ledger_account_low_alert_raw_check";`);
    this.addSql(`alter table "ledger_account" drop column "low_alert_raw";`);
    this.addSql(`alter table "paywall" drop constraint "paywall_low_balance_threshold_raw_check";`);
    this.addSql(`alter table "paywall" drop column "low_balance_threshold_raw";`);
  }
}
