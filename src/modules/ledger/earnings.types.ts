import { Field, ID, InputType, ObjectType, registerEnumType } from 'type-graphql';
import { MoneyScalar } from '../../graphql/scalars.js';
import { Connection } from '../../graphql/connection.js';
import { WITHDRAWAL_STATUSES, type WithdrawalStatus } from '../accounts/account.entity.js';
import type { Earnings, EarningsEntry, WithdrawalRow } from './earnings.service.js';

export const WithdrawalStatusEnum = Object.fromEntries(WITHDRAWAL_STATUSES.map((s) => [s, s])) as {
  [K in WithdrawalStatus]: K;
};
registerEnumType(WithdrawalStatusEnum, {
  name: 'WithdrawalStatus',
  description:
    'PENDING until the operator pays it (PAID) or it fails (FAILED, funds returned); CANCELED by you.',
});

@ObjectType('Earnings', {
  description: "A paywall's earnings (SHARED mode: what wallet users paid, less fees).",
})
export class EarningsType {
  @Field(() => MoneyScalar, { description: 'Withdrawable now.' }) available!: bigint;
  @Field(() => MoneyScalar, { description: 'Requested withdrawals not yet paid.' }) pending!: bigint;
  @Field(() => MoneyScalar, { description: 'Paid out.' }) withdrawn!: bigint;
  @Field(() => MoneyScalar, { description: 'Platform fees taken from your charges (PLATFORM_FEE_BPS).' })
  fees!: bigint;

  static from(e: Earnings): EarningsType {
    return Object.assign(new EarningsType(), {
      available: e.availableRaw,
      pending: e.pendingRaw,
      withdrawn: e.withdrawnRaw,
      fees: e.feesRaw,
    });
  }
}

@ObjectType('EarningsEntry', { description: 'One movement of the earnings account.' })
export class EarningsEntryType {
  @Field(() => ID, { description: 'The transfer id.' }) id!: string;
  @Field({
    description:
      '`usage` (a chat), `charge` (a manual charge), `withdrawal` (out), `withdrawal_return` (a failed or canceled withdrawal back).',
  })
  kind!: string;
  @Field(() => MoneyScalar, { description: 'Signed: positive in, negative out.' }) amount!: bigint;
  @Field(() => ID, { nullable: true }) chargeId!: string | null;
  @Field(() => ID, { nullable: true }) withdrawalId!: string | null;
  @Field(() => String, { nullable: true }) model!: string | null;
  @Field() createdAt!: string;

  static from(e: EarningsEntry): EarningsEntryType {
    return Object.assign(new EarningsEntryType(), {
      id: e.id,
      kind: e.kind,
      amount: e.amountRaw,
      chargeId: e.chargeId,
      withdrawalId: e.withdrawalId,
      model: e.model,
      createdAt: e.createdAt.toISOString(),
    });
  }
}

export const EarningsEntryConnection = Connection(EarningsEntryType, {
  connection: 'EarningsEntryConnection',
  edge: 'EarningsEntryEdge',
  description: 'Movements of the earnings account, newest first.',
});
export type EarningsEntryConnection = InstanceType<typeof EarningsEntryConnection>;

@ObjectType('Withdrawal')
export class WithdrawalType {
  @Field(() => ID) id!: string;
  @Field(() => ID) paywallId!: string;
  @Field(() => MoneyScalar) amount!: bigint;
  @Field() destination!: string;
  @Field(() => WithdrawalStatusEnum) status!: WithdrawalStatus;
  @Field(() => String, { nullable: true }) failureReason!: string | null;
  @Field() createdAt!: string;
  @Field() updatedAt!: string;

  static from(w: WithdrawalRow): WithdrawalType {
    return Object.assign(new WithdrawalType(), {
      id: w.id,
      paywallId: w.paywallId,
      amount: w.amountRaw,
      destination: w.destination,
      status: w.status,
      failureReason: w.failureReason,
      createdAt: w.createdAt.toISOString(),
      updatedAt: w.updatedAt.toISOString(),
    });
  }
}

export const WithdrawalConnection = Connection(WithdrawalType, {
  connection: 'WithdrawalConnection',
  edge: 'WithdrawalEdge',
});
export type WithdrawalConnection = InstanceType<typeof WithdrawalConnection>;

@InputType()
export class RequestWithdrawalInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field({ description: 'USDC decimal string > 0, at most the available earnings.' }) amount!: string;
  @Field({ description: 'Where the payout goes (e.g. a bank reference or an address), 1 to 500 characters.' })
  destination!: string;
}
