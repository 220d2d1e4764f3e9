import { Migration } from '@mikro-orm/migrations';

/**
 * Stripe top-ups (docs/reference.md §9): a paywall's Stripe integration (encrypted key and webhook secret), one
 * row per Checkout Session (unique session id: credited exactly once) and the processed Stripe event
 * ids. Generated against a scratch database (the raw objects MikroORM proposed to drop are left out).
 */
export class Migration20261123213204_stripe extends Migration {
  override name = 'Migration20261123213204_stripe';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "stripe_checkout" ("session_id" text not null, "paywall_id" uuid not null, "end_user_id" uuid not null, "status" varchar(16) not null, "amount_cents" bigint not null, "transfer_id" uuid null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("session_id"));`,
    );
    this.addSql(`create index "stripe_checkout_paywall_id_index" on "stripe_checkout" ("paywall_id");`);
    this.addSql(
      `create table "stripe_event" ("event_id" text not null, "paywall_id" uuid not null, "type" text not null, "created_at" timestamptz not null default now(), primary key ("event_id"));`,
    );
    this.addSql(
      `create table "stripe_integration" ("paywall_id" uuid not null, "secret_key_ciphertext" text not null, "webhook_endpoint_id" text not null, "webhook_secret_ciphertext" text not null, "topup_amounts_cents" jsonb not null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("paywall_id"));`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id");`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_status" check (status in ('open', 'paid', 'failed'));`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_amount_positive" check (amount_cents > 0);`,
    );
    this.addSql(
      `alter table "stripe_event" add constraint "stripe_event_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "stripe_integration" add constraint "stripe_integration_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on update cascade on delete cascade;`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "stripe_checkout" cascade;`);
    this.addSql(`drop table if exists "stripe_event" cascade;`);
    this.addSql(`drop table if exists "stripe_integration" cascade;`);
  }
}
