import type { Database, Sql, Tx } from '../../db/database.js';
import type { Config } from '../../config.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import { DomainError, invalid, notFound } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { EVENT_TYPES, eventMatches, validateEventPatterns } from '../events/event-catalog.js';
import type { Auth } from '../paywalls/paywall-info.js';
import { Paywall } from '../paywalls/paywall.entity.js';
import {
  buildDeliveryPayload,
  eventPayloadColumns,
  eventRowFrom,
  type DeliveryPayload,
} from './delivery-payload.js';
import { UrlGuardError, validateWebhookUrl } from '../../shared/url-guard.js';
import { generateWebhookSecret, SECRET_ROTATION_GRACE_MS, webhookSecretContext } from './webhook-secrets.js';
import type { Clock } from '../../shared/clock.js';
import { loadSecretBox, type SecretBox } from '../../shared/crypto.js';
import { WebhookSubscription } from './webhook.entity.js';

export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 512;
export const MAX_CUSTOM_HEADERS = 10;
export const MAX_HEADER_NAME_LENGTH = 256;
export const MAX_HEADER_VALUE_LENGTH = 1024;
/** Each active subscription costs a delivery per matching event; a cap keeps one paywall from flooding the worker. */
export const MAX_ACTIVE_SUBSCRIPTIONS = 100;
export const LOGS_DEFAULT_LIMIT = 20;
export const LOGS_MAX_LIMIT = 100;
/** docs/reference.md §4 "Log entries": the response body is shown up to 4 KiB. */
export const RESPONSE_BODY_MAX_BYTES = 4096;

export const SUBSCRIPTION_STATUSES = ['active', 'inactive'] as const;
export const DELIVERY_STATUSES = ['pending', 'success', 'error'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** Channel the delivery workers LISTEN on (the `event_fanout` trigger uses it too). */
const WAKE_CHANNEL = 'webhook_deliveries';

/**
 * Header names a subscription may not set: the ones that frame the HTTP message (a wrong value breaks the
 * request or smuggles another one), the ones that describe the signed body, and our own identity. Every
 * `X-Service-*` name is ours as well (checked by prefix): a receiver must be able to trust those, and so are
 * the three Standard Webhooks headers (docs/reference.md §17).
 * `Authorization` is allowed on purpose: receivers commonly gate their endpoint with a static token.
 */
const RESERVED_HEADERS = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'host',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'user-agent',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);
const RESERVED_HEADER_PREFIXES = ['x-service-', 'proxy-'];
/** RFC 9110 `token`. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII, space and tab: what every HTTP stack sends unchanged (no CR/LF, no control bytes). */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
/** A pre-shared secret: visible ASCII without whitespace, so it survives copy-paste and env files intact. */
const PRESHARED_SECRET = /^[\x21-\x7e]{16,256}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A subscription as the API shows it. `secret` is set only right after creation or rotation. */
export interface SubscriptionView {
  id: string;
  paywallId: string;
  url: string;
  events: string[];
  isActive: boolean;
  description: string | null;
  customHeaders: Record<string, string>;
  createdAt: Date;
  updatedAt: Date;
  secret: string | null;
  secretSuffix: string;
  createdBy: string;
  consecutiveFailures: number;
  lastDeliveredAt: Date | null;
}

export interface CreateSubscriptionInput {
  paywallId?: string | null;
  url: unknown;
  events: unknown;
  description?: unknown;
  customHeaders?: unknown;
  secret?: unknown;
}

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

const view = (s: WebhookSubscription, secret: string | null = null): SubscriptionView => ({
  id: s.id,
  paywallId: s.paywall as unknown as string,
  url: s.url,
  events: [...s.events],
  isActive: s.isActive,
  description: s.description ?? null,
  customHeaders: { ...(s.customHeaders ?? {}) },
  createdAt: s.createdAt,
  updatedAt: s.updatedAt,
  secret,
  secretSuffix: s.secretSuffix,
  createdBy: s.createdBy,
  consecutiveFailures: s.consecutiveFailures,
  lastDeliveredAt: s.lastDeliveredAt ?? null,
});

/** What webhook subscriptions need: paywalls to authorize the caller. */
export interface SubscriptionServiceDeps {
  db: Database;
  /**
   * The lag-tolerant reads (delivery logs): the replica in a GraphQL query. Subscriptions themselves are
   * read on the primary: the dashboard reads them back right after changing them.
   */
  reads: Sql;
  config: Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS' | 'ENCRYPTION_KEY' | 'DATA_DIR'>;
  paywalls: Pick<PaywallService, 'resolve'>;
  /** When a rotation's grace period starts (default: the system clock). */
  clock?: Clock;
}

/**
 * Webhook subscriptions and their delivery logs: the management side of webhooks. Deliveries themselves are
 * written by the `event_fanout` trigger (one outbox row per matching active subscription, in the transaction
 * of the event) and sent by the delivery worker; this service reads them, and resets them for a manual
 * resend.
 *
 * Scope: an API key sees only its paywall; an owner sees the paywalls it owns. Anything else is "not found",
 * never "forbidden", so ids of other paywalls reveal nothing.
 */
export class SubscriptionService {
  private secretBox?: SecretBox;

  constructor(private readonly deps: SubscriptionServiceDeps) {}

  /** Signing secrets are stored encrypted, like provider keys (ENCRYPTION_KEY; shared/crypto.ts). */
  private box(): SecretBox {
    this.secretBox ??= loadSecretBox(this.deps.config).box;
    return this.secretBox;
  }

  /** Validates everything first (nothing is written on a 400), then stores; the secret is returned once. */
  async create(auth: Auth, input: CreateSubscriptionInput): Promise<SubscriptionView> {
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId);
    const url = await this.checkUrl(input.url);
    const events = checkEvents(input.events);
    const description = checkDescription(input.description);
    const customHeaders = checkCustomHeaders(input.customHeaders);
    const secret = input.secret == null ? generateWebhookSecret() : checkSecret(input.secret);
    const createdBy = auth.kind === 'apiKey' ? `api_key:${auth.paywall.id}` : `owner:${auth.ownerId}`;

    const created = await this.deps.db.transaction(async (tx) => {
      // Lock the paywall row so two concurrent creations cannot both pass the cap.
      await tx.query(`select 1 from paywall where id = $1 for update`, [paywall.id]);
      const [{ n }] = await tx.query<{ n: number }>(
        `select count(*)::int as n from webhook_subscription where paywall_id = $1 and is_active`,
        [paywall.id],
      );
      if (n >= MAX_ACTIVE_SUBSCRIPTIONS)
        throw invalid(
          `a paywall may have at most ${MAX_ACTIVE_SUBSCRIPTIONS} active subscriptions; deactivate one first`,
          null,
          'too_many_subscriptions',
        );
      const now = new Date();
      const id = newId();
      return tx.em.create(WebhookSubscription, {
        id,
        paywall: paywall.id,
        url,
        events,
        description,
        customHeaders,
        secretCiphertext: this.box().encrypt(secret, webhookSecretContext(id)),
        secretSuffix: secret.slice(-4),
        isActive: true,
        createdBy,
        consecutiveFailures: 0,
        lastDeliveredAt: null,
        createdAt: now,
        updatedAt: now,
      } as any);
    });
    return view(created, secret);
  }

  /** The paywall's subscriptions, newest first; `status` is `active`, `inactive`, or absent for both. */
  async list(
    auth: Auth,
    paywallId: string | null | undefined,
    status?: string | null,
  ): Promise<SubscriptionView[]> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    if (status != null && !(SUBSCRIPTION_STATUSES as readonly string[]).includes(status))
      throw invalid('status must be "active" or "inactive"', 'status');
    const where: Record<string, unknown> = { paywall: paywall.id };
    if (status != null) where.isActive = status === 'active';
    const rows = await this.deps.db.withEm((em) =>
      em.find(WebhookSubscription, where, { orderBy: { createdAt: 'desc', id: 'desc' } }),
    );
    return rows.map((r) => view(r));
  }

  async get(auth: Auth, id: string): Promise<SubscriptionView> {
    const sub = await this.deps.db.withEm((em) => this.find(em, auth, id));
    return view(sub);
  }

  /** Soft deactivation: the record stays readable and no new deliveries are written for it. Idempotent. */
  async deactivate(auth: Auth, id: string): Promise<SubscriptionView> {
    return this.change(auth, id, (sub) => {
      if (!sub.isActive) return false;
      sub.isActive = false;
      return true;
    });
  }

  /** Re-enables a subscription and clears its failure streak, so it starts again from a clean slate. */
  async reactivate(auth: Auth, id: string): Promise<SubscriptionView> {
    return this.change(auth, id, (sub) => {
      if (sub.isActive && sub.consecutiveFailures === 0) return false;
      sub.isActive = true;
      sub.consecutiveFailures = 0;
      return true;
    });
  }

  /**
   * Replaces the signing secret (the given pre-shared one, or a generated one) and returns it once. Deliveries
   * sent from now on, retries of older events included, are signed with the new secret, and for
   * {@link SECRET_ROTATION_GRACE_MS} with the replaced one too (as Stripe does), so a receiver can switch at
   * any time in that window. A second rotation within it drops the first's old secret at once (only the
   * secret it replaces stays in grace): the way to retire a leaked secret without waiting.
   */
  async rotateSecret(auth: Auth, id: string, secret?: unknown): Promise<SubscriptionView> {
    const next = secret == null ? generateWebhookSecret() : checkSecret(secret);
    const graceEnds = new Date((this.deps.clock?.now() ?? new Date()).getTime() + SECRET_ROTATION_GRACE_MS);
    const sub = await this.change(auth, id, (s) => {
      // Same subscription, same encryption context: the replaced ciphertext is kept as it is.
      s.previousSecretCiphertext = s.secretCiphertext;
      s.previousSecretExpiresAt = graceEnds;
      s.secretCiphertext = this.box().encrypt(next, webhookSecretContext(s.id));
      s.secretSuffix = next.slice(-4);
      return true;
    });
    return { ...sub, secret: next, secretSuffix: next.slice(-4) };
  }

  /**
   * Delivery logs of the paywall, newest first, with cursor pagination. Filters: one of the paywall's
   * subscriptions (another paywall's or an unknown id is not found), a status, an exact event name.
   */
  async listDeliveries(
    auth: Auth,
    paywallId: string | null | undefined,
    q: DeliveryQuery,
  ): Promise<DeliveryPage> {
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
      const [owned] = UUID.test(q.subscriptionId)
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
    const event = UUID.test(eventId)
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
      const sub = UUID.test(subscriptionId)
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

  // -------------------------------------------------------------------------------------------------------

  private async checkUrl(url: unknown): Promise<string> {
    if (typeof url !== 'string' || url.trim() === '') throw invalid('url is required', 'url');
    if (url.length > MAX_URL_LENGTH) throw invalid(`url must be at most ${MAX_URL_LENGTH} characters`, 'url');
    try {
      // Store the parsed form: what the guard checked is exactly what the worker will connect to.
      const parsed = await validateWebhookUrl(url.trim(), {
        allowPrivate: this.deps.config.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
      });
      return parsed.href;
    } catch (e) {
      if (e instanceof UrlGuardError)
        throw invalid(`${e.message}.${this.privateHint(e, url)}`, 'url', 'invalid_webhook_url');
      throw e;
    }
  }

  /**
   * What lifts a refusal that WEBHOOK_ALLOW_PRIVATE_NETWORKS would lift (an http: URL, a local or private
   * target): a developer's local receiver is the usual case. Never for a host that did not resolve: that
   * is a DNS failure, not a private network.
   */
  private privateHint(e: UrlGuardError, url: string): string {
    const lifted =
      e.reason === 'forbidden_address' ||
      e.reason === 'forbidden_host' ||
      (e.reason === 'unsupported_scheme' && /^http:/i.test(url.trim()));
    return lifted
      ? ' For a receiver on this machine or a private network (e.g. http://localhost:3000/hooks in development), start the service with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true.'
      : '';
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

  private async find(em: Tx['em'], auth: Auth, id: string): Promise<WebhookSubscription> {
    const sub = UUID.test(id) ? await em.findOne(WebhookSubscription, { id }) : null;
    if (!sub || !(await this.mayActIn(em, auth, sub.paywall as unknown as string)))
      throw notFound('subscription');
    return sub;
  }

  /** {@link mayAct} inside a unit of work (PGlite: never a second query outside the open transaction). */
  private async mayActIn(em: Tx['em'], auth: Auth, paywallId: string): Promise<boolean> {
    if (auth.kind === 'apiKey') return auth.paywall.id === paywallId;
    return (await em.count(Paywall, { id: paywallId, owner: auth.ownerId })) > 0;
  }

  /** Loads the caller's subscription in a transaction, applies `fn`, and saves when it changed something. */
  private async change(
    auth: Auth,
    id: string,
    fn: (sub: WebhookSubscription) => boolean,
  ): Promise<SubscriptionView> {
    const sub = await this.deps.db.transaction(async (tx) => {
      const found = await this.find(tx.em, auth, id);
      if (fn(found)) found.updatedAt = new Date();
      return found;
    });
    return view(sub);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Input rules (the spec's "Webhook endpoints" and "Limits"; each failure names its field)
// ---------------------------------------------------------------------------------------------------------

function checkEvents(events: unknown): string[] {
  const problem = validateEventPatterns(events);
  if (problem) throw invalid(problem, 'events');
  return [...new Set(events as string[])];
}

/** Optional; trimmed, then cut to 512 characters (code points, so no emoji is split in half). */
function checkDescription(description: unknown): string | null {
  if (description == null) return null;
  if (typeof description !== 'string') throw invalid('description must be a string', 'description');
  if (description.includes('\u0000'))
    throw invalid('description must not contain NUL characters', 'description');
  const trimmed = Array.from(description.trim()).slice(0, MAX_DESCRIPTION_LENGTH).join('').trim();
  return trimmed === '' ? null : trimmed;
}

function checkCustomHeaders(headers: unknown): Record<string, string> {
  if (headers == null) return {};
  if (typeof headers !== 'object' || Array.isArray(headers))
    throw invalid('customHeaders must be an object of header names to string values', 'customHeaders');
  const entries = Object.entries(headers as Record<string, unknown>);
  if (entries.length > MAX_CUSTOM_HEADERS)
    throw invalid(`customHeaders may hold at most ${MAX_CUSTOM_HEADERS} entries`, 'customHeaders');
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name) || name.length > MAX_HEADER_NAME_LENGTH)
      throw invalid(`customHeaders: "${name}" is not a valid HTTP header name`, 'customHeaders');
    if (RESERVED_HEADERS.has(lower) || RESERVED_HEADER_PREFIXES.some((p) => lower.startsWith(p)))
      throw invalid(`customHeaders: ${name} is set by the service and cannot be overridden`, 'customHeaders');
    if (seen.has(lower)) throw invalid(`customHeaders: ${name} is given twice`, 'customHeaders');
    seen.add(lower);
    if (typeof value !== 'string')
      throw invalid(`customHeaders: the value of ${name} must be a string`, 'customHeaders');
    if (value.length > MAX_HEADER_VALUE_LENGTH || !HEADER_VALUE.test(value))
      throw invalid(
        `customHeaders: the value of ${name} must be at most ${MAX_HEADER_VALUE_LENGTH} printable ASCII characters (no line breaks)`,
        'customHeaders',
      );
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

function checkSecret(secret: unknown): string {
  if (typeof secret !== 'string' || !PRESHARED_SECRET.test(secret))
    throw invalid('secret must be 16 to 256 printable characters without whitespace', 'secret');
  return secret;
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
      UUID.test(id)
    )
      return { us, seq, id };
  } catch {
    /* fall through */
  }
  throw invalid('after is not a cursor returned by this API', 'after');
}
