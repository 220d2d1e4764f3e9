import DataLoader from 'dataloader';
import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { PaywallType } from '../paywalls/paywall.types.js';
import { checkFirst } from '../../graphql/connection.js';
import { decodeCursor, decodeSeqCursor } from '../../shared/cursor.js';
import type { PaywallPageKey } from './earnings.service.js';
import {
  EarningsEntryConnection,
  EarningsEntryType,
  EarningsType,
  RequestWithdrawalInput,
  WithdrawalConnection,
  WithdrawalType,
} from './earnings.types.js';

/** Earnings, their history and withdrawals of a paywall (docs/reference.md §8). */
@Resolver(() => PaywallType)
export class EarningsResolver {
  @FieldResolver(() => EarningsType, { description: 'What this paywall earned (SHARED: withdrawable).' })
  async earnings(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<EarningsType> {
    const loader = ctx.loaders.get(
      'earnings',
      () => new DataLoader((ids: readonly string[]) => ctx.services.earnings.many(ids)),
    );
    return EarningsType.from(await loader.load(paywall.id));
  }

  @FieldResolver(() => EarningsEntryConnection, {
    description: 'Movements of the earnings account, newest first.',
  })
  async earningsHistory(
    @Root() paywall: PaywallType,
    @Ctx() ctx: AppContext,
    @Arg('first', () => Int, { defaultValue: 20 }) first = 20,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<EarningsEntryConnection> {
    if (after) decodeSeqCursor(after, 'ea'); // a bad cursor fails this field, not the whole batch
    const loader = ctx.loaders.keyed('earningsHistory', (keys: readonly PaywallPageKey[]) =>
      ctx.services.earnings.historyPages(keys),
    );
    const page = await loader.load({ paywallId: paywall.id, first: checkFirst(first), after: after ?? null });
    return EarningsEntryConnection.of(page, EarningsEntryType.from);
  }

  @FieldResolver(() => WithdrawalConnection, { description: 'Withdrawals, newest first.' })
  async withdrawals(
    @Root() paywall: PaywallType,
    @Ctx() ctx: AppContext,
    @Arg('first', () => Int, { defaultValue: 20 }) first = 20,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<WithdrawalConnection> {
    if (after) decodeCursor(after, 'w'); // a bad cursor fails this field, not the whole batch
    const loader = ctx.loaders.keyed('withdrawals', (keys: readonly PaywallPageKey[]) =>
      ctx.services.earnings.withdrawalPages(keys),
    );
    const page = await loader.load({ paywallId: paywall.id, first: checkFirst(first), after: after ?? null });
    return WithdrawalConnection.of(page, WithdrawalType.from);
  }

  @Mutation(() => WithdrawalType, {
    description:
      'SHARED paywalls: moves the amount out of the available earnings at once; PENDING until paid.',
  })
  async requestWithdrawal(
    @Ctx() ctx: AppContext,
    @Arg('input') input: RequestWithdrawalInput,
  ): Promise<WithdrawalType> {
    const paywall = await ctx.services.paywalls.resolve(requireAuth(ctx), input.paywallId);
    return WithdrawalType.from(await ctx.services.earnings.requestWithdrawal(paywall, input));
  }

  @Mutation(() => WithdrawalType, {
    description: 'Cancels a PENDING withdrawal; the funds return to earnings.',
  })
  async cancelWithdrawal(
    @Ctx() ctx: AppContext,
    @Arg('id', () => ID) id: string,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
  ): Promise<WithdrawalType> {
    const auth = requireAuth(ctx);
    // With an owner token the withdrawal names its paywall; the service checks it belongs to the caller.
    const paywall =
      auth.kind === 'apiKey' || paywallId
        ? await ctx.services.paywalls.resolve(auth, paywallId)
        : await ctx.services.paywalls.resolve(auth, await ctx.services.earnings.paywallOf(id));
    return WithdrawalType.from(await ctx.services.earnings.cancelWithdrawal(paywall, id));
  }
}
