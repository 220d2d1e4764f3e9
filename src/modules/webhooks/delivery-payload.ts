/**
 * The body POSTed to a subscription URL (spec "Delivery payload"). One builder for the worker that sends
 * it and for the delivery logs that show it, so what a receiver got and what the logs say it got can
 * never drift apart.
 */

/** A timestamp as the drivers return it: a Date (pg) or a string (PGlite, or a `::text` cast). */
type Timestamp = Date | string;

/** The `webhook_delivery` columns the payload needs, as raw SQL returns them (snake_case). */
export interface DeliveryPayloadRow {
  id: string;
  subscription_id: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** The `event` columns the payload needs, as raw SQL returns them (snake_case; jsonb columns parsed). */
export interface EventPayloadRow {
  id: string;
  paywall_id: string;
  owner_user_id: string;
  type: string;
  version: string;
  created_at: Timestamp;
  trigger: Record<string, unknown>;
  subject: Record<string, unknown>;
  data: Record<string, unknown>;
  metadata: Record<string, unknown> | null;
}

/**
 * Columns of `event` to select for {@link buildDeliveryPayload}, for a query that aliases the event table as
 * `alias` and the delivery table separately; names are prefixed `ev_` so they never collide with the
 * delivery's own columns. Use {@link eventRowFrom} on the result row.
 */
export const eventPayloadColumns = (alias: string): string =>
  [
    'id',
    'paywall_id',
    'owner_user_id',
    'type',
    'version',
    'created_at',
    'trigger',
    'subject',
    'data',
    'metadata',
  ]
    .map((c) => `${alias}.${c} as ev_${c}`)
    .join(', ');

/** The event part of a row selected with {@link eventPayloadColumns}. */
export function eventRowFrom(row: Record<string, any>): EventPayloadRow {
  return {
    id: row.ev_id,
    paywall_id: row.ev_paywall_id,
    owner_user_id: row.ev_owner_user_id,
    type: row.ev_type,
    version: row.ev_version,
    created_at: row.ev_created_at,
    trigger: row.ev_trigger,
    subject: row.ev_subject,
    data: row.ev_data,
    metadata: row.ev_metadata,
  };
}

export interface DeliveryPayload {
  delivery: { id: string; subscriptionId: string; attempts: number; createdAt: string; updatedAt: string };
  event: {
    id: string;
    paywallId: string;
    ownerUserId: string;
    type: string;
    version: string;
    status: 'pending';
    createdAt: string;
    trigger: Record<string, unknown>;
    subject: Record<string, unknown>;
    data: Record<string, unknown>;
    metadata: Record<string, unknown>;
  };
}

const iso = (t: Timestamp): string => new Date(t).toISOString();

/** jsonb arrives parsed from both drivers; a string (a `::text` cast) is parsed here to be safe. */
const object = (v: unknown): Record<string, unknown> =>
  typeof v === 'string' ? (JSON.parse(v) as Record<string, unknown>) : ((v ?? {}) as Record<string, unknown>);

/**
 * The delivery payload, exactly the spec's fields in the spec's order.
 *
 * @param attempt the number of THIS attempt, 1 on the first (docs/reference.md §4 "Delivery payload"): the worker
 *   passes the attempt it is about to make, the logs pass the attempts made so far.
 *
 * `event.status` is always `pending`: the spec shows that value in delivery bodies and defines no other; it
 * describes the event as delivered (not yet acknowledged), not the delivery's own state.
 */
export function buildDeliveryPayload(
  delivery: DeliveryPayloadRow,
  event: EventPayloadRow,
  attempt: number,
): DeliveryPayload {
  return {
    delivery: {
      id: delivery.id,
      subscriptionId: delivery.subscription_id,
      attempts: attempt,
      createdAt: iso(delivery.created_at),
      updatedAt: iso(delivery.updated_at),
    },
    event: {
      id: event.id,
      paywallId: event.paywall_id,
      ownerUserId: event.owner_user_id,
      type: event.type,
      version: event.version,
      status: 'pending',
      createdAt: iso(event.created_at),
      trigger: object(event.trigger),
      subject: object(event.subject),
      data: object(event.data),
      metadata: object(event.metadata),
    },
  };
}
