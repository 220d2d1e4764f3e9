import type { Database, Sql } from '../../../db/database.js';
import type { Clock } from '../../../shared/clock.js';
import { invalid } from '../../../shared/errors.js';
import type { Logger } from '../../../shared/logger.js';
import { recordEvents } from '../../events/event.service.js';
import { buildEvent } from '../../events/event-payloads.js';
import type { Auth, PaywallInfo } from '../../paywalls/paywall-info.js';
import { triggerOf } from '../../users/user.service.js';
import { parseTopupAmounts } from './stripe-amounts.js';
import type { StripeGateway } from './stripe-gateway.js';
import {
  INTEGRATION_COLUMNS,
  integrationInfo,
  notConnected,
  readIntegration,
  requireDefault,
  stripeFailed,
  type IntegrationRow,
  type StripeInfo,
  type StripeSecrets,
} from './stripe-integration.store.js';

const INTEGRATION_KEY = 'stripe';
const MAX_SECRET_KEY_LENGTH = 4096;
/** After a rotation the replaced endpoint (and its secret) stays valid this long: Stripe retries for days. */
export const OLD_WEBHOOK_SECRET_GRACE_MS = 24 * 60 * 60 * 1000;
/** Stripe's Checkout Sessions expire by themselves 24 hours after creation: older ones need no expiring. */
const SESSION_LIFETIME_HOURS = 24;

export interface ConnectStripeInput {
  paywallId?: string | null;
  secretKey: string;
  topupAmounts?: string[] | null;
}

/** The one thing the integration needs of paywalls: which one the caller may manage. */
export interface PaywallResolver {
  resolve(auth: Auth, paywallId?: string | null, opts?: { allowArchived?: boolean }): Promise<PaywallInfo>;
}

export interface StripeIntegrationDeps {
  db: Database;
  config: { PUBLIC_BASE_URL: string };
  gateway: StripeGateway;
  secrets: StripeSecrets;
  paywalls: PaywallResolver;
  clock: Clock;
  log: Logger;
}

function checkSecretKey(input: unknown): string {
  const key = typeof input === 'string' ? input.trim() : '';
  if (!key || key.length > MAX_SECRET_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key))
    // Never echoes the value: it is a secret.
    throw invalid(
      'secretKey must be a Stripe secret key (sk_… or rk_…) of printable ASCII characters without spaces',
      'secretKey',
      'invalid_stripe_key',
    );
  return key;
}

const suffixOf = (secret: string) => secret.slice(-4);

/**
 * A DEFAULT paywall's Stripe account (docs/stripe.md "Connect, rotate, disconnect"): connect (one
 * Stripe events endpoint for the three Checkout events), rotate that endpoint, disconnect, and the
 * cleanup of endpoints a rotation replaced. The secret key and the endpoint's signing secret are
 * kept encrypted ({@link StripeSecrets}) and never returned or logged.
 */
export class StripeIntegrationService {
  private timer?: NodeJS.Timeout;

  constructor(private readonly d: StripeIntegrationDeps) {}

  /** Hourly: deletes the endpoints that rotations replaced once their grace period ended (unref'd). */
  async start(): Promise<void> {
    this.timer = setInterval(() => {
      this.retireReplacedEndpoints().catch((err) =>
        this.d.log.warn({ err }, 'retiring replaced Stripe webhook endpoints failed'),
      );
    }, 3_600_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
  }

  private endpointUrl(paywallId: string): string {
    return `${this.d.config.PUBLIC_BASE_URL}/v1/stripe/webhooks/${paywallId}`;
  }

  /**
   * Connects (or replaces) the paywall's Stripe account: creates ONE Stripe events endpoint for the
   * three Checkout events (a replaced integration's endpoint is deleted), stores key and endpoint secret
   * encrypted; records `paywall.integration.connected` and `paywall.integration.stripe.webhook.rotated`.
   */
  async connect(auth: Auth, input: ConnectStripeInput): Promise<PaywallInfo> {
    const { db, secrets } = this.d;
    const paywall = await this.d.paywalls.resolve(auth, input.paywallId);
    requireDefault(paywall);
    const secretKey = checkSecretKey(input.secretKey);
    const amounts = parseTopupAmounts(input.topupAmounts);
    const previous = await readIntegration(db, paywall.id);
    const url = this.endpointUrl(paywall.id);
    const endpoint = await this.createEndpoint(secretKey, url, paywall.id);
    const trigger = triggerOf(auth, 'graphql');
    await db.transaction(async (tx) => {
      await tx.query(
        `insert into stripe_integration (paywall_id, secret_key_ciphertext, webhook_endpoint_id,
                                         webhook_secret_ciphertext, topup_amounts_cents, created_at, updated_at)
         values ($1, $2, $3, $4, $5::jsonb, now(), now())
         on conflict (paywall_id) do update
           set secret_key_ciphertext = excluded.secret_key_ciphertext,
               webhook_endpoint_id = excluded.webhook_endpoint_id,
               webhook_secret_ciphertext = excluded.webhook_secret_ciphertext,
               topup_amounts_cents = excluded.topup_amounts_cents, previous_webhook_endpoint_id = null,
               previous_webhook_secret_ciphertext = null, previous_secret_expires_at = null, updated_at = now()`,
        [
          paywall.id,
          secrets.encrypt(paywall.id, secretKey),
          endpoint.id,
          secrets.encrypt(paywall.id, endpoint.secret),
          JSON.stringify(amounts),
        ],
      );
      const ctx = { paywall, trigger, subject: { type: 'paywall' as const, id: paywall.id } };
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.connected',
          { ...ctx, metadata: { replaced: !!previous } },
          { integrationKey: INTEGRATION_KEY, enabledBy: trigger.actorId },
        ),
        buildEvent('paywall.integration.stripe.webhook.rotated', ctx, {
          webhookId: endpoint.id,
          url,
          secretSuffix: suffixOf(endpoint.secret),
        }),
      ]);
    });
    // A new key may be another account: the replaced endpoints go at once.
    if (previous) await this.deleteEndpointsQuietly(paywall.id, previous, true);
    this.d.log.info({ paywallId: paywall.id, webhookId: endpoint.id }, 'stripe connected');
    return paywall;
  }

  /** Creates the paywall's Stripe events endpoint; a Stripe failure becomes a clear error. */
  private async createEndpoint(secretKey: string, url: string, paywallId: string) {
    try {
      return await this.d.gateway.createWebhookEndpoint(secretKey, url);
    } catch (e) {
      throw stripeFailed(this.d.log, e, paywallId, 'creating the webhook endpoint');
    }
  }

  /**
   * Replaces the Stripe events endpoint: a new endpoint and secret become current; the replaced one is
   * kept (at Stripe, and its secret still verifies) for {@link OLD_WEBHOOK_SECRET_GRACE_MS}, so Stripe's
   * retries of events it already sent there still land; then it is deleted. An endpoint replaced by an
   * earlier rotation still in its grace period is deleted now.
   */
  async rotateWebhook(auth: Auth, paywallId?: string | null): Promise<PaywallInfo> {
    const { db, secrets } = this.d;
    const paywall = await this.d.paywalls.resolve(auth, paywallId);
    const current = await readIntegration(db, paywall.id);
    if (!current) throw notConnected();
    const secretKey = secrets.decrypt(paywall.id, current.secret_key_ciphertext);
    const url = this.endpointUrl(paywall.id);
    const endpoint = await this.createEndpoint(secretKey, url, paywall.id);
    const trigger = triggerOf(auth, 'graphql');
    const graceEnds = new Date(this.d.clock.now().getTime() + OLD_WEBHOOK_SECRET_GRACE_MS);
    const replaced = await db.transaction(async (tx) => {
      const [before] = await tx.query<IntegrationRow>(
        `select ${INTEGRATION_COLUMNS} from stripe_integration where paywall_id = $1 for update`,
        [paywall.id],
      );
      if (!before) return null;
      // On the right of SET the columns are the row before the update: current becomes previous.
      await tx.query(
        `update stripe_integration
            set previous_webhook_endpoint_id = webhook_endpoint_id,
                previous_webhook_secret_ciphertext = webhook_secret_ciphertext,
                previous_secret_expires_at = $4::timestamptz,
                webhook_endpoint_id = $2, webhook_secret_ciphertext = $3, updated_at = now()
          where paywall_id = $1`,
        [paywall.id, endpoint.id, secrets.encrypt(paywall.id, endpoint.secret), graceEnds],
      );
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.stripe.webhook.rotated',
          { paywall, trigger, subject: { type: 'paywall', id: paywall.id } },
          { webhookId: endpoint.id, url, secretSuffix: suffixOf(endpoint.secret) },
        ),
      ]);
      return before;
    });
    if (!replaced) {
      // Disconnected meanwhile: the endpoint just made has no owner.
      await this.deleteEndpointQuietly(paywall.id, current.secret_key_ciphertext, endpoint.id);
      throw notConnected();
    }
    if (replaced.previous_webhook_endpoint_id)
      await this.deleteEndpointQuietly(
        paywall.id,
        replaced.secret_key_ciphertext,
        replaced.previous_webhook_endpoint_id,
      );
    this.d.log.info(
      {
        paywallId: paywall.id,
        webhookId: endpoint.id,
        replacedWebhookId: replaced.webhook_endpoint_id,
        replacedValidUntil: graceEnds.toISOString(),
      },
      'stripe webhook endpoint rotated; the replaced endpoint verifies until its grace period ends',
    );
    return paywall;
  }

  /**
   * Deletes the Stripe events endpoint (and one a rotation replaced), forgets the key, and expires the
   * open Checkout Sessions this paywall created, so nobody pays into an integration that is gone.
   * Idempotent (nothing connected: no event).
   */
  async disconnect(auth: Auth, paywallId?: string | null): Promise<PaywallInfo> {
    const paywall = await this.d.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const trigger = triggerOf(auth, 'graphql');
    const removed = await this.d.db.transaction(async (tx) => {
      const rows = await tx.query<IntegrationRow>(
        `delete from stripe_integration where paywall_id = $1 returning ${INTEGRATION_COLUMNS}`,
        [paywall.id],
      );
      if (rows.length === 0) return null;
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.disconnected',
          { paywall, trigger, subject: { type: 'paywall', id: paywall.id } },
          { integrationKey: INTEGRATION_KEY, disabledBy: trigger.actorId },
        ),
      ]);
      return rows[0];
    });
    if (removed) {
      await this.deleteEndpointsQuietly(paywall.id, removed, true);
      const expired = await this.expireOpenSessions(paywall.id, removed.secret_key_ciphertext);
      this.d.log.info({ paywallId: paywall.id, expiredSessions: expired }, 'stripe disconnected');
    }
    return paywall;
  }

  /**
   * Expires, at Stripe, the sessions of this paywall still `open` here and young enough to be open at
   * Stripe; each one Stripe expired is marked `expired`. Best effort (a session paid meanwhile is not
   * open any more and stays as it is). Returns how many were expired.
   */
  private async expireOpenSessions(paywallId: string, keyCiphertext: string): Promise<number> {
    const { db, log } = this.d;
    const open = await db.query<{ session_id: string }>(
      `select session_id from stripe_checkout
        where paywall_id = $1 and status = 'open' and created_at > now() - make_interval(hours => $2)
        order by created_at`,
      [paywallId, SESSION_LIFETIME_HOURS],
    );
    if (open.length === 0) return 0;
    let key: string;
    try {
      key = this.d.secrets.box().decrypt(keyCiphertext, paywallId);
    } catch {
      log.warn({ paywallId, open: open.length }, 'cannot expire open Stripe sessions: key undecryptable');
      return 0;
    }
    let expired = 0;
    const queue = open.map((r) => r.session_id);
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        try {
          if (!(await this.d.gateway.expireCheckoutSession(key, id))) continue;
          await db.query(
            `update stripe_checkout set status = 'expired', updated_at = now() where session_id = $1 and status = 'open'`,
            [id],
          );
          expired += 1;
        } catch (e) {
          log.warn(
            { paywallId, sessionId: id, status: (e as any)?.statusCode },
            'could not expire an open Stripe Checkout Session; it expires by itself within 24 hours',
          );
        }
      }
    };
    // A few at a time: the calls count against the account's Stripe rate limit.
    await Promise.all(Array.from({ length: Math.min(4, queue.length) }, worker));
    return expired;
  }

  /** Best effort: deletes the current endpoint of `row` and, with `previousToo`, the one a rotation replaced. */
  private async deleteEndpointsQuietly(paywallId: string, row: IntegrationRow, previousToo: boolean) {
    await this.deleteEndpointQuietly(paywallId, row.secret_key_ciphertext, row.webhook_endpoint_id);
    if (previousToo && row.previous_webhook_endpoint_id)
      await this.deleteEndpointQuietly(
        paywallId,
        row.secret_key_ciphertext,
        row.previous_webhook_endpoint_id,
      );
  }

  /** Best effort: the integration row no longer names this endpoint, so it only costs noise at Stripe. */
  private async deleteEndpointQuietly(paywallId: string, keyCiphertext: string, webhookId: string) {
    try {
      const key = this.d.secrets.box().decrypt(keyCiphertext, paywallId);
      await this.d.gateway.deleteWebhookEndpoint(key, webhookId);
    } catch (e) {
      this.d.log.warn(
        { paywallId, webhookId, status: (e as any)?.statusCode },
        'could not delete an old Stripe webhook endpoint; delete it in the Stripe dashboard',
      );
    }
  }

  /**
   * Forgets, and deletes at Stripe, the endpoints replaced by rotations whose grace period has ended
   * (all paywalls, or one). Runs hourly and whenever such an endpoint's secret is refused.
   */
  async retireReplacedEndpoints(paywallId?: string): Promise<number> {
    const rows = await this.d.db.query<{
      paywall_id: string;
      secret_key_ciphertext: string;
      endpoint_id: string;
    }>(
      `update stripe_integration i
          set previous_webhook_endpoint_id = null, previous_webhook_secret_ciphertext = null,
              previous_secret_expires_at = null
         from (select paywall_id, previous_webhook_endpoint_id as endpoint_id from stripe_integration
                where previous_secret_expires_at <= $1::timestamptz and ($2::uuid is null or paywall_id = $2::uuid)
                for update) old
        where i.paywall_id = old.paywall_id
        returning i.paywall_id, i.secret_key_ciphertext, old.endpoint_id`,
      [this.d.clock.now(), paywallId ?? null],
    );
    for (const r of rows)
      if (r.endpoint_id)
        await this.deleteEndpointQuietly(r.paywall_id, r.secret_key_ciphertext, r.endpoint_id);
    return rows.length;
  }

  /** The Stripe integrations of several paywalls (in the order asked), for a DataLoader. */
  infoMany(paywallIds: readonly string[], sql: Sql = this.d.db): Promise<StripeInfo[]> {
    return integrationInfo(sql, paywallIds);
  }
}
