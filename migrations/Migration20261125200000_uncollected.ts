import { Migration } from '@mikro-orm/migrations';

/**
 * What the proxy could not collect, followed up:
 * - `ledger_account.debt_raw`: the spending account's outstanding uncollected usage (a charge that cost
 *   more than its hold and the free balance could pay). A metered request is refused while it is above
 *   MAX_UNCOLLECTED_PER_USER; the free balance repays it first.
 * - `charge.recovered_raw`: how much of the charge's `uncollected_raw` was repaid later.
 * - `relayed_response`: input + output tokens of each Responses API answer relayed, so a request that
 *   continues it (`previous_response_id`) is held for the context the provider bills again.
 */
export class Migration20261125200000_uncollected extends Migration {
  override name = 'Migration20261125200000_uncollected';

  override up(): void {
    this.addSql(
      `alter table "ledger_account" add column "debt_raw" bigint not null default 0, add constraint "ledger_account_debt_raw_check" check (debt_raw >= 0);`,
    );
    this.addSql(
      `alter table "charge" add column "recovered_raw" bigint not null default 0, add constraint "charge_recovered_raw_check" check (recovered_raw >= 0);`,
    );
    this.addSql(
      `create table "relayed_response" ("paywall_id" uuid not null, "id" varchar(255) not null, "tokens" bigint not null, "created_at" timestamptz not null default now(), constraint "relayed_response_pkey" primary key ("paywall_id", "id"));`,
    );
    this.addSql(`create index "relayed_response_created_at_index" on "relayed_response" ("created_at");`);
  }

  override down(): void {
    this.addSql(`drop table if exists "relayed_response";`);
    this.addSql(`alter table "charge" drop column "recovered_raw";`);
    this.addSql(`alter table "ledger_account" drop column "debt_raw";`);
  }
}
