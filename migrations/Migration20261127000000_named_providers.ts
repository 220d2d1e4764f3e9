import { Migration } from '@mikro-orm/migrations';

/**
 * docs/reference.md §15 "Providers", "Routing": a paywall has any number of named providers of a kind
 * (`OPENAI`, `ANTHROPIC`); the one it had becomes `default`. A model names the provider that serves it,
 * the model id sent there, and the providers tried next when it fails before answering.
 */
export class Migration20261127000000_named_providers extends Migration {
  override name = 'Migration20261127000000_named_providers';

  override up(): void {
    this.addSql(`alter table "provider" add "name" varchar(40) not null default 'default';`);
    this.addSql(`alter table "provider" add "kind" text not null default 'OPENAI';`);
    this.addSql(
      `alter table "provider" add constraint "provider_kind_check" check ("kind" in ('OPENAI', 'ANTHROPIC'));`,
    );
    this.addSql(`alter table "provider" drop constraint "provider_pkey";`);
    this.addSql(`alter table "provider" add constraint "provider_pkey" primary key ("paywall_id", "name");`);
    this.addSql(`alter table "model_price" add "provider" varchar(40) null;`);
    this.addSql(`alter table "model_price" add "upstream_model" varchar(200) null;`);
    this.addSql(`alter table "model_price" add "fallbacks" text[] not null default '{}';`);
  }

  override down(): void {
    this.addSql(`alter table "model_price" drop column "fallbacks";`);
    this.addSql(`alter table "model_price" drop column "upstream_model";`);
    this.addSql(`alter table "model_price" drop column "provider";`);
    this.addSql(`delete from "provider" where "name" <> 'default';`);
    this.addSql(`alter table "provider" drop constraint "provider_pkey";`);
    this.addSql(`alter table "provider" add constraint "provider_pkey" primary key ("paywall_id");`);
    this.addSql(`alter table "provider" drop constraint "provider_kind_check";`);
    this.addSql(`alter table "provider" drop column "kind";`);
    this.addSql(`alter table "provider" drop column "name";`);
  }
}
