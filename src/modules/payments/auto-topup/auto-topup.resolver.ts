import DataLoader from 'dataloader';
import { Ctx, Field, FieldResolver, Int, ObjectType, Resolver, Root } from 'type-graphql';
import type { AppContext } from '../../../graphql/context.js';
import { formatDecimal, usdcDecimal } from '../../../shared/money.js';
import { EndUserType } from '../../users/user.types.js';
import type { AutoTopupState } from './auto-topup-state.js';

const usd = (cents: number) => formatDecimal(BigInt(cents), 2);

@ObjectType('AutoTopup', {
  description:
    "An end user's auto top-up with a saved card (docs/reference.md §16): read-only, set by the user on the hosted top-up page.",
})
export class AutoTopupType {
  @Field({ description: 'true while auto top-up is on.' }) enabled!: boolean;
  @Field(() => String, {
    nullable: true,
    description:
      'The free balance (USDC decimal) below which a payment is made; null until a card was saved.',
  })
  threshold!: string | null;
  @Field(() => String, { nullable: true, description: 'The amount each payment adds (USD decimal).' })
  amount!: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'At most this much per UTC calendar month (USD decimal).',
  })
  monthlyCap!: string | null;
  @Field({ description: "This UTC month's payments, succeeded or in flight (USD decimal)." })
  spentThisMonth!: string;
  @Field(() => Int, { description: 'Failed payments since the last success; at 3 auto top-up turns off.' })
  failuresInRow!: number;
  @Field(() => String, {
    nullable: true,
    description:
      'Why it is off: `failures` (3 failed payments in a row) or `user`; null when on or never on.',
  })
  disabledReason!: string | null;
  @Field({ description: 'A payment is in flight (created; its outcome not known yet).' }) pending!: boolean;

  static from(s: AutoTopupState): AutoTopupType {
    return Object.assign(new AutoTopupType(), {
      enabled: s.enabled,
      threshold: s.settings ? usdcDecimal(s.settings.thresholdRaw) : null,
      amount: s.settings ? usd(s.settings.amountCents) : null,
      monthlyCap: s.settings ? usd(s.settings.monthlyCapCents) : null,
      spentThisMonth: usd(s.spentThisMonthCents),
      failuresInRow: s.failuresInRow,
      disabledReason: s.disabledReason,
      pending: s.pending,
    });
  }
}

@Resolver(() => EndUserType)
export class AutoTopupResolver {
  @FieldResolver(() => AutoTopupType, {
    nullable: true,
    description:
      "DEFAULT mode: the end user's auto top-up (null when never set up). SHARED: always null (the wallet's own setting).",
  })
  async autoTopup(@Root() user: EndUserType, @Ctx() ctx: AppContext): Promise<AutoTopupType | null> {
    const loader = ctx.loaders.get(
      'autoTopup',
      () => new DataLoader((ids: readonly string[]) => ctx.services.autoTopup.endUserStates(ids)),
    );
    const state = await loader.load(user.id);
    return state ? AutoTopupType.from(state) : null;
  }
}
