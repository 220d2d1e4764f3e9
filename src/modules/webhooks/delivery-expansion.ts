import type { Sql } from '../../db/database.js';

/**
 * Expands committed events into webhook delivery rows (`webhook_expand()`, migration 20261201200000): one
 * `pending` row per event and subscription that is active now, was created at or before the event, and
 * whose patterns match it. Returns the number of rows written.
 *
 * The events table is the outbox: the `event_fanout` trigger writes no delivery row on the paid request's
 * path. The delivery worker expands on each wake-up (NOTIFY `webhook_deliveries`, its poll), and every API
 * call that reads or acts on delivery rows (logs, resend, subscription (de)activation, retention) expands
 * first, so a committed event's deliveries are there as soon as anything looks. The function locks its
 * one-row cursor, so expansions run one at a time; each one sees every event committed before it started
 * and writes each delivery at most once (`on conflict do nothing`); a failed one rolls back whole.
 */
export async function expandDeliveries(db: Sql): Promise<number> {
  const [row] = await db.query<{ n: number | string }>('select webhook_expand() as n', [], 'webhook_expand');
  return Number(row?.n ?? 0);
}
