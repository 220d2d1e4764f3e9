import { defineEntity, p } from '@mikro-orm/core';
import { Owner } from '../owners/owner.entity.js';

export const WALLET_MODES = ['DEFAULT', 'SHARED'] as const;
export type WalletMode = (typeof WALLET_MODES)[number];

/**
 * A paywall: one API key (hashed), a wallet mode fixed at creation, pricing settings.
 * `markupPpm` is the markup in millionths (1.5x = 1500000).
 */
export const PaywallSchema = defineEntity({
  name: 'Paywall',
  tableName: 'paywall',
  properties: {
    id: p.uuid().primary(),
    owner: () => p.manyToOne(Owner).mapToPk().index(),
    name: p.string().length(200),
    /** Shown to wallet users on the consent page (SHARED mode). */
    description: p.text().nullable(),
    mode: p.enum(WALLET_MODES).nativeEnumName('wallet_mode'),
    apiKeyHash: p.string().length(64).unique(),
    apiKeyLastFour: p.string().length(4),
    markupPpm: p.bigint('bigint').defaultRaw('1000000').check('markup_ppm > 0'),
    topupUrl: p.text().nullable(),
    trialCreditsRaw: p.bigint('bigint').defaultRaw('0').check('trial_credits_raw >= 0'),
    connectMessageTemplate: p.text().nullable(),
    topupMessageTemplate: p.text().nullable(),
    /** docs/reference.md §10: chat requests per end user per UTC day (null = no limit). */
    dailyRequestLimit: p.integer().nullable().check('daily_request_limit >= 0'),
    /** docs/reference.md §10: chat spend per end user per UTC day, raw units (null = no limit). */
    dailySpendLimitRaw: p.bigint('bigint').nullable().check('daily_spend_limit_raw >= 0'),
    /** docs/reference.md §16 "Low balance": `paywall.balance.low` below this free balance (null = off). */
    lowBalanceThresholdRaw: p.bigint('bigint').nullable().check('low_balance_threshold_raw > 0'),
    archivedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class Paywall extends PaywallSchema.class {}
PaywallSchema.setClass(Paywall);
