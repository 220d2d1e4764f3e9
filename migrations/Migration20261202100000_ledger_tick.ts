import { Migration } from '@mikro-orm/migrations';
import { LEDGER_FUNCTIONS_V5 } from './sql/ledger-functions-v5.js';
import { Migration20261201300000_lean_ledger_restored } from './Migration20261201300000_lean_ledger_restored.js';

/**
 * Hand-written. The ledger's hold and settlement rules in one place (docs/ledger.md, "Where the rules
 * live"): applies version 5 of the ledger's SQL functions (migrations/sql/ledger-functions-v5.ts:
 * `ledger_period_start`, `ledger_tick` and the row types a batch reads into), which a lone operation and a
 * batch both call, and drops `ledger_hold_one` / `ledger_settle_one` (migrations 20261128100000,
 * 20261129100000 and 20261201300000), which held a second copy of the rules.
 *
 * Every database ends with the same objects, whatever it ran before: the file drops any `ledger_tick` and
 * row type of a reverted version (a database may have run Migration20261130100000 or
 * Migration20261201110000, both removed) before creating its own.
 *
 * A later change to the rules is a new versioned SQL file and a new migration applying it; this one and
 * the file it applies never change.
 */
export class Migration20261202100000_ledger_tick extends Migration {
  override name = 'Migration20261202100000_ledger_tick';

  override up(): void {
    for (const sql of LEDGER_FUNCTIONS_V5) this.addSql(sql);
    this.addSql(`drop function if exists ledger_hold_one(jsonb);`);
    this.addSql(`drop function if exists ledger_settle_one(jsonb);`);
  }

  override down(): void {
    // Back to the service before it: the lean functions (as Migration20261201300000 re-creates them, which
    // also drops ledger_tick's objects of the round-8 version), then this version's objects.
    const restored = new Migration20261201300000_lean_ledger_restored(this.driver, this.config);
    restored.up();
    for (const sql of restored.getQueries()) if (typeof sql === 'string') this.addSql(sql);
    this.addSql(`drop function if exists ledger_tick(jsonb, jsonb, text);`);
    this.addSql(`drop function if exists ledger_period_start(text, timestamptz);`);
    this.addSql(`drop type if exists ledger_hold_in;`);
    this.addSql(`drop type if exists ledger_settled;`);
    this.addSql(`drop type if exists ledger_placed;`);
  }
}
