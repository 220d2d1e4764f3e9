import { Migration } from '@mikro-orm/migrations';
import { LEDGER_FUNCTIONS_V2 } from './sql/ledger-functions-v2.js';

/**
 * The ledger's hold and settlement rules in one place (docs/ledger.md, "Where the rules live"): applies
 * version 2 of the ledger's SQL functions (migrations/sql/ledger-functions-v2.ts: `ledger_period_start`,
 * `ledger_hold_item`, `ledger_settle_item`, `ledger_tick`), which a lone operation and a batch both call,
 * and drops the single-operation functions `ledger_hold_one` / `ledger_settle_one` (migrations
 * 20261128100000 and 20261129100000), whose rules the item functions now hold.
 *
 * A later change to the rules is a new versioned SQL file and a new migration applying it; this one and
 * the file it applies never change.
 */
export class Migration20261201100000_ledger_functions extends Migration {
  override name = 'Migration20261201100000_ledger_functions';

  override up(): void {
    for (const sql of LEDGER_FUNCTIONS_V2) this.addSql(sql);
    this.addSql(`drop function if exists ledger_hold_one(jsonb);`);
    this.addSql(`drop function if exists ledger_settle_one(jsonb);`);
  }

  override down(): void {
    // The previous service called ledger_hold_one / ledger_settle_one: to go back past this migration,
    // run the down and up of Migration20261129100000_user_keys again (it re-creates them).
    this.addSql(`drop function if exists ledger_tick(jsonb, jsonb, text);`);
    this.addSql(`drop function if exists ledger_hold_item(jsonb);`);
    this.addSql(`drop function if exists ledger_settle_item(jsonb);`);
    this.addSql(`drop function if exists ledger_period_start(text, timestamptz);`);
  }
}
