import { Migration } from '@mikro-orm/migrations';

/**
 * Retention (docs/reference.md §18 "Retention"): `webhook_delivery (event_id)`, so the batches that remove
 * old events find their deliveries without a scan of the table.
 */
export class Migration20261128000000_retention extends Migration {
  override name = 'Migration20261128000000_retention';

  override up(): void {
    this.addSql(
      `create index if not exists "webhook_delivery_event_id_index" on "webhook_delivery" ("event_id");`,
    );
  }

  override down(): void {
    this.addSql(`drop index if exists "webhook_delivery_event_id_index";`);
  }
}
