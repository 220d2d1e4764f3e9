import { Migration } from '@mikro-orm/migrations';
import { LEDGER_FUNCTIONS_V3 } from './sql/ledger-functions-v3.js';

/**
 * The ledger's hold and settlement rules in one place (docs/ledger.md, "Where the rules live"): applies
 * version 3 of the ledger's SQL functions (migrations/sql/ledger-functions-v3.ts: `ledger_period_start`,
 * `ledger_tick` and the row types it reads into), which a lone operation and a batch both call, and drops the single-operation functions
 * `ledger_hold_one` / `ledger_settle_one` (migrations 20261128100000 and 20261129100000), which held a
 * second copy of the rules.
 *
 * A later change to the rules is a new versioned SQL file and a new migration applying it; this one and
 * the file it applies never change.
 */
export class Migration20261201110000_ledger_tick extends Migration {
  override name = 'Migration20261201110000_ledger_tick';

  override up(): void {
    for (const sql of LEDGER_FUNCTIONS_V3) this.addSql(sql);
    this.addSql(`drop function if exists ledger_hold_one(jsonb);`);
    this.addSql(`drop function if exists ledger_settle_one(jsonb);`);
  }

  override down(): void {
    // The previous service called ledger_hold_one / ledger_settle_one: to go back past this migration,
    // run the down and up of Migration20261129100000_user_keys again (it re-creates them).
    this.addSql(`drop function if exists ledger_tick(jsonb, jsonb, text);`);
    this.addSql(`drop function if exists ledger_period_start(text, timestamptz);`);
    this.addSql(`drop type if exists ledger_hold_in;`);
    this.addSql(`drop type if exists ledger_settled;`);
    this.addSql(`drop type if exists ledger_placed;`);
  }
}
