import { defineEntity, p } from '@mikro-orm/core';
import { LedgerAccount } from '../accounts/account.entity.js';
import { Paywall } from '../paywalls/paywall.entity.js';

/**
 * An end user of one paywall, created on first sight. `account` is the ledger account it spends: its
 * own in DEFAULT mode; in SHARED mode its wallet's once connected, none otherwise.
 */
export const EndUserSchema = defineEntity({
  name: 'EndUser',
  tableName: 'end_user',
  uniques: [{ properties: ['paywall', 'externalId'] }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    externalId: p.string().length(256),
    account: () => p.manyToOne(LedgerAccount).mapToPk().nullable(),
    /** SHARED mode: the hosted-wallet user this end user is connected to (null = not connected). */
    walletUserId: p.uuid().nullable(),
    connectedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class EndUser extends EndUserSchema.class {}
EndUserSchema.setClass(EndUser);
