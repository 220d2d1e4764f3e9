import { Migration } from '@mikro-orm/migrations';

/**
 * Stripe events deduplicated per receiving endpoint; top-up sessions that name a user not created yet;
 * the endpoint a rotation replaced, kept for a grace period; sessions expired by a disconnect.
 * - `stripe_event`: primary key (endpoint, event_id) instead of event_id alone. Stripe sends one event id
 *   to every endpoint of an account: keyed on the id alone, the first endpoint to see it hid it from the
 *   one that owned the session. Existing rows get the endpoint they were received on.
 * - `stripe_checkout.external_id`: the hosted page no longer creates the end user; the first paid session
 *   does, so a DEFAULT session names the user by external id until then. Status `expired` is new.
 * - `stripe_integration.previous_*`: the replaced endpoint and its secret, valid until the expiry.
 */
export class Migration20261125100000_stripe_endpoints extends Migration {
  override name = 'Migration20261125100000_stripe_endpoints';

  override up(): void {
    this.addSql(`alter table "stripe_event" add "endpoint" text null;`);
    this.addSql(`update "stripe_event" set "endpoint" = coalesce("paywall_id"::text, 'wallet');`);
    this.addSql(`alter table "stripe_event" alter column "endpoint" set not null;`);
    this.addSql(`alter table "stripe_event" drop constraint "stripe_event_pkey";`);
    this.addSql(
      `alter table "stripe_event" add constraint "stripe_event_pkey" primary key ("endpoint", "event_id");`,
    );

    this.addSql(`alter table "stripe_checkout" add "external_id" varchar(256) null;`);
    this.addSql(
      `update "stripe_checkout" c set "external_id" = e."external_id" from "end_user" e where e."id" = c."end_user_id";`,
    );
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_status";`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_status" check (status in ('open', 'paid', 'failed', 'expired'));`,
    );
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_target";`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_target" check ((wallet_user_id is null and paywall_id is not null and (end_user_id is not null or external_id is not null)) or (wallet_user_id is not null and paywall_id is null and end_user_id is null and external_id is null));`,
    );

    this.addSql(`alter table "stripe_integration" add "previous_webhook_endpoint_id" text null;`);
    this.addSql(`alter table "stripe_integration" add "previous_webhook_secret_ciphertext" text null;`);
    this.addSql(`alter table "stripe_integration" add "previous_secret_expires_at" timestamptz null;`);
  }

  override down(): void {
    this.addSql(`alter table "stripe_integration" drop column "previous_secret_expires_at";`);
    this.addSql(`alter table "stripe_integration" drop column "previous_webhook_secret_ciphertext";`);
    this.addSql(`alter table "stripe_integration" drop column "previous_webhook_endpoint_id";`);
    // Sessions of users never created cannot exist in the old shape.
    this.addSql(`delete from "stripe_checkout" where "wallet_user_id" is null and "end_user_id" is null;`);
    this.addSql(`update "stripe_checkout" set "status" = 'failed' where "status" = 'expired';`);
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_target";`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_target" check ((wallet_user_id is null and paywall_id is not null and end_user_id is not null) or (wallet_user_id is not null and paywall_id is null and end_user_id is null));`,
    );
    this.addSql(`alter table "stripe_checkout" drop constraint "stripe_checkout_status";`);
    this.addSql(
      `alter table "stripe_checkout" add constraint "stripe_checkout_status" check (status in ('open', 'paid', 'failed'));`,
    );
    this.addSql(`alter table "stripe_checkout" drop column "external_id";`);
    // One row per event id again: the first endpoint's row stays.
    this.addSql(
      `delete from "stripe_event" a using "stripe_event" b where a."event_id" = b."event_id" and a."endpoint" > b."endpoint";`,
    );
    this.addSql(`alter table "stripe_event" drop constraint "stripe_event_pkey";`);
    this.addSql(`alter table "stripe_event" add constraint "stripe_event_pkey" primary key ("event_id");`);
    this.addSql(`alter table "stripe_event" drop column "endpoint";`);
  }
}
