import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';
import { WalletUser } from '../wallet/wallet.entity.js';
import { EndUser } from './end-user.entity.js';

/** A connect link handed out (`paywall.authorization.requested`): valid 24 h, decided once. */
export const ConnectRequestSchema = defineEntity({
  name: 'ConnectRequest',
  tableName: 'connect_request',
  indexes: [{ properties: ['endUser', 'createdAt'] }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    endUser: () => p.manyToOne(EndUser).mapToPk(),
    status: p.string().length(16).default('pending'),
    walletUserId: p.uuid().nullable(),
    expiresAt: p.datetime(),
    createdAt: p.datetime().defaultRaw('now()'),
    decidedAt: p.datetime().nullable(),
  },
});
export class ConnectRequest extends ConnectRequestSchema.class {}
ConnectRequestSchema.setClass(ConnectRequest);

/** An approved authorization: end user (of one paywall) ↔ wallet user, until revoked. */
export const WalletConnectionSchema = defineEntity({
  name: 'WalletConnection',
  tableName: 'wallet_connection',
  indexes: [{ properties: ['paywall', 'createdAt'] }, { properties: ['walletUser', 'createdAt'] }],
  checks: [
    {
      name: 'wallet_connection_allowance_check',
      expression: `(allowance_raw is null and allowance_period is null)
             or (allowance_raw >= 0 and allowance_period in ('day', 'week', 'month', 'total'))`,
    },
  ],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    endUser: () => p.manyToOne(EndUser).mapToPk(),
    walletUser: () => p.manyToOne(WalletUser).mapToPk(),
    createdAt: p.datetime().defaultRaw('now()'),
    revokedAt: p.datetime().nullable(),
    /**
     * docs/reference.md §16 "Allowance (SHARED)": the wallet user's spending limit for this app (null = none)
     * and its period; what the app spent in the period starting on `allowancePeriodStart`; the period
     * `paywall.allowance.reached` was recorded for. Written by SQL only (src/modules/wallet/allowance.ts).
     */
    allowanceRaw: p.bigint('bigint').nullable(),
    allowancePeriod: p.string().length(8).nullable(),
    allowanceSpentRaw: p.bigint('bigint').defaultRaw('0'),
    allowancePeriodStart: p.date().nullable(),
    allowanceReachedStart: p.date().nullable(),
  },
});
export class WalletConnection extends WalletConnectionSchema.class {}
WalletConnectionSchema.setClass(WalletConnection);
