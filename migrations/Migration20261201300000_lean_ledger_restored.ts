import { Migration } from '@mikro-orm/migrations';
import { Migration20261129100000_user_keys } from './Migration20261129100000_user_keys.js';

/**
 * Hand-written. Every database ends with the ledger functions the service calls, whatever it ran before.
 *
 * `Migration20261130100000_ledger_functions` was on main for a short while (the ledger's rules as one
 * `ledger_tick`, docs/performance.md round 8) and was then removed because it was slower. A database
 * that ran it has `ledger_tick`, `ledger_period_start` and the type `ledger_tick_row`, and no longer has
 * `ledger_hold_one` / `ledger_settle_one`, which the service calls for an operation alone; the migrator
 * skips an executed migration it does not know, so nothing put them back. This one re-creates both
 * functions with the text `Migration20261129100000_user_keys` applied (taken from that migration, not
 * copied, so the two cannot differ) and drops what the removed migration added. On every other database
 * it changes nothing: the same `create or replace`, and `drop … if exists` of objects that never existed.
 */
export class Migration20261201300000_lean_ledger_restored extends Migration {
  override name = 'Migration20261201300000_lean_ledger_restored';

  override up(): void {
    const userKeys = new Migration20261129100000_user_keys(this.driver, this.config);
    void userKeys.up();
    const functions = userKeys
      .getQueries()
      .filter(
        (q): q is string =>
          typeof q === 'string' && /^\s*create or replace function ledger_(hold|settle)_one\(/.test(q),
      );
    if (functions.length !== 2)
      throw new Error('the ledger functions of Migration20261129100000 were not found');
    for (const sql of functions) this.addSql(sql);
    this.addSql(`drop function if exists ledger_tick(jsonb, jsonb);`);
    this.addSql(`drop function if exists ledger_period_start(text, timestamptz);`);
    this.addSql(`drop type if exists ledger_tick_row;`);
  }

  override down(): void {
    // Nothing to undo: the functions are those of Migration20261129100000, and what was dropped belonged
    // to a migration that is no longer part of the service.
  }
}
