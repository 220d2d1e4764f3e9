import { Arg, Ctx, FieldResolver, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { PaywallType } from '../paywalls/paywall.types.js';
import { checkExternalId, triggerOf } from '../users/user.service.js';
import {
  CreateUserKeyInput,
  CreateUserKeyPayload,
  RevokeUserKeyInput,
  UserKeyType,
} from './user-key.types.js';

/** End-user keys (docs/reference.md §19): create, list, revoke; owner token or the paywall's key. */
@Resolver(() => PaywallType)
export class UserKeyResolver {
  @Mutation(() => CreateUserKeyPayload, {
    description: 'Creates an end-user key; the key is shown only here.',
  })
  async createUserKey(
    @Ctx() ctx: AppContext,
    @Arg('input') input: CreateUserKeyInput,
  ): Promise<CreateUserKeyPayload> {
    const auth = requireAuth(ctx);
    const paywall = await ctx.services.paywalls.resolve(auth, input.paywallId);
    const r = await ctx.services.userKeys.create(
      paywall,
      {
        externalUserId: checkExternalId(input.externalUserId),
        name: input.name,
        limit: input.limit,
        limitPeriod: input.limitPeriod,
        expiresAt: input.expiresAt,
      },
      triggerOf(auth, ctx.transport),
    );
    return Object.assign(new CreateUserKeyPayload(), { key: r.key, userKey: UserKeyType.from(r.userKey) });
  }

  @Mutation(() => UserKeyType, { description: 'Revokes an end-user key at once (every instance).' })
  async revokeUserKey(@Ctx() ctx: AppContext, @Arg('input') input: RevokeUserKeyInput): Promise<UserKeyType> {
    const auth = requireAuth(ctx);
    const paywall = await ctx.services.paywalls.resolve(auth, input.paywallId, { allowArchived: true });
    return UserKeyType.from(
      await ctx.services.userKeys.revoke(paywall, input.id, triggerOf(auth, ctx.transport)),
    );
  }

  @FieldResolver(() => [UserKeyType], {
    description:
      "The paywall's end-user keys (of one end user when given), newest first, revoked ones included.",
  })
  async userKeys(
    @Root() paywall: PaywallType,
    @Ctx() ctx: AppContext,
    @Arg('externalUserId', () => String, { nullable: true }) externalUserId?: string | null,
  ): Promise<UserKeyType[]> {
    type Key = { paywallId: string; externalUserId: string | null };
    const loader = ctx.loaders.keyed('userKeys', (k: readonly Key[]) => ctx.services.userKeys.listMany(k));
    const keys = await loader.load({ paywallId: paywall.id, externalUserId: externalUserId ?? null });
    return keys.map(UserKeyType.from);
  }
}
