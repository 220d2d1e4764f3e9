import { Arg, Ctx, FieldResolver, Int, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { DomainError } from '../../shared/errors.js';
import { triggerOf } from '../users/user.service.js';
import { checkFirst } from '../../graphql/connection.js';
import { EndUserType } from '../users/user.types.js';
import type { PageKey } from './ledger.service.js';
import {
  ChargeConnection,
  ChargeInput,
  ChargePayload,
  ChargeType,
  DepositInput,
  DepositPayload,
  LedgerEntryConnection,
  LedgerEntryType,
} from './ledger.types.js';

/** Replayed answers (and replayed refusals) tell the transport, which sets `Idempotent-Replayed`. */
function markReplayed(ctx: AppContext, e: unknown): never {
  if (e instanceof DomainError && (e as DomainError & { replayed?: boolean }).replayed) ctx.replayed = true;
  throw e;
}

/** Deposits, manual charges and each user's ledger and charges. */
@Resolver(() => EndUserType)
export class LedgerResolver {
  @Mutation(() => DepositPayload, {
    description: 'Credits a user (DEFAULT mode). Idempotent with idempotencyKey.',
  })
  async deposit(@Ctx() ctx: AppContext, @Arg('input') input: DepositInput): Promise<DepositPayload> {
    const auth = requireAuth(ctx);
    const { result, replayed, paywall } = await ctx.services.ledger
      .deposit(auth, input, { idempotencyKey: input.idempotencyKey, trigger: triggerOf(auth, ctx.transport) })
      .catch((e) => markReplayed(ctx, e));
    if (replayed) ctx.replayed = true;
    return DepositPayload.from(result, replayed, paywall);
  }

  @Mutation(() => ChargePayload, {
    description: 'Charges a user’s free balance. A refusal is success: false with a message and a link.',
  })
  async charge(@Ctx() ctx: AppContext, @Arg('input') input: ChargeInput): Promise<ChargePayload> {
    const auth = requireAuth(ctx);
    const { result, replayed, paywall } = await ctx.services.ledger
      .charge(auth, input, { idempotencyKey: input.idempotencyKey, trigger: triggerOf(auth, ctx.transport) })
      .catch((e) => markReplayed(ctx, e));
    if (replayed) ctx.replayed = true;
    return ChargePayload.from(result, replayed, paywall);
  }

  @FieldResolver(() => LedgerEntryConnection, { description: 'Ledger entries, newest first.' })
  async ledgerEntries(
    @Ctx() ctx: AppContext,
    @Root() user: EndUserType,
    @Arg('first', () => Int, { defaultValue: 20 }) first: number,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<LedgerEntryConnection> {
    const loader = ctx.loaders.keyed('ledgerPages', (keys: readonly PageKey[]) =>
      ctx.services.ledger.ledgerPages(keys),
    );
    const page = await loader.load({ userId: user.id, first: checkFirst(first), after: after ?? null });
    return LedgerEntryConnection.of(page, LedgerEntryType.from);
  }

  @FieldResolver(() => ChargeConnection, { description: 'Manual and usage charges, newest first.' })
  async charges(
    @Ctx() ctx: AppContext,
    @Root() user: EndUserType,
    @Arg('first', () => Int, { defaultValue: 20 }) first: number,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<ChargeConnection> {
    const loader = ctx.loaders.keyed('chargePages', (keys: readonly PageKey[]) =>
      ctx.services.ledger.chargePages(keys),
    );
    const page = await loader.load({ userId: user.id, first: checkFirst(first), after: after ?? null });
    return ChargeConnection.of(page, ChargeType.from);
  }
}
