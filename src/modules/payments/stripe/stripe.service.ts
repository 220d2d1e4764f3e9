import { randomUUID } from 'node:crypto';
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
}

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
 * signature, then {@link handleEvent} records the Stripe event id and credits the session in ONE
 * transaction. "Exactly once per Checkout Session" is the `stripe_checkout` row: the crediting statement
 * flips its status to `paid` under the row lock and writes the transfer only when it did, so repeated or
 * concurrent deliveries (and `completed` + `async_payment_succeeded` for the same session) credit once.
 */
export class StripeService {
  private secretBox?: SecretBox;
  readonly gateway: StripeGateway;

  constructor(private readonly s: Services) {
    this.gateway = createStripeGateway(s.config.STRIPE_API_BASE);
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
        `select secret_key_ciphertext, webhook_endpoint_id, webhook_secret_ciphertext, topup_amounts_cents
           from stripe_integration where paywall_id = $1`,
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
               topup_amounts_cents = excluded.topup_amounts_cents, updated_at = now()`,
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
    if (previous) await this.deleteEndpointQuietly(paywall.id, previous);
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

  /** Replaces the webhook endpoint (new endpoint and secret first, then the old one is deleted). */
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
    await this.s.db.transaction(async (tx) => {
      await tx.query(
        `update stripe_integration set webhook_endpoint_id = $2, webhook_secret_ciphertext = $3, updated_at = now()
          where paywall_id = $1`,
        [paywall.id, endpoint.id, this.box().encrypt(endpoint.secret, paywall.id)],
      );
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.stripe.webhook.rotated',
          { paywall, trigger, subject: { type: 'paywall', id: paywall.id } },
          { webhookId: endpoint.id, url, secretSuffix: suffixOf(endpoint.secret) },
        ),
      ]);
    });
    await this.deleteEndpointQuietly(paywall.id, current);
    return paywall;
  }

  /** Deletes the webhook endpoint and forgets the key. Idempotent (nothing connected: no event). */
  async disconnect(auth: Auth, paywallId?: string | null): Promise<PaywallInfo> {
    const paywall = await this.s.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const trigger = triggerOf(auth, 'graphql');
    const removed = await this.s.db.transaction(async (tx) => {
      const rows = await tx.query<IntegrationRow>(
        `delete from stripe_integration where paywall_id = $1
         returning secret_key_ciphertext, webhook_endpoint_id, webhook_secret_ciphertext, topup_amounts_cents`,
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
      await this.deleteEndpointQuietly(paywall.id, removed);
      this.s.log.info({ paywallId: paywall.id }, 'stripe disconnected');
    }
    return paywall;
  }

  /** Best effort: the integration row is already replaced or gone, so its old endpoint only costs noise. */
  private async deleteEndpointQuietly(paywallId: string, row: IntegrationRow): Promise<void> {
    try {
      const key = this.box().decrypt(row.secret_key_ciphertext, paywallId);
      await this.gateway.deleteWebhookEndpoint(key, row.webhook_endpoint_id);
    } catch (e) {
      this.s.log.warn(
        { paywallId, webhookId: row.webhook_endpoint_id, status: (e as any)?.statusCode },
        'could not delete the old Stripe webhook endpoint; delete it in the Stripe dashboard',
      );
    }
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

  /**
   * The hosted page's "Pay N USD": creates a Checkout Session for one of the offered amounts and
   * returns its URL. The session row is written first (status `open`) so fulfilment knows whom to credit.
   */
  async startCheckout(paywallId: string, user: unknown, amount: unknown): Promise<string> {
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
    const trigger: EventTrigger = { source: 'page', actorType: 'end_user', actorId: externalId };
    const endUser = await this.s.users.ensureUser(this.s.db, paywall, externalId, trigger);
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
        clientReferenceId: `${paywall.id}:${endUser.id}`,
        metadata: { paywallId: paywall.id, endUserId: endUser.id, user: externalId },
        successUrl: back('success'),
        cancelUrl: back('canceled'),
        productName: `${paywall.name} balance top-up`,
      });
    } catch (e) {
      throw this.stripeFailed(e, paywall.id, 'creating a Checkout Session');
    }
    await this.s.db.query(
      `insert into stripe_checkout (session_id, paywall_id, end_user_id, status, amount_cents)
       values ($1, $2, $3, 'open', $4) on conflict (session_id) do nothing`,
      [session.id, paywall.id, endUser.id, cents.toString()],
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
   * The webhook: verifies the signature on the raw body with the paywall's endpoint secret (a bad or
   * missing one is a 400 and changes nothing), then processes the event once.
   */
  async receiveWebhook(paywallId: string, rawBody: unknown, signature: string | undefined): Promise<void> {
    const badSignature = () =>
      new DomainError('invalid_request', 'Stripe signature verification failed', null, 'invalid_signature');
    const paywall = await this.s.paywalls.byId(paywallId);
    if (!paywall) throw notFound('paywall');
    const row = await this.row(this.s.db, paywall.id);
    if (!row) throw badSignature();
    if (!signature || !Buffer.isBuffer(rawBody)) throw badSignature();
    const secret = this.decrypt(paywall.id, row.webhook_secret_ciphertext);
    let event: VerifiedStripeEvent;
    try {
      event = this.gateway.verifyEvent(rawBody, signature, secret);
    } catch {
      throw badSignature();
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
    await this.process(null, event, (tx, session) => this.walletTarget(tx, session));
  }

  /** A DEFAULT paywall's event (see {@link process}). */
  async handleEvent(paywall: PaywallInfo, event: VerifiedStripeEvent): Promise<void> {
    await this.process(paywall.id, event, (tx, session) => this.endUserTarget(tx, paywall, session));
  }

  /**
   * Records the event id and applies the event in one transaction; a repeated event id does nothing.
   * `targetOf` names whom the session credits (or null: not ours); the paywall's and the platform's
   * endpoints differ only there.
   */
  private async process(
    endpointPaywallId: string | null,
    event: VerifiedStripeEvent,
    targetOf: (tx: Sql, session: StripeSession) => Promise<CreditTarget | null>,
  ): Promise<void> {
    const session = event.session;
    await this.s.db.transaction(async (tx) => {
      // A concurrent delivery of the same event waits here on the unique key and then finds it taken.
      const fresh = await tx.query(
        `insert into stripe_event (event_id, paywall_id, type) values ($1, $2, $3)
         on conflict (event_id) do nothing returning event_id`,
        [event.id, endpointPaywallId, event.type],
      );
      if (fresh.length === 0 || !session) return;
      const credit =
        (event.type === 'checkout.session.completed' && session.paymentStatus === 'paid') ||
        event.type === 'checkout.session.async_payment_succeeded';
      const fail = event.type === 'checkout.session.async_payment_failed';
      if (!credit && !fail) {
        // Unpaid (async payment pending): only make sure the session row exists.
        await targetOf(tx, session);
        return;
      }
      const target = await targetOf(tx, session);
      if (!target) return;
      if (fail) {
        await tx.query(
          `update stripe_checkout set status = 'failed', updated_at = now() where session_id = $1 and status = 'open'`,
          [session.id],
        );
        return;
      }
      await this.credit(tx, session, target);
    });
  }

  /** DEFAULT: the session's row (created by startCheckout), else from the session's metadata. */
  private async endUserTarget(
    tx: Sql,
    paywall: PaywallInfo,
    session: StripeSession,
  ): Promise<CreditTarget | null> {
    const [mine] = await tx.query<{ end_user_id: string | null; paywall_id: string | null }>(
      `select end_user_id, paywall_id from stripe_checkout where session_id = $1`,
      [session.id],
    );
    let endUserId: string;
    if (mine) {
      if (mine.paywall_id !== paywall.id || !mine.end_user_id) return null;
      endUserId = mine.end_user_id;
    } else {
      const amount = session.amountTotal;
      const externalId = validExternalId(session.metadata.user);
      if (session.metadata.paywallId !== paywall.id || !externalId || !amount || amount <= 0) {
        this.s.log.warn(
          { paywallId: paywall.id, sessionId: session.id },
          'Stripe session names no end user of this paywall; ignored',
        );
        return null;
      }
      const user = await this.s.users.ensureUser(tx, paywall, externalId, STRIPE_TRIGGER);
      await tx.query(
        `insert into stripe_checkout (session_id, paywall_id, end_user_id, status, amount_cents)
         values ($1, $2, $3, 'open', $4) on conflict (session_id) do nothing`,
        [session.id, paywall.id, user.id, String(amount)],
      );
      endUserId = user.id;
    }
    const [u] = await tx.query<{ account_id: string; external_id: string }>(
      `select account_id, external_id from end_user where id = $1`,
      [endUserId],
    );
    if (!u?.account_id) return null;
    const walletUserId = walletUserIdOf(paywall, { id: endUserId, walletUserId: null });
    return {
      accountId: u.account_id,
      paywallId: paywall.id,
      endUserId,
      metadata: {},
      events: (amountRaw, transferId) => {
        const ctx = {
          paywall,
          trigger: STRIPE_TRIGGER,
          subject: { type: 'end_user' as const, id: endUserId, externalId: u.external_id },
          metadata: { source: 'stripe', checkoutSessionId: session.id },
        };
        return creditEvents(ctx, session, amountRaw, transferId, walletUserId, u.external_id);
      },
    };
  }

  /**
   * Wallet: the session's row (created by startWalletCheckout), else from the session's metadata
   * (`kind: "wallet"`, `walletUserId`). Events: one pair per paywall the wallet is connected to.
   */
  private async walletTarget(tx: Sql, session: StripeSession): Promise<CreditTarget | null> {
    const [mine] = await tx.query<{ wallet_user_id: string | null }>(
      `select wallet_user_id from stripe_checkout where session_id = $1`,
      [session.id],
    );
    let walletUserId: string;
    if (mine) {
      if (!mine.wallet_user_id) return null;
      walletUserId = mine.wallet_user_id;
    } else {
      const named = session.metadata.walletUserId;
      const amount = session.amountTotal;
      const known =
        session.metadata.kind === 'wallet' &&
        typeof named === 'string' &&
        UUID.test(named) &&
        amount &&
        amount > 0
          ? await tx.query(`select id from wallet_user where id = $1`, [named])
          : [];
      if (known.length === 0) {
        this.s.log.warn({ sessionId: session.id }, 'Stripe session names no wallet of this server; ignored');
        return null;
      }
      await tx.query(
        `insert into stripe_checkout (session_id, wallet_user_id, status, amount_cents)
         values ($1, $2, 'open', $3) on conflict (session_id) do nothing`,
        [session.id, named, String(amount)],
      );
      walletUserId = named;
    }
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
  private async credit(tx: Sql, session: StripeSession, target: CreditTarget): Promise<void> {
    const cents = session.amountTotal;
    if (!cents || cents <= 0) return;
    // The hosted pages only sell USD (1 cent = 10,000 raw units); any other currency has no rate here.
    if (session.currency !== 'usd') {
      this.s.log.warn(
        { sessionId: session.id, currency: session.currency },
        'Stripe session is not in USD; not credited',
      );
      return;
    }
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
