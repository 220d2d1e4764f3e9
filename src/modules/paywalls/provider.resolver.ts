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
    description: 'null when no provider is connected.',
  })
  async provider(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<ProviderInfoType | null> {
    const loader = ctx.loaders.get(
      'provider',
      () => new DataLoader((ids: readonly string[]) => ctx.services.providers.infoMany(ids)),
    );
    const info = await loader.load(paywall.id);
    return info ? ProviderInfoType.from(info) : null;
  }
}
