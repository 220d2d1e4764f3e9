import { Migration } from '@mikro-orm/migrations';

/**
 * Usage reports take a SHARED charge's provider cost from the ledger's split (the `provider_cost` leg paid
 * to the built-in provider) instead of model prices the paywall never set (so it read 0, and every unit of
 * revenue looked like margin). The index finds a charge's leg; the daily roll-ups written with the old
 * figure are dropped and rebuilt from the charges on the next usage read.
 */
export class Migration20261125500000_usage_provider_cost extends Migration {
  override name = 'Migration20261125500000_usage_provider_cost';

  override up(): void {
    this.addSql(
      `create index if not exists "transfer_provider_cost_index" on "transfer" ("charge_id") include ("amount_raw") where kind = 'provider_cost';`,
    );
    this.addSql(`delete from "usage_day_model";`);
    this.addSql(`delete from "usage_day_user";`);
    this.addSql(`delete from "usage_rollup";`);
  }

  override down(): void {
    this.addSql(`drop index if exists "transfer_provider_cost_index";`);
    // Roll-ups are a cache of the charges: dropped here too, rebuilt with the older figure on demand.
    this.addSql(`delete from "usage_day_model";`);
    this.addSql(`delete from "usage_day_user";`);
    this.addSql(`delete from "usage_rollup";`);
  }
}
