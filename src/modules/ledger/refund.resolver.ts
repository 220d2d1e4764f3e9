import DataLoader from 'dataloader';
import { Arg, Ctx, FieldResolver, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { DomainError } from '../../shared/errors.js';
import { MoneyScalar } from '../../graphql/scalars.js';
import { triggerOf } from '../users/user.service.js';
import { ChargeType, LedgerEntryType, ReceiptType } from './ledger.types.js';
import type { RefundRow, RefundState } from './refund.service.js';
import { RefundChargeInput, RefundType } from './refund.types.js';

/** The refunds of every charge in a response, in one statement. */
const refundsOf = (ctx: AppContext, chargeId: string): Promise<RefundRow[]> =>
  ctx.loaders
    .get(
      'refundsOfCharges',
      () => new DataLoader<string, RefundRow[]>((ids) => ctx.services.refunds.ofCharges(ids)),
    )
    .load(chargeId);

const sum = (rows: RefundRow[]) => rows.reduce((s, r) => s + r.amountRaw, 0n);

/** What a charge took from the account that paid: its captured amount and later debt repayments. */
export const paidOf = (c: Pick<ChargeType, 'status' | 'amount' | 'recovered'>): bigint =>
  c.status === 'completed' ? c.amount + c.recovered : 0n;

/** `refundCharge`, and the refunds of a charge and of its receipt. */
@Resolver(() => ChargeType)
export class RefundResolver {
  @Mutation(() => RefundType, {
    description:
      'Gives back up to what a charge took, less its earlier refunds, to the account that paid ' +
      '(docs/reference.md §16 "Refunds"). Idempotent with idempotencyKey.',
  })
  async refundCharge(@Ctx() ctx: AppContext, @Arg('input') input: RefundChargeInput): Promise<RefundType> {
    const auth = requireAuth(ctx);
    const { result, replayed } = await ctx.services.refunds
      .refund(auth, input, { idempotencyKey: input.idempotencyKey, trigger: triggerOf(auth, ctx.transport) })
      .catch((e) => {
        if (e instanceof DomainError && (e as DomainError & { replayed?: boolean }).replayed)
          ctx.replayed = true;
        throw e;
      });
    if (replayed) ctx.replayed = true;
    return RefundType.from(result);
  }

  @FieldResolver(() => [RefundType], { description: "The charge's refunds, oldest first." })
  async refunds(@Ctx() ctx: AppContext, @Root() charge: ChargeType): Promise<RefundType[]> {
    return (await refundsOf(ctx, charge.id)).map(RefundType.from);
  }

  @FieldResolver(() => MoneyScalar, { description: 'The sum of its refunds.' })
  async refundedAmount(@Ctx() ctx: AppContext, @Root() charge: ChargeType): Promise<bigint> {
    return sum(await refundsOf(ctx, charge.id));
  }

  @FieldResolver(() => MoneyScalar, {
    description: 'What may still be refunded: what the charge took (amount + recovered) less its refunds.',
  })
  async refundable(@Ctx() ctx: AppContext, @Root() charge: ChargeType): Promise<bigint> {
    const rest = paidOf(charge) - sum(await refundsOf(ctx, charge.id));
    return rest > 0n ? rest : 0n;
  }
}

/** Refunds on a receipt: what was given back, and the net amount the user paid. */
@Resolver(() => ReceiptType)
export class ReceiptRefundResolver {
  @FieldResolver(() => [RefundType], { description: "The charge's refunds, oldest first." })
  async refunds(@Ctx() ctx: AppContext, @Root() receipt: ReceiptType): Promise<RefundType[]> {
    return (await refundsOf(ctx, receipt.chargeId)).map(RefundType.from);
  }

  @FieldResolver(() => MoneyScalar, { description: 'The sum of the refunds.' })
  async refunded(@Ctx() ctx: AppContext, @Root() receipt: ReceiptType): Promise<bigint> {
    return sum(await refundsOf(ctx, receipt.chargeId));
  }

  @FieldResolver(() => MoneyScalar, {
    description: 'What the user paid in the end: what the balance paid of the total, less the refunds.',
  })
  async net(@Ctx() ctx: AppContext, @Root() receipt: ReceiptType): Promise<bigint> {
    return receipt.paidRaw - sum(await refundsOf(ctx, receipt.chargeId));
  }
}

/** A charge's entry of a user's ledger: what may still be refunded of it, and what was (the dashboard's Refund). */
@Resolver(() => LedgerEntryType)
export class LedgerEntryRefundResolver {
  private state(ctx: AppContext, e: LedgerEntryType) {
    if (!e.chargeId || !['charge', 'usage'].includes(e.kind)) return null;
    return ctx.loaders
      .get(
        'refundStates',
        () => new DataLoader<string, RefundState>((ids) => ctx.services.refunds.states(ids)),
      )
      .load(e.chargeId);
  }

  @FieldResolver(() => MoneyScalar, {
    nullable: true,
    description: "A charge's entry: what may still be refunded (refundCharge); null for other entries.",
  })
  async refundable(@Ctx() ctx: AppContext, @Root() e: LedgerEntryType): Promise<bigint | null> {
    const s = await this.state(ctx, e);
    return s ? s.refundableRaw : null;
  }

  @FieldResolver(() => MoneyScalar, {
    nullable: true,
    description: "A charge's entry: what was refunded of it so far; null for other entries.",
  })
  async refunded(@Ctx() ctx: AppContext, @Root() e: LedgerEntryType): Promise<bigint | null> {
    const s = await this.state(ctx, e);
    return s ? s.refundedRaw : null;
  }
}
