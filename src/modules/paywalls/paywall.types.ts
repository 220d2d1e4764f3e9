import { Field, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { MoneyScalar } from '../../graphql/scalars.js';
import { WALLET_MODES, type WalletMode } from './paywall.entity.js';
import type { PaywallInfo } from './paywall-info.js';
import { formatMarkup } from './paywall.service.js';

export const WalletModeEnum = Object.fromEntries(WALLET_MODES.map((m) => [m, m])) as { [K in WalletMode]: K };
registerEnumType(WalletModeEnum, {
  name: 'WalletMode',
  description: 'DEFAULT: app-scoped wallet funded by the developer. SHARED: hosted wallet the user controls.',
});

@ObjectType('Paywall', { description: 'A paywall: one API key, one wallet mode, prices and settings.' })
export class PaywallType {
  @Field(() => ID) id!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true, description: 'Shown to wallet users on the consent page (SHARED).' })
  description!: string | null;
  @Field(() => WalletModeEnum) mode!: WalletMode;
  @Field({ description: 'Multiplier applied to token costs, decimal string (e.g. "1.5").' }) markup!: string;
  @Field(() => String, { nullable: true, description: 'DEFAULT mode: where users top up.' }) topupUrl!:
    string | null;
  @Field(() => MoneyScalar, { description: 'Credits granted to each new end user (0 = off).' })
  trialCredits!: bigint;
  @Field(() => Int, {
    nullable: true,
    description: 'Chat requests per end user per UTC day; null = no limit.',
  })
  dailyRequestLimit!: number | null;
  @Field(() => MoneyScalar, {
    nullable: true,
    description: 'Chat spend per end user per UTC day; null = no limit.',
  })
  dailySpendLimit!: bigint | null;
  @Field(() => MoneyScalar, {
    nullable: true,
    description:
      "When a charge takes an end user's free balance below this, `paywall.balance.low` is recorded (once per crossing); null = off.",
  })
  lowBalanceThreshold!: bigint | null;
  @Field(() => String, { nullable: true }) connectMessageTemplate!: string | null;
  @Field(() => String, { nullable: true }) topupMessageTemplate!: string | null;
  @Field({ description: 'Last four characters of the current API key.' }) apiKeyLastFour!: string;
  @Field(() => String, { nullable: true }) archivedAt!: string | null;
  @Field() createdAt!: string;
  @Field() updatedAt!: string;
  @Field(() => String, {
    nullable: true,
    description: 'In `paywalls`: pass as `after` to get the paywalls after this one. Null elsewhere.',
  })
  cursor: string | null = null;
  /** Internal: resolvers of other modules (provider, models) hang off it. */
  ownerId!: string;
  /** Internal: the markup in millionths (the built-in provider rule needs it). */
  markupPpm!: bigint;

  static from(p: PaywallInfo): PaywallType {
    return Object.assign(new PaywallType(), {
      id: p.id,
      name: p.name,
      description: p.description,
      mode: p.mode,
      markup: formatMarkup(p.markupPpm),
      topupUrl: p.topupUrl,
      trialCredits: p.trialCreditsRaw,
      dailyRequestLimit: p.dailyRequestLimit,
      dailySpendLimit: p.dailySpendLimitRaw,
      lowBalanceThreshold: p.lowBalanceThresholdRaw,
      connectMessageTemplate: p.connectMessageTemplate,
      topupMessageTemplate: p.topupMessageTemplate,
      apiKeyLastFour: p.apiKeyLastFour,
      archivedAt: p.archivedAt ? p.archivedAt.toISOString() : null,
      createdAt: p.createdAt.toISOString(),
      updatedAt: p.updatedAt.toISOString(),
      ownerId: p.ownerId,
      markupPpm: p.markupPpm,
    });
  }
}

@InputType()
export class CreatePaywallInput {
  @Field() name!: string;
  @Field(() => WalletModeEnum, { description: 'Fixed for the life of the paywall.' }) mode!: WalletMode;
  @Field(() => String, {
    nullable: true,
    description: 'What the app does; shown to wallet users on the consent page (at most 1000 characters).',
  })
  description?: string | null;
}

@ObjectType()
export class CreatePaywallPayload {
  @Field(() => PaywallType) paywall!: PaywallType;
  @Field({ description: 'The full API key. Shown only here: store it now.' }) apiKey!: string;
}

@InputType()
export class UpdatePaywallInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field(() => String, { nullable: true }) name?: string | null;
  @Field(() => String, { nullable: true, description: 'Shown on the consent page; "" clears it.' })
  description?: string | null;
  @Field(() => String, { nullable: true, description: 'Decimal string > 0, e.g. "1.5".' }) markup?:
    string | null;
  @Field(() => String, { nullable: true, description: 'DEFAULT mode only. null clears it.' }) topupUrl?:
    string | null;
  @Field(() => String, {
    nullable: true,
    description: 'USDC decimal string granted to each new user; "0" = off.',
  })
  trialCredits?: string | null;
  @Field(() => Int, {
    nullable: true,
    description: 'Chat requests per end user per UTC day (docs/reference.md §10); null removes the limit.',
  })
  dailyRequestLimit?: number | null;
  @Field(() => String, {
    nullable: true,
    description: 'Chat spend per end user per UTC day, USDC decimal string; null removes the limit.',
  })
  dailySpendLimit?: string | null;
  @Field(() => String, {
    nullable: true,
    description:
      "USDC decimal string: when a charge takes an end user's free balance from at or above it to below it, `paywall.balance.low` is recorded (docs/reference.md §16); null turns it off.",
  })
  lowBalanceThreshold?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Blocked-reply text for unconnected users; must contain {url}.',
  })
  connectMessageTemplate?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Blocked-reply text for short balances; must contain {url}.',
  })
  topupMessageTemplate?: string | null;
}
