import { defineEntity, p } from '@mikro-orm/core';
import { LedgerAccount } from '../accounts/account.entity.js';

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
