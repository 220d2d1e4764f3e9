import type { WalletMode } from './paywall.entity.js';

/** The in-memory view of a paywall the request path needs; cached by API-key hash. */
export interface PaywallInfo {
  id: string;
  ownerId: string;
  name: string;
  /** Shown on the hosted consent page (SHARED). */
  description: string | null;
  mode: WalletMode;
  markupPpm: bigint;
  topupUrl: string | null;
  trialCreditsRaw: bigint;
  /** docs/reference.md §10: chat requests per end user per UTC day; null = no limit. */
  dailyRequestLimit: number | null;
  /** docs/reference.md §10: chat spend per end user per UTC day (raw units); null = no limit. */
  dailySpendLimitRaw: bigint | null;
  /** docs/reference.md §16 "Low balance": free balance below which `paywall.balance.low` is recorded; null = off. */
  lowBalanceThresholdRaw: bigint | null;
  connectMessageTemplate: string | null;
  topupMessageTemplate: string | null;
  archivedAt: Date | null;
  apiKeyLastFour: string;
  createdAt: Date;
  updatedAt: Date;
}

/** Who is calling: an owner (developer account) or a paywall's API key. */
export type Auth = { kind: 'owner'; ownerId: string } | { kind: 'apiKey'; paywall: PaywallInfo };
