import { Migration } from '@mikro-orm/migrations';

/**
 * docs/reference.md §16 "Refunds": a refund of a completed charge, given back from the paywall's earnings
 * (and, SHARED, the platform fee in proportion) to the account that paid. The money moves as transfers
 * (`refund`: earnings → payer, its id the refund's; `fee_refund`: fees → earnings); this row keeps the
 * amount, its two parts (which add up to it), the reason, and which charge it refunds.
 */
export class Migration20261127100000_refunds extends Migration {
  override name = 'Migration20261127100000_refunds';

  override up(): void {
    this.addSql(
      `create table "refund" ("id" uuid not null, "paywall_id" uuid not null, "charge_id" uuid not null, "user_id" uuid not null, "account_id" uuid not null, "amount_raw" bigint not null, "earnings_raw" bigint not null, "fee_raw" bigint not null, "reason" varchar(500) null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`create index "refund_charge_id_created_at_index" on "refund" ("charge_id", "created_at");`);
    this.addSql(
      `create index "refund_paywall_id_created_at_index" on "refund" ("paywall_id", "created_at");`,
    );
    this.addSql(
      `alter table "refund" add constraint "refund_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "refund" add constraint "refund_charge_id_foreign" foreign key ("charge_id") references "charge" ("id");`,
    );
    this.addSql(
      `alter table "refund" add constraint "refund_user_id_foreign" foreign key ("user_id") references "end_user" ("id");`,
    );
    this.addSql(
      `alter table "refund" add constraint "refund_account_id_foreign" foreign key ("account_id") references "ledger_account" ("id");`,
    );
    this.addSql(
      `alter table "refund" add constraint "refund_parts_add_up" check (amount_raw = earnings_raw + fee_raw);`,
    );
    this.addSql(`alter table "refund" add constraint "refund_amount_raw_check" check (amount_raw > 0);`);
    this.addSql(`alter table "refund" add constraint "refund_earnings_raw_check" check (earnings_raw >= 0);`);
    this.addSql(`alter table "refund" add constraint "refund_fee_raw_check" check (fee_raw >= 0);`);
  }

  override down(): void {
    this.addSql(`drop table if exists "refund" cascade;`);
  }
}
