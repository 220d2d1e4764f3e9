import type { Database, Sql } from '../../db/database.js';
import { nextUtcMidnight, utcDay } from '../../shared/clock.js';
import { usdcDecimal, usdcText } from '../../shared/money.js';
import type { ModelPriceInfo } from '../catalog/catalog-model.js';
import { recordEvents, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { DailyLimit, ReserveResult } from '../ledger/holds.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { periodEnd, recordAllowanceReached } from '../wallet/allowance.js';
import {
  allowanceText,
  blockedReply,
  keyLimitText,
  blockedText,
  rateLimitedText,
  type BlockReason,
} from './blocked-reply.js';
import type { ChatCall, ChatJson, StreamSink } from './flight.js';
import type { MeteredRequest, WireFormat } from './wire-format.js';

/**
 * The links a blocked reply offers (UserService). Each link comes with its event, which the blocked call
 * records after the request's own events, in one transaction with them.
 */
export interface PaymentLinks {
  /** A SHARED-mode connect link (reusing the user's pending request) and its `authorization.requested`. */
  connectRequest(
    sql: Sql,
    paywall: PaywallInfo,
    user: { id: string; externalId: string },
    trigger: EventTrigger,
  ): Promise<{ url: string; event: NewEvent }>;
  /** The top-up link of a user (no event). */
  topupUrl(paywall: PaywallInfo, externalId: string, sql?: Sql): Promise<string>;
  /** The `paywall.balance.topup.link.created` event of a link handed out. */
  topupLinkEvent(
    paywall: PaywallInfo,
    user: { id: string; externalId: string; walletUserId: string | null },
    url: string,
    trigger: EventTrigger,
  ): NewEvent;
  /** The hosted wallet page (where a wallet user changes an app's spending limit). */
  walletUrl(): string;
}

/** A refused hold, to be answered with a payment-blocked reply. */
export interface BlockedCall<R extends MeteredRequest> {
  fmt: WireFormat<R>;
  call: ChatCall;
  req: R;
  /** The hold statement's row (who, the free balance, the limit that refused). */
  hold: ReserveResult;
  reason: BlockReason;
  requestId: string;
  trigger: EventTrigger;
  /** What the smallest request would have held (for `paywall.balance.depleted`). */
  neededRaw: bigint;
  now: Date;
  price: ModelPriceInfo;
  sink?: StreamSink;
}

/** A daily limit in words and as the value events carry. */
function describeLimit(
  limit: DailyLimit,
  paywall: PaywallInfo,
  price: ModelPriceInfo,
): { what: string; value: string } {
  if (limit === 'dailySpendLimit') {
    const raw = paywall.dailySpendLimitRaw ?? 0n;
    return { what: `${usdcText(raw)} of usage per day`, value: usdcDecimal(raw) };
  }
  const n = limit === 'dailyRequestLimit' ? paywall.dailyRequestLimit : price.dailyRequestLimit;
  return {
    what: `${n} requests per day${limit === 'modelDailyRequestLimit' ? ` with ${price.modelId}` : ''}`,
    value: String(n),
  };
}

/**
 * Answers a refused hold: records the blocked request's events and replies in the client's format with
 * the connect or top-up link (or, over a daily limit, when it resets). Returns null when the reply was
 * streamed to the sink.
 */
export async function answerBlocked<R extends MeteredRequest>(
  deps: { db: Database; links: PaymentLinks },
  o: BlockedCall<R>,
): Promise<ChatJson | null> {
  const { fmt, req, hold, reason, requestId, trigger, now, price, sink } = o;
  const { paywall, externalUserId } = o.call;
  const walletUserId = hold.walletUserId;
  const onRequest = {
    paywall,
    trigger,
    subject: { type: 'request' as const, id: requestId, externalId: externalUserId },
  };
  const onUser = {
    paywall,
    trigger,
    subject: { type: 'end_user' as const, id: hold.userId, externalId: externalUserId },
  };
  const events: NewEvent[] = [
    buildEvent('paywall.proxy.request.started', onRequest, {
      requestId,
      walletUserId,
      model: req.model,
      stream: req.stream,
    }),
    buildEvent('paywall.request.blocked', onUser, { walletUserId, reason, requestId }),
    buildEvent('paywall.proxy.request.blocked', onRequest, {
      requestId,
      walletUserId,
      reason,
      model: req.model,
    }),
  ];
  if (reason === 'insufficient_balance')
    events.push(
      buildEvent('paywall.balance.depleted', onUser, {
        walletUserId,
        requestedAmount: usdcDecimal(o.neededRaw),
        availableBalance: usdcDecimal(hold.freeRaw > 0n ? hold.freeRaw : 0n),
      }),
    );
  const limit = hold.limit ? describeLimit(hold.limit, paywall, price) : null;
  if (reason === 'rate_limited' && limit)
    events.push(
      buildEvent('paywall.usage.rate.limited', onUser, {
        limit: hold.limit!,
        value: limit.value,
        date: utcDay(now),
        model: req.model,
        walletUserId,
      }),
    );
  // The link's event follows the request's own (started, then blocked, docs/reference.md §7), and is
  // recorded with them: a subscriber never sees a link announced for a request it has not seen start.
  const endUser = { id: hold.userId, externalId: externalUserId, walletUserId };
  const url = await deps.db.transaction(async (tx) => {
    let link: string | null = null;
    if (reason === 'not_connected') {
      const connect = await deps.links.connectRequest(tx, paywall, endUser, trigger);
      link = connect.url;
      events.push(connect.event);
    } else if (reason === 'insufficient_balance') {
      link = await deps.links.topupUrl(paywall, externalUserId, tx);
      events.push(deps.links.topupLinkEvent(paywall, endUser, link, trigger));
    } else if (reason === 'allowance_exceeded') link = deps.links.walletUrl();
    // SHARED: the wallet page lists the key (and can revoke it); DEFAULT mode has no page about keys, and
    // nothing to pay would lift a limit the app set.
    else if (reason === 'key_limit_exceeded' && paywall.mode === 'SHARED') link = deps.links.walletUrl();
    await recordEvents(tx, events);
    return link;
  });
  // The app's allowance is used up: announced once per period (docs/reference.md §16).
  const allowance = reason === 'allowance_exceeded' ? (hold.allowance ?? null) : null;
  const allowanceResets = allowance
    ? periodEnd(allowance.period, new Date(`${allowance.periodStart}T00:00:00.000Z`))
    : null;
  if (allowance && walletUserId)
    await recordAllowanceReached(deps.db, {
      connectionId: allowance.connectionId,
      paywall,
      walletUserId,
      endUserId: hold.userId,
      externalUserId,
      amountRaw: allowance.amountRaw,
      period: allowance.period,
      spentRaw: allowance.spentRaw,
      periodStart: allowance.periodStart,
      resetsAt: allowanceResets,
      trigger,
    });

  const keyLimit = reason === 'key_limit_exceeded' ? (hold.keyLimit ?? null) : null;
  const keyResets = keyLimit
    ? periodEnd(keyLimit.period, new Date(`${keyLimit.periodStart}T00:00:00.000Z`))
    : null;
  const reply =
    reason === 'key_limit_exceeded'
      ? blockedReply({
          model: req.model,
          reason,
          url,
          text: keyLimitText(keyLimit?.amountRaw ?? 0n, keyLimit?.period ?? 'total', keyResets),
          ...(keyResets ? { resetsAt: keyResets } : {}),
        })
      : reason === 'allowance_exceeded' && url !== null
        ? blockedReply({
            model: req.model,
            reason,
            url,
            text: allowanceText(
              allowance?.amountRaw ?? 0n,
              allowance?.period ?? 'total',
              allowanceResets,
              url,
            ),
            ...(allowanceResets ? { resetsAt: allowanceResets } : {}),
          })
        : reason === 'rate_limited' || url === null
          ? blockedReply({
              model: req.model,
              reason,
              url: null,
              text: rateLimitedText(limit?.what ?? 'requests', nextUtcMidnight(now)),
              resetsAt: nextUtcMidnight(now),
            })
          : blockedReply({
              model: req.model,
              reason,
              url,
              text: blockedText(
                reason === 'not_connected' ? paywall.connectMessageTemplate : paywall.topupMessageTemplate,
                reason === 'not_connected' ? reason : 'insufficient_balance',
                url,
              ),
            });
  if (!req.stream || !sink) return { status: 200, ...fmt.blockedHttp?.(reply), body: fmt.blockedJson(reply) };
  sink.open();
  sink.write(fmt.blockedStream(reply, req));
  sink.end();
  return null;
}
