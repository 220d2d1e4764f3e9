import type { Database, Sql, Tx } from '../../db/database.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import { DomainError, invalid } from '../../shared/errors.js';
import { isUuid } from '../../shared/ids.js';
import { EVENT_TYPES, eventMatches } from '../events/event-catalog.js';
import type { Auth } from '../paywalls/paywall-info.js';
import {
  buildDeliveryPayload,
  eventPayloadColumns,
  eventRowFrom,
  type DeliveryPayload,
} from './delivery-payload.js';
import { WebhookSubscription } from './webhook.entity.js';

export const LOGS_DEFAULT_LIMIT = 20;
export const LOGS_MAX_LIMIT = 100;
/** docs/reference.md §4 "Log entries": the response body is shown up to 4 KiB. */
export const RESPONSE_BODY_MAX_BYTES = 4096;

export const DELIVERY_STATUSES = ['pending', 'success', 'error'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** Channel the delivery workers LISTEN on (the `event_fanout` trigger uses it too). */
const WAKE_CHANNEL = 'webhook_deliveries';

/** One delivery of one event to one subscription, as the logs show it. */
export interface DeliveryView {
  id: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  /** When the next attempt is due; null once the delivery is finished (success or error). */
  nextAttemptAt: Date | null;
  responseStatus: number | null;
  responseLatencyMs: number | null;
  /** The receiver's last answer, cut to {@link RESPONSE_BODY_MAX_BYTES} bytes of UTF-8. */
  responseBody: string | null;
  /** Why the last attempt failed before an answer (timeout, refused connection, URL guard). */
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** The `event` object of the delivery payload, exactly as sent. */
  event: DeliveryPayload['event'];
  /** Opaque position for cursor pagination. */
  cursor: string;
}

export interface DeliveryQuery {
  subscriptionId?: string | null;
  status?: string | null;
  eventType?: string | null;
  first?: number | null;
  after?: string | null;
}

export interface DeliveryPage {
  entries: DeliveryView[];
  hasNextPage: boolean;
  endCursor: string | null;
}

/** What the delivery log needs: paywalls to authorize the caller. */
export interface DeliveryLogDeps {
  db: Database;
  /** The lag-tolerant reads (delivery logs): the replica in a GraphQL query. */
  reads: Sql;
  paywalls: Pick<PaywallService, 'resolve'>;
}

/**
 * The delivery log of webhooks: reading it, and resetting deliveries for a manual resend. Deliveries
 * themselves are written by the `event_fanout` trigger (one outbox row per matching active subscription, in
 * the transaction of the event) and sent by the delivery worker.
 *
 * Scope: an API key sees only its paywall; an owner sees the paywalls it owns. Anything else is "not found",
 * never "forbidden", so ids of other paywalls reveal nothing.
 */
export class DeliveryLog {
  constructor(private readonly deps: DeliveryLogDeps) {}

  /**
   * Delivery logs of the paywall, newest first, with cursor pagination. Filters: one of the paywall's
   * subscriptions (another paywall's or an unknown id is not found), a status, an exact event name.
   */
  async list(auth: Auth, paywallId: string | null | undefined, q: DeliveryQuery): Promise<DeliveryPage> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const first = q.first ?? LOGS_DEFAULT_LIMIT;
    if (!Number.isInteger(first) || first < 1 || first > LOGS_MAX_LIMIT)
      throw invalid(`first must be an integer from 1 to ${LOGS_MAX_LIMIT}`, 'first');
    if (q.status != null && !(DELIVERY_STATUSES as readonly string[]).includes(q.status))
      throw invalid('status must be one of pending, success, error', 'status');
    if (q.eventType != null && !(EVENT_TYPES as readonly string[]).includes(q.eventType))
      throw invalid(`unknown event name: ${q.eventType}`, 'eventType');
    const after = q.after == null ? null : decodeCursor(q.after);

    const params: unknown[] = [paywall.id];
    const where = ['d.paywall_id = $1'];
    if (q.subscriptionId != null) {
      const [owned] = isUuid(q.subscriptionId)
        ? await this.deps.db.query(`select 1 from webhook_subscription where id = $1 and paywall_id = $2`, [
            q.subscriptionId,
            paywall.id,
          ])
        : [];
      if (!owned) throw new DomainError('not_found', 'subscription not found', 'subscriptionId');
      params.push(q.subscriptionId);
      where.push(`d.subscription_id = $${params.length}`);
    }
    if (q.status != null) {
      params.push(q.status);
      where.push(`d.status = $${params.length}`);
    }
    if (q.eventType != null) {
      params.push(q.eventType);
      where.push(`d.event_type = $${params.length}`);
    }
    if (after) {
      params.push(after.us, after.seq, after.id);
      const n = params.length;
      where.push(
        `(d.created_at, e.seq, d.id) < ('epoch'::timestamptz + $${n - 2}::bigint * interval '1 microsecond', $${n - 1}::bigint, $${n}::uuid)`,
      );
    }
    params.push(first + 1);
    // The subscription filter above was checked on the primary (one created a moment ago exists); its
    // deliveries may trail by the replica's lag.
    const rows = await this.deps.reads.query(
      `${DELIVERY_SELECT} where ${where.join(' and ')}
       order by d.created_at desc, e.seq desc, d.id desc limit $${params.length}`,
      params,
    );
    const entries = rows.slice(0, first).map(deliveryView);
    return {
      entries,
      hasNextPage: rows.length > first,
      endCursor: entries.length ? entries[entries.length - 1].cursor : null,
    };
  }

  /**
   * Manual resend of one of the paywall's events: to the given subscription, or to every active subscription
   * whose patterns match the event. Each delivery row goes back to `pending`, due now, unleased; a missing row
   * (the subscription was created after the event) is inserted. Workers are woken with NOTIFY.
   *
   * `attempts` is NOT reset: it keeps counting every attempt ever made, so the log and `delivery.attempts` stay
   * truthful. A delivery whose retries were used up therefore gets exactly one more attempt (like a "resend"
   * button elsewhere); one that ended early (a 410, say) continues its remaining schedule. A delivery being
   * sent at this very moment (pending with a live lease) is left to finish.
   */
  async redeliver(auth: Auth, eventId: string, subscriptionId?: string | null): Promise<DeliveryView[]> {
    const event = isUuid(eventId)
      ? (
          await this.deps.db.query<{ id: string; paywall_id: string; type: string }>(
            `select id, paywall_id, type from event where id = $1`,
            [eventId],
          )
        )[0]
      : undefined;
    if (!event || !(await this.mayAct(auth, event.paywall_id)))
      throw new DomainError('not_found', 'event not found', 'eventId');

    let targets: string[];
    if (subscriptionId != null) {
      const sub = isUuid(subscriptionId)
        ? await this.deps.db.withEm((em) =>
            em.findOne(WebhookSubscription, { id: subscriptionId, paywall: event.paywall_id }),
          )
        : null;
      if (!sub) throw new DomainError('not_found', 'subscription not found', 'subscriptionId');
      if (!sub.isActive)
        throw new DomainError(
          'conflict',
          'the subscription is inactive; reactivate it first',
          'subscriptionId',
        );
      if (!eventMatches(sub.events, event.type))
        throw invalid(`the subscription does not subscribe to ${event.type}`, 'subscriptionId');
      targets = [sub.id];
    } else {
      const subs = await this.deps.db.query<{ id: string }>(
        `select id from webhook_subscription
          where paywall_id = $1 and is_active and event_matches(events, $2)`,
        [event.paywall_id, event.type],
      );
      targets = subs.map((r) => r.id);
    }
    if (targets.length === 0) return [];

    const rows = await this.deps.db.transaction(async (tx: Tx) => {
      await tx.query(
        `insert into webhook_delivery (id, subscription_id, paywall_id, event_id, event_type, status, attempts,
                                       next_attempt_at, created_at, updated_at)
         select gen_random_uuid(), s.id, $1, $2, $3, 'pending', 0, now(), now(), now()
           from unnest($4::uuid[]) as s(id)
         on conflict (subscription_id, event_id) do update
            set status = 'pending', next_attempt_at = now(), lease_until = null, updated_at = now()
          where not (webhook_delivery.status = 'pending' and webhook_delivery.lease_until > now())`,
        [event.paywall_id, event.id, event.type, targets],
      );
      await tx.query(`select pg_notify($1, '')`, [WAKE_CHANNEL]);
      return tx.query(
        `${DELIVERY_SELECT} where d.event_id = $1 and d.subscription_id = any($2::uuid[])
         order by d.created_at desc, e.seq desc, d.id desc`,
        [event.id, targets],
      );
    });
    return rows.map(deliveryView);
  }

  /** True when the caller may act on that paywall (its key, or its owner). */
  private async mayAct(auth: Auth, paywallId: string): Promise<boolean> {
    if (auth.kind === 'apiKey') return auth.paywall.id === paywallId;
    const rows = await this.deps.db.query(`select 1 from paywall where id = $1 and owner_id = $2`, [
      paywallId,
      auth.ownerId,
    ]);
    return rows.length > 0;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Delivery rows
// ---------------------------------------------------------------------------------------------------------

/**
 * A delivery with its event. The response body is cut in SQL first (characters) so a huge body is never
 * fetched, then to bytes in {@link cutUtf8}. `cursor_us` keeps PostgreSQL's microseconds for the cursor.
 */
const DELIVERY_SELECT = `
  select d.id, d.subscription_id, d.event_id, d.event_type, d.status, d.attempts, d.next_attempt_at,
         d.response_status, d.response_latency_ms, left(d.response_body, ${RESPONSE_BODY_MAX_BYTES}) as response_body,
         d.last_error, d.created_at, d.updated_at, (extract(epoch from d.created_at) * 1000000)::bigint::text as cursor_us, e.seq::text as cursor_seq,
         ${eventPayloadColumns('e')}
    from webhook_delivery d
    join event e on e.id = d.event_id`;

function deliveryView(r: Record<string, any>): DeliveryView {
  const status = r.status as DeliveryStatus;
  const attempts = Number(r.attempts);
  return {
    id: r.id,
    subscriptionId: r.subscription_id,
    eventId: r.event_id,
    eventType: r.event_type,
    status,
    attempts,
    nextAttemptAt: status === 'pending' && r.next_attempt_at ? new Date(r.next_attempt_at) : null,
    responseStatus: r.response_status == null ? null : Number(r.response_status),
    responseLatencyMs: r.response_latency_ms == null ? null : Number(r.response_latency_ms),
    responseBody: r.response_body == null ? null : cutUtf8(r.response_body, RESPONSE_BODY_MAX_BYTES),
    lastError: r.last_error ?? null,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
    // The log shows the payload of the last attempt made (attempt 0 = not sent yet: shown as the first).
    event: buildDeliveryPayload(r as any, eventRowFrom(r), Math.max(attempts, 1)).event,
    cursor: encodeCursor({ us: r.cursor_us, seq: r.cursor_seq, id: r.id }),
  };
}

/** The longest prefix of `s` whose UTF-8 encoding fits in `max` bytes, never splitting a character. */
function cutUtf8(s: string, max: number): string {
  const bytes = Buffer.from(s, 'utf8');
  if (bytes.length <= max) return s;
  let end = max;
  // Step back over continuation bytes (10xxxxxx) to the start of the character that does not fit.
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

interface Cursor {
  /** created_at in microseconds since the epoch (exact: PostgreSQL keeps microseconds, a JS Date does not). */
  us: string;
  seq: string;
  id: string;
}

const encodeCursor = (c: Cursor): string =>
  Buffer.from(JSON.stringify([c.us, c.seq, c.id])).toString('base64url');

function decodeCursor(s: string): Cursor {
  try {
    const [us, seq, id] = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown[];
    if (
      typeof us === 'string' &&
      /^\d{1,18}$/.test(us) &&
      typeof seq === 'string' &&
      /^\d{1,18}$/.test(seq) &&
      typeof id === 'string' &&
      isUuid(id)
    )
      return { us, seq, id };
  } catch {
    /* fall through */
  }
  throw invalid('after is not a cursor returned by this API', 'after');
}
