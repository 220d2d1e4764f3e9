import { Arg, Ctx, ID, Mutation, Query, Resolver } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { ModelType, SetModelPricingInput } from './catalog.types.js';

@Resolver(() => ModelType)
export class CatalogResolver {
  @Query(() => [ModelType], { description: 'The models a paywall sells, ordered by id.' })
  async models(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<ModelType[]> {
    return (await ctx.services.catalog.list(requireAuth(ctx), paywallId)).map(ModelType.from);
  }

  @Query(() => ModelType, {
    description: 'One model; NOT_FOUND (model_not_found) when the paywall does not sell it.',
  })
  async model(
    @Ctx() ctx: AppContext,
    @Arg('id', () => String) id: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<ModelType> {
    return ModelType.from(await ctx.services.catalog.get(requireAuth(ctx), paywallId, id));
  }

  @Mutation(() => ModelType, { description: 'Create or update the prices of a model.' })
  async setModelPricing(
    @Ctx() ctx: AppContext,
    @Arg('input') input: SetModelPricingInput,
  ): Promise<ModelType> {
    return ModelType.from(await ctx.services.catalog.setPrice(requireAuth(ctx), input));
  }

  @Mutation(() => Boolean, { description: 'Stop selling a model. false when it was not there.' })
  async removeModelPricing(
    @Ctx() ctx: AppContext,
    @Arg('modelId', () => String) modelId: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<boolean> {
    return ctx.services.catalog.removePrice(requireAuth(ctx), paywallId, modelId);
  }
}
