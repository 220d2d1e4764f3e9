import { Arg, Ctx, Field, FieldResolver, ID, Int, ObjectType, Resolver, Root } from 'type-graphql';
import type { AppContext } from '../../graphql/context.js';
import { PaywallType } from '../paywalls/paywall.types.js';
import type { ConnectionRow } from './user.service.js';
import { checkFirst, PageInfo, pageInfo } from './user.types.js';

@ObjectType('WalletConnection', {
  description: 'SHARED mode: an end user of this paywall authorized by a wallet user (approve → revoke).',
})
export class WalletConnectionType {
  @Field(() => ID, { description: 'The connectionId of paywall.authorization.completed.' }) id!: string;
  @Field() externalUserId!: string;
  @Field(() => ID) walletUserId!: string;
  @Field({ description: '`ACTIVE` or `REVOKED`.' }) status!: string;
  @Field({ description: 'When the wallet user approved.' }) connectedAt!: string;
  @Field(() => String, { nullable: true }) revokedAt!: string | null;

  static from(c: ConnectionRow): WalletConnectionType {
    return Object.assign(new WalletConnectionType(), {
      id: c.id,
      externalUserId: c.externalUserId,
      walletUserId: c.walletUserId,
      status: c.status,
      connectedAt: c.createdAt.toISOString(),
      revokedAt: c.revokedAt ? c.revokedAt.toISOString() : null,
    });
  }
}

@ObjectType()
export class WalletConnectionEdge {
  @Field() cursor!: string;
  @Field(() => WalletConnectionType) node!: WalletConnectionType;
}

@ObjectType()
export class WalletConnectionPage {
  @Field(() => [WalletConnectionEdge]) edges!: WalletConnectionEdge[];
  @Field(() => PageInfo) pageInfo!: PageInfo;
}

@Resolver(() => PaywallType)
export class ConnectionResolver {
  @FieldResolver(() => WalletConnectionPage, {
    description: 'SHARED mode: wallet authorizations of this paywall, newest first (revoked ones included).',
  })
  async connections(
    @Root() paywall: PaywallType,
    @Ctx() ctx: AppContext,
    @Arg('first', () => Int, { defaultValue: 20 }) first = 20,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<WalletConnectionPage> {
    const page = await ctx.services.users.connections(paywall.id, checkFirst(first), after ?? null);
    return Object.assign(new WalletConnectionPage(), {
      edges: page.rows.map((r) => ({ cursor: r.cursor, node: WalletConnectionType.from(r) })),
      pageInfo: pageInfo(page.rows, page.hasNextPage),
    });
  }
}
