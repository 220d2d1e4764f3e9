import { createHash } from 'node:crypto';
import type { Sql } from '../../../db/database.js';
import { DomainError, notFound } from '../../../shared/errors.js';
import type { Logger } from '../../../shared/logger.js';
import { parseDecimal } from '../../../shared/money.js';
import type { PaywallInfo } from '../../paywalls/paywall-info.js';
import { checkExternalId } from '../../users/user.service.js';
import { WALLET_TOPUP_CENTS } from './stripe-amounts.js';
import type { StripeGateway } from './stripe-gateway.js';
import {
  integrationInfo,
  readIntegration,
  requireDefault,
  stripeFailed,
  WALLET_ENDPOINT,
  type StripeSecrets,
} from './stripe-integration.store.js';
import type { TopupLimiter } from './topup-limits.js';
import { parseAutoTopup, settingsJson, type AutoTopupSettings } from '../auto-topup/auto-topup-settings.js';
import type { AutoTopupScope } from '../auto-topup/auto-topup-rows.js';

/** What checkout needs of paywalls and end users: look-ups only (it creates no user). */
export interface CheckoutPaywalls {
  byId(paywallId: string): Promise<PaywallInfo | null>;
}
export interface CheckoutUsers {
  findUser(paywallId: string, externalId: string): Promise<{ id: string } | null>;
}

/** Auto top-up's part of a Checkout: the one Stripe customer of a user (auto-topup/stripe-customers.ts). */
export interface CheckoutAutoTopup {
  customerFor(scope: AutoTopupScope, secretKey: string, description: string): Promise<string>;
}

export interface StripeCheckoutDeps {
  db: Sql;
  config: { PUBLIC_BASE_URL: string; STRIPE_SECRET_KEY?: string; STRIPE_WEBHOOK_SECRET?: string };
  gateway: StripeGateway;
  secrets: StripeSecrets;
  /** Limits of the public top-up page and of Checkout Session creation (topup-limits.ts). */
  limits: TopupLimiter;
  paywalls: CheckoutPaywalls;
  users: CheckoutUsers;
  autoTopup: CheckoutAutoTopup;
  log: Logger;
}

/**
 * The two Checkouts (docs/stripe.md "Top-up page and Checkout"): a DEFAULT paywall's hosted top-up page
 * (the paywall's own Stripe key) and the hosted wallet's card top-up (the platform's key). Each writes
 * the `stripe_checkout` row (status `open`) that Stripe events ingest later credits; neither creates an
 * end user or grants anything.
 */
export class StripeCheckoutService {
  constructor(private readonly d: StripeCheckoutDeps) {}

  /** The amounts the hosted top-up page offers (USD decimal strings); null when Stripe is not connected. */
  async topupAmounts(paywallId: string, sql: Sql = this.d.db): Promise<string[] | null> {
    const [info] = await integrationInfo(sql, [paywallId]);
    return info.connected ? info.topupAmounts : null;
  }

  /** One view of the public top-up page (or one "Pay" click) from `clientIp`; throws 429 past the limit. */
  topupPageView(clientIp: string): void {
    this.d.limits.pageView(clientIp);
  }

  /**
   * The hosted page's "Pay N USD": creates a Checkout Session for one of the offered amounts and
   * returns its URL. Creates no end user and grants nothing: the session row names the user by external
   * id, and the first paid session creates the user (docs/stripe.md). Limited per top-up link and client
   * IP, and Stripe calls by token bucket ({@link TopupLimiter}); a refusal is a 429 that charged nothing.
   * With "Top up automatically" ticked (`autoTopupForm`, docs/reference.md §16), the session pays as the
   * user's one Stripe customer and saves the card (`setup_future_usage: "off_session"`); its payment
   * turns auto top-up on with the settings.
   */
  async startCheckout(
    paywallId: string,
    user: unknown,
    amount: unknown,
    clientIp: string,
    autoTopupForm: Record<string, string | undefined> = {},
  ): Promise<string> {
    const { db, log } = this.d;
    const paywall = await this.d.paywalls.byId(paywallId);
    if (!paywall || paywall.archivedAt) throw notFound('paywall');
    requireDefault(paywall);
    const externalId = checkExternalId(user);
    const row = await readIntegration(db, paywall.id);
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
    const auto = parseAutoTopup(autoTopupForm, row.topup_amounts_cents);
    this.d.limits.checkout(clientIp, `${paywall.id}:${externalId}`, paywall.id);
    const known = await this.d.users.findUser(paywall.id, externalId);
    const secretKey = this.d.secrets.decrypt(paywall.id, row.secret_key_ciphertext);
    let customer: string | null = null;
    if (auto)
      try {
        customer = await this.d.autoTopup.customerFor(
          { kind: 'end_user', paywallId: paywall.id, externalId },
          secretKey,
          `${paywall.name}: ${externalId}`.slice(0, 300),
        );
      } catch (e) {
        throw stripeFailed(log, e, paywall.id, 'creating a customer');
      }
    const page = new URL(`${this.d.config.PUBLIC_BASE_URL}/topup/${paywall.id}`);
    page.searchParams.set('user', externalId);
    const back = (state: string) => {
      const u = new URL(page);
      u.searchParams.set('checkout', state);
      return u.toString();
    };
    let session;
    try {
      session = await this.d.gateway.createCheckoutSession(secretKey, {
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
        ...(customer ? { saveCardFor: customer } : {}),
      });
    } catch (e) {
      throw stripeFailed(log, e, paywall.id, 'creating a Checkout Session');
    }
    await db.query(
      `insert into stripe_checkout (session_id, paywall_id, end_user_id, external_id, status, amount_cents,
                                    stripe_customer_id, auto_topup)
       values ($1, $2, $3, $4, 'open', $5, $6, $7::jsonb) on conflict (session_id) do nothing`,
      [session.id, paywall.id, known?.id ?? null, externalId, cents.toString(), customer, autoJson(auto)],
    );
    return session.url;
  }

  /** Whether the platform's Stripe is configured: the hosted wallet then offers card top-ups. */
  walletCardsEnabled(): boolean {
    return !!(this.d.config.STRIPE_SECRET_KEY && this.d.config.STRIPE_WEBHOOK_SECRET);
  }

  /**
   * The wallet top-up page's "Pay N USD": a Checkout Session with the PLATFORM key for one of
   * WALLET_TOPUP_AMOUNTS, naming the wallet user; returns its URL. The session row is written first
   * (status `open`) so Stripe events ingest knows which wallet to credit.
   */
  async startWalletCheckout(
    walletUser: { id: string; email?: string },
    amount: unknown,
    autoTopupForm: Record<string, string | undefined> = {},
  ): Promise<string> {
    const secretKey = this.d.config.STRIPE_SECRET_KEY;
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
    const auto = parseAutoTopup(autoTopupForm, WALLET_TOPUP_CENTS);
    this.d.limits.stripeCall(WALLET_ENDPOINT);
    const base = this.d.config.PUBLIC_BASE_URL;
    let session;
    let customer: string | null = null;
    try {
      if (auto)
        customer = await this.d.autoTopup.customerFor(
          { kind: 'wallet', walletUserId: walletUser.id, email: walletUser.email },
          secretKey,
          'Wallet',
        );
      session = await this.d.gateway.createCheckoutSession(secretKey, {
        amountCents: Number(cents),
        clientReferenceId: `wallet:${walletUser.id}`,
        metadata: { kind: 'wallet', walletUserId: walletUser.id },
        successUrl: `${base}/wallet?done=card`,
        cancelUrl: `${base}/wallet?done=card_canceled`,
        productName: 'Wallet top-up',
        ...(customer ? { saveCardFor: customer } : {}),
      });
    } catch (e) {
      this.d.log.warn(
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
    await this.d.db.query(
      `insert into stripe_checkout (session_id, wallet_user_id, status, amount_cents, stripe_customer_id, auto_topup)
       values ($1, $2, 'open', $3, $4, $5::jsonb) on conflict (session_id) do nothing`,
      [session.id, walletUser.id, cents.toString(), customer, autoJson(auto)],
    );
    return session.url;
  }
}

const autoJson = (s: AutoTopupSettings | null): string | null => (s ? JSON.stringify(settingsJson(s)) : null);

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
