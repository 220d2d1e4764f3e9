import { Migration } from '@mikro-orm/migrations';

/**
 * Hand-written (issue 11): the event fan-out runs once per STATEMENT instead of once per event row.
 *
 * `event_fanout` becomes a statement-level AFTER INSERT trigger with a transition table (`new_events`):
 * - the webhook outbox rows of all the statement's events are written by one set-based insert (one row
 *   per event and matching active subscription, as before);
 * - live subscribers are told with ONE `paywall_events` NOTIFY per statement instead of one per event.
 *   Its payload lists the statement's events by paywall: `[{"p": paywall id, "s": [event seq, …],
 *   "t": [distinct types]}, …]` (seq = `event.seq`, the primary key). The live-event hub reads the rows
 *   by seq, as it read them by id before. A payload stays under PostgreSQL's 8000-byte limit: a
 *   statement whose list would not fit (hundreds of events over many paywalls) sends it in several
 *   notifications of whole groups (a group holds at most 250 events);
 * - delivery workers get ONE `webhook_deliveries` NOTIFY when the statement created deliveries.
 *
 * A query with several data-modifying CTEs inserting into `event` (the ledger tick) fires the trigger
 * once, with all their rows in the transition table.
 */
export class Migration20261124000000_event_fanout_statement extends Migration {
  override name = 'Migration20261124000000_event_fanout_statement';

  override up(): void {
    this.addSql(`drop trigger if exists event_fanout on event;`);
    this.addSql(`create or replace function event_fanout() returns trigger language plpgsql as $$
      declare
        n integer;
        msg text := '';
        part text;
      begin
        insert into webhook_delivery (id, subscription_id, paywall_id, event_id, event_type, status, attempts,
                                      next_attempt_at, created_at, updated_at)
        select gen_random_uuid(), s.id, e.paywall_id, e.id, e.type, 'pending', 0, now(), now(), now()
          from new_events e join webhook_subscription s on s.paywall_id = e.paywall_id
         where s.is_active and event_matches(s.events, e.type)
         order by e.seq, s.id;
        get diagnostics n = row_count;
        for part in
          select json_build_object('p', g.paywall_id, 's', array_agg(g.seq order by g.seq),
                                   't', array_agg(distinct g.type))::text
            from (select e.paywall_id, e.seq, e.type,
                         (row_number() over (partition by e.paywall_id order by e.seq) - 1) / 250 as chunk
                    from new_events e) g
           group by g.paywall_id, g.chunk
           order by min(g.seq)
        loop
          if msg <> '' and length(msg) + length(part) > 7900 then
            perform pg_notify('paywall_events', '[' || msg || ']');
            msg := '';
          end if;
          msg := case when msg = '' then part else msg || ',' || part end;
        end loop;
        if msg <> '' then
          perform pg_notify('paywall_events', '[' || msg || ']');
        end if;
        if n > 0 then
          perform pg_notify('webhook_deliveries', '');
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger event_fanout after insert on event referencing new table as new_events
      for each statement execute function event_fanout();`);
  }

  override down(): void {
    this.addSql(`drop trigger if exists event_fanout on event;`);
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
  }
}
