import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';
import { EndUser } from '../users/end-user.entity.js';

/**
 * An end-user key (docs/reference.md §19): names a paywall and one of its end users at once, for tools that
 * take one API key and a base URL. Only the key's SHA-256 hash is stored (and its last four characters).
 * The optional spending limit (`limitRaw` per `limitPeriod`) is counted like a wallet allowance: what the
 * key spent in the period starting on `limitPeriodStart`, under the row's lock in the hold's statement.
 */
export const UserKeySchema = defineEntity({
  name: 'UserKey',
  tableName: 'user_key',
  indexes: [{ properties: ['paywall', 'endUser'] }],
  checks: [
    {
      name: 'user_key_limit_check',
      expression: `(limit_raw is null and limit_period is null)
             or (limit_raw >= 0 and limit_period in ('day', 'week', 'month', 'total'))`,
    },
  ],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    endUser: () => p.manyToOne(EndUser).mapToPk(),
    name: p.string().length(200),
    keyHash: p.string().length(64).unique(),
    lastFour: p.string().length(4),
    createdAt: p.datetime().defaultRaw('now()'),
    lastUsedAt: p.datetime().nullable(),
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    /** Written by SQL only: the hold's and the settlement's steps of `ledger_tick` (migrations/sql/ledger-functions-v5.ts). */
    limitRaw: p.bigint('bigint').nullable(),
    limitPeriod: p.string().length(8).nullable(),
    limitSpentRaw: p.bigint('bigint').defaultRaw('0'),
    limitPeriodStart: p.date().nullable(),
  },
});
export class UserKey extends UserKeySchema.class {}
UserKeySchema.setClass(UserKey);
