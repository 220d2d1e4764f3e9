import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';
import { EndUser } from '../users/end-user.entity.js';
import { LedgerAccount } from '../accounts/account.entity.js';
import { Charge } from './ledger.entity.js';

/**
 * A refund of a completed charge (docs/reference.md §16 "Refunds", docs/ledger.md "Refunds"): money given
 * back from the paywall's earnings (and, SHARED, the platform fee in proportion) to the account that
 * paid. `amountRaw` = `earningsRaw` + `feeRaw` (the parts, to the raw unit). Its ledger movement is the
 * transfer whose id is the refund's id (`refund`, earnings → payer) and, when `feeRaw` > 0, a
 * `fee_refund` transfer (fees → earnings).
 */
export const RefundSchema = defineEntity({
  name: 'Refund',
  tableName: 'refund',
  indexes: [{ properties: ['charge', 'createdAt'] }, { properties: ['paywall', 'createdAt'] }],
  checks: [{ name: 'refund_parts_add_up', expression: 'amount_raw = earnings_raw + fee_raw' }],
  properties: {
    id: p.uuid().primary(),
    paywall: () => p.manyToOne(Paywall).mapToPk(),
    charge: () => p.manyToOne(Charge).mapToPk(),
    user: () => p.manyToOne(EndUser).mapToPk(),
    /** The account credited: the one the charge took the money from. */
    account: () => p.manyToOne(LedgerAccount).mapToPk(),
    amountRaw: p.bigint('bigint').check('amount_raw > 0'),
    /** What the paywall's earnings gave back (the amount less the fee part). */
    earningsRaw: p.bigint('bigint').check('earnings_raw >= 0'),
    /** What the platform's fee account gave back (SHARED; 0 in DEFAULT mode). */
    feeRaw: p.bigint('bigint').check('fee_raw >= 0'),
    reason: p.string().length(500).nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class Refund extends RefundSchema.class {}
RefundSchema.setClass(Refund);
