import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';
import { EndUser } from '../users/end-user.entity.js';
import { LedgerAccount } from '../accounts/account.entity.js';

export const CHARGE_KINDS = ['manual', 'usage'] as const;
export const CHARGE_STATUSES = ['held', 'completed', 'released', 'failed'] as const;
export type ChargeStatus = (typeof CHARGE_STATUSES)[number];

/**
 * A charge: a manual charge (completed at once, or failed), or a chat request's usage charge, which
 * starts as a hold (`held`, `holdRaw` reserved) and settles to `completed` (amount captured) or
 * `released` (nothing produced). `uncollectedRaw` records usage that exceeded the hold.
 */
export const ChargeSchema = defineEntity({
  name: 'Charge',
  tableName: 'charge',
  // No (status, created_at) index: open holds and completed usage have partial indexes of their own
  // (migrations), and every index is one more entry written by each request's hold and settlement.
  indexes: [{ properties: ['user', 'createdAt'] }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    user: () => p.manyToOne(EndUser).mapToPk(),
    /** The account the hold was placed on (and the settlement debits). */
    account: () => p.manyToOne(LedgerAccount).mapToPk().nullable(),
    kind: p.string().length(16),
    status: p.string().length(16),
    holdRaw: p.bigint('bigint').defaultRaw('0').check('hold_raw >= 0'),
    amountRaw: p.bigint('bigint').defaultRaw('0').check('amount_raw >= 0'),
    uncollectedRaw: p.bigint('bigint').defaultRaw('0').check('uncollected_raw >= 0'),
    /** How much of `uncollectedRaw` was repaid later, from the free balance (debt recovery). */
    recoveredRaw: p.bigint('bigint').defaultRaw('0').check('recovered_raw >= 0'),
    model: p.string().length(200).nullable(),
    promptTokens: p.integer().nullable(),
    completionTokens: p.integer().nullable(),
    maxCompletionTokens: p.integer().nullable(),
    stream: p.boolean().default(false),
    errorCode: p.string().length(64).nullable(),
    metadata: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
    createdAt: p.datetime().defaultRaw('now()'),
    settledAt: p.datetime().nullable(),
    /** The end-user key the request came with (docs/reference.md §19); no foreign key: the hot path's insert checks nothing more. */
    userKeyId: p.uuid().nullable(),
  },
});
export class Charge extends ChargeSchema.class {}
ChargeSchema.setClass(Charge);

/**
 * Idempotency keys (docs/reference.md §4): claimed before the effect, completed with the stored response in
 * the effect's transaction. `completedAt` null = still in flight.
 */
export const IdempotencyKeySchema = defineEntity({
  name: 'IdempotencyKey',
  tableName: 'idempotency_key',
  indexes: [{ properties: ['createdAt'] }],
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary(),
    endpoint: p.string().length(64).primary(),
    key: p.string().length(255).primary(),
    requestHash: p.string().length(64),
    responseStatus: p.integer().nullable(),
    responseBody: p.json<unknown>().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    completedAt: p.datetime().nullable(),
  },
});
export class IdempotencyKey extends IdempotencyKeySchema.class {}
IdempotencyKeySchema.setClass(IdempotencyKey);
