import { Migration } from '@mikro-orm/migrations';

const OLD_BODY = `language sql immutable as $$
        select exists (
          select 1 from unnest(patterns) as p
          where p = '*' or p = event_type
             or (right(p, 2) = '.*' and left(event_type, length(p) - 1) = left(p, length(p) - 1))
        )
      $$`;

/**
 * Hand-written (issue 11): `event_matches` in PL/pgSQL, same rule. As a SQL function with a sub-select it
 * cannot be inlined, so every statement that called it (the `event_fanout` trigger, once per ledger
 * statement) parsed and planned its body again: about 0.1 ms of a one-request statement. PL/pgSQL keeps
 * the compiled function and its expression plans for the session.
 */
export class Migration20261124100000_event_matches_plpgsql extends Migration {
  override name = 'Migration20261124100000_event_matches_plpgsql';

  override up(): void {
    this.addSql(`create or replace function event_matches(patterns text[], event_type text) returns boolean
      language plpgsql immutable as $$
      declare p text;
      begin
        foreach p in array coalesce(patterns, '{}') loop
          if p = '*' or p = event_type
             or (right(p, 2) = '.*' and left(event_type, length(p) - 1) = left(p, length(p) - 1)) then
            return true;
          end if;
        end loop;
        return false;
      end $$;`);
  }

  override down(): void {
    this.addSql(`create or replace function event_matches(patterns text[], event_type text) returns boolean
      ${OLD_BODY};`);
  }
}
