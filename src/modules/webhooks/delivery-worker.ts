import { Counter, Histogram, type Registry } from 'prom-client';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import { buildDeliveryPayload, eventPayloadColumns, eventRowFrom } from './delivery-payload.js';
import { serviceSignatureHeaders, standardWebhookHeaders } from './signing.js';
import { webhookSecretContext } from './webhook-secrets.js';
import type { SecretBox } from '../../shared/crypto.js';
import type { Clock } from '../../shared/clock.js';
import { USER_AGENT, WebhookSender, type SendResult } from './webhook-sender.js';

/** Consumer answers that end a delivery at once (spec "Delivery"): retrying cannot change them. */
export const TERMINAL_STATUSES: ReadonlySet<number> = new Set([400, 401, 403, 404, 410, 422]);

/** A 429's Retry-After is honoured, but never beyond this (a receiver cannot park a delivery for days). */
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

/** The longest backoff ever scheduled (base × 2^k grows fast with a large WEBHOOK_MAX_ATTEMPTS). */
const MAX_BACKOFF_MS = 24 * 60 * 60 * 1000;

const JITTER = 0.2;

export interface DeliveryWorkerOptions {
  db: Database;
  log: Logger;
  /** WEBHOOK_MAX_ATTEMPTS: every attempt counts, the first included. */
  maxAttempts: number;
  /** WEBHOOK_BACKOFF_BASE_MS: the wait before the 2nd attempt; doubles for each later one. */
  backoffBaseMs: number;
  /** WEBHOOK_TIMEOUT_MS: one attempt, connect to last byte read. */
  timeoutMs: number;
  /** WEBHOOK_POLL_MS: how often due retries and expired leases are looked for without a NOTIFY. */
  pollMs: number;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS */
  allowPrivate: boolean;
  /** Decrypts the subscriptions' signing secrets (stored encrypted; shared/crypto.ts). */
  secretBox: SecretBox;
  /** POSTs in flight at once in this worker (default 16). */
  concurrency?: number;
  /**
   * POSTs in flight at once for one owner's paywalls while other owners have deliveries due (default a
   * quarter of `concurrency`, at least 1): a developer whose receivers hang until the timeout (on any number
   * of paywalls) cannot take every slot and hold up every other developer's deliveries. When nobody else
   * has anything due, an owner may use all slots but one share.
   */
  perOwnerConcurrency?: number;
  /** Registry for the worker's metrics (the app's /metrics), if any. */
  metrics?: Registry;
  /** Transport override (tests of the connect-time guard). */
  sender?: WebhookSender;
  /** Randomness for the jitter (tests). */
  random?: () => number;
  /** Whether a rotation's grace period is still on (default: the system clock). */
  clock?: Clock;
}

/** The wait before retry number `attemptsMade` (1 after the first attempt): base × 2^(k-1), ±20 % jitter. */
export function backoffDelay(
  attemptsMade: number,
  baseMs: number,
  random: () => number = Math.random,
): number {
  const exp = Math.min(baseMs * 2 ** Math.max(0, attemptsMade - 1), MAX_BACKOFF_MS);
  return Math.round(exp * (1 - JITTER + 2 * JITTER * random()));
}

/**
 * A 429's `Retry-After` (delta-seconds or an HTTP date) in ms, bounded to [base, 1 hour]; null when the
 * header is absent or unreadable (then the normal backoff applies).
 */
export function retryAfterDelay(header: string | null, baseMs: number, now = Date.now()): number | null {
  if (!header) return null;
  const text = header.trim();
  let ms: number;
  if (/^\d+$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = Date.parse(text);
    if (!Number.isFinite(at)) return null;
    ms = at - now;
  }
  return Math.min(Math.max(ms, baseMs), MAX_RETRY_AFTER_MS);
}

/** What to record after one attempt. */
export interface Outcome {
  status: 'success' | 'error' | 'pending';
  /** For `pending`: when the next attempt is due, in ms from now. */
  retryInMs: number | null;
  responseStatus: number | null;
  latencyMs: number | null;
  responseBody: string | null;
  lastError: string | null;
}

/**
 * The delivery rules (spec "Delivery", docs/reference.md §1): 2xx → success; 400/401/403/404/410/422, a refused
 * address or a malformed request → error at once; anything else (5xx, other 4xx, 3xx — redirects are not
 * followed —, timeouts, network errors) → retried with backoff until `maxAttempts` attempts were made.
 */
export function decideOutcome(
  result: SendResult,
  attempt: number,
  opts: { maxAttempts: number; backoffBaseMs: number; random?: () => number },
): Outcome {
  const retryOrFail = (lastError: string, retryInMs: number | null, response?: SendResult): Outcome => {
    const r = response?.kind === 'response' ? response : null;
    const base = {
      responseStatus: r?.status ?? null,
      latencyMs: result.latencyMs,
      responseBody: r?.body ?? null,
    };
    if (attempt >= opts.maxAttempts) {
      return {
        status: 'error',
        retryInMs: null,
        lastError: `${lastError}; gave up after ${attempt} attempts`,
        ...base,
      };
    }
    return {
      status: 'pending',
      retryInMs: retryInMs ?? backoffDelay(attempt, opts.backoffBaseMs, opts.random),
      lastError,
      ...base,
    };
  };

  if (result.kind === 'failure') {
    if (result.reason === 'refused' || result.reason === 'invalid') {
      return {
        status: 'error',
        retryInMs: null,
        responseStatus: null,
        latencyMs: result.latencyMs,
        responseBody: null,
        lastError: `${result.error} (not retried)`,
      };
    }
    return retryOrFail(result.error, null);
  }

  const done = { responseStatus: result.status, latencyMs: result.latencyMs, responseBody: result.body };
  if (result.status >= 200 && result.status < 300) {
    return { status: 'success', retryInMs: null, lastError: null, ...done };
  }
  if (TERMINAL_STATUSES.has(result.status)) {
    return { status: 'error', retryInMs: null, lastError: `HTTP ${result.status} (not retried)`, ...done };
  }
  if (result.status === 429) {
    return retryOrFail('HTTP 429', retryAfterDelay(result.retryAfter, opts.backoffBaseMs), result);
  }
  if (result.status >= 300 && result.status < 400) {
    const to = result.location ? ` to ${result.location.slice(0, 200)}` : '';
    return retryOrFail(`HTTP ${result.status} redirect${to} (redirects are not followed)`, null, result);
  }
  return retryOrFail(`HTTP ${result.status}`, null, result);
}

interface ClaimedRow {
  id: string;
  subscription_id: string;
  paywall_id: string;
  owner_id: string | null;
  event_id: string;
  event_type: string;
  attempts: number;
  created_at: Date | string;
  updated_at: Date | string;
  url: string | null;
  secret_ciphertext: string | null;
  previous_secret_ciphertext: string | null;
  previous_secret_expires_at: Date | string | null;
  custom_headers: Record<string, string> | string | null;
  is_active: boolean | null;
  ev_id: string | null;
  [column: string]: unknown;
}

/** Whose share of the worker a delivery takes: its paywall's owner (the paywall itself if none is found). */
const ownerOf = (row: ClaimedRow): string => row.owner_id ?? row.paywall_id;

/**
 * Claims due deliveries and marks them as attempted in ONE autocommit statement, so the claim is committed
 * before any POST leaves: a worker never holds a row lock across the network. `FOR UPDATE SKIP LOCKED` lets
 * any number of workers claim side by side without waiting for or double-claiming each other's rows; the
 * lease (`lease_until`) is what keeps a claimed row away from the others after the lock is gone, and is
 * also how a crashed worker's row comes back: once its lease expires, it is due again.
 *
 * MATERIALIZED: the locking subquery must run exactly once (re-running a SKIP LOCKED scan can pick other rows).
 *
 * The claimed rows come back in the order their events were recorded (`e.seq`) and are dispatched in that
 * order: the events of one transaction share one `createdAt`, so arrival order is all a receiver has to
 * tell `…request.started` from the `…blocked` that follows it. Without the ORDER BY the join decides (a hash
 * join hands one subscription's rows back newest first).
 */
const CLAIM_SQL = `
  with due as materialized (
    select id from webhook_delivery
     where status = 'pending' and next_attempt_at <= now()
       and (lease_until is null or lease_until < now())
       and paywall_id not in (select id from paywall where owner_id = any($3::uuid[]))
     order by next_attempt_at
     limit $1
     for update skip locked
  ), claimed as (
    update webhook_delivery d
       set lease_until = now() + $2 * interval '1 millisecond', attempts = d.attempts + 1, updated_at = now()
      from due
     where d.id = due.id
    returning d.id, d.subscription_id, d.paywall_id, d.event_id, d.event_type, d.attempts, d.created_at,
              d.updated_at
  )
  select c.*, p.owner_id, s.url, s.secret_ciphertext, s.previous_secret_ciphertext, s.previous_secret_expires_at,
         s.custom_headers, s.is_active, ${eventPayloadColumns('e')}
    from claimed c
    left join paywall p on p.id = c.paywall_id
    left join webhook_subscription s on s.id = c.subscription_id
    left join event e on e.id = c.event_id
   order by e.seq`;

/**
 * Records an attempt's outcome and keeps the subscription's counters true, in one statement. The
 * `attempts = $9` condition fences out a worker whose lease expired and whose row another worker has
 * claimed since: only the holder of the latest attempt writes.
 */
const RECORD_SQL = `
  with d as (
    update webhook_delivery
       set status = $2,
           next_attempt_at = case when $3::bigint is null then null
                                  else now() + $3::bigint * interval '1 millisecond' end,
           response_status = $4, response_latency_ms = $5, response_body = $6, last_error = $7,
           lease_until = null, updated_at = now()
     where id = $1 and attempts = $9 and status = 'pending'
    returning subscription_id
  )
  update webhook_subscription s
     set consecutive_failures = case when $8 = 'success' then 0
                                     when $8 = 'failure' then s.consecutive_failures + 1
                                     else s.consecutive_failures end,
         last_delivered_at = case when $8 = 'success' then now() else s.last_delivered_at end
    from d
   where s.id = d.subscription_id
  returning s.id`;

/**
 * The webhook delivery worker: the consumer of the `webhook_delivery` outbox.
 *
 * Woken by NOTIFY `webhook_deliveries` (sent by the `event_fanout` trigger when an event created deliveries)
 * and by a poll every `pollMs` (retries falling due, leases expiring, a missed notification). It claims due
 * rows in batches, POSTs them with bounded concurrency, and records each outcome. Delivery is at least
 * once: a crash between the POST and the record means the row is sent again after its lease, with the
 * same event id, which receivers use to deduplicate.
 */
export class DeliveryWorker {
  private readonly sender: WebhookSender;
  private readonly ownsSender: boolean;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly perOwnerConcurrency: number;
  /** POSTs in flight per owner (of the delivery's paywall). */
  private readonly inFlightByOwner = new Map<string, number>();
  private readonly stopController = new AbortController();
  private running = false;
  private claiming = false;
  private claimAgain = false;
  /** A claim was cut short by the concurrency limit: more rows may be due. */
  private backlog = false;
  private unlisten?: () => void;
  private unReconnect?: () => void;
  private pollTimer?: NodeJS.Timeout;
  private wakeTimer?: NodeJS.Timeout;
  private wakeAt = Infinity;
  private readonly attemptsCounter?: Counter<'outcome'>;
  private readonly latency?: Histogram;
  /** Attempts this worker made (tests and logs). */
  sent = 0;

  constructor(private readonly opts: DeliveryWorkerOptions) {
    this.ownsSender = !opts.sender;
    this.sender =
      opts.sender ?? new WebhookSender({ allowPrivate: opts.allowPrivate, timeoutMs: opts.timeoutMs });
    this.concurrency = Math.max(1, opts.concurrency ?? 16);
    this.perOwnerConcurrency = Math.max(
      1,
      Math.min(this.concurrency, opts.perOwnerConcurrency ?? Math.floor(this.concurrency / 4)),
    );
    // Long enough that a live worker always records its outcome first (the POST is cut at timeoutMs),
    // short enough that a crashed worker's deliveries come back soon.
    this.leaseMs = 2 * opts.timeoutMs + 5000;
    if (opts.metrics) {
      this.attemptsCounter = new Counter({
        name: 'webhook_delivery_attempts_total',
        help: 'Webhook delivery attempts by outcome (success, retry, error)',
        labelNames: ['outcome'] as const,
        registers: [opts.metrics],
      });
      this.latency = new Histogram({
        name: 'webhook_delivery_duration_seconds',
        help: 'Webhook POST duration, connect to response',
        buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
        registers: [opts.metrics],
      });
    }
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unlisten = await this.opts.db.listen('webhook_deliveries', () => this.wake());
    // Wake-ups notified while the LISTEN connection was down were missed: look for work now.
    this.unReconnect = this.opts.db.onReconnect(() => this.wake());
    this.pollTimer = setInterval(() => this.wake(), this.opts.pollMs);
    this.pollTimer.unref();
    this.wake();
  }

  /**
   * Stops claiming and waits up to `graceMs` for the POSTs in flight to finish and be recorded. Whatever is
   * still running then is aborted and left to its lease: another worker (or this one, restarted) retries it.
   */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unlisten?.();
    this.unReconnect?.();
    clearInterval(this.pollTimer);
    clearTimeout(this.wakeTimer);
    if (this.inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), graceMs);
      });
      const all = Promise.allSettled([...this.inFlight]);
      if ((await Promise.race([all, timedOut])) === 'timeout') {
        this.stopController.abort();
        await all;
      }
      clearTimeout(timer);
    }
    if (this.ownsSender) await this.sender.close();
  }

  /** Deliveries in flight right now. */
  get busy(): number {
    return this.inFlight.size;
  }

  /** Run a claim round now (or right after the current one). */
  wake(): void {
    if (!this.running) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = true;
    void this.claimLoop()
      .catch((err) => this.opts.log.error({ err }, 'webhook claim failed'))
      .finally(() => {
        this.claiming = false;
      });
  }

  /** Wake at a retry's due time if that comes before the next poll (retries faster than the poll interval). */
  private wakeIn(ms: number): void {
    if (!this.running || ms >= this.opts.pollMs) return;
    const at = Date.now() + ms;
    if (at >= this.wakeAt) return;
    clearTimeout(this.wakeTimer);
    this.wakeAt = at;
    this.wakeTimer = setTimeout(
      () => {
        this.wakeAt = Infinity;
        this.wake();
      },
      Math.max(0, ms) + 5,
    );
    this.wakeTimer.unref();
  }

  private async claimLoop(): Promise<void> {
    do {
      this.claimAgain = false;
      while (this.running) {
        const room = this.concurrency - this.inFlight.size;
        if (room <= 0) {
          this.backlog = true; // a finishing delivery wakes the loop again
          break;
        }
        // Owners at their share of the slots are left out of the claim, so other owners' due rows are
        // reached. When it comes back short (nobody else has anything due), the owners at their share may
        // use the idle slots, always leaving one share free for another owner's next delivery: one busy app
        // still gets most of the worker, and a hanging one cannot take all of it.
        const full = [...this.inFlightByOwner].filter(([, n]) => n >= this.perOwnerConcurrency);
        let rows = await this.claim(
          room,
          full.map(([id]) => id),
        );
        const idle = rows.length < room;
        if (idle && full.length > 0) rows = rows.concat(await this.claim(room - rows.length, []));
        const reserve = this.concurrency - this.perOwnerConcurrency;
        let dispatched = 0;
        // A row beyond its owner's share is handed back untouched (its attempt not counted), and so are
        // that owner's later rows in this batch: a slot freed meanwhile must not send a later event first.
        const handedBack = new Set<string>();
        for (const row of rows) {
          const owner = ownerOf(row);
          const busy = this.inFlightByOwner.get(owner) ?? 0;
          if (
            !handedBack.has(owner) &&
            (busy < this.perOwnerConcurrency || (idle && this.inFlight.size < reserve))
          ) {
            this.dispatch(row);
            dispatched++;
          } else {
            handedBack.add(owner);
            await this.release(row);
          }
        }
        if (idle || dispatched === 0) {
          // A finishing delivery wakes the loop again when rows were left for later.
          if (handedBack.size > 0 || full.length > 0 || !idle) this.backlog = true;
          break;
        }
      }
    } while (this.claimAgain && this.running);
  }

  private claim(limit: number, leaveOutOwners: string[]): Promise<ClaimedRow[]> {
    return this.opts.db.query<ClaimedRow>(CLAIM_SQL, [limit, this.leaseMs, leaveOutOwners], 'webhook_claim');
  }

  /** A claimed row handed back unsent: due again at once, the attempt counted at claim time taken back. */
  private async release(row: ClaimedRow): Promise<void> {
    await this.opts.db.query(
      `update webhook_delivery set attempts = attempts - 1, lease_until = null, updated_at = now()
        where id = $1 and attempts = $2 and status = 'pending'`,
      [row.id, Number(row.attempts)],
    );
  }

  private dispatch(row: ClaimedRow): void {
    const owner = ownerOf(row);
    this.inFlightByOwner.set(owner, (this.inFlightByOwner.get(owner) ?? 0) + 1);
    const p = this.deliver(row)
      .catch((err) =>
        // The row keeps its lease and comes back when it expires; nothing is lost.
        this.opts.log.error({ err, deliveryId: row.id }, 'webhook delivery could not be recorded'),
      )
      .finally(() => {
        this.inFlight.delete(p);
        const left = (this.inFlightByOwner.get(owner) ?? 1) - 1;
        if (left > 0) this.inFlightByOwner.set(owner, left);
        else this.inFlightByOwner.delete(owner);
        if (this.backlog) {
          this.backlog = false;
          this.wake();
        }
      });
    this.inFlight.add(p);
  }

  private async deliver(row: ClaimedRow): Promise<void> {
    const attempt = Number(row.attempts);
    if (!row.url || !row.secret_ciphertext || !row.ev_id || !row.is_active) {
      // Deactivated after the event was recorded (or its event is gone): nothing is sent. The attempt that
      // was counted at claim time is taken back, as no request was made.
      const why = !row.is_active ? 'subscription is inactive' : 'event or subscription not found';
      await this.opts.db.query(
        `update webhook_delivery set status = 'error', attempts = attempts - 1, next_attempt_at = null,
                lease_until = null, last_error = $2, updated_at = now()
          where id = $1 and attempts = $3 and status = 'pending'`,
        [row.id, `${why}; not sent`, attempt],
      );
      return;
    }

    // Decrypted only for signing, never kept or logged. A secret that does not decrypt (ENCRYPTION_KEY
    // changed) throws: the delivery keeps its lease and is retried, and the error is logged.
    const secret = this.opts.secretBox.decrypt(
      row.secret_ciphertext,
      webhookSecretContext(row.subscription_id),
    );
    // A rotation's replaced secret signs too until its grace period ends (docs/webhooks.md "Rotate"), by
    // the rules' clock; the signatures' timestamp is the real time receivers compare with theirs.
    const graceNow = (this.opts.clock?.now() ?? new Date()).getTime();
    const previousSecret =
      row.previous_secret_ciphertext &&
      row.previous_secret_expires_at &&
      new Date(row.previous_secret_expires_at).getTime() > graceNow
        ? this.opts.secretBox.decrypt(
            row.previous_secret_ciphertext,
            webhookSecretContext(row.subscription_id),
          )
        : null;
    const payload = buildDeliveryPayload(row, eventRowFrom(row), attempt);
    const body = JSON.stringify(payload);
    const custom =
      typeof row.custom_headers === 'string'
        ? (JSON.parse(row.custom_headers) as Record<string, string>)
        : (row.custom_headers ?? {});
    const headers: Record<string, string> = {};
    // Custom headers first, so none of them can replace the signatures, the event id or the content type.
    for (const [name, value] of Object.entries(custom)) headers[name.toLowerCase()] = String(value);
    // Signed now, at each attempt (docs/reference.md §17): a retry has a new timestamp and signatures.
    const signedAt = new Date();
    Object.assign(headers, {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'x-service-event': `${payload.event.type}@${payload.event.version}`,
      ...serviceSignatureHeaders(secret, body, previousSecret),
      'x-service-timestamp': signedAt.toISOString(),
      'x-service-event-id': payload.event.id,
      'x-service-delivery-id': row.id,
      ...standardWebhookHeaders(secret, payload.event.id, body, signedAt, previousSecret),
    });

    const result = await this.sender.send({ url: row.url, body, headers }, this.stopController.signal);
    this.sent++;
    if (result.kind === 'failure' && result.reason === 'aborted') return; // shutting down: the lease decides
    this.latency?.observe(result.latencyMs / 1000);

    const outcome = decideOutcome(result, attempt, {
      maxAttempts: this.opts.maxAttempts,
      backoffBaseMs: this.opts.backoffBaseMs,
      random: this.opts.random,
    });
    await this.opts.db.query(
      RECORD_SQL,
      [
        row.id,
        outcome.status,
        outcome.retryInMs,
        outcome.responseStatus,
        outcome.latencyMs,
        outcome.responseBody,
        outcome.lastError,
        outcome.status === 'success' ? 'success' : 'failure',
        attempt,
      ],
      'webhook_record',
    );
    this.attemptsCounter?.inc({ outcome: outcome.status === 'pending' ? 'retry' : outcome.status });
    if (outcome.status === 'pending') this.wakeIn(outcome.retryInMs ?? 0);
    else if (outcome.status === 'error') {
      this.opts.log.warn(
        {
          deliveryId: row.id,
          subscriptionId: row.subscription_id,
          attempts: attempt,
          error: outcome.lastError,
        },
        'webhook delivery failed for good',
      );
    }
  }
}
