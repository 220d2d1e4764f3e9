import { Migration } from '@mikro-orm/migrations';

/**
 * `provider.cap_parameter` (docs/reference.md §13 "Cap sent upstream"): the field a chat request carries its
 * completion cap in when the client sent none — `MAX_COMPLETION_TOKENS` (the default, also for providers
 * connected before this column existed) or `MAX_TOKENS` for an older OpenAI-compatible server.
 */
export class Migration20261126200000_cap_parameter extends Migration {
  override name = 'Migration20261126200000_cap_parameter';

  override up(): void {
    this.addSql(`alter table "provider" add "cap_parameter" text not null default 'MAX_COMPLETION_TOKENS';`);
    this.addSql(
      `alter table "provider" add constraint "provider_cap_parameter_check" check ("cap_parameter" in ('MAX_COMPLETION_TOKENS', 'MAX_TOKENS'));`,
    );
  }

  override down(): void {
    this.addSql(`alter table "provider" drop constraint "provider_cap_parameter_check";`);
    this.addSql(`alter table "provider" drop column "cap_parameter";`);
  }
}
