import DataLoader from 'dataloader';
import { Arg, Ctx, FieldResolver, ID, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../../graphql/context.js';
import { PaywallType } from '../../paywalls/paywall.types.js';
import { ConnectStripeInput, StripeInfoType } from './stripe.types.js';

@Resolver(() => PaywallType)
export class StripeResolver {
  @Mutation(() => PaywallType, {
    description:
      'Connect (or replace) Stripe top-ups of a DEFAULT paywall: creates one webhook endpoint for the Checkout ' +
      'events; the key and the endpoint secret are stored encrypted.',
  })
  async connectStripe(@Ctx() ctx: AppContext, @Arg('input') input: ConnectStripeInput): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.stripeIntegration.connect(requireAuth(ctx), input));
  }

  @Mutation(() => PaywallType, {
    description: 'Replace the Stripe webhook endpoint (and its signing secret) of a paywall.',
  })
  async rotateStripeWebhook(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.stripeIntegration.rotateWebhook(requireAuth(ctx), paywallId));
  }

  @Mutation(() => PaywallType, {
    description: 'Delete the Stripe webhook endpoint and forget the key. No-op when Stripe is not connected.',
  })
  async disconnectStripe(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.stripeIntegration.disconnect(requireAuth(ctx), paywallId));
  }

  @FieldResolver(() => StripeInfoType, { description: 'Stripe top-ups of this paywall (never the key).' })
  async stripe(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<StripeInfoType> {
    const loader = ctx.loaders.get(
      'stripe',
      () => new DataLoader((ids: readonly string[]) => ctx.services.stripeIntegration.infoMany(ids)),
    );
    return StripeInfoType.from(await loader.load(paywall.id));
  }
}
