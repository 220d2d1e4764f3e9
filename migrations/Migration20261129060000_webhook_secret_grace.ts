import { Migration } from '@mikro-orm/migrations';

/**
 * A webhook secret's grace period after a rotation (docs/webhooks.md "Rotate"): the secret a rotation
 * replaced, encrypted like the current one, and until when it still signs deliveries alongside it.
 */
export class Migration20261129060000_webhook_secret_grace extends Migration {
  override name = 'Migration20261129060000_webhook_secret_grace';

  override up(): void {
    this.addSql(`alter table "webhook_subscription" add "previous_secret_ciphertext" text null;`);
    this.addSql(`alter table "webhook_subscription" add "previous_secret_expires_at" timestamptz null;`);
  }

  override down(): void {
    this.addSql(`alter table "webhook_subscription" drop column "previous_secret_expires_at";`);
    this.addSql(`alter table "webhook_subscription" drop column "previous_secret_ciphertext";`);
  }
}
