import type { EventType } from './event-catalog.js';
import type { EventSubject, EventTrigger, NewEvent } from './event.service.js';

/**
 * The `data` of every event, one type per event (the spec's catalogue, plus the fields this service adds).
 * Amounts are USDC decimal strings (docs/reference.md §4). Services build events only through `buildEvent`, so a
 * payload is written in one place; `paywallId` and `ownerUserId` come from the paywall.
 */
type Usdc = string;

export interface EventDataMap {
  'paywall.updated': { changedFields: string[]; summarySections: string[] };
  'paywall.archived': { reason: string | null };
  'paywall.secret.rotated': { secretLastFour: string; actorId: string; actorType: string };
  /** `provider` and `kind` name the model provider (docs/reference.md §15); absent for Stripe. */
  'paywall.integration.connected': {
    integrationKey: string;
    enabledBy: string;
    provider?: string;
    kind?: string;
  };
  'paywall.integration.disconnected': {
    integrationKey: string;
    disabledBy: string;
    provider?: string;
    kind?: string;
  };
  'paywall.integration.stripe.webhook.rotated': { webhookId: string; url: string; secretSuffix: string };
  'paywall.authorization.requested': {
    externalUserId: string;
    walletUserId: string | null;
    requestId: string;
    approvalUrl: string;
    mode: 'shared';
  };
  'paywall.authorization.completed': { externalUserId: string; walletUserId: string; connectionId: string };
  'paywall.authorization.revoked': { externalUserId: string; walletUserId: string };
  'paywall.authorization.declined': {
    externalUserId: string;
    walletUserId: string | null;
    requestId: string;
    reason: 'user_declined';
  };
  'paywall.balance.deposit.created': {
    walletUserId: string | null;
    externalUserId: string | null;
    amount: Usdc;
    currency: 'USDC';
    source: 'api' | 'test_funds' | 'stripe';
    activityId: string;
  };
  'paywall.balance.topup.link.created': {
    walletUserId: string | null;
    redirectUrl: string;
    checkoutSessionId: string | null;
  };
  'paywall.balance.trial.granted': { walletUserId: string; credits: Usdc; activityId: string };
  'paywall.balance.charge.created': {
    walletUserId: string | null;
    activityId: string;
    amount: Usdc;
    processingFeeAmount: Usdc;
  };
  'paywall.balance.charge.completed': { activityId: string; settlementReference: string };
  'paywall.balance.charge.failed': {
    walletUserId: string | null;
    activityId: string;
    amount: Usdc;
    errorCode: 'insufficient_balance' | 'not_connected' | 'charge_limit_exceeded' | 'allowance_exceeded';
  };
  /**
   * A refund of a charge (docs/reference.md §16 "Refunds"): `activityId` is the refund's id, `chargeId`
   * the charge it gives money back for, `amount` what went back to the account that paid.
   */
  'paywall.balance.refund.created': {
    activityId: string;
    chargeId: string;
    amount: Usdc;
    walletUserId: string | null;
    externalUserId: string;
    reason: string | null;
  };
  'paywall.usage.charge.created': {
    walletUserId: string | null;
    activityId: string;
    model: string;
    /** All input tokens (cache and audio included). */
    promptTokens: number;
    /** All output tokens (reasoning and audio included). */
    completionTokens: number;
    /** The parts of promptTokens / completionTokens billed at their own prices (docs/reference.md §13). */
    cacheReadTokens: number;
    cacheWriteTokens: number;
    audioPromptTokens: number;
    reasoningTokens: number;
    audioCompletionTokens: number;
    /** Image input and output tokens (gpt-image-1, docs/reference.md §22); present when there are some. */
    imagePromptTokens?: number;
    imageCompletionTokens?: number;
    /**
     * docs/reference.md §22: what was charged besides tokens (images with their size, quality and price
     * per image; seconds of audio; characters), and the same in words (`label`: "3 images 1024x1024 high").
     */
    units?: Record<string, unknown> & { label: string };
    cost: Usdc;
    /** The charge per bucket before rounding (the `usage.cost_details` of the answer). */
    costDetails: Record<string, string>;
    /** Usage neither the hold nor the free balance could cover (it becomes a debt); present only when > 0. */
    uncollected?: Usdc;
    /** The end-user key the request came with (docs/reference.md §19); present only then. */
    userKeyId?: string;
  };
  'paywall.usage.charge.deferred': { deferredRequestId: string; model: string };
  /**
   * Uncollected usage of an earlier charge (`activityId`) repaid from the free balance: `amount` repaid
   * now, `uncollected` what of that charge is still owed.
   */
  'paywall.usage.charge.recovered': {
    walletUserId: string | null;
    activityId: string;
    model: string | null;
    amount: Usdc;
    uncollected: Usdc;
  };
  /** `limit`: which daily limit (dailyRequestLimit, dailySpendLimit, modelDailyRequestLimit); `value`: its value. */
  'paywall.usage.rate.limited': {
    limit: string;
    value: string;
    date: string;
    model: string | null;
    walletUserId: string | null;
  };
  'paywall.balance.depleted': { walletUserId: string | null; requestedAmount: Usdc; availableBalance: Usdc };
  'paywall.request.blocked': { walletUserId: string | null; reason: string; requestId: string };
  'paywall.stripe.checkout.session.completed': {
    checkoutSessionId: string;
    amount: Usdc;
    currency: string;
    walletUserId: string | null;
  };
  /** `walletUserId` is filled in by the hold's statement (it is known only under the row lock). */
  'paywall.proxy.request.started': {
    requestId: string;
    model: string;
    stream: boolean;
    walletUserId?: string | null;
  };
  /** `provider`: the name of the provider that answered (docs/reference.md §15 "Fallbacks"). */
  'paywall.proxy.request.completed': {
    requestId: string;
    walletUserId: string | null;
    model: string;
    provider: string;
  };
  'paywall.proxy.request.failed': {
    requestId: string;
    walletUserId: string | null;
    model: string;
    errorCode: string;
  };
  'paywall.proxy.request.canceled': { requestId: string; walletUserId: string | null; model: string };
  'paywall.proxy.request.blocked': {
    requestId: string;
    walletUserId: string | null;
    reason: string;
    model: string;
  };
  /**
   * docs/reference.md §16 "Low balance": a charge took the spending account's free balance below the
   * paywall's threshold (once per crossing). `balance`: the free balance that charge answered.
   */
  'paywall.balance.low': {
    walletUserId: string | null;
    externalUserId: string;
    balance: Usdc;
    threshold: Usdc;
  };
  /**
   * SHARED: an app reached the spending limit its wallet user set (docs/reference.md §16 "Allowance"), once per
   * period. `period`: day, week, month or total; `resetsAt`: null for total.
   */
  'paywall.allowance.reached': {
    walletUserId: string;
    externalUserId: string;
    connectionId: string;
    amount: Usdc;
    period: string;
    spent: Usdc;
    resetsAt: string | null;
  };
  /** Auto top-up (docs/reference.md §16): an off-session payment succeeded and was credited (`amount` USDC). */
  'paywall.balance.autotopup.succeeded': {
    walletUserId: string | null;
    externalUserId: string;
    paymentIntentId: string;
    amount: Usdc;
    currency: string;
    activityId: string;
  };
  /** An auto top-up payment failed; `failuresInRow` counts the failures since the last success. */
  'paywall.balance.autotopup.failed': {
    walletUserId: string | null;
    externalUserId: string;
    paymentIntentId: string | null;
    amount: Usdc;
    failureCode: string;
    failureMessage: string;
    failuresInRow: number;
  };
  /** Auto top-up was turned off: `reason` `failures` (3 in a row) or `user` (turned off by its user). */
  'paywall.balance.autotopup.disabled': {
    walletUserId: string | null;
    externalUserId: string;
    reason: 'failures' | 'user';
    failuresInRow: number;
    lastFailureCode: string | null;
  };
  /** An end-user key (docs/reference.md §19) was created or revoked; never the key itself. */
  'paywall.user_key.created': UserKeyEventData;
  'paywall.user_key.revoked': UserKeyEventData;
}

/** What both end-user key events carry. */
export interface UserKeyEventData {
  id: string;
  externalUserId: string;
  walletUserId: string | null;
  name: string;
  lastFour: string;
}

// Every catalogue event has a data type (a compile error here names a missing one).
type Missing = Exclude<EventType, keyof EventDataMap>;
const _complete: Missing extends never ? true : Missing = true;
void _complete;

export interface EventContext {
  paywall: { id: string; ownerId: string };
  trigger: EventTrigger;
  subject: EventSubject;
  metadata?: Record<string, unknown>;
}

/** The one way to make an event: its type, who/what it is about, and its typed data. */
export function buildEvent<T extends keyof EventDataMap>(
  type: T,
  ctx: EventContext,
  data: EventDataMap[T],
): NewEvent {
  return {
    paywallId: ctx.paywall.id,
    ownerUserId: ctx.paywall.ownerId,
    type,
    trigger: ctx.trigger,
    subject: ctx.subject,
    data: { paywallId: ctx.paywall.id, ownerUserId: ctx.paywall.ownerId, ...data },
    ...(ctx.metadata ? { metadata: ctx.metadata } : {}),
  };
}
