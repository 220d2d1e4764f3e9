import { Migration } from '@mikro-orm/migrations';

/**
 * Hand-written: a Responses answer's charge names the response (`metadata.responseId`), so a later
 * `previous_response_id` can be checked against the end user who owns it (RelayedResponses.earlierContext).
 * The index is partial: only charges of stored Responses answers have an entry, so a chat completion's
 * settlement writes nothing more. Built like any index of a migration (writes to `charge` wait meanwhile);
 * docs/operations.md says how to build it beforehand without blocking, which this migration then skips.
 */
export class Migration20261203100000_charge_response_owner extends Migration {
  override name = 'Migration20261203100000_charge_response_owner';

  override up(): void {
    this.addSql(
      `create index if not exists "charge_response_id_index" on "charge" ("paywall_id", ("metadata"->>'responseId')) where "metadata" ? 'responseId';`,
    );
  }

  override down(): void {
    this.addSql(`drop index if exists "charge_response_id_index";`);
  }
}
