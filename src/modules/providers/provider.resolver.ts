import DataLoader from 'dataloader';
import { Arg, Ctx, FieldResolver, ID, Mutation, Resolver, Root } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { DEFAULT_PROVIDER } from './provider-client.js';
import { PaywallType } from '../paywalls/paywall.types.js';
import {
  ConnectProviderInput,
  DisconnectProviderInput,
  ProviderHealthType,
  ProviderInfoType,
} from './provider.types.js';
import { HEALTH_WINDOW_MINUTES } from './provider-health.js';

@Resolver(() => PaywallType)
export class ProviderResolver {
  @Mutation(() => PaywallType, {
    description:
      'Connect (or replace) a named provider of a paywall (OpenAI-compatible or Anthropic); the key is ' +
      'stored encrypted.',
  })
  async connectProvider(
    @Ctx() ctx: AppContext,
    @Arg('input') input: ConnectProviderInput,
  ): Promise<PaywallType> {
    return PaywallType.from(await ctx.services.providers.connect(requireAuth(ctx), input));
  }

  @Mutation(() => PaywallType, {
    description:
      'Remove a provider (input.name, default `default`) and its key. No-op when it is not connected. ' +
      'The paywallId argument is the older form of input.paywallId.',
  })
  async disconnectProvider(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
    @Arg('input', () => DisconnectProviderInput, { nullable: true }) input?: DisconnectProviderInput,
  ): Promise<PaywallType> {
    return PaywallType.from(
      await ctx.services.providers.disconnect(requireAuth(ctx), input?.paywallId ?? paywallId, input?.name),
    );
  }

  @FieldResolver(() => ProviderInfoType, {
    nullable: true,
    description:
      'The provider named `default` this paywall connected itself; null when none is (see providers, and ' +
      'builtinProvider for SHARED paywalls).',
  })
  async provider(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<ProviderInfoType | null> {
    const list = await providerLoader(ctx).load(paywall.id);
    const info = list.find((p) => p.name === DEFAULT_PROVIDER);
    return info ? ProviderInfoType.from(info) : null;
  }

  @FieldResolver(() => [ProviderInfoType], {
    description:
      "Every provider of this paywall by name; in SHARED mode with the platform's built-in provider " +
      'configured, `builtin` too (models route to it by that name, and `default` falls back to it).',
  })
  async providers(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<ProviderInfoType[]> {
    const list = await providerLoader(ctx).load(paywall.id);
    const builtin = ctx.services.providers.builtinInfo(paywall);
    return [...list, ...(builtin ? [builtin] : [])].map((p) => ProviderInfoType.from(p));
  }

  @FieldResolver(() => Boolean, {
    description:
      "true when the platform's built-in provider serves this paywall: SHARED mode, no provider of its own, " +
      'markup at least 1, and the operator configured one. Its models are then the built-in ones ' +
      '(cost x markup, unless the paywall prices a model itself). connectProvider takes precedence.',
  })
  async builtinProvider(@Root() paywall: PaywallType, @Ctx() ctx: AppContext): Promise<boolean> {
    if (!ctx.services.providers.builtinMayServe(paywall)) return false;
    return !(await providerLoader(ctx).load(paywall.id)).some((p) => p.name === DEFAULT_PROVIDER);
  }
}

@Resolver(() => ProviderInfoType)
export class ProviderHealthResolver {
  @FieldResolver(() => ProviderHealthType, {
    description: `Requests and failures of the last ${HEALTH_WINDOW_MINUTES} minutes, and the last failure.`,
  })
  health(@Root() provider: ProviderInfoType, @Ctx() ctx: AppContext): ProviderHealthType {
    const h = ctx.services.proxy.health.snapshot(provider.paywallId, provider.name);
    return Object.assign(new ProviderHealthType(), {
      windowMinutes: HEALTH_WINDOW_MINUTES,
      requests: h.requests,
      errors: h.errors,
      errorRate: h.errorRate,
      lastError: h.lastError,
      lastErrorAt: h.lastErrorAt?.toISOString() ?? null,
    });
  }
}

/** One provider lookup per paywall per request, shared by `provider` and `builtinProvider`. */
const providerLoader = (ctx: AppContext) =>
  ctx.loaders.get(
    'provider',
    () => new DataLoader((ids: readonly string[]) => ctx.services.providers.infoMany(ids)),
  );
