import { Arg, Ctx, ID, Int, Mutation, Query, Resolver } from 'type-graphql';
import { checkFirst } from '../../graphql/connection.js';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { checkExternalId, triggerOf } from './user.service.js';
import {
  ConnectResult,
  ConnectedUser,
  DisconnectResult,
  EndUserConnection,
  EndUserType,
  TopUpLink,
} from './user.types.js';

/** End users: lookups, the paywall's user list, connection (docs/reference.md §4) and top-up links. */
@Resolver(() => EndUserType)
export class UserResolver {
  @Query(() => EndUserType, {
    nullable: true,
    description: 'One end user by external id; null when unknown.',
  })
  async user(
    @Ctx() ctx: AppContext,
    @Arg('externalId') externalId: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<EndUserType | null> {
    const paywall = await ctx.services.paywalls.resolve(requireAuth(ctx), paywallId, { allowArchived: true });
    const u = await ctx.services.users.findUser(paywall.id, checkExternalId(externalId));
    return u ? EndUserType.from(u, paywall) : null;
  }

  @Query(() => EndUserConnection, { description: "The paywall's end users, newest first." })
  async users(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
    @Arg('first', () => Int, { defaultValue: 20 }) first = 20,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<EndUserConnection> {
    const paywall = await ctx.services.paywalls.resolve(requireAuth(ctx), paywallId, { allowArchived: true });
    const page = await ctx.services.users.list(paywall.id, checkFirst(first), after ?? null);
    return EndUserConnection.of(page, (r) => EndUserType.from(r, paywall));
  }

  @Mutation(() => ConnectResult, {
    description: 'Connection check. DEFAULT: always connected. SHARED: a connect link for unconnected users.',
  })
  async connectUser(
    @Ctx() ctx: AppContext,
    @Arg('user') user: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<ConnectResult> {
    const auth = requireAuth(ctx);
    const paywall = await ctx.services.paywalls.resolve(auth, paywallId);
    const r = await ctx.services.users.connect(paywall, user, triggerOf(auth, ctx.transport));
    return Object.assign(new ConnectResult(), {
      ...r,
      connectedUser: r.connectedUser
        ? Object.assign(new ConnectedUser(), {
            ...r.connectedUser,
            createdAt: r.connectedUser.createdAt.toISOString(),
          })
        : null,
    });
  }

  @Mutation(() => DisconnectResult, {
    description:
      'Revokes a SHARED-mode authorization. DEFAULT mode has none: success false, nothing changes.',
  })
  async disconnectUser(
    @Ctx() ctx: AppContext,
    @Arg('user') user: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<DisconnectResult> {
    const auth = requireAuth(ctx);
    const paywall = await ctx.services.paywalls.resolve(auth, paywallId);
    const r = await ctx.services.users.disconnect(paywall, user, triggerOf(auth, ctx.transport));
    return Object.assign(new DisconnectResult(), r);
  }

  @Mutation(() => TopUpLink, { description: 'A top-up link for the user (records topup.link.created).' })
  async topUpLink(
    @Ctx() ctx: AppContext,
    @Arg('user') user: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<TopUpLink> {
    const auth = requireAuth(ctx);
    const paywall = await ctx.services.paywalls.resolve(auth, paywallId);
    const url = await ctx.services.users.topupLink(paywall, user, triggerOf(auth, ctx.transport));
    return Object.assign(new TopUpLink(), { url });
  }
}
