import { Field, ID, InputType, ObjectType, registerEnumType } from 'type-graphql';
import { MoneyScalar } from '../../graphql/scalars.js';
import type { UserKeyRecord } from './user-key.service.js';

export enum UserKeyLimitPeriod {
  DAY = 'DAY',
  WEEK = 'WEEK',
  MONTH = 'MONTH',
  TOTAL = 'TOTAL',
}
registerEnumType(UserKeyLimitPeriod, {
  name: 'UserKeyLimitPeriod',
  description: 'UTC calendar periods (weeks from Monday); TOTAL never resets.',
});

@ObjectType('UserKeyLimit', { description: "An end-user key's spending limit, as of now." })
export class UserKeyLimitType {
  @Field(() => MoneyScalar, { description: 'The limit per period.' }) amount!: bigint;
  @Field(() => UserKeyLimitPeriod) period!: UserKeyLimitPeriod;
  @Field(() => MoneyScalar, {
    description: 'Spent with this key in the current period (holds in flight included).',
  })
  spent!: bigint;
  @Field(() => String, { nullable: true, description: 'When the current period ends; null for TOTAL.' })
  resetsAt!: string | null;
}

@ObjectType('UserKey', {
  description:
    'An end-user key (docs/reference.md §19): acts as one end user of one paywall on the proxy routes. The key itself is shown once, when created.',
})
export class UserKeyType {
  @Field(() => ID) id!: string;
  @Field() name!: string;
  @Field() externalUserId!: string;
  @Field({ description: 'The last four characters of the key.' }) lastFour!: string;
  @Field() createdAt!: string;
  @Field(() => String, { nullable: true, description: 'Updated at most once a minute.' })
  lastUsedAt!: string | null;
  @Field(() => String, { nullable: true }) expiresAt!: string | null;
  @Field(() => String, { nullable: true }) revokedAt!: string | null;
  @Field(() => UserKeyLimitType, { nullable: true, description: 'null: no limit of its own.' })
  limit!: UserKeyLimitType | null;

  static from(k: UserKeyRecord): UserKeyType {
    return Object.assign(new UserKeyType(), {
      id: k.id,
      name: k.name,
      externalUserId: k.externalUserId,
      lastFour: k.lastFour,
      createdAt: k.createdAt.toISOString(),
      lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
      expiresAt: k.expiresAt?.toISOString() ?? null,
      revokedAt: k.revokedAt?.toISOString() ?? null,
      limit: k.limit
        ? Object.assign(new UserKeyLimitType(), {
            amount: k.limit.amountRaw,
            period: k.limit.period.toUpperCase() as UserKeyLimitPeriod,
            spent: k.limit.spentRaw,
            resetsAt: k.limit.resetsAt?.toISOString() ?? null,
          })
        : null,
    });
  }
}

@InputType()
export class CreateUserKeyInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string | null;
  @Field({ description: 'The end user the key acts as (created on first sight).' }) externalUserId!: string;
  @Field(() => String, {
    nullable: true,
    description: 'A label, e.g. the tool or machine; default "default".',
  })
  name?: string | null;
  @Field(() => String, { nullable: true, description: 'Spending limit in USDC per period; null: none.' })
  limit?: string | null;
  @Field(() => UserKeyLimitPeriod, { nullable: true, description: 'Default MONTH when a limit is given.' })
  limitPeriod?: UserKeyLimitPeriod | null;
  @Field(() => String, {
    nullable: true,
    description: 'ISO 8601 date-time after which the key stops working.',
  })
  expiresAt?: string | null;
}

@ObjectType('CreateUserKeyPayload')
export class CreateUserKeyPayload {
  @Field({ description: 'The key (`uk_…`). Shown only here: store it now.' }) key!: string;
  @Field(() => UserKeyType) userKey!: UserKeyType;
}

@InputType()
export class RevokeUserKeyInput {
  @Field(() => ID, { nullable: true }) paywallId?: string | null;
  @Field(() => ID) id!: string;
}
