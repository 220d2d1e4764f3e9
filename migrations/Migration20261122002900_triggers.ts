import { Migration } from '@mikro-orm/migrations';

/**
 * Hand-written: what the schema diff cannot express.
 * - the ledger is append-only (UPDATE/DELETE raise);
 * - recording an event fans it out, in the same transaction, to one outbox row per matching active
 *   webhook subscription, and NOTIFYs live subscribers and delivery workers (delivered at commit);
 * - a partial index finds open holds fast.
 */
export class Migration20261122002900_triggers extends Migration {
  override up(): void {
    this.addSql(`create or replace function event_matches(patterns text[], event_type text) returns boolean
      language sql immutable as $$
        select exists (
          select 1 from unnest(patterns) as p
          where p = '*' or p = event_type
             or (right(p, 2) = '.*' and left(event_type, length(p) - 1) = left(p, length(p) - 1))
        )
      $$;`);
    this.addSql(`create or replace function ledger_entry_immutable() returns trigger language plpgsql as $$
      begin
        raise exception 'ledger_entry is append-only';
      end $$;`);
    this.addSql(`create trigger ledger_entry_append_only before update or delete on ledger_entry
      for each row execute function ledger_entry_immutable();`);
    this.addSql(`create or replace function event_fanout() returns trigger language plpgsql as $$
      declare n integer;
      begin
        insert into webhook_delivery (id, subscription_id, paywall_id, event_id, event_type, status, attempts,
                                      next_attempt_at, created_at, updated_at)
        select gen_random_uuid(), s.id, new.paywall_id, new.id, new.type, 'pending', 0, now(), now(), now()
          from webhook_subscription s
         where s.paywall_id = new.paywall_id and s.is_active and event_matches(s.events, new.type);
        get diagnostics n = row_count;
        perform pg_notify('paywall_events',
          json_build_object('id', new.id, 'paywallId', new.paywall_id, 'type', new.type)::text);
        if n > 0 then
          perform pg_notify('webhook_deliveries', '');
        end if;
        return null;
      end $$;`);
    this.addSql(
      `create trigger event_fanout after insert on event for each row execute function event_fanout();`,
    );
    this.addSql(`create index charge_open_holds_index on charge (created_at) where status = 'held';`);
  }

  override down(): void {
    this.addSql(`drop index if exists charge_open_holds_index;`);
    this.addSql(`drop trigger if exists event_fanout on event;`);
    this.addSql(`drop function if exists event_fanout();`);
    this.addSql(`drop trigger if exists ledger_entry_append_only on ledger_entry;`);
    this.addSql(`drop function if exists ledger_entry_immutable();`);
    this.addSql(`drop function if exists event_matches(text[], text);`);
  }
}
