import { randomUUID } from 'node:crypto';
import type { Database, Sql } from '../../../db/database.js';
import type { Clock } from '../../../shared/clock.js';
import { DomainError, notFound } from '../../../shared/errors.js';
import type { Logger } from '../../../shared/logger.js';
import { usdcDecimal } from '../../../shared/money.js';
import type { EventTrigger, NewEvent } from '../../events/event.service.js';
import { buildEvent } from '../../events/event-payloads.js';
import { creditFromWorld } from '../../accounts/credit-from-world.js';
import type { PaywallInfo } from '../../paywalls/paywall-info.js';
import { validExternalId, walletUserIdOf } from '../../users/user.service.js';
import { stripeEventAction, type SessionOwnership, type StripeEventAction } from './stripe-event-action.js';
import type { StripeGateway, VerifiedStripeEvent } from './stripe-gateway.js';
import { readIntegration, WALLET_ENDPOINT, type StripeSecrets } from './stripe-integration.store.js';
import {
  paymentIntentAction,
  type PaymentIntentAction,
  type PaymentIntentOwnership,
} from '../auto-topup/auto-topup-event-action.js';

/** What ingest needs of paywalls and end users: find a paywall; create the end user a paid session names. */
export interface IngestPaywalls {
  byId(paywallId: string): Promise<PaywallInfo | null>;
}
export interface IngestUsers {
  ensureUser(
    sql: Sql,
    paywall: PaywallInfo,
    externalId: string,
    trigger: EventTrigger,
  ): Promise<{ id: string }>;
}

/**
 * What ingest needs of auto top-up (auto-topup/ingest-port.ts), in the event's transaction: whether the
 * endpoint owns a PaymentIntent, applying its action, and turning auto top-up on when a Checkout that
 * saved the card is paid. `applyPaymentIntent` returns work to do after the commit (an e-mail), or null.
 */
export interface IngestAutoTopup {
  claimPaymentIntent(
    tx: Sql,
    endpointKey: string,
    pi: NonNullable<VerifiedStripeEvent['paymentIntent']>,
  ): Promise<PaymentIntentOwnership>;
  applyPaymentIntent(tx: Sql, action: PaymentIntentAction): Promise<(() => void) | null>;
  enableFromCheckout(
    tx: Sql,
    sessionId: string,
    target: { accountId: string; endUserId: string | null },
  ): Promise<void>;
}

export interface StripeWebhookIngestDeps {
  db: Database;
  config: { STRIPE_WEBHOOK_SECRET?: string };
  gateway: StripeGateway;
  secrets: StripeSecrets;
  paywalls: IngestPaywalls;
  users: IngestUsers;
  autoTopup: IngestAutoTopup;
  /** Forgets the endpoint a rotation replaced once its grace period ended (the integration's cleanup). */
  retireReplacedEndpoints(paywallId: string): Promise<number>;
  clock: Clock;
  log: Logger;
}

/**
 * Stripe webhook ingest: incoming Stripe events (not our outgoing webhooks, modules/webhooks). In the
 * manner of "route → verified event → idempotent handler":
 * 1. verify the signature on the raw body with the endpoint's secret(s) (a bad one is a 400 that changes
 *    nothing);
 * 2. in ONE transaction: find out whether this endpoint owns the event's Checkout Session, turn event +
 *    ownership into a {@link StripeEventAction} (a pure function), record the (endpoint, event id), and
 *    apply the action: `credit` is one idempotent ledger operation (world → account).
 * An event about a session another endpoint owns is logged and left unrecorded here (one Stripe account
 * may feed several endpoints, each getting every event). "Exactly once per Checkout Session" is the
 * `stripe_checkout` row: the credit flips its status to `paid` under the row lock and writes the transfer
 * only when it did, so repeated or concurrent deliveries (and `completed` + `async_payment_succeeded` for
 * the same session) credit once.
 */
export class StripeWebhookIngestService {
  constructor(private readonly d: StripeWebhookIngestDeps) {}

  /**
   * A DEFAULT paywall's endpoint (`POST /v1/stripe/webhooks/:paywallId`): verifies with the endpoint's
   * secret, or with the secret of the endpoint a rotation replaced while its grace period lasts.
   */
  async receive(paywallId: string, rawBody: unknown, signature: string | undefined): Promise<void> {
    const { secrets, gateway } = this.d;
    const paywall = await this.d.paywalls.byId(paywallId);
    if (!paywall) throw notFound('paywall');
    const row = await readIntegration(this.d.db, paywall.id);
    if (!row) throw badSignature();
    if (!signature || !Buffer.isBuffer(rawBody)) throw badSignature();
    let event: VerifiedStripeEvent;
    try {
      event = gateway.verifyEvent(
        rawBody,
        signature,
        secrets.decrypt(paywall.id, row.webhook_secret_ciphertext),
      );
    } catch (current) {
      if (current instanceof DomainError) throw current;
      const previous = row.previous_webhook_secret_ciphertext;
      const until = row.previous_secret_expires_at;
      if (!previous || !until) throw badSignature();
      if (new Date(until).getTime() <= this.d.clock.now().getTime()) {
        await this.d.retireReplacedEndpoints(paywall.id).catch(() => 0);
        throw badSignature();
      }
      try {
        event = gateway.verifyEvent(rawBody, signature, secrets.decrypt(paywall.id, previous));
      } catch {
        throw badSignature();
      }
    }
    await this.handleEvent(paywall, event);
  }

  /**
   * The platform's endpoint (`POST /v1/stripe/webhooks/wallet`, wallet top-ups): verified with
   * `STRIPE_WEBHOOK_SECRET` (bad, missing or unconfigured → 400, nothing changes).
   */
  async receiveWallet(rawBody: unknown, signature: string | undefined): Promise<void> {
    const secret = this.d.config.STRIPE_WEBHOOK_SECRET;
    if (!secret || !signature || !Buffer.isBuffer(rawBody)) throw badSignature();
    let event: VerifiedStripeEvent;
    try {
      event = this.d.gateway.verifyEvent(rawBody, signature, secret);
    } catch {
      throw badSignature();
    }
    const endpoint = { key: WALLET_ENDPOINT, paywallId: null };
    if (event.type.startsWith('payment_intent.')) return this.processPaymentIntent(endpoint, event);
    await this.process(endpoint, event, (tx, session) => this.walletClaim(tx, session));
  }

  /** A DEFAULT paywall's verified event (see {@link process}). */
  async handleEvent(paywall: PaywallInfo, event: VerifiedStripeEvent): Promise<void> {
    if (event.type.startsWith('payment_intent.'))
      return this.processPaymentIntent({ key: paywall.id, paywallId: paywall.id }, event);
    await this.process({ key: paywall.id, paywallId: paywall.id }, event, (tx, session) =>
      this.endUserClaim(tx, paywall, session),
    );
  }

  /**
   * Applies an event received on one endpoint (a paywall's, or the platform's `wallet`), once per
   * endpoint. Stripe sends the same event id to every endpoint of an account. `claim` finds out whether
   * the session belongs to this endpoint (writing its `stripe_checkout` row when it was not made here):
   * when it does not, the claim's writes roll back and the event is logged as ignored, answered 200 and
   * NOT recorded. When it does, the (endpoint, event id) row is written in the transaction that applies
   * the action; a repeat does nothing.
   */
  private async process(
    endpoint: { key: string; paywallId: string | null },
    event: VerifiedStripeEvent,
    claim: (tx: Sql, session: StripeSession) => Promise<Claim>,
  ): Promise<void> {
    const session = event.session;
    const ignored = (reason: string) =>
      this.d.log.info(
        { endpoint: endpoint.key, eventId: event.id, eventType: event.type, sessionId: session?.id, reason },
        `Stripe event ignored on this endpoint (not recorded as processed): ${reason}`,
      );
    if (!session) {
      const action = stripeEventAction(event, null);
      return ignored(action.kind === 'ignore' ? action.reason : 'no session');
    }
    try {
      await this.d.db.transaction(async (tx) => {
        const mine = await claim(tx, session);
        const action = stripeEventAction(event, mine);
        if (action.kind === 'ignore' && !action.record) throw new NotOurs(action.reason);
        // A concurrent delivery of the same event to this endpoint waits here on the key, then finds it taken.
        const fresh = await tx.query(
          `insert into stripe_event (endpoint, event_id, paywall_id, type) values ($1, $2, $3, $4)
           on conflict (endpoint, event_id) do nothing returning event_id`,
          [endpoint.key, event.id, endpoint.paywallId, event.type],
        );
        if (fresh.length === 0 || !mine.owned) return;
        await this.apply(tx, action, session, mine.target);
      });
    } catch (e) {
      if (!(e instanceof NotOurs)) throw e;
      ignored(e.message);
    }
  }

  /**
   * A `payment_intent.*` event (auto top-up, docs/reference.md §16), the same way as a Checkout event:
   * in one transaction, does this endpoint own the PaymentIntent (an auto top-up attempt of one of its
   * users)? If not: logged, answered 200, not recorded. If so: the (endpoint, event id) row is written
   * (a repeat stops here) and the normalized action applied (`credit` once per PaymentIntent).
   */
  private async processPaymentIntent(
    endpoint: { key: string; paywallId: string | null },
    event: VerifiedStripeEvent,
  ): Promise<void> {
    const pi = event.paymentIntent;
    const ignored = (reason: string) =>
      this.d.log.info(
        { endpoint: endpoint.key, eventId: event.id, eventType: event.type, paymentIntentId: pi?.id, reason },
        `Stripe event ignored on this endpoint (not recorded as processed): ${reason}`,
      );
    if (!pi) {
      const action = paymentIntentAction(event, null);
      return ignored(action.kind === 'ignore' ? action.reason : 'no PaymentIntent');
    }
    let after: (() => void) | null = null;
    try {
      after = await this.d.db.transaction(async (tx) => {
        const mine = await this.d.autoTopup.claimPaymentIntent(tx, endpoint.key, pi);
        const action = paymentIntentAction(event, mine);
        if (action.kind === 'ignore' && !action.record) throw new NotOurs(action.reason);
        const fresh = await tx.query(
          `insert into stripe_event (endpoint, event_id, paywall_id, type) values ($1, $2, $3, $4)
           on conflict (endpoint, event_id) do nothing returning event_id`,
          [endpoint.key, event.id, endpoint.paywallId, event.type],
        );
        if (fresh.length === 0) return null;
        return this.d.autoTopup.applyPaymentIntent(tx, action);
      });
    } catch (e) {
      if (!(e instanceof NotOurs)) throw e;
      ignored(e.message);
    }
    after?.();
  }

  /** The action's one database change, in the event's transaction. */
  private async apply(
    tx: Sql,
    action: StripeEventAction,
    session: StripeSession,
    targetOf: () => Promise<CreditTarget | null>,
  ): Promise<void> {
    switch (action.kind) {
      case 'fail':
        await tx.query(
          `update stripe_checkout set status = 'failed', updated_at = now() where session_id = $1 and status = 'open'`,
          [session.id],
        );
        return;
      case 'pending':
        // Unpaid (async payment pending): the claim made sure the session row exists; nothing more.
        return;
      case 'ignore':
        // Recorded as processed (it is this endpoint's), but nothing can be credited.
        this.d.log.warn({ sessionId: session.id, currency: session.currency }, action.reason);
        return;
      case 'credit':
        return this.credit(tx, session, action, targetOf);
    }
  }

  /**
   * DEFAULT: the session belongs to this paywall when its row says so (written by the checkout), or, for
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
      return notOurs(
        row.wallet_user_id
          ? 'the session is a hosted-wallet top-up (the platform endpoint credits it)'
          : 'the session was started by another paywall (its own endpoint credits it)',
      );
    if (!row) {
      const amount = session.amountTotal;
      const externalId = validExternalId(session.metadata.user);
      if (session.metadata.paywallId !== paywall.id)
        return notOurs(
          session.metadata.kind === 'wallet'
            ? 'the session is a hosted-wallet top-up (the platform endpoint credits it)'
            : 'the session was not started here and its metadata names another paywall or none',
        );
      if (!externalId) return notOurs('the session names no valid end user of this paywall');
      if (!amount || amount <= 0) return notOurs('the session has no positive amount');
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
    return { owned: true, target: () => this.endUserTarget(tx, paywall, session, knownUserId, externalId) };
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
      endUserId = (await this.d.users.ensureUser(tx, paywall, externalId, STRIPE_TRIGGER)).id;
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
   * Wallet: the session belongs to the platform endpoint when its row names a wallet (written by the
   * wallet checkout), or, for a session not made here, when its metadata says `kind: "wallet"` and names
   * an existing wallet user (the row is then written).
   */
  private async walletClaim(tx: Sql, session: StripeSession): Promise<Claim> {
    const [row] = await tx.query<{ wallet_user_id: string | null }>(
      `select wallet_user_id from stripe_checkout where session_id = $1`,
      [session.id],
    );
    if (row && !row.wallet_user_id)
      return notOurs(
        "the session was started by a paywall's top-up page (that paywall's endpoint credits it)",
      );
    let walletUserId: string;
    if (row) walletUserId = row.wallet_user_id!;
    else {
      const named = session.metadata.walletUserId;
      const amount = session.amountTotal;
      if (session.metadata.kind !== 'wallet')
        return notOurs(
          session.metadata.paywallId
            ? "the session was not started here and names a paywall (that paywall's endpoint credits it)"
            : 'the session was not started here and its metadata names no wallet',
        );
      if (!amount || amount <= 0) return notOurs('the session has no positive amount');
      const known =
        typeof named === 'string' && UUID.test(named)
          ? await tx.query(`select id from wallet_user where id = $1`, [named])
          : [];
      if (known.length === 0) return notOurs('the session names no wallet of this server');
      await tx.query(
        `insert into stripe_checkout (session_id, wallet_user_id, status, amount_cents)
         values ($1, $2, 'open', $3) on conflict (session_id) do nothing`,
        [session.id, named, String(amount)],
      );
      walletUserId = named!;
    }
    return { owned: true, target: () => this.walletTarget(tx, session, walletUserId) };
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
   * The idempotent ledger operation of a paid session: the session flips to `paid` (under its row lock:
   * a concurrent delivery waits, then finds it paid), and only when this delivery flipped it, world →
   * target account `deposit` of amount_total cents x 10,000 with its events (creditFromWorld), in the
   * event's transaction.
   */
  private async credit(
    tx: Sql,
    session: StripeSession,
    action: Extract<StripeEventAction, { kind: 'credit' }>,
    targetOf: () => Promise<CreditTarget | null>,
  ): Promise<void> {
    // Only now, for a paid session: the end user of a DEFAULT session may be created here.
    const target = await targetOf();
    if (!target) return;
    const transferId = randomUUID();
    const flipped = await tx.query(
      `update stripe_checkout set status = 'paid', amount_cents = $2::bigint, transfer_id = $3::uuid, updated_at = now()
        where session_id = $1 and status <> 'paid'
       returning session_id`,
      [session.id, String(action.amountCents), transferId],
    );
    if (flipped.length === 0) return;
    await creditFromWorld(tx, {
      account: target.accountId,
      kind: 'deposit',
      transferId,
      amountRaw: action.amountRaw,
      paywallId: target.paywallId,
      endUserId: target.endUserId,
      metadata: { source: 'stripe', checkoutSessionId: session.id, ...target.metadata },
      events: target.events(action.amountRaw, transferId),
    });
    // "Top up automatically" was ticked: the card is saved now; auto top-up turns on (§16).
    await this.d.autoTopup.enableFromCheckout(tx, session.id, {
      accountId: target.accountId,
      endUserId: target.endUserId,
    });
  }
}

const badSignature = () =>
  new DomainError('invalid_request', 'Stripe signature verification failed', null, 'invalid_signature');

type StripeSession = NonNullable<VerifiedStripeEvent['session']>;

/** Whether an endpoint owns an event's session: whom it credits when paid, or why it is ignored there. */
type Claim =
  (SessionOwnership & { owned: false }) | { owned: true; target: () => Promise<CreditTarget | null> };
const notOurs = (reason: string): Claim => ({ owned: false, reason });

/** Thrown inside the event's transaction to roll back what the claim wrote: the event is not ours. */
class NotOurs extends Error {}

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
