import { Migration } from '@mikro-orm/migrations';

/**
 * Hand-written (performance round 7): the `event_fanout` trigger builds its `paywall_events` payload with
 * one plain aggregate when the statement's events are of one paywall and at most 250 (one group: every
 * lone request's statement, and every batch of one paywall). The payload is the same
 * (`[{"p": paywall id, "s": [event seq, …], "t": [distinct types]}]`, one notification); statements with
 * several paywalls or more events take the general query of migration 20261124000000 as before. The
 * general query's window, grouping and sort cost about 1–2 % of a lone ledger statement's PostgreSQL time
 * to start and run (docs/performance.md, round 7). Deliveries and the `webhook_deliveries` notification
 * are unchanged.
 */
export class Migration20261130210000_fanout_one_paywall extends Migration {
  override name = 'Migration20261130210000_fanout_one_paywall';

  override up(): void {
    this.addSql(`create or replace function event_fanout() returns trigger language plpgsql as $$
      declare
        n integer;
        msg text := '';
        part text;
        single boolean;
      begin
        insert into webhook_delivery (id, subscription_id, paywall_id, event_id, event_type, status, attempts,
                                      next_attempt_at, created_at, updated_at)
        select gen_random_uuid(), s.id, e.paywall_id, e.id, e.type, 'pending', 0, now(), now(), now()
          from new_events e join webhook_subscription s on s.paywall_id = e.paywall_id
         where s.is_active and event_matches(s.events, e.type)
         order by e.seq, s.id;
        get diagnostics n = row_count;
        -- One paywall and at most one group's worth of events (every ledger statement but the largest
        -- batches): the payload in one plain aggregate, without the window and the grouping below.
        select count(distinct e.paywall_id) = 1 and count(*) <= 250,
               json_build_object('p', (array_agg(e.paywall_id))[1], 's', array_agg(e.seq order by e.seq),
                                 't', array_agg(distinct e.type))::text
          into single, part
          from new_events e;
        if single then
          perform pg_notify('paywall_events', '[' || part || ']');
          if n > 0 then
            perform pg_notify('webhook_deliveries', '');
          end if;
          return null;
        end if;
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
  }

  override down(): void {
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
  }
}
