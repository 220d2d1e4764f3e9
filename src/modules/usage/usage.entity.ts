import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';

/**
 * Tokens per usage bucket (docs/reference.md §13), parts of the prompt and completion totals: cache read,
 * cache write and audio prompt of the input; reasoning and audio completion of the output.
 */
const bucketTokens = () => ({
  cacheReadTokens: p.bigint('bigint'),
  cacheWriteTokens: p.bigint('bigint'),
  audioPromptTokens: p.bigint('bigint'),
  reasoningTokens: p.bigint('bigint'),
  audioCompletionTokens: p.bigint('bigint'),
  /** docs/reference.md §22: image input and output tokens, and the units charged besides tokens. */
  imagePromptTokens: p.bigint('bigint'),
  imageCompletionTokens: p.bigint('bigint'),
  images: p.bigint('bigint'),
  audioSeconds: p.bigint('bigint'),
  characters: p.bigint('bigint'),
});

/**
 * Daily roll-ups of completed charges (by UTC day of settlement), written lazily by the usage query for
 * days that are over: a year of a busy paywall is then a few thousand rows instead of a million charges.
 * Days not rolled up yet (today, or any day after `usage_rollup.rolled_through`) are read from `charge`.
 * `model` is '' for manual charges.
 */
export const UsageDayModelSchema = defineEntity({
  name: 'UsageDayModel',
  tableName: 'usage_day_model',
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary(),
    day: p.date().primary(),
    model: p.string().length(200).primary(),
    requests: p.bigint('bigint'),
    revenueRaw: p.bigint('bigint'),
    costRaw: p.bigint('bigint'),
    promptTokens: p.bigint('bigint'),
    completionTokens: p.bigint('bigint'),
    ...bucketTokens(),
  },
});
export class UsageDayModel extends UsageDayModelSchema.class {}
UsageDayModelSchema.setClass(UsageDayModel);

/**
 * Per end user, running totals: each row holds everything the user was charged from the start through
 * `day` (a row only for days with charges). A user's usage over [from, to] is then the latest row ≤ to
 * minus the latest row < from: two index probes per user, whatever the range (the top-users ranking).
 */
export const UsageDayUserSchema = defineEntity({
  name: 'UsageDayUser',
  tableName: 'usage_day_user',
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary(),
    endUserId: p.uuid().primary(),
    day: p.date().primary(),
    requests: p.bigint('bigint'),
    revenueRaw: p.bigint('bigint'),
    costRaw: p.bigint('bigint'),
    promptTokens: p.bigint('bigint'),
    completionTokens: p.bigint('bigint'),
    ...bucketTokens(),
  },
});
export class UsageDayUser extends UsageDayUserSchema.class {}
UsageDayUserSchema.setClass(UsageDayUser);

/** How far a paywall's roll-ups go: every UTC day up to and including `rolledThrough` is rolled up. */
export const UsageRollupSchema = defineEntity({
  name: 'UsageRollup',
  tableName: 'usage_rollup',
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary(),
    rolledThrough: p.date(),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class UsageRollup extends UsageRollupSchema.class {}
UsageRollupSchema.setClass(UsageRollup);
