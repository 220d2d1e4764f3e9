import { Migration } from '@mikro-orm/migrations';

/**
 * Usage limits (docs/reference.md §10): paywall and model daily limits, one usage counter per end user (created
 * for every existing end user here, and with each new one by UserService.ensureUser), and the API rate
 * limit's per-minute window per paywall key.
 */
export class Migration20261123213143_limits extends Migration {
  override name = 'Migration20261123213143_limits';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "usage_counter" ("end_user_id" uuid not null, "day" date null, "requests" int not null default 0, "spend_raw" bigint not null default 0, "model_requests" jsonb not null default '{}', primary key ("end_user_id"));`,
    );
    this.addSql(
      `alter table "paywall" add "daily_request_limit" int null, add "daily_spend_limit_raw" bigint null;`,
    );
    this.addSql(
      `alter table "paywall" add constraint "paywall_daily_request_limit_check" check (daily_request_limit >= 0);`,
    );
    this.addSql(
      `alter table "paywall" add constraint "paywall_daily_spend_limit_raw_check" check (daily_spend_limit_raw >= 0);`,
    );
    this.addSql(`alter table "model_price" add "daily_request_limit" int null;`);
    this.addSql(
      `alter table "model_price" add constraint "model_price_daily_request_limit_check" check (daily_request_limit >= 0);`,
    );
    this.addSql(
      `alter table "usage_counter" add constraint "usage_counter_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(`insert into usage_counter (end_user_id) select id from end_user;`);
    this.addSql(
      `create table "rate_window" ("paywall_id" uuid not null, "window_start" timestamptz not null, "count" int not null default 0, primary key ("paywall_id"));`,
    );
    this.addSql(
      `alter table "rate_window" add constraint "rate_window_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on update cascade on delete cascade;`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "rate_window" cascade;`);
    this.addSql(`drop table if exists "usage_counter" cascade;`);
    this.addSql(`alter table "model_price" drop constraint "model_price_daily_request_limit_check";`);
    this.addSql(`alter table "model_price" drop column "daily_request_limit";`);
    this.addSql(`alter table "paywall" drop constraint "paywall_daily_request_limit_check";`);
    this.addSql(`alter table "paywall" drop constraint "paywall_daily_spend_limit_raw_check";`);
    this.addSql(
      `alter table "paywall" drop column "daily_request_limit", drop column "daily_spend_limit_raw";`,
    );
  }
}
