import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { EVENT_VERSION, type EventType } from './event-catalog.js';

export interface EventTrigger {
  source: 'api' | 'graphql' | 'proxy' | 'system' | 'page';
  actorType: 'api_key' | 'owner' | 'end_user' | 'system';
  actorId: string;
}

export interface EventSubject {
  type: 'paywall' | 'end_user' | 'charge' | 'request' | 'subscription';
  id: string;
  externalId?: string | null;
}

export interface NewEvent {
  paywallId: string;
  ownerUserId: string;
  type: EventType;
  trigger: EventTrigger;
  subject: EventSubject;
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

/** The JSON rows `recordEvents` inserts; also usable inside a larger CTE on the hot path. */
export function eventRows(events: NewEvent[]): Record<string, unknown>[] {
  return events.map((e) => ({
    id: randomUUID(),
    paywall_id: e.paywallId,
    owner_user_id: e.ownerUserId,
    type: e.type,
    version: EVENT_VERSION,
    trigger: e.trigger,
    subject: { type: e.subject.type, id: e.subject.id, externalId: e.subject.externalId ?? null },
    data: e.data,
    metadata: e.metadata ?? {},
  }));
}

/**
 * SQL that inserts the events given as a jsonb array in parameter `$n`. Usable as a statement or a
 * data-modifying CTE. The `event_fanout` trigger writes the webhook outbox rows and NOTIFYs.
 */
export const insertEventsSql = (n: number) =>
  `insert into event (id, paywall_id, owner_user_id, type, version, trigger, subject, data, metadata)
   select x.id, x.paywall_id, x.owner_user_id, x.type, x.version, x.trigger, x.subject, x.data, x.metadata
     from jsonb_to_recordset($${n}::jsonb) as x(id uuid, paywall_id uuid, owner_user_id uuid, type text,
          version text, trigger jsonb, subject jsonb, data jsonb, metadata jsonb)`;

/**
 * Records events in the caller's transaction (one statement), so the change and its events commit or
 * roll back together. Returns the new event ids in order.
 */
export async function recordEvents(sql: Sql, events: NewEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const rows = eventRows(events);
  await sql.query(insertEventsSql(1), [JSON.stringify(rows)]);
  return rows.map((r) => r.id as string);
}
