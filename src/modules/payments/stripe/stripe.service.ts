import { createHash, randomUUID } from 'node:crypto';
import type { Sql } from '../../../db/database.js';
import type { Services } from '../../../services.js';
import { loadSecretBox, type SecretBox } from '../../../shared/crypto.js';
import { DomainError, invalid, notFound } from '../../../shared/errors.js';
import { formatDecimal, parseDecimal, usdcDecimal } from '../../../shared/money.js';
import {
  eventRows,
  insertEventsSql,
  recordEvents,
  type EventTrigger,
  type NewEvent,
} from '../../events/event.service.js';
import { buildEvent } from '../../events/event-payloads.js';
import { WORLD_ACCOUNT_ID } from '../../ledger/accounts.js';
import type { Auth, PaywallInfo } from '../../paywalls/paywall-info.js';
import { checkExternalId, triggerOf, validExternalId, walletUserIdOf } from '../../users/user.service.js';
import { createStripeGateway, type StripeGateway, type VerifiedStripeEvent } from './stripe-gateway.js';
import { TopupLimiter } from './topup-limits.js';

const INTEGRATION_KEY = 'stripe';
/** 1 US cent = 10,000 raw units (10⁻⁶ USDC). */
export const RAW_PER_CENT = 10_000n;
export const DEFAULT_TOPUP_AMOUNTS = ['5', '10', '20'];
/** What the hosted wallet's top-up page offers with the platform's Stripe (USD). */
export const WALLET_TOPUP_AMOUNTS = DEFAULT_TOPUP_AMOUNTS;
const MAX_TOPUP_AMOUNTS = 10;
/** Stripe's own ceiling for one Checkout payment in USD is 999,999.99; we stay well below. */
const MAX_TOPUP_CENTS = 10_000_00n;
const MAX_SECRET_KEY_LENGTH = 4096;
/** After a rotation the replaced endpoint (and its secret) stays valid this long: Stripe retries for days. */
export const OLD_WEBHOOK_SECRET_GRACE_MS = 24 * 60 * 60 * 1000;
/** Stripe's Checkout Sessions expire by themselves 24 hours after creation: older ones need no expiring. */
const SESSION_LIFETIME_HOURS = 24;
/** The endpoint key of the platform's own webhook endpoint (wallet top-ups) in `stripe_event`. */
const WALLET_ENDPOINT = 'wallet';

export interface ConnectStripeInput {
  paywallId?: string | null;
  secretKey: string;
  topupAmounts?: string[] | null;
}

/** What the API shows of a paywall's Stripe integration: never the key or the endpoint secret. */
export interface StripeInfo {
  connected: boolean;
  webhookId: string | null;
  topupAmounts: string[];
}

interface IntegrationRow {
  secret_key_ciphertext: string;
  webhook_endpoint_id: string;
  webhook_secret_ciphertext: string;
  topup_amounts_cents: number[];
  previous_webhook_endpoint_id: string | null;
  previous_webhook_secret_ciphertext: string | null;
  previous_secret_expires_at: Date | null;
}

const INTEGRATION_COLUMNS = `secret_key_ciphertext, webhook_endpoint_id, webhook_secret_ciphertext, topup_amounts_cents,
  previous_webhook_endpoint_id, previous_webhook_secret_ciphertext, previous_secret_expires_at`;

/** USD decimal for cents: 500 → "5", 1050 → "10.5". */
export const usdOfCents = (cents: bigint | number): string => formatDecimal(BigInt(cents), 2);

/** `topupAmounts`: USD decimal strings, > 0, at most 2 fraction digits, at most 10000, distinct. */
export function parseTopupAmounts(input: unknown): number[] {
  const list = input === undefined || input === null ? DEFAULT_TOPUP_AMOUNTS : input;
  const fail = () =>
    invalid(
      `topupAmounts must be 1 to ${MAX_TOPUP_AMOUNTS} distinct USD decimal strings, each > 0 and at most 10000 with at most 2 fraction digits (e.g. ["5", "10", "20"])`,
      'topupAmounts',
      'invalid_amount',
    );
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_TOPUP_AMOUNTS) throw fail();
  const cents = list.map((a) => {
    const c = parseDecimal(a, 2);
    if (c === null || c <= 0n || c > MAX_TOPUP_CENTS) throw fail();
    return Number(c);
  });
  if (new Set(cents).size !== cents.length) throw fail();
  return cents;
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
const WALLET_TOPUP_CENTS = parseTopupAmounts(WALLET_TOPUP_AMOUNTS);

/**
 * Stripe top-ups for DEFAULT paywalls (CONTRACT §9). The paywall's own Stripe account: its secret key
 * and the webhook endpoint's signing secret are kept encrypted (shared/crypto.ts, bound to the paywall
 * id) and never returned or logged.
 *
 * Fulfilment (DESIGN "Integrations behind a small interface"): the webhook route verifies the
 * signature, then {@link handleEvent} checks that this endpoint owns the event's session, records the
 * (endpoint, event id) and credits the session in ONE transaction; an event about a session another
 * endpoint owns is logged and left unrecorded here (one Stripe account may feed several endpoints, each
 * getting every event). "Exactly once per Checkout Session" is the `stripe_checkout` row: the crediting statement
 * flips its status to `paid` under the row lock and writes the transfer only when it did, so repeated or
 * concurrent deliveries (and `completed` + `async_payment_succeeded` for the same session) credit once.
 */
export class StripeService {
  private secretBox?: SecretBox;
  private timer?: NodeJS.Timeout;
  readonly gateway: StripeGateway;
  /** Limits of the public top-up page and of Checkout Session creation (topup-limits.ts). */
  readonly limits: TopupLimiter;

  constructor(private readonly s: Services) {
    this.gateway = createStripeGateway(s.config.STRIPE_API_BASE);
    this.limits = new TopupLimiter(s.config, s.clock);
  }

  /** Hourly: deletes the endpoints that rotations replaced once their grace period ended (unref'd). */
  start(): void {
    this.timer = setInterval(() => {
      this.retireReplacedEndpoints().catch((err) =>
        this.s.log.warn({ err }, 'retiring replaced Stripe webhook endpoints failed'),
      );
    }, 3_600_000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private box(): SecretBox {
    this.secretBox ??= loadSecretBox(this.s.config).box;
    return this.secretBox;
  }

  private webhookUrl(paywallId: string): string {
    return `${this.s.config.PUBLIC_BASE_URL}/v1/stripe/webhooks/${paywallId}`;
  }

  private async row(sql: Sql, paywallId: string): Promise<IntegrationRow | undefined> {
    return (
      await sql.query<IntegrationRow>(
        `select ${INTEGRATION_COLUMNS} from stripe_integration where paywall_id = $1`,
        [paywallId],
      )
    )[0];
  }

  private decrypt(paywallId: string, ciphertext: string): string {
    try {
      return this.box().decrypt(ciphertext, paywallId);
    } catch (e) {
      this.s.log.error(
        { paywallId, reason: (e as any)?.reason },
        'Stripe secret cannot be decrypted: ENCRYPTION_KEY differs from the one it was stored with',
      );
      throw new DomainError(
        'conflict',
        'The Stripe key of this paywall cannot be decrypted on this server; connect Stripe again.',
        null,
        'stripe_not_connected',
      );
    }
  }

  private stripeFailed(e: unknown, paywallId: string, what: string): DomainError {
    // The library's message names the problem (bad key, network); it never contains the key.
    this.s.log.warn(
      { paywallId, status: (e as any)?.statusCode, type: (e as any)?.type },
      `Stripe ${what} failed`,
    );
    if ((e as any)?.statusCode === 429)
      return new DomainError(
        'rate_limited',
        `Stripe is busy right now (${what}); nothing was charged. Wait a few seconds, then try again.`,
        null,
        'stripe_rate_limited',
      );
    return new DomainError(
      'upstream_error',
      `Stripe refused or could not be reached (${what}): ${(e as any)?.message ?? 'unknown error'}`,
      null,
      'stripe_error',
    );
  }

  private requireDefault(paywall: PaywallInfo): void {
    if (paywall.mode !== 'DEFAULT')
      throw new DomainError(
        'unsupported_in_mode',
        'Stripe top-ups apply only to DEFAULT-mode paywalls; SHARED-mode users top up their hosted wallet.',
        null,
        'unsupported_in_mode',
      );
  }

  /**
   * Connects (or replaces) the paywall's Stripe account: creates ONE webhook endpoint for the three
   * Checkout events (a replaced integration's endpoint is deleted), stores key and endpoint secret
   * encrypted; records `paywall.integration.connected` and `paywall.integration.stripe.webhook.rotated`.
   */
  async connect(auth: Auth, input: ConnectStripeInput): Promise<PaywallInfo> {
    const paywall = await this.s.paywalls.resolve(auth, input.paywallId);
    this.requireDefault(paywall);
    const secretKey = checkSecretKey(input.secretKey);
    const amounts = parseTopupAmounts(input.topupAmounts);
    const previous = await this.row(this.s.db, paywall.id);
    const url = this.webhookUrl(paywall.id);
    const endpoint = await this.createEndpoint(secretKey, url, paywall.id);
    const trigger = triggerOf(auth, 'graphql');
    await this.s.db.transaction(async (tx) => {
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
          this.box().encrypt(secretKey, paywall.id),
          endpoint.id,
          this.box().encrypt(endpoint.secret, paywall.id),
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
    this.s.log.info({ paywallId: paywall.id, webhookId: endpoint.id }, 'stripe connected');
    return paywall;
  }

  /** Creates the paywall's webhook endpoint at Stripe; a Stripe failure becomes a clear error. */
  private async createEndpoint(secretKey: string, url: string, paywallId: string) {
    try {
      return await this.gateway.createWebhookEndpoint(secretKey, url);
    } catch (e) {
      throw this.stripeFailed(e, paywallId, 'creating the webhook endpoint');
    }
  }

  /**
   * Replaces the webhook endpoint: a new endpoint and secret become current; the replaced one is kept
   * (at Stripe, and its secret still verifies) for {@link OLD_WEBHOOK_SECRET_GRACE_MS}, so Stripe's
   * retries of events it already sent there still land; then it is deleted. An endpoint replaced by an
   * earlier rotation still in its grace period is deleted now.
   */
  async rotateWebhook(auth: Auth, paywallId?: string | null): Promise<PaywallInfo> {
    const paywall = await this.s.paywalls.resolve(auth, paywallId);
    const current = await this.row(this.s.db, paywall.id);
    if (!current)
      throw new DomainError(
        'conflict',
        'Stripe is not connected to this paywall',
        null,
        'stripe_not_connected',
      );
    const secretKey = this.decrypt(paywall.id, current.secret_key_ciphertext);
    const url = this.webhookUrl(paywall.id);
    const endpoint = await this.createEndpoint(secretKey, url, paywall.id);
    const trigger = triggerOf(auth, 'graphql');
    const graceEnds = new Date(this.s.clock.now().getTime() + OLD_WEBHOOK_SECRET_GRACE_MS);
    const replaced = await this.s.db.transaction(async (tx) => {
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
        [paywall.id, endpoint.id, this.box().encrypt(endpoint.secret, paywall.id), graceEnds],
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
      throw new DomainError(
        'conflict',
        'Stripe is not connected to this paywall',
        null,
        'stripe_not_connected',
      );
    }
    if (replaced.previous_webhook_endpoint_id)
      await this.deleteEndpointQuietly(
        paywall.id,
        replaced.secret_key_ciphertext,
        replaced.previous_webhook_endpoint_id,
      );
    this.s.log.info(
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
   * Deletes the webhook endpoint (and one a rotation replaced), forgets the key, and expires the open
   * Checkout Sessions this paywall created, so nobody pays into an integration that is gone. Idempotent
   * (nothing connected: no event).
   */
  async disconnect(auth: Auth, paywallId?: string | null): Promise<PaywallInfo> {
    const paywall = await this.s.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const trigger = triggerOf(auth, 'graphql');
    const removed = await this.s.db.transaction(async (tx) => {
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
      this.s.log.info({ paywallId: paywall.id, expiredSessions: expired }, 'stripe disconnected');
    }
    return paywall;
  }

  /**
   * Expires, at Stripe, the sessions of this paywall still `open` here and young enough to be open at
   * Stripe; each one Stripe expired is marked `expired`. Best effort (a session paid meanwhile is not
   * open any more and stays as it is). Returns how many were expired.
   */
  private async expireOpenSessions(paywallId: string, keyCiphertext: string): Promise<number> {
    const open = await this.s.db.query<{ session_id: string }>(
      `select session_id from stripe_checkout
        where paywall_id = $1 and status = 'open' and created_at > now() - make_interval(hours => $2)
        order by created_at`,
      [paywallId, SESSION_LIFETIME_HOURS],
    );
    if (open.length === 0) return 0;
    let key: string;
    try {
      key = this.box().decrypt(keyCiphertext, paywallId);
    } catch {
      this.s.log.warn(
        { paywallId, open: open.length },
        'cannot expire open Stripe sessions: key undecryptable',
      );
      return 0;
    }
    let expired = 0;
    const queue = open.map((r) => r.session_id);
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        try {
          if (!(await this.gateway.expireCheckoutSession(key, id))) continue;
          await this.s.db.query(
            `update stripe_checkout set status = 'expired', updated_at = now() where session_id = $1 and status = 'open'`,
            [id],
          );
          expired += 1;
        } catch (e) {
          this.s.log.warn(
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
      const key = this.box().decrypt(keyCiphertext, paywallId);
      await this.gateway.deleteWebhookEndpoint(key, webhookId);
    } catch (e) {
      this.s.log.warn(
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
    const rows = await this.s.db.query<{
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
      [this.s.clock.now(), paywallId ?? null],
    );
    for (const r of rows)
      if (r.endpoint_id)
        await this.deleteEndpointQuietly(r.paywall_id, r.secret_key_ciphertext, r.endpoint_id);
    return rows.length;
  }

  /** The Stripe integrations of several paywalls (in the order asked), for a DataLoader. */
  async infoMany(paywallIds: readonly string[], sql: Sql = this.s.db): Promise<StripeInfo[]> {
    const rows = await sql.query<{
      paywall_id: string;
      webhook_endpoint_id: string;
      topup_amounts_cents: number[];
    }>(
      `select paywall_id, webhook_endpoint_id, topup_amounts_cents from stripe_integration
        where paywall_id = any($1::uuid[])`,
      [paywallIds],
    );
    const byId = new Map(rows.map((r) => [r.paywall_id, r]));
    return paywallIds.map((id) => {
      const r = byId.get(id);
      return r
        ? {
            connected: true,
            webhookId: r.webhook_endpoint_id,
            topupAmounts: r.topup_amounts_cents.map(usdOfCents),
          }
        : { connected: false, webhookId: null, topupAmounts: [] };
    });
  }

  /** The amounts the hosted top-up page offers (USD decimal strings); null when Stripe is not connected. */
  async topupAmounts(paywallId: string, sql: Sql = this.s.db): Promise<string[] | null> {
    const [info] = await this.infoMany([paywallId], sql);
    return info.connected ? info.topupAmounts : null;
  }

  /** One view of the public top-up page (or one "Pay" click) from `clientIp`; throws 429 past the limit. */
  topupPageView(clientIp: string): void {
    this.limits.pageView(clientIp);
  }

  /**
   * The hosted page's "Pay N USD": creates a Checkout Session for one of the offered amounts and
   * returns its URL. Creates no end user and grants nothing: the session row names the user by external
   * id, and the first paid session creates the user (docs/stripe.md). Limited per top-up link and client
   * IP, and Stripe calls by token bucket ({@link TopupLimiter}); a refusal is a 429 that charged nothing.
   */
  async startCheckout(paywallId: string, user: unknown, amount: unknown, clientIp: string): Promise<string> {
    const paywall = await this.s.paywalls.byId(paywallId);
    if (!paywall || paywall.archivedAt) throw notFound('paywall');
    this.requireDefault(paywall);
    const externalId = checkExternalId(user);
    const row = await this.row(this.s.db, paywall.id);
    if (!row)
      throw new DomainError(
        'conflict',
        'This app has not set up card top-ups.',
        null,
        'stripe_not_connected',
      );
    const cents = parseDecimal(amount, 2);
    if (cents === null || !row.topup_amounts_cents.includes(Number(cents)))
      throw new DomainError(
        'invalid_amount',
        'Choose one of the amounts offered.',
        'amount',
        'invalid_amount',
      );
    this.limits.checkout(clientIp, `${paywall.id}:${externalId}`, paywall.id);
    const known = await this.s.users.findUser(paywall.id, externalId);
    const secretKey = this.decrypt(paywall.id, row.secret_key_ciphertext);
    const page = new URL(`${this.s.config.PUBLIC_BASE_URL}/topup/${paywall.id}`);
    page.searchParams.set('user', externalId);
    const back = (state: string) => {
      const u = new URL(page);
      u.searchParams.set('checkout', state);
      return u.toString();
    };
    let session;
    try {
      session = await this.gateway.createCheckoutSession(secretKey, {
        amountCents: Number(cents),
        clientReferenceId: clientReference(paywall.id, externalId),
        metadata: {
          paywallId: paywall.id,
          user: externalId,
          ...(known ? { endUserId: known.id } : {}),
        },
        successUrl: back('success'),
        cancelUrl: back('canceled'),
        productName: `${paywall.name} balance top-up for ${externalId}`.slice(0, 250),
      });
    } catch (e) {
      throw this.stripeFailed(e, paywall.id, 'creating a Checkout Session');
    }
    await this.s.db.query(
      `insert into stripe_checkout (session_id, paywall_id, end_user_id, external_id, status, amount_cents)
       values ($1, $2, $3, $4, 'open', $5) on conflict (session_id) do nothing`,
      [session.id, paywall.id, known?.id ?? null, externalId, cents.toString()],
    );
    return session.url;
  }

  /** Whether the platform's Stripe is configured: the hosted wallet then offers card top-ups. */
  walletCardsEnabled(): boolean {
    return !!(this.s.config.STRIPE_SECRET_KEY && this.s.config.STRIPE_WEBHOOK_SECRET);
  }

  /**
   * The wallet top-up page's "Pay N USD" (CONTRACT §8 "Top-up"): a Checkout Session with the PLATFORM
   * key for one of {@link WALLET_TOPUP_AMOUNTS}, naming the wallet user; returns its URL. The session
   * row is written first (status `open`) so fulfilment knows which wallet to credit.
   */
  async startWalletCheckout(walletUser: { id: string }, amount: unknown): Promise<string> {
    const secretKey = this.s.config.STRIPE_SECRET_KEY;
    if (!secretKey || !this.walletCardsEnabled())
      throw new DomainError(
        'conflict',
        'Card top-ups are not configured on this server.',
        null,
        'stripe_not_connected',
      );
    const cents = parseDecimal(amount, 2);
    if (cents === null || !WALLET_TOPUP_CENTS.includes(Number(cents)))
      throw new DomainError(
        'invalid_amount',
        'Choose one of the amounts offered.',
        'amount',
        'invalid_amount',
      );
    this.limits.stripeCall(WALLET_ENDPOINT);
    const base = this.s.config.PUBLIC_BASE_URL;
    let session;
    try {
      session = await this.gateway.createCheckoutSession(secretKey, {
        amountCents: Number(cents),
        clientReferenceId: `wallet:${walletUser.id}`,
        metadata: { kind: 'wallet', walletUserId: walletUser.id },
        successUrl: `${base}/wallet?done=card`,
        cancelUrl: `${base}/wallet?done=card_canceled`,
        productName: 'Wallet top-up',
      });
    } catch (e) {
      this.s.log.warn(
        { walletUserId: walletUser.id, status: (e as any)?.statusCode, type: (e as any)?.type },
        'Stripe creating a wallet Checkout Session failed',
      );
      if ((e as any)?.statusCode === 429)
        throw new DomainError(
          'rate_limited',
          'Stripe is busy right now; nothing was charged. Wait a few seconds, then try again.',
          null,
          'stripe_rate_limited',
        );
      throw new DomainError(
        'upstream_error',
        `Stripe refused or could not be reached (creating a Checkout Session): ${(e as any)?.message ?? 'unknown error'}`,
        null,
        'stripe_error',
      );
    }
    await this.s.db.query(
      `insert into stripe_checkout (session_id, wallet_user_id, status, amount_cents)
       values ($1, $2, 'open', $3) on conflict (session_id) do nothing`,
      [session.id, walletUser.id, cents.toString()],
    );
    return session.url;
  }

  /**
   * The webhook: verifies the signature on the raw body with the paywall's endpoint secret, or with the
   * secret of the endpoint a rotation replaced while its grace period lasts (a bad or missing one is a
   * 400 and changes nothing), then processes the event once for this endpoint.
   */
  async receiveWebhook(paywallId: string, rawBody: unknown, signature: string | undefined): Promise<void> {
    const badSignature = () =>
      new DomainError('invalid_request', 'Stripe signature verification failed', null, 'invalid_signature');
    const paywall = await this.s.paywalls.byId(paywallId);
    if (!paywall) throw notFound('paywall');
    const row = await this.row(this.s.db, paywall.id);
    if (!row) throw badSignature();
    if (!signature || !Buffer.isBuffer(rawBody)) throw badSignature();
    let event: VerifiedStripeEvent;
    try {
      event = this.gateway.verifyEvent(
        rawBody,
        signature,
        this.decrypt(paywall.id, row.webhook_secret_ciphertext),
      );
    } catch (current) {
      if (current instanceof DomainError) throw current;
      const previous = row.previous_webhook_secret_ciphertext;
      const until = row.previous_secret_expires_at;
      if (!previous || !until) throw badSignature();
      if (new Date(until).getTime() <= this.s.clock.now().getTime()) {
        await this.retireReplacedEndpoints(paywall.id).catch(() => 0);
        throw badSignature();
      }
      try {
        event = this.gateway.verifyEvent(rawBody, signature, this.decrypt(paywall.id, previous));
      } catch {
        throw badSignature();
      }
    }
    await this.handleEvent(paywall, event);
  }

  /**
   * The platform's webhook (`POST /v1/stripe/webhooks/wallet`, wallet top-ups): verified with
   * `STRIPE_WEBHOOK_SECRET` on the raw body (bad, missing or unconfigured → 400, nothing changes).
   */
  async receiveWalletWebhook(rawBody: unknown, signature: string | undefined): Promise<void> {
    const secret = this.s.config.STRIPE_WEBHOOK_SECRET;
    if (!secret || !signature || !Buffer.isBuffer(rawBody))
      throw new DomainError(
        'invalid_request',
        'Stripe signature verification failed',
        null,
        'invalid_signature',
      );
    let event: VerifiedStripeEvent;
    try {
      event = this.gateway.verifyEvent(rawBody, signature, secret);
    } catch {
      throw new DomainError(
        'invalid_request',
        'Stripe signature verification failed',
        null,
        'invalid_signature',
      );
    }
    await this.process({ key: WALLET_ENDPOINT, paywallId: null }, event, (tx, session) =>
      this.walletClaim(tx, session),
    );
  }

  /** A DEFAULT paywall's event (see {@link process}). */
  async handleEvent(paywall: PaywallInfo, event: VerifiedStripeEvent): Promise<void> {
    await this.process({ key: paywall.id, paywallId: paywall.id }, event, (tx, session) =>
      this.endUserClaim(tx, paywall, session),
    );
  }

  /**
   * Applies an event received on one endpoint (a paywall's, or the platform's `wallet`), once per
   * endpoint. Stripe sends the same event id to every endpoint of an account, so one account connected
   * to several endpoints delivers each event to each. `claim` says whether the event's session belongs to
   * this endpoint: when it does not, the event is logged as ignored (with the reason), answered 200, and
   * NOT recorded, so it never hides the event from the endpoint that owns the session. When it does, the
   * (endpoint, event id) row is written in the transaction that applies it; a repeat does nothing.
   */
  private async process(
    endpoint: { key: string; paywallId: string | null },
    event: VerifiedStripeEvent,
    claim: (tx: Sql, session: StripeSession) => Promise<Claim>,
  ): Promise<void> {
    const session = event.session;
    const ignored = (reason: string) =>
      this.s.log.info(
        { endpoint: endpoint.key, eventId: event.id, eventType: event.type, sessionId: session?.id, reason },
        `Stripe event ignored on this endpoint (not recorded as processed): ${reason}`,
      );
    if (!session) return ignored('it is not about a Checkout Session with an id');
    try {
      await this.s.db.transaction(async (tx) => {
        const mine = await claim(tx, session);
        if ('ignored' in mine) throw new NotOurs(mine.ignored);
        // A concurrent delivery of the same event to this endpoint waits here on the key, then finds it taken.
        const fresh = await tx.query(
          `insert into stripe_event (endpoint, event_id, paywall_id, type) values ($1, $2, $3, $4)
           on conflict (endpoint, event_id) do nothing returning event_id`,
          [endpoint.key, event.id, endpoint.paywallId, event.type],
        );
        if (fresh.length === 0) return;
        if (event.type === 'checkout.session.async_payment_failed') {
          await tx.query(
            `update stripe_checkout set status = 'failed', updated_at = now() where session_id = $1 and status = 'open'`,
            [session.id],
          );
          return;
        }
        const paid =
          (event.type === 'checkout.session.completed' && session.paymentStatus === 'paid') ||
          event.type === 'checkout.session.async_payment_succeeded';
        // Unpaid (async payment pending): the claim made sure the session row exists; nothing more.
        if (paid) await this.credit(tx, session, mine.target);
      });
    } catch (e) {
      if (!(e instanceof NotOurs)) throw e;
      ignored(e.message);
    }
  }

  /**
   * DEFAULT: the session belongs to this paywall when its row says so (written by startCheckout), or, for
   * a session not made here, when its metadata names this paywall and a valid end user (the row is then
   * written). The end user is created only by `target`, which runs only when a paid session is credited.
   */
  private async endUserClaim(tx: Sql, paywall: PaywallInfo, session: StripeSession): Promise<Claim> {
    const [row] = await tx.query<{
      paywall_id: string | null;
      wallet_user_id: string | null;
      end_user_id: string | null;
      external_id: string | null;
    }>(
      `select paywall_id, wallet_user_id, end_user_id, external_id from stripe_checkout where session_id = $1`,
      [session.id],
    );
    if (row && row.paywall_id !== paywall.id)
      return {
        ignored: row.wallet_user_id
          ? 'the session is a hosted-wallet top-up (the platform endpoint credits it)'
          : 'the session was started by another paywall (its own endpoint credits it)',
      };
    if (!row) {
      const amount = session.amountTotal;
      const externalId = validExternalId(session.metadata.user);
      if (session.metadata.paywallId !== paywall.id)
        return {
          ignored:
            session.metadata.kind === 'wallet'
              ? 'the session is a hosted-wallet top-up (the platform endpoint credits it)'
              : 'the session was not started here and its metadata names another paywall or none',
        };
      if (!externalId) return { ignored: 'the session names no valid end user of this paywall' };
      if (!amount || amount <= 0) return { ignored: 'the session has no positive amount' };
      // In the transaction (the embedded database has one connection: a query beside it would wait).
      const [known] = await tx.query<{ id: string }>(
        `select id from end_user where paywall_id = $1 and external_id = $2`,
        [paywall.id, externalId],
      );
      await tx.query(
        `insert into stripe_checkout (session_id, paywall_id, end_user_id, external_id, status, amount_cents)
         values ($1, $2, $3, $4, 'open', $5) on conflict (session_id) do nothing`,
        [session.id, paywall.id, known?.id ?? null, externalId, String(amount)],
      );
    }
    const externalId = row ? row.external_id : validExternalId(session.metadata.user);
    const knownUserId = row?.end_user_id ?? null;
    return { target: () => this.endUserTarget(tx, paywall, session, knownUserId, externalId) };
  }

  /** Whom a paid DEFAULT session credits: its end user, created now when the session named a new one. */
  private async endUserTarget(
    tx: Sql,
    paywall: PaywallInfo,
    session: StripeSession,
    knownUserId: string | null,
    externalId: string | null,
  ): Promise<CreditTarget | null> {
    let endUserId = knownUserId;
    if (!endUserId) {
      if (!externalId) return null;
      endUserId = (await this.s.users.ensureUser(tx, paywall, externalId, STRIPE_TRIGGER)).id;
      await tx.query(
        `update stripe_checkout set end_user_id = $2, updated_at = now() where session_id = $1 and end_user_id is null`,
        [session.id, endUserId],
      );
    }
    const [u] = await tx.query<{ account_id: string; external_id: string }>(
      `select account_id, external_id from end_user where id = $1`,
      [endUserId],
    );
    if (!u?.account_id) return null;
    const walletUserId = walletUserIdOf(paywall, { id: endUserId, walletUserId: null });
    const userId = endUserId;
    return {
      accountId: u.account_id,
      paywallId: paywall.id,
      endUserId: userId,
      metadata: {},
      events: (amountRaw, transferId) => {
        const ctx = {
          paywall,
          trigger: STRIPE_TRIGGER,
          subject: { type: 'end_user' as const, id: userId, externalId: u.external_id },
          metadata: { source: 'stripe', checkoutSessionId: session.id },
        };
        return creditEvents(ctx, session, amountRaw, transferId, walletUserId, u.external_id);
      },
    };
  }

  /**
   * Wallet: the session belongs to the platform endpoint when its row names a wallet (written by
   * startWalletCheckout), or, for a session not made here, when its metadata says `kind: "wallet"` and
   * names an existing wallet user (the row is then written).
   */
  private async walletClaim(tx: Sql, session: StripeSession): Promise<Claim> {
    const [row] = await tx.query<{ wallet_user_id: string | null }>(
      `select wallet_user_id from stripe_checkout where session_id = $1`,
      [session.id],
    );
    if (row && !row.wallet_user_id)
      return {
        ignored: "the session was started by a paywall's top-up page (that paywall's endpoint credits it)",
      };
    let walletUserId: string;
    if (row) walletUserId = row.wallet_user_id!;
    else {
      const named = session.metadata.walletUserId;
      const amount = session.amountTotal;
      if (session.metadata.kind !== 'wallet')
        return {
          ignored: session.metadata.paywallId
            ? "the session was not started here and names a paywall (that paywall's endpoint credits it)"
            : 'the session was not started here and its metadata names no wallet',
        };
      if (!amount || amount <= 0) return { ignored: 'the session has no positive amount' };
      const known =
        typeof named === 'string' && UUID.test(named)
          ? await tx.query(`select id from wallet_user where id = $1`, [named])
          : [];
      if (known.length === 0) return { ignored: 'the session names no wallet of this server' };
      await tx.query(
        `insert into stripe_checkout (session_id, wallet_user_id, status, amount_cents)
         values ($1, $2, 'open', $3) on conflict (session_id) do nothing`,
        [session.id, named, String(amount)],
      );
      walletUserId = named!;
    }
    return { target: () => this.walletTarget(tx, session, walletUserId) };
  }

  /** Whom a paid wallet session credits. Events: one pair per paywall the wallet is connected to. */
  private async walletTarget(
    tx: Sql,
    session: StripeSession,
    walletUserId: string,
  ): Promise<CreditTarget | null> {
    const [w] = await tx.query<{ account_id: string }>(`select account_id from wallet_user where id = $1`, [
      walletUserId,
    ]);
    if (!w) return null;
    // One event pair per connected paywall (the latest connection names the end user), as test funds do.
    const conns = await tx.query<{
      paywall_id: string;
      owner_id: string;
      end_user_id: string;
      external_id: string;
    }>(
      `select distinct on (c.paywall_id) c.paywall_id, p.owner_id, eu.id as end_user_id, eu.external_id
         from wallet_connection c join paywall p on p.id = c.paywall_id join end_user eu on eu.id = c.end_user_id
        where c.wallet_user_id = $1 and c.revoked_at is null
        order by c.paywall_id, c.created_at desc`,
      [walletUserId],
    );
    return {
      accountId: w.account_id,
      paywallId: null,
      endUserId: null,
      metadata: { walletUserId },
      events: (amountRaw, transferId) =>
        conns.flatMap((c) =>
          creditEvents(
            {
              paywall: { id: c.paywall_id, ownerId: c.owner_id },
              trigger: STRIPE_TRIGGER,
              subject: { type: 'end_user', id: c.end_user_id, externalId: c.external_id },
              metadata: { source: 'stripe', checkoutSessionId: session.id },
            },
            session,
            amountRaw,
            transferId,
            walletUserId,
            c.external_id,
          ),
        ),
    };
  }

  /**
   * world → target account `deposit` of amount_total cents x 10,000, the session flipped to `paid`, and
   * the events, in ONE statement: everything happens only when this statement is the one that flipped it.
   */
  private async credit(
    tx: Sql,
    session: StripeSession,
    targetOf: () => Promise<CreditTarget | null>,
  ): Promise<void> {
    const cents = session.amountTotal;
    if (!cents || cents <= 0) {
      this.s.log.warn({ sessionId: session.id }, 'Stripe session has no positive amount; not credited');
      return;
    }
    // The hosted pages only sell USD (1 cent = 10,000 raw units); any other currency has no rate here.
    if (session.currency !== 'usd') {
      this.s.log.warn(
        { sessionId: session.id, currency: session.currency },
        'Stripe session is not in USD; not credited',
      );
      return;
    }
    // Only now, for a paid session: the end user of a DEFAULT session may be created here.
    const target = await targetOf();
    if (!target) return;
    const amountRaw = BigInt(cents) * RAW_PER_CENT;
    const transferId = randomUUID();
    const events = target.events(amountRaw, transferId);
    await tx.query(
      `with c as (
         update stripe_checkout set status = 'paid', amount_cents = $7::bigint, transfer_id = $3::uuid, updated_at = now()
          where session_id = $5 and status <> 'paid'
         returning session_id
       ), u as (
         update ledger_account set balance_raw = balance_raw + $1::bigint
          where id = $2::uuid and exists (select 1 from c)
         returning id, balance_raw
       ), w as (
         update ledger_account set balance_raw = balance_raw - $1::bigint
          where id = '${WORLD_ACCOUNT_ID}' and exists (select 1 from u)
       ), t as (
         insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, balance_after_raw,
                               paywall_id, end_user_id, metadata, created_at)
         select $3::uuid, 'deposit', '${WORLD_ACCOUNT_ID}', u.id, $1::bigint, u.balance_raw, $6::uuid, $9::uuid,
                $4::jsonb, now() from u
       ), e as (
         ${insertEventsSql(8)} where exists (select 1 from u)
       )
       select count(*)::int as n from u`,
      [
        amountRaw.toString(),
        target.accountId,
        transferId,
        JSON.stringify({ source: 'stripe', checkoutSessionId: session.id, ...target.metadata }),
        session.id,
        target.paywallId,
        String(cents),
        JSON.stringify(eventRows(events)),
        target.endUserId,
      ],
    );
  }
}

type StripeSession = NonNullable<VerifiedStripeEvent['session']>;

/** Whether an endpoint owns an event's session: whom it credits when paid, or why it is ignored there. */
type Claim = { target: () => Promise<CreditTarget | null> } | { ignored: string };

/** Thrown inside the event's transaction to roll back what the claim wrote: the event is not ours. */
class NotOurs extends Error {}

/**
 * `client_reference_id` naming paywall and end user (`{paywallId}:{user}`); Stripe allows 200
 * characters, so a longer user id is named by its SHA-256 instead (the metadata always has it in full).
 */
function clientReference(paywallId: string, externalId: string): string {
  const plain = `${paywallId}:${externalId}`;
  return plain.length <= 200
    ? plain
    : `${paywallId}:sha256:${createHash('sha256').update(externalId).digest('hex')}`;
}

const STRIPE_TRIGGER: EventTrigger = { source: 'system', actorType: 'system', actorId: 'stripe' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whom a paid Checkout Session credits: an end user's account (DEFAULT) or a wallet's. */
interface CreditTarget {
  accountId: string;
  /** The transfer's paywall and end user (null for the wallet: it serves every app). */
  paywallId: string | null;
  endUserId: string | null;
  /** Extra transfer metadata. */
  metadata: Record<string, string>;
  /** The events recorded with the credit. */
  events(amountRaw: bigint, transferId: string): NewEvent[];
}

/** `paywall.stripe.checkout.session.completed` then `paywall.balance.deposit.created` for one paywall. */
function creditEvents(
  ctx: Parameters<typeof buildEvent>[1],
  session: StripeSession,
  amountRaw: bigint,
  transferId: string,
  walletUserId: string | null,
  externalUserId: string,
): NewEvent[] {
  return [
    buildEvent('paywall.stripe.checkout.session.completed', ctx, {
      checkoutSessionId: session.id,
      amount: usdcDecimal(amountRaw),
      currency: session.currency ?? 'usd',
      walletUserId,
    }),
    buildEvent('paywall.balance.deposit.created', ctx, {
      walletUserId,
      externalUserId,
      amount: usdcDecimal(amountRaw),
      currency: 'USDC',
      source: 'stripe',
      activityId: transferId,
    }),
  ];
}
