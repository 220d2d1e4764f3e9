import { Arg, Ctx, FieldResolver, Int, Resolver, Root } from 'type-graphql';
import type { AppContext } from '../../graphql/context.js';
import { PaywallType } from '../paywalls/paywall.types.js';
import { MAX_USAGE_DAYS, type UsageGroupBy } from './usage.service.js';
import { UsageGroupByEnum, UsageType } from './usage.types.js';

/** Paywall.usage: revenue, provider cost, margin, requests and tokens (the dashboard's overview). */
@Resolver(() => PaywallType)
export class UsageResolver {
  @FieldResolver(() => UsageType, {
    description: `Completed charges of UTC days from..to (YYYY-MM-DD, both included, at most ${MAX_USAGE_DAYS} days), grouped by day, model or end user (top \`limit\` by revenue). Costs one per day of the range (docs/graphql.md).`,
  })
  async usage(
    @Root() paywall: PaywallType,
    @Ctx() ctx: AppContext,
    @Arg('from') from: string,
    @Arg('to') to: string,
    @Arg('groupBy', () => UsageGroupByEnum) groupBy: UsageGroupBy,
    @Arg('limit', () => Int, {
      defaultValue: 10,
      description: 'MODEL and USER: at most this many buckets (1–1000).',
    })
    limit = 10,
  ): Promise<UsageType> {
    return UsageType.from(
      await ctx.services.usage.usage(paywall.id, from, to, groupBy, limit, `owner:${paywall.ownerId}`),
    );
  }
}
