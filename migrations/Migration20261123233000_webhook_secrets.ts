import { Migration } from '@mikro-orm/migrations';
import { migrationSecretBox } from '../src/db/migration-secrets.js';
import { webhookSecretContext } from '../src/modules/webhooks/webhook-secrets.js';

/**
 * Webhook signing secrets encrypted at rest (issue 10), like provider keys: `secret` (plaintext) becomes
 * `secret_ciphertext` (AES-256-GCM with ENCRYPTION_KEY, bound to the subscription id) and `secret_suffix`
 * (the last 4 characters, which reads show). Existing rows are encrypted here, in Node, inside the
 * migration's transaction: after it there is no plaintext column. The table is then rewritten (CLUSTER) so
 * neither the dropped column's bytes nor the updated rows' old versions stay in its files.
 */
export class Migration20261123233000_webhook_secrets extends Migration {
  override name = 'Migration20261123233000_webhook_secrets';

  override async up(): Promise<void> {
    await this.execute(
      `alter table "webhook_subscription" add column "secret_ciphertext" text null, add column "secret_suffix" varchar(4) null;`,
    );
    const rows = await this.execute(`select "id", "secret" from "webhook_subscription" for update;`);
    if (rows.length) {
      const box = migrationSecretBox(`encrypting ${rows.length} webhook signing secrets`);
      for (const row of rows as Array<{ id: string; secret: string }>)
        await this.execute(
          `update "webhook_subscription" set "secret_ciphertext" = ?, "secret_suffix" = ? where "id" = ?;`,
          [box.encrypt(row.secret, webhookSecretContext(row.id)), row.secret.slice(-4), row.id],
        );
    }
    await this.execute(`alter table "webhook_subscription" drop column "secret";`);
    await this.execute(
      `alter table "webhook_subscription" alter column "secret_ciphertext" set not null, alter column "secret_suffix" set not null;`,
    );
    await this.execute(`cluster "webhook_subscription" using "webhook_subscription_pkey";`);
  }

  override async down(): Promise<void> {
    await this.execute(`alter table "webhook_subscription" add column "secret" text null;`);
    const rows = await this.execute(
      `select "id", "secret_ciphertext" from "webhook_subscription" for update;`,
    );
    if (rows.length) {
      const box = migrationSecretBox(`decrypting ${rows.length} webhook signing secrets`);
      for (const row of rows as Array<{ id: string; secret_ciphertext: string }>)
        await this.execute(`update "webhook_subscription" set "secret" = ? where "id" = ?;`, [
          box.decrypt(row.secret_ciphertext, webhookSecretContext(row.id)),
          row.id,
        ]);
    }
    await this.execute(
      `alter table "webhook_subscription" drop column "secret_ciphertext", drop column "secret_suffix";`,
    );
    await this.execute(`alter table "webhook_subscription" alter column "secret" set not null;`);
  }
}
