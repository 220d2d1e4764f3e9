import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';

/** A webhook subscription. `events` holds exact names, `prefix.*` families, or the lone `*`. */
export const WebhookSubscriptionSchema = defineEntity({
  name: 'WebhookSubscription',
  tableName: 'webhook_subscription',
  indexes: [{ properties: ['paywall', 'isActive'] }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    url: p.text(),
    events: p.array().columnType('text[]'),
    description: p.string().length(512).nullable(),
    customHeaders: p.json<Record<string, string>>().defaultRaw(`'{}'`),
    /** The signing secret, encrypted at rest (shared/crypto.ts, context: webhookSecretContext(id)). */
    secretCiphertext: p.text(),
    /** Its last 4 characters, shown on reads to tell secrets apart. */
    secretSuffix: p.string().length(4),
    /** The secret the last rotation replaced (encrypted, same context): it also signs until the time below. */
    previousSecretCiphertext: p.text().nullable(),
    /** The end of the rotation's grace period (24 h after it); null when there is none. */
    previousSecretExpiresAt: p.datetime().nullable(),
    isActive: p.boolean().default(true),
    createdBy: p.string().length(100),
    consecutiveFailures: p.integer().default(0),
    lastDeliveredAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class WebhookSubscription extends WebhookSubscriptionSchema.class {}
WebhookSubscriptionSchema.setClass(WebhookSubscription);

/**
 * One delivery of one event to one subscription: the outbox row. Claimed by workers with
 * `FOR UPDATE SKIP LOCKED`; `leaseUntil` lets another worker retry it when a worker dies mid-send.
 */
export const WebhookDeliverySchema = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_delivery',
  indexes: [
    { properties: ['status', 'nextAttemptAt'] },
    { properties: ['subscription', 'createdAt'] },
    { properties: ['paywallId', 'createdAt'] },
  ],
  // One delivery per event and subscription; `eventId` first, so retention (which removes an event's
  // deliveries with it, docs/reference.md §18 "Retention") and a resend find an event's deliveries by it.
  uniques: [{ properties: ['eventId', 'subscription'] }],
  properties: {
    id: p.uuid().primary(),
    // No foreign key: rows are written by the event_fanout trigger from a join with the subscription itself,
    // subscriptions are never deleted, and the check was one more query for every delivery of every event.
    subscription: () => p.manyToOne(WebhookSubscription).mapToPk().createForeignKeyConstraint(false),
    paywallId: p.uuid(),
    eventId: p.uuid(),
    eventType: p.string().length(100),
    status: p.string().length(16).default('pending'),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime().defaultRaw('now()').nullable(),
    leaseUntil: p.datetime().nullable(),
    responseStatus: p.integer().nullable(),
    responseLatencyMs: p.integer().nullable(),
    responseBody: p.text().nullable(),
    lastError: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class WebhookDelivery extends WebhookDeliverySchema.class {}
WebhookDeliverySchema.setClass(WebhookDelivery);
