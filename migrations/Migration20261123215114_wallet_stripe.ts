import { Migration } from '@mikro-orm/migrations';

/**
 * Card top-ups of the hosted wallet (docs/reference.md §8 "Top-up"): a Checkout Session belongs either to an end
 * user of a DEFAULT paywall or to a wallet user (`wallet_user_id`), and events of the platform's own
 * webhook endpoint have no paywall. Generated against a scratch database (the raw objects MikroORM
 * proposed to drop are left out).
 */
export class Migration20261123215114_wallet_stripe extends Migration {
  override name = 'Migration20261123215114_wallet_stripe';

  override up(): void | Promise<void> {
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_end_user_id_foreign";`);
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_paywall_id_foreign";`);
    this.addSql(`alter table "stripe_event" drop constraint "stripe_event_paywall_id_foreign";`);
    this.addSql(`alter table "stripe_event" alter column "paywall_id" drop not null;`);
    this.addSql(
      `alter table "stripe_event" add constraint "stripe_event_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on delete set null;`,
    );
    this.addSql(`alter table "stripe_checkout" add "wallet_user_id" uuid null;`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_wallet_user_id_foreign" foreign key ("wallet_user_id") references "wallet_user" ("id") on delete set null;`,
    );
    this.addSql(`alter table "stripe_checkout" alter column "paywall_id" drop not null;`);
    this.addSql(`alter table "stripe_checkout" alter column "end_user_id" drop not null;`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id") on delete set null;`,
    );
    this.addSql(
      `create index "stripe_checkout_wallet_user_id_index" on "stripe_checkout" ("wallet_user_id");`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_target" check ((wallet_user_id is null and paywall_id is not null and end_user_id is not null) or (wallet_user_id is not null and paywall_id is null and end_user_id is null));`,
    );
  }

  override down(): void | Promise<void> {
    // Wallet sessions and platform events cannot exist in the old shape.
    this.addSql(`delete from "stripe_checkout" where "wallet_user_id" is not null;`);
    this.addSql(`delete from "stripe_event" where "paywall_id" is null;`);
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_target";`);
    this.addSql(`drop index "stripe_checkout_wallet_user_id_index";`);
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_wallet_user_id_foreign";`);
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_end_user_id_foreign";`);
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_paywall_id_foreign";`);
    this.addSql(`alter table "stripe_checkout" drop column "wallet_user_id";`);
    this.addSql(`alter table "stripe_checkout" alter column "paywall_id" set not null;`);
    this.addSql(`alter table "stripe_checkout" alter column "end_user_id" set not null;`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_end_user_id_foreign" foreign key ("end_user_id") references "end_user" ("id");`,
    );
    this.addSql(`alter table "stripe_event" drop constraint "stripe_event_paywall_id_foreign";`);
    this.addSql(`alter table "stripe_event" alter column "paywall_id" set not null;`);
    this.addSql(
      `alter table "stripe_event" add constraint "stripe_event_paywall_id_foreign" foreign key ("paywall_id") references "paywall" ("id");`,
    );
  }
}
