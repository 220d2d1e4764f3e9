import { Migration } from '@mikro-orm/migrations';

/**
 * Sign-in codes are bound to the browser that asked for them: `challenge_hash` is the SHA-256 of the
 * random token in that browser's `pp_sign_in` cookie. A code verifies, and a wrong try counts, only
 * with that cookie, so nobody else's guesses can lock it. Rows from before (no challenge) simply stop
 * verifying; they expired within 10 minutes anyway.
 * `sent` is false for a request a send limit held back: it is recorded all the same (with a code nobody
 * knows), so limits count requests and a code typed afterwards gets the same answer as after a real send.
 */
export class Migration20261125400000_sign_in_challenge extends Migration {
  override name = 'Migration20261125400000_sign_in_challenge';

  override up(): void {
    this.addSql(
      `alter table "wallet_sign_in" add column "challenge_hash" varchar(64) null, add column "sent" boolean not null default true;`,
    );
  }

  override down(): void {
    this.addSql(`alter table "wallet_sign_in" drop column "challenge_hash", drop column "sent";`);
  }
}
