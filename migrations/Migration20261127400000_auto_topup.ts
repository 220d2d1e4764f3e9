import { Migration } from '@mikro-orm/migrations';

/**
 * Auto top-up (docs/reference.md §16 "Auto top-up"):
 * - `auto_topup`: one row per end user of a DEFAULT paywall (paywall + external id) or per hosted wallet:
 *   the user's Stripe customer, the settings, whether it is on, the one payment in flight
 *   (`pending_attempt_id`) and the failures in a row;
 * - `auto_topup_attempt`: each off-session PaymentIntent (its id is the Stripe idempotency key; the
 *   PaymentIntent id is unique: credited once);
 * - `stripe_checkout.stripe_customer_id` / `auto_topup`: a Checkout that saves the card, and the settings
 *   its payment turns on.
 */
export class Migration20261127400000_auto_topup extends Migration {
  override name = 'Migration20261127400000_auto_topup';

  override up(): void {
    this.addSql(
      `create table "auto_topup" ("id" uuid not null, "paywall_id" uuid null, "external_id" varchar(256) null, "end_user_id" uuid null, "wallet_user_id" uuid null, "account_id" uuid null, "stripe_customer_id" text not null, "enabled" boolean not null default false, "threshold_raw" bigint null, "amount_cents" bigint null, "monthly_cap_cents" bigint null, "pending_attempt_id" uuid null, "failures_in_row" int not null default 0, "disabled_reason" text null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`create index "auto_topup_account_id_index" on "auto_topup" ("account_id");`);
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_paywall_id_external_id_unique" unique ("paywall_id", "external_id");`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_wallet_user_id_unique" unique ("wallet_user_id");`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_wallet_user_id_foreign" foreign key ("wallet_user_id") references "wallet_user" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_account_id_foreign" foreign key ("account_id") references "ledger_account" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_target" check ((wallet_user_id is null and paywall_id is not null and external_id is not null) or (wallet_user_id is not null and paywall_id is null and external_id is null and end_user_id is null));`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_settings" check (not enabled or (account_id is not null and threshold_raw > 0 and amount_cents > 0 and monthly_cap_cents >= amount_cents));`,
    );
    this.addSql(
      `alter table "auto_topup" add constraint "auto_topup_failures" check (failures_in_row >= 0);`,
    );

    this.addSql(
      `create table "auto_topup_attempt" ("id" uuid not null, "auto_topup_id" uuid not null, "amount_cents" bigint not null, "status" varchar(16) not null, "payment_intent_id" text null, "transfer_id" uuid null, "failure_code" text null, "failure_message" text null, "tries" int not null default 0, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "auto_topup_attempt" add constraint "auto_topup_attempt_payment_intent_id_unique" unique ("payment_intent_id");`,
    );
    this.addSql(
      `create index "auto_topup_attempt_auto_topup_id_created_at_index" on "auto_topup_attempt" ("auto_topup_id", "created_at");`,
    );
    this.addSql(
      `create index "auto_topup_attempt_status_created_at_index" on "auto_topup_attempt" ("status", "created_at");`,
    );
    this.addSql(
      `alter table "auto_topup_attempt" add constraint "auto_topup_attempt_auto_topup_id_foreign" foreign key ("auto_topup_id") references "auto_topup" ("id");`,
    );
    this.addSql(
      `alter table "auto_topup_attempt" add constraint "auto_topup_attempt_status" check (status in ('pending', 'succeeded', 'failed'));`,
    );
    this.addSql(
      `alter table "auto_topup_attempt" add constraint "auto_topup_attempt_amount_positive" check (amount_cents > 0);`,
    );

    this.addSql(
      `alter table "stripe_checkout" add "stripe_customer_id" text null, add "auto_topup" jsonb null;`,
    );
  }

  override down(): void {
    this.addSql(`alter table "stripe_checkout" drop column "stripe_customer_id", drop column "auto_topup";`);
    this.addSql(`drop table if exists "auto_topup_attempt" cascade;`);
    this.addSql(`drop table if exists "auto_topup" cascade;`);
  }
}
