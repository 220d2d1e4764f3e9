import { Migration } from '@mikro-orm/migrations';

/**
 * The usage query (docs/dashboard.md): daily roll-ups of completed charges per model, running totals per end user,
 * how far each paywall is rolled up, and a covering partial index that reads the days not rolled up yet
 * (today) without touching the table.
 */
export class Migration20261123234348_usage extends Migration {
  override name = 'Migration20261123234348_usage';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "usage_day_model" ("paywall_id" uuid not null, "day" date not null, "model" varchar(200) not null, "requests" bigint not null, "revenue_raw" bigint not null, "cost_raw" bigint not null, "prompt_tokens" bigint not null, "completion_tokens" bigint not null, primary key ("paywall_id", "day", "model"));`,
    );
    this.addSql(
      `create table "usage_day_user" ("paywall_id" uuid not null, "end_user_id" uuid not null, "day" date not null, "requests" bigint not null, "revenue_raw" bigint not null, "cost_raw" bigint not null, "prompt_tokens" bigint not null, "completion_tokens" bigint not null, primary key ("paywall_id", "end_user_id", "day"));`,
    );
    this.addSql(
      `create table "usage_rollup" ("paywall_id" uuid not null, "rolled_through" date not null, "updated_at" timestamptz not null default now(), primary key ("paywall_id"));`,
    );
    this.addSql(
      `alter table "usage_day_model" add constraint "usage_day_model_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "usage_day_user" add constraint "usage_day_user_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "usage_rollup" add constraint "usage_rollup_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on update cascade on delete cascade;`,
    );
    // Hand-written (MikroORM cannot declare INCLUDE or a partial index): an index-only scan of the
    // completed charges of one paywall settled in a time range.
    this.addSql(
      `create index charge_usage_index on charge (paywall_id, settled_at) include (model, user_id, amount_raw, prompt_tokens, completion_tokens) where status = 'completed';`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index if exists charge_usage_index;`);
    this.addSql(`drop table if exists "usage_day_model" cascade;`);
    this.addSql(`drop table if exists "usage_day_user" cascade;`);
    this.addSql(`drop table if exists "usage_rollup" cascade;`);
  }
}
