import type { Database, Tx } from '../../db/database.js';
import type { Config } from '../../config.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import { invalid, notFound } from '../../shared/errors.js';
import { isUuid, newId } from '../../shared/ids.js';
import type { Auth } from '../paywalls/paywall-info.js';
import { Paywall } from '../paywalls/paywall.entity.js';
import { generateWebhookSecret, SECRET_ROTATION_GRACE_MS, webhookSecretContext } from './webhook-secrets.js';
import type { Clock } from '../../shared/clock.js';
import { loadSecretBox, type SecretBox } from '../../shared/crypto.js';
import { WebhookSubscription } from './webhook.entity.js';
import {
  checkCustomHeaders,
  checkDescription,
  checkEvents,
  checkSecret,
  checkUrl,
  type CreateSubscriptionInput,
} from './subscription-input.js';

/** Each active subscription costs a delivery per matching event; a cap keeps one paywall from flooding the worker. */
export const MAX_ACTIVE_SUBSCRIPTIONS = 100;

export const SUBSCRIPTION_STATUSES = ['active', 'inactive'] as const;

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
  config: Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS' | 'ENCRYPTION_KEY' | 'DATA_DIR'>;
  paywalls: Pick<PaywallService, 'resolve'>;
  /** When a rotation's grace period starts (default: the system clock). */
  clock?: Clock;
}

/**
 * Webhook subscriptions: create, list, deactivate, reactivate, rotate the signing secret (the management
 * side of webhooks; the delivery log is delivery-log.ts).
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
    const url = await checkUrl(input.url, this.deps.config.WEBHOOK_ALLOW_PRIVATE_NETWORKS);
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

  // -------------------------------------------------------------------------------------------------------

  private async find(em: Tx['em'], auth: Auth, id: string): Promise<WebhookSubscription> {
    const sub = isUuid(id) ? await em.findOne(WebhookSubscription, { id }) : null;
    if (!sub || !(await this.mayActIn(em, auth, sub.paywall as unknown as string)))
      throw notFound('subscription');
    return sub;
  }

  /**
   * True when the caller may act on that paywall (its key, or its owner), inside a unit of work (PGlite:
   * never a second query outside the open transaction).
   */
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
