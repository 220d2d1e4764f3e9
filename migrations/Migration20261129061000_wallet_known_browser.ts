import { Migration } from '@mikro-orm/migrations';

/**
 * Sign-in codes for the owner's own browser, apart from strangers' (docs/reference.md §8 "Sign-in"):
 * - `wallet_known_browser`: browsers that signed in to an address (the digest of their long-lived cookie);
 * - `wallet_sign_in.browser_hash`: the known browser a code was asked from (null: any other), so its
 *   requests are counted on their own and never against the limits strangers can use up.
 */
export class Migration20261129061000_wallet_known_browser extends Migration {
  override name = 'Migration20261129061000_wallet_known_browser';

  override up(): void {
    this.addSql(
      `create table "wallet_known_browser" ("token_hash" varchar(64) not null, "email" varchar(254) not null, "created_at" timestamptz not null default now(), "last_used_at" timestamptz not null default now(), primary key ("token_hash"));`,
    );
    this.addSql(`alter table "wallet_sign_in" add "browser_hash" varchar(64) null;`);
  }

  override down(): void {
    this.addSql(`alter table "wallet_sign_in" drop column "browser_hash";`);
    this.addSql(`drop table if exists "wallet_known_browser" cascade;`);
  }
}
