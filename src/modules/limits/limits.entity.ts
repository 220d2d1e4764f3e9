import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';
import { EndUser } from '../users/end-user.entity.js';

/**
 * An end user's usage on its current UTC day (docs/reference.md §10), one row per end user created with it:
 * chat requests, chat spend (holds while they run, then what was charged) and requests per model. The
 * hold's statement locks this row, so the daily limits are exact across instances and under concurrency;
 * a new day starts the counts over (the row keeps only the current day).
 */
export const UsageCounterSchema = defineEntity({
  name: 'UsageCounter',
  tableName: 'usage_counter',
  properties: {
    endUser: () => p.oneToOne(EndUser).mapToPk().owner().primary(),
    day: p.date().nullable(),
    requests: p.integer().default(0),
    spendRaw: p.bigint('bigint').defaultRaw('0'),
    modelRequests: p.json<Record<string, number>>().defaultRaw(`'{}'`),
  },
});
export class UsageCounter extends UsageCounterSchema.class {}
UsageCounterSchema.setClass(UsageCounter);

/**
 * The API rate limit's counter (docs/reference.md §10): requests of one paywall key in the current minute, shared
 * by every instance (PostgreSQL is the shared state). A new minute starts the count over.
 */
export const RateWindowSchema = defineEntity({
  name: 'RateWindow',
  tableName: 'rate_window',
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary(),
    windowStart: p.datetime(),
    count: p.integer().default(0),
  },
});
export class RateWindow extends RateWindowSchema.class {}
RateWindowSchema.setClass(RateWindow);
