import { Migration } from '@mikro-orm/migrations';

export class Migration20261122002823 extends Migration {
  override name = 'Migration20261122002823';

  override up(): void | Promise<void> {
    this.addSql(`create type "wallet_mode" as enum ('DEFAULT', 'SHARED');`);
    this.addSql(
      `create table "event" ("seq" bigserial primary key, "id" uuid not null, "paywall_id" uuid not null, "owner_user_id" uuid not null, "type" varchar(100) not null, "version" varchar(10) not null default '1.0', "trigger" jsonb not null, "subject" jsonb not null, "data" jsonb not null, "metadata" jsonb not null default '{}', "created_at" timestamptz not null default now());`,
    );
    this.addSql(`alter table "event" add constraint "event_id_unique" unique ("id");`);
    this.addSql(`create index "event_paywall_id_seq_index" on "event" ("paywall_id", "seq");`);

    this.addSql(
      `create table "owner" ("id" uuid not null, "name" varchar(200) not null, "token_hash" varchar(64) not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`alter table "owner" add constraint "owner_token_hash_unique" unique ("token_hash");`);

    this.addSql(
      `create table "paywall" ("id" uuid not null, "owner_id" uuid not null, "name" varchar(200) not null, "mode" "wallet_mode" not null, "api_key_hash" varchar(64) not null, "api_key_last_four" varchar(4) not null, "markup_ppm" bigint not null default 1000000, "topup_url" text null, "trial_credits_raw" bigint not null default 0, "connect_message_template" text null, "topup_message_template" text null, "archived_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`create index "paywall_owner_id_index" on "paywall" ("owner_id");`);
    this.addSql(
      `alter table "paywall" add constraint "paywall_api_key_hash_unique" unique ("api_key_hash");`,
    );

    this.addSql(
      `create table "model_price" ("paywall_id" uuid not null, "model_id" varchar(200) not null, "display_name" varchar(200) null, "description" text null, "prompt_pico" bigint not null default 0, "completion_pico" bigint not null default 0, "request_pico" bigint not null default 0, "max_completion_tokens" int null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("paywall_id", "model_id"));`,
    );

    this.addSql(
      `create table "idempotency_key" ("paywall_id" uuid not null, "endpoint" varchar(64) not null, "key" varchar(255) not null, "request_hash" varchar(64) not null, "response_status" int null, "response_body" jsonb null, "created_at" timestamptz not null default now(), "completed_at" timestamptz null, primary key ("paywall_id", "endpoint", "key"));`,
    );
    this.addSql(`create index "idempotency_key_created_at_index" on "idempotency_key" ("created_at");`);

    this.addSql(
      `create table "end_user" ("id" uuid not null, "paywall_id" uuid not null, "external_id" varchar(256) not null, "balance_raw" bigint not null default 0, "held_raw" bigint not null default 0, "wallet_user_id" uuid null, "connected_at" timestamptz null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "end_user" add constraint "end_user_paywall_id_external_id_unique" unique ("paywall_id", "external_id");`,
    );

    this.addSql(
      `create table "ledger_entry" ("seq" bigserial primary key, "id" uuid not null, "paywall_id" uuid not null, "user_id" uuid not null, "kind" varchar(16) not null, "amount_raw" bigint not null, "balance_after_raw" bigint not null, "charge_id" uuid null, "metadata" jsonb not null default '{}', "created_at" timestamptz not null default now());`,
    );
    this.addSql(`alter table "ledger_entry" add constraint "ledger_entry_id_unique" unique ("id");`);
    this.addSql(`create index "ledger_entry_user_id_seq_index" on "ledger_entry" ("user_id", "seq");`);

    this.addSql(
      `create table "charge" ("id" uuid not null, "paywall_id" uuid not null, "user_id" uuid not null, "kind" varchar(16) not null, "status" varchar(16) not null, "hold_raw" bigint not null default 0, "amount_raw" bigint not null default 0, "uncollected_raw" bigint not null default 0, "model" varchar(200) null, "prompt_tokens" int null, "completion_tokens" int null, "max_completion_tokens" int null, "stream" boolean not null default false, "error_code" varchar(64) null, "metadata" jsonb not null default '{}', "created_at" timestamptz not null default now(), "settled_at" timestamptz null, primary key ("id"));`,
    );
    this.addSql(`create index "charge_user_id_created_at_index" on "charge" ("user_id", "created_at");`);
    this.addSql(`create index "charge_status_created_at_index" on "charge" ("status", "created_at");`);

    this.addSql(
      `create table "provider" ("paywall_id" uuid not null, "base_url" text not null, "api_key_ciphertext" text not null, "api_key_last_four" varchar(4) not null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("paywall_id"));`,
    );

    this.addSql(
      `create table "webhook_subscription" ("id" uuid not null, "paywall_id" uuid not null, "url" text not null, "events" text[] not null, "description" varchar(512) null, "custom_headers" jsonb not null default '{}', "secret" text not null, "is_active" boolean not null default true, "created_by" varchar(100) not null, "consecutive_failures" int not null default 0, "last_delivered_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `create index "webhook_subscription_paywall_id_is_active_index" on "webhook_subscription" ("paywall_id", "is_active");`,
    );

    this.addSql(
      `create table "webhook_delivery" ("id" uuid not null, "subscription_id" uuid not null, "paywall_id" uuid not null, "event_id" uuid not null, "event_type" varchar(100) not null, "status" varchar(16) not null default 'pending', "attempts" int not null default 0, "next_attempt_at" timestamptz null default now(), "lease_until" timestamptz null, "response_status" int null, "response_latency_ms" int null, "response_body" text null, "last_error" text null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `create index "webhook_delivery_status_next_attempt_at_index" on "webhook_delivery" ("status", "next_attempt_at");`,
    );
    this.addSql(
      `create index "webhook_delivery_subscription_id_created_at_index" on "webhook_delivery" ("subscription_id", "created_at");`,
    );
    this.addSql(
      `create index "webhook_delivery_paywall_id_created_at_index" on "webhook_delivery" ("paywall_id", "created_at");`,
    );
    this.addSql(
      `alter table "webhook_delivery" add constraint "webhook_delivery_subscription_id_event_id_unique" unique ("subscription_id", "event_id");`,
    );

    this.addSql(
      `alter table "paywall" add constraint "paywall_owner_id_foreign" foreign key ("owner_id") references "owner" ("id");`,
    );
    this.addSql(`alter table "paywall" add constraint "paywall_markup_ppm_check" check (markup_ppm > 0);`);
    this.addSql(
      `alter table "paywall" add constraint "paywall_trial_credits_raw_check" check (trial_credits_raw >= 0);`,
    );

    this.addSql(
      `alter table "model_price" add constraint "model_price_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "model_price" add constraint "model_price_prompt_pico_check" check (prompt_pico >= 0);`,
    );
    this.addSql(
      `alter table "model_price" add constraint "model_price_completion_pico_check" check (completion_pico >= 0);`,
    );
    this.addSql(
      `alter table "model_price" add constraint "model_price_request_pico_check" check (request_pico >= 0);`,
    );

    this.addSql(
      `alter table "idempotency_key" add constraint "idempotency_key_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );

    this.addSql(
      `alter table "end_user" add constraint "end_user_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "end_user" add constraint "end_user_held_within_balance" check (held_raw <= balance_raw);`,
    );
    this.addSql(
      `alter table "end_user" add constraint "end_user_balance_raw_check" check (balance_raw >= 0);`,
    );
    this.addSql(`alter table "end_user" add constraint "end_user_held_raw_check" check (held_raw >= 0);`);

    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_user_id_foreign" foreign key ("user_id") references "end_user" ("id");`,
    );
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_amount_raw_check" check (amount_raw <> 0);`,
    );
    this.addSql(
      `alter table "ledger_entry" add constraint "ledger_entry_balance_after_raw_check" check (balance_after_raw >= 0);`,
    );

    this.addSql(
      `alter table "charge" add constraint "charge_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "charge" add constraint "charge_user_id_foreign" foreign key ("user_id") references "end_user" ("id");`,
    );
    this.addSql(`alter table "charge" add constraint "charge_hold_raw_check" check (hold_raw >= 0);`);
    this.addSql(`alter table "charge" add constraint "charge_amount_raw_check" check (amount_raw >= 0);`);
    this.addSql(
      `alter table "charge" add constraint "charge_uncollected_raw_check" check (uncollected_raw >= 0);`,
    );

    this.addSql(
      `alter table "provider" add constraint "provider_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on update cascade on delete cascade;`,
    );

    this.addSql(
      `alter table "webhook_subscription" add constraint "webhook_subscription_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );

    this.addSql(
      `alter table "webhook_delivery" add constraint "webhook_delivery_subscription_id_foreign" foreign key ("subscription_id") references "webhook_subscription" ("id");`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "paywall" drop constraint "paywall_owner_id_foreign";`);
    this.addSql(`alter table "model_price" drop constraint "model_price_paywall_id_foreign";`);
    this.addSql(`alter table "idempotency_key" drop constraint "idempotency_key_paywall_id_foreign";`);
    this.addSql(`alter table "end_user" drop constraint "end_user_paywall_id_foreign";`);
    this.addSql(`alter table "ledger_entry" drop constraint "ledger_entry_paywall_id_foreign";`);
    this.addSql(`alter table "charge" drop constraint "charge_paywall_id_foreign";`);
    this.addSql(`alter table "provider" drop constraint "provider_paywall_id_foreign";`);
    this.addSql(
      `alter table "webhook_subscription" drop constraint "webhook_subscription_paywall_id_foreign";`,
    );
    this.addSql(`alter table "ledger_entry" drop constraint "ledger_entry_user_id_foreign";`);
    this.addSql(`alter table "charge" drop constraint "charge_user_id_foreign";`);
    this.addSql(`alter table "webhook_delivery" drop constraint "webhook_delivery_subscription_id_foreign";`);

    this.addSql(`drop table if exists "event" cascade;`);
    this.addSql(`drop table if exists "owner" cascade;`);
    this.addSql(`drop table if exists "paywall" cascade;`);
    this.addSql(`drop table if exists "model_price" cascade;`);
    this.addSql(`drop table if exists "idempotency_key" cascade;`);
    this.addSql(`drop table if exists "end_user" cascade;`);
    this.addSql(`drop table if exists "ledger_entry" cascade;`);
    this.addSql(`drop table if exists "charge" cascade;`);
    this.addSql(`drop table if exists "provider" cascade;`);
    this.addSql(`drop table if exists "webhook_subscription" cascade;`);
    this.addSql(`drop table if exists "webhook_delivery" cascade;`);

    this.addSql(`drop type "wallet_mode";`);
  }
}
