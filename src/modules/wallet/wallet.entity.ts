import { defineEntity, p } from '@mikro-orm/core';
import { LedgerAccount } from '../ledger/account.entity.js';
import { Paywall } from '../paywalls/paywall.entity.js';
import { EndUser } from '../users/end-user.entity.js';

/** A person with a hosted wallet (SHARED mode), known by e-mail; one `wallet` account serves every app. */
export const WalletUserSchema = defineEntity({
  name: 'WalletUser',
  tableName: 'wallet_user',
  properties: {
    id: p.uuid().primary(),
    email: p.string().length(254).unique(),
    account: () => p.oneToOne(LedgerAccount).mapToPk().owner().unique(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class WalletUser extends WalletUserSchema.class {}
WalletUserSchema.setClass(WalletUser);

/**
 * A one-time sign-in code sent by e-mail (hashed; single use, 10 minutes, 5 tries), bound to the browser
 * that asked for it (`challengeHash`: SHA-256 of its sign-in cookie).
 */
export const WalletSignInSchema = defineEntity({
  name: 'WalletSignIn',
  tableName: 'wallet_sign_in',
  indexes: [{ properties: ['email', 'createdAt'] }, { properties: ['ip', 'createdAt'] }],
  properties: {
    id: p.uuid().primary(),
    email: p.string().length(254),
    codeHash: p.string().length(64),
    challengeHash: p.string().length(64).nullable(),
    /** The known browser (signed in to this address before) that asked, or null: counted apart. */
    browserHash: p.string().length(64).nullable(),
    /** False when a send limit held the request back (its code was never e-mailed, nor known). */
    sent: p.boolean().default(true),
    ip: p.string().length(64),
    attempts: p.integer().default(0),
    expiresAt: p.datetime(),
    usedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class WalletSignIn extends WalletSignInSchema.class {}
WalletSignInSchema.setClass(WalletSignIn);

/**
 * A browser that signed in to an address (its long-lived cookie holds the token, the database its hash):
 * its code requests for that address are limited on their own, so strangers cannot use them up.
 */
export const WalletKnownBrowserSchema = defineEntity({
  name: 'WalletKnownBrowser',
  tableName: 'wallet_known_browser',
  properties: {
    tokenHash: p.string().length(64).primary(),
    email: p.string().length(254),
    createdAt: p.datetime().defaultRaw('now()'),
    lastUsedAt: p.datetime().defaultRaw('now()'),
  },
});
export class WalletKnownBrowser extends WalletKnownBrowserSchema.class {}
WalletKnownBrowserSchema.setClass(WalletKnownBrowser);

/** A signed-in browser: the cookie holds the token, the database its hash. */
export const WalletSessionSchema = defineEntity({
  name: 'WalletSession',
  tableName: 'wallet_session',
  properties: {
    id: p.uuid().primary(),
    tokenHash: p.string().length(64).unique(),
    walletUser: () => p.manyToOne(WalletUser).mapToPk().index(),
    expiresAt: p.datetime(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class WalletSession extends WalletSessionSchema.class {}
WalletSessionSchema.setClass(WalletSession);

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
