import { Field, ID, InputType, ObjectType } from 'type-graphql';
import { MoneyScalar } from '../../graphql/scalars.js';
import type { RefundResult, RefundRow } from './refund.service.js';

@InputType({ description: 'docs/reference.md §16 "Refunds".' })
export class RefundChargeInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field(() => ID, { description: 'The charge to refund (a manual or usage charge of this paywall).' })
  chargeId!: string;
  @Field(() => String, {
    nullable: true,
    description:
      'USDC decimal string > 0 with at most 6 fraction digits. Left out: the whole refundable rest of the charge.',
  })
  amount?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Shown to the user on the wallet page; at most 500 characters.',
  })
  reason?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Same as the REST Idempotency-Key header: a repeated key replays the first refund.',
  })
  idempotencyKey?: string | null;
}

@ObjectType('Refund', {
  description:
    'Money given back for a charge, to the account that paid it (docs/reference.md §16 "Refunds"). ' +
    'amount = fromEarnings + fromFee.',
})
export class RefundType {
  @Field(() => ID, { description: "The refund's id (`activityId` of paywall.balance.refund.created)." })
  id!: string;
  @Field(() => ID) chargeId!: string;
  @Field(() => MoneyScalar) amount!: bigint;
  @Field(() => MoneyScalar, { description: "The part the paywall's earnings gave back." })
  fromEarnings!: bigint;
  @Field(() => MoneyScalar, {
    description: 'The part of the platform fee given back (SHARED; 0 in DEFAULT).',
  })
  fromFee!: bigint;
  @Field(() => String, { nullable: true }) reason!: string | null;
  @Field() createdAt!: string;

  static from(r: RefundRow | RefundResult): RefundType {
    return Object.assign(new RefundType(), {
      id: r.id,
      chargeId: r.chargeId,
      amount: r.amountRaw,
      fromEarnings: r.earningsRaw,
      fromFee: r.feeRaw,
      reason: r.reason,
      createdAt: typeof r.createdAt === 'string' ? r.createdAt : r.createdAt.toISOString(),
    });
  }
}
