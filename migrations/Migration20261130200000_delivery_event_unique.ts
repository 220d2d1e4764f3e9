import { Migration } from '@mikro-orm/migrations';

/**
 * Hand-written (performance round 7): one index fewer on `webhook_delivery`, the table every paid request
 * writes a row to per event and matching subscription (about 3.3 rows per request with one subscription to
 * every event, each written into every index of the table).
 *
 * Duplicate protection was `unique (subscription_id, event_id)`, and retention found an event's deliveries
 * through a second index on `(event_id)`. One unique index on `(event_id, subscription_id)` does both: the
 * same pairs are unique (`on conflict (subscription_id, event_id)` infers it, column order does not matter),
 * and `event_id` leads it, so retention's `where event_id in (…)` and a resend's `event_id = $1 and
 * subscription_id = any($2)` use it. No query looked a subscription's deliveries up by
 * `(subscription_id, event_id)`: the logs per subscription use `(subscription_id, created_at)`.
 *
 * On a large table the new index is built before the old ones are dropped (the table is locked against
 * writes meanwhile, like any index build of a migration); docs/operations.md says how to build it
 * beforehand without blocking, which this migration then skips.
 */
export class Migration20261130200000_delivery_event_unique extends Migration {
  override name = 'Migration20261130200000_delivery_event_unique';

  override up(): void {
    // Skipped when the constraint exists already (built beforehand without blocking: docs/operations.md).
    this.addSql(`do $$ begin
      if not exists (select 1 from pg_constraint where conname = 'webhook_delivery_event_id_subscription_id_unique') then
        alter table "webhook_delivery" add constraint "webhook_delivery_event_id_subscription_id_unique"
          unique ("event_id", "subscription_id");
      end if;
    end $$;`);
    this.addSql(
      `alter table "webhook_delivery" drop constraint if exists "webhook_delivery_subscription_id_event_id_unique";`,
    );
    this.addSql(`drop index if exists "webhook_delivery_event_id_index";`);
  }

  override down(): void {
    this.addSql(
      `alter table "webhook_delivery" add constraint "webhook_delivery_subscription_id_event_id_unique" unique ("subscription_id", "event_id");`,
    );
    this.addSql(
      `create index if not exists "webhook_delivery_event_id_index" on "webhook_delivery" ("event_id");`,
    );
    this.addSql(
      `alter table "webhook_delivery" drop constraint if exists "webhook_delivery_event_id_subscription_id_unique";`,
    );
  }
}
