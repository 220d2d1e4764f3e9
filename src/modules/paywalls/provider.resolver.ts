import DataLoader from 'dataloader';
import { Arg, Ctx, FieldResolver, ID, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { PaywallType } from './paywall.types.js';
import { ConnectProviderInput, ProviderInfoType } from './provider.types.js';

@Resolver(() => PaywallType)
export class ProviderResolver {
  @Mutation(() => PaywallType, {
    description:
      'Connect (or replace) the OpenAI-compatible provider of a paywall; the key is stored encrypted.',
  })
  async connectProvider(
    @Ctx() ctx: AppContext,
    @Arg('input') input: ConnectProviderInput,
  ): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.providers.connect(requireAuth(ctx), input));
  }

  @Mutation(() => PaywallType, {
    description: 'Remove the provider and its key. No-op when none is connected.',
  })
  async disconnectProvider(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.providers.disconnect(requireAuth(ctx), paywallId));
  }

  @FieldResolver(() => ProviderInfoType, {
    nullable: true,
    description:
      'The provider this paywall connected itself; null when none is (see builtinProvider for SHARED paywalls).',
  })
  async provider(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<ProviderInfoType | null> {
    const info = await providerLoader(ctx).load(paywall.id);
    return info ? ProviderInfoType.from(info) : null;
  }

  @FieldResolver(() => Boolean, {
    description:
      "true when the platform's built-in provider serves this paywall: SHARED mode, no provider of its own, " +
      'markup at least 1, and the operator configured one. Its models are then the built-in ones ' +
      '(cost x markup, unless the paywall prices a model itself). connectProvider takes precedence.',
  })
  async builtinProvider(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<boolean> {
    if (!ctx.services.providers.builtinMayServe(paywall)) return false;
    return (await providerLoader(ctx).load(paywall.id)) === null;
  }
}

/** One provider lookup per paywall per request, shared by `provider` and `builtinProvider`. */
const providerLoader = (ctx: AppContext) =>
  ctx.loaders.get(
    'provider',
    () => new DataLoader((ids: readonly string[]) => ctx.services.providers.infoMany(ids)),
  );
