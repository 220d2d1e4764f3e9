import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';

/**
 * An end user of one paywall, created on first sight. `balanceRaw` is the settled balance (the sum of
 * the user's ledger entries); `heldRaw` is reserved by open holds. Free balance = balance − held.
 */
export const EndUserSchema = defineEntity({
  name: 'EndUser',
  tableName: 'end_user',
  uniques: [{ properties: ['paywall', 'externalId'] }],
  checks: [{ name: 'end_user_held_within_balance', expression: 'held_raw <= balance_raw' }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    externalId: p.string().length(256),
    balanceRaw: p.bigint('bigint').defaultRaw('0').check('balance_raw >= 0'),
    heldRaw: p.bigint('bigint').defaultRaw('0').check('held_raw >= 0'),
    /** SHARED mode: the hosted-wallet user this end user is connected to (null = not connected). */
    walletUserId: p.uuid().nullable(),
    connectedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class EndUser extends EndUserSchema.class {}
EndUserSchema.setClass(EndUser);
