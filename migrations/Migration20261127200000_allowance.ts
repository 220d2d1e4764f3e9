import { Migration } from '@mikro-orm/migrations';

/**
 * docs/reference.md §16 "Allowance (SHARED)": a wallet user's spending limit per connected app. The limit
 * (`allowance_raw`, null = none) and its period live on the connection; `allowance_spent_raw` is what the
 * app spent in the period that starts on `allowance_period_start` (reset by the statements that count,
 * when they see a later period), and `allowance_reached_start` the period `paywall.allowance.reached`
 * was recorded for (once per period).
 */
export class Migration20261127200000_allowance extends Migration {
  override name = 'Migration20261127200000_allowance';

  override up(): void {
    this.addSql(`alter table "wallet_connection" add "allowance_raw" bigint null;`);
    this.addSql(`alter table "wallet_connection" add "allowance_period" varchar(8) null;`);
    this.addSql(`alter table "wallet_connection" add "allowance_spent_raw" bigint not null default 0;`);
    this.addSql(`alter table "wallet_connection" add "allowance_period_start" date null;`);
    this.addSql(`alter table "wallet_connection" add "allowance_reached_start" date null;`);
    this.addSql(
      `alter table "wallet_connection" add constraint "wallet_connection_allowance_check"
         check ((allowance_raw is null and allowance_period is null)
             or (allowance_raw >= 0 and allowance_period in ('day', 'week', 'month', 'total')));`,
    );
  }

  override down(): void {
    this.addSql(`alter table "wallet_connection" drop constraint "wallet_connection_allowance_check";`);
    for (const c of [
      'allowance_reached_start',
      'allowance_period_start',
      'allowance_spent_raw',
      'allowance_period',
      'allowance_raw',
    ])
      this.addSql(`alter table "wallet_connection" drop column "${c}";`);
  }
}
