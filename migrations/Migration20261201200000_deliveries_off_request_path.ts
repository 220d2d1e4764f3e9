import { Migration } from '@mikro-orm/migrations';

/**
 * Hand-written (performance round 10, issue 34): webhook delivery rows leave the paid request's path.
 *
 * The `event_fanout` trigger wrote one `webhook_delivery` row per event and matching active subscription in
 * the event's own statement: a fifth of a lone ledger statement's PostgreSQL time (docs/performance.md,
 * round 7). It now writes none. The events table is the outbox: the delivery worker (and every API call
 * that reads or acts on delivery rows) expands committed events into deliveries with `webhook_expand()`.
 *
 * - `event.xid`: the id of the transaction that wrote the event (`pg_current_xact_id()`, xid8). Events
 *   written before this migration keep null: they had their delivery rows from the old trigger.
 * - `webhook_expansion`: one row, the snapshot (`pg_snapshot`) of the last expansion. Every event visible
 *   in it has been expanded.
 * - `webhook_expand()`: locks that row, then in ONE statement (one snapshot S) inserts the deliveries of
 *   the events visible in S but not in the stored snapshot (their xid in its in-progress list, or at or
 *   above its xmax), and stores S. A transaction that was in progress at the last expansion and committed
 *   since is in that list, so an event committed out of xid order is never skipped; an expansion that
 *   fails or crashes rolls back with its snapshot, so nothing is lost. Unlike a plain xid cursor below the
 *   snapshot's xmin, a long transaction elsewhere holds nothing back: every committed event is expanded.
 * - A subscription gets an event when it is active at expansion time and was created at or before the
 *   event (`s.created_at <= e.created_at`); the delivery's `created_at` is its event's, as before.
 * - The trigger still sends `paywall_events` (same payload) and sends `webhook_deliveries` only when the
 *   statement's events match an active subscription (an EXISTS in the payload's aggregate, instead of the
 *   insert's row count: one statement in the trigger instead of two).
 * - The expansion commits asynchronously (`synchronous_commit = off` for its transaction): one lost in a
 *   crash is redone, and a delivery is sent only after a later synchronous commit (its claim).
 *
 * Existing databases: the stored snapshot is this migration's own, so events written after it are
 * expanded and none before (they have null `xid` and their deliveries already).
 */
export class Migration20261201200000_deliveries_off_request_path extends Migration {
  override name = 'Migration20261201200000_deliveries_off_request_path';

  override up(): void {
    // Nullable without a default first (no table rewrite: old rows stay null), then the default for new rows.
    this.addSql(`alter table "event" add column "xid" xid8;`);
    this.addSql(`alter table "event" alter column "xid" set default pg_current_xact_id();`);
    this.addSql(`create index "event_xid_index" on "event" ("xid") where "xid" is not null;`);
    this.addSql(`create table "webhook_expansion" (
      "id" boolean primary key default true check ("id"),
      "snap" pg_snapshot not null);`);
    // This migration's snapshot: events written after it commits are not visible in it (the alter above
    // locks the table until then), events before it have null xid.
    this.addSql(`insert into "webhook_expansion" ("id", "snap") values (true, pg_current_snapshot());`);
    // Generic plans (planned once per connection): a custom plan per call cost a third of a small
    // expansion's time. Every scan of `event` is a bounded range of `event_xid_index`, so the generic plans
    // read the index and never the table.
    this.addSql(`create or replace function webhook_expand() returns integer language plpgsql
      set plan_cache_mode = force_generic_plan as $$
      declare
        prev pg_snapshot;
        xips xid8[];
        newest xid8;
        n integer;
      begin
        -- Nothing committed since the last expansion's snapshot: nothing to do, and nothing written (an
        -- idle poll or a log read is a read-only transaction). max() reads one index entry.
        select w.snap, (select max(e.xid) from event e) into prev, newest from webhook_expansion w where w.id;
        xips := array(select pg_snapshot_xip(prev));
        if (newest is null or newest < pg_snapshot_xmax(prev))
           and (cardinality(xips) = 0 or not exists (select 1 from event e where e.xid = any (xips))) then
          return 0;
        end if;
        -- The lock, in its own statement: the insert below takes its snapshot after it, so it sees
        -- everything the previous expansion (committed before the lock was granted) saw.
        select w.snap into prev from webhook_expansion w where w.id for update;
        xips := array(select pg_snapshot_xip(prev));
        -- An expansion lost in a crash is redone from the same snapshot (both roll back together, WAL is
        -- sequential); a delivery is claimed, and so sent, only by a later synchronous commit, which makes
        -- the expansion before it durable too.
        perform set_config('synchronous_commit', 'off', true);
        with ins as (
          insert into webhook_delivery (id, subscription_id, paywall_id, event_id, event_type, status, attempts,
                                        next_attempt_at, created_at, updated_at)
          select gen_random_uuid(), s.id, e.paywall_id, e.id, e.type, 'pending', 0, now(), e.created_at, now()
            from (select * from event
                   where xid >= pg_snapshot_xmax(prev) and xid < pg_snapshot_xmax(pg_current_snapshot())
                  union all
                  select * from event where xid = any (xips)) e
            join webhook_subscription s on s.paywall_id = e.paywall_id
           where s.is_active and s.created_at <= e.created_at and event_matches(s.events, e.type)
           order by e.seq, s.id
          on conflict (subscription_id, event_id) do nothing
          returning 1),
        upd as (update webhook_expansion set snap = pg_current_snapshot() where id returning 1)
        select count(*) into n from ins;
        return n;
      end $$;`);
    this.addSql(`create or replace function event_fanout() returns trigger language plpgsql as $$
      declare
        msg text := '';
        part text;
        single boolean;
        wake boolean;
      begin
        -- No delivery rows here (webhook_expand() writes them). One paywall and at most one group's worth
        -- of events (every ledger statement but the largest batches): the payload in one plain aggregate,
        -- without the window and the grouping below, and in the same statement whether an active
        -- subscription wants one of the events (then the worker is woken).
        select count(distinct e.paywall_id) = 1 and count(*) <= 250,
               json_build_object('p', (array_agg(e.paywall_id))[1], 's', array_agg(e.seq order by e.seq),
                                 't', array_agg(distinct e.type))::text,
               bool_or(exists (select 1 from webhook_subscription s
                                where s.paywall_id = e.paywall_id and s.is_active and event_matches(s.events, e.type)))
          into single, part, wake
          from new_events e;
        if single then
          perform pg_notify('paywall_events', '[' || part || ']');
          if wake then
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
        if wake then
          perform pg_notify('webhook_deliveries', '');
        end if;
        return null;
      end $$;`);
  }

  override down(): void {
    // Events not expanded yet get their deliveries before the trigger writes them again.
    this.addSql(`select webhook_expand();`);
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
    this.addSql(`drop function if exists webhook_expand();`);
    this.addSql(`drop table if exists "webhook_expansion";`);
    this.addSql(`drop index if exists "event_xid_index";`);
    this.addSql(`alter table "event" drop column if exists "xid";`);
  }
}
