import { Arg, Ctx, ID, Int, Mutation, Query, Resolver } from 'type-graphql';
import { requireAuth, requireOwner, type AppContext } from '../../graphql/context.js';
import { PAYWALLS_PAGE } from './paywall.service.js';
import {
  CreatePaywallInput,
  CreatePaywallPayload,
  PaywallType,
  UpdatePaywallInput,
} from './paywall.types.js';

const payload = (r: { paywall: Parameters<typeof PaywallType.from>[0]; apiKey: string }) =>
  Object.assign(new CreatePaywallPayload(), { paywall: PaywallType.from(r.paywall), apiKey: r.apiKey });

@Resolver(() => PaywallType)
export class PaywallResolver {
  @Query(() => [PaywallType], {
    description: `The owner's paywalls, oldest first, a page at a time (an API key sees only its own). Fewer than \`first\` means the last page; for the next, pass the last one's \`cursor\` as \`after\`.`,
  })
  async paywalls(
    @Ctx() ctx: AppContext,
    @Arg('includeArchived', { defaultValue: false }) includeArchived: boolean,
    @Arg('first', () => Int, {
      defaultValue: PAYWALLS_PAGE.default,
      description: `1 to ${PAYWALLS_PAGE.max}, default ${PAYWALLS_PAGE.default}.`,
    })
    first: number,
    @Arg('after', () => String, { nullable: true, description: 'The `cursor` of the last paywall seen.' })
    after?: string | null,
  ): Promise<PaywallType[]> {
    const auth = requireAuth(ctx);
    if (auth.kind === 'apiKey') {
      const own = Object.assign(PaywallType.from(auth.paywall), { cursor: null });
      return after ? [] : [own];
    }
    const page = await ctx.services.paywalls.list(auth.ownerId, includeArchived, first, after ?? null);
    return page.rows.map((r) => Object.assign(PaywallType.from(r), { cursor: r.cursor }));
  }

  @Query(() => PaywallType, { description: 'One paywall: the API key’s own, or an owner’s by id.' })
  async paywall(
    @Ctx() ctx: AppContext,
    @Arg('id', () => ID, { nullable: true }) id?: string,
  ): Promise<PaywallType> {
    const p = await ctx.services.paywalls.resolve(requireAuth(ctx), id, { allowArchived: true });
    return PaywallType.from(p);
  }

  @Mutation(() => CreatePaywallPayload, { description: 'Owner token. The API key is returned once.' })
  async createPaywall(
    @Ctx() ctx: AppContext,
    @Arg('input') input: CreatePaywallInput,
  ): Promise<CreatePaywallPayload> {
    return payload(
      await ctx.services.paywalls.create(requireOwner(ctx), input.name, input.mode, input.description),
    );
  }

  @Mutation(() => PaywallType)
  async updatePaywall(@Ctx() ctx: AppContext, @Arg('input') input: UpdatePaywallInput): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.paywalls.update(requireAuth(ctx), input.paywallId, input));
  }

  @Mutation(() => CreatePaywallPayload, { description: 'New API key; the old one is rejected at once.' })
  async rotatePaywallSecret(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<CreatePaywallPayload> {
    return payload(await ctx.services.paywalls.rotateSecret(requireAuth(ctx), paywallId));
  }

  @Mutation(() => PaywallType, { description: 'Archive: the API key stops working; data is kept.' })
  async archivePaywall(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
    @Arg('reason', () => String, { nullable: true }) reason?: string,
  ): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.paywalls.archive(requireAuth(ctx), paywallId, reason));
  }
}
