import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 11: two writes fewer on every paid request's path.
 * - `charge_status_created_at_index` served no query: open holds (`charge_open_holds_index`) and completed
 *   usage (`charge_usage_index`) have partial indexes of their own. It took an entry at the hold and
 *   another at the settlement (which changes `status`, so it is not a HOT update).
 * - `webhook_delivery_subscription_id_foreign`: the `event_fanout` trigger writes delivery rows from a join
 *   with `webhook_subscription` itself, the resend path from the subscriptions it has just read, and
 *   subscriptions are never deleted; the check was one more query (and a row lock) per delivery.
 */
export class Migration20261124200000_request_path_writes extends Migration {
  override name = 'Migration20261124200000_request_path_writes';

  override up(): void {
    this.addSql(`drop index if exists "charge_status_created_at_index";`);
    this.addSql(
      `alter table "webhook_delivery" drop constraint if exists "webhook_delivery_subscription_id_foreign";`,
    );
  }

  override down(): void {
    this.addSql(`create index "charge_status_created_at_index" on "charge" ("status", "created_at");`);
    this.addSql(
      `alter table "webhook_delivery" add constraint "webhook_delivery_subscription_id_foreign" foreign key ("subscription_id") references "webhook_subscription" ("id");`,
    );
  }
}
