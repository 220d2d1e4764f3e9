import { decodeCursor } from '../../shared/cursor.js';
import { Arg, Ctx, Field, FieldResolver, ID, Int, ObjectType, Resolver, Root } from 'type-graphql';
import type { AppContext } from '../../graphql/context.js';
import { PaywallType } from '../paywalls/paywall.types.js';
import type { ConnectionRow } from './user.service.js';
import { checkFirst, Connection } from '../../graphql/connection.js';
import { MoneyScalar } from '../../graphql/scalars.js';
import { allowanceOf } from '../wallet/allowance.js';

@ObjectType('Allowance', {
  description:
    'SHARED mode: the spending limit the wallet user set for this app (docs/reference.md §16), as of now.',
})
export class AllowanceType {
  @Field(() => MoneyScalar, { description: 'The limit per period.' }) amount!: bigint;
  @Field({ description: '`day`, `week` (from Monday), `month` (UTC calendar periods) or `total`.' })
  period!: string;
  @Field(() => MoneyScalar, {
    description: 'What the app spent in the current period (holds in flight included).',
  })
  spent!: bigint;
  @Field(() => String, { nullable: true, description: 'When the current period ends; null for `total`.' })
  resetsAt!: string | null;
}

@ObjectType('Connection', {
  description: 'SHARED mode: an end user of this paywall authorized by a wallet user (approve → revoke).',
})
export class WalletConnectionType {
  @Field(() => ID, { description: 'The connectionId of paywall.authorization.completed.' }) id!: string;
  @Field() externalUserId!: string;
  @Field(() => ID) walletUserId!: string;
  @Field({ description: '`ACTIVE` or `REVOKED`.' }) status!: string;
  @Field({ description: 'When the wallet user approved.' }) connectedAt!: string;
  @Field(() => String, { nullable: true }) revokedAt!: string | null;
  @Field(() => AllowanceType, { nullable: true, description: 'The spending limit for this app; null: none.' })
  allowance!: AllowanceType | null;

  static from(c: ConnectionRow, now: Date = new Date()): WalletConnectionType {
    const a = c.allowance ? allowanceOf(c.allowance, now) : null;
    return Object.assign(new WalletConnectionType(), {
      id: c.id,
      externalUserId: c.externalUserId,
      walletUserId: c.walletUserId,
      status: c.status,
      connectedAt: c.createdAt.toISOString(),
      revokedAt: c.revokedAt ? c.revokedAt.toISOString() : null,
      allowance: a
        ? Object.assign(new AllowanceType(), {
            amount: a.amountRaw,
            period: a.period,
            spent: a.spentRaw,
            resetsAt: a.resetsAt ? a.resetsAt.toISOString() : null,
          })
        : null,
    });
  }
}

export const WalletConnectionList = Connection(WalletConnectionType, {
  connection: 'WalletConnectionList',
  edge: 'WalletConnectionEdge',
  description: "A paywall's wallet connections, newest first.",
});
export type WalletConnectionList = InstanceType<typeof WalletConnectionList>;

@Resolver(() => PaywallType)
export class ConnectionResolver {
  @FieldResolver(() => WalletConnectionList, {
    description: 'SHARED mode: wallet authorizations of this paywall, newest first (revoked ones included).',
  })
  async connections(
    @Root() paywall: PaywallType,
    @Ctx() ctx: AppContext,
    @Arg('first', () => Int, { defaultValue: 20 }) first = 20,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<WalletConnectionList> {
    if (after) decodeCursor(after, 'wc'); // a bad cursor fails this field, not the whole batch
    type Key = { paywallId: string; first: number; after: string | null };
    const loader = ctx.loaders.keyed('connections', (keys: readonly Key[]) =>
      ctx.services.users.connectionPages(keys),
    );
    const page = await loader.load({ paywallId: paywall.id, first: checkFirst(first), after: after ?? null });
    const now = ctx.services.clock.now();
    return WalletConnectionList.of(page, (c) => WalletConnectionType.from(c, now));
  }
}
