import { Field, ID, InputType, ObjectType } from 'type-graphql';
import type { StripeInfo } from './stripe-integration.store.js';

@ObjectType('StripeIntegration', {
  description:
    "A paywall's Stripe top-ups (DEFAULT mode). The secret key and webhook secret are never shown.",
})
export class StripeInfoType {
  @Field({ description: 'true when Stripe is connected to this paywall.' })
  connected!: boolean;
  @Field(() => String, { nullable: true, description: 'Id of the Stripe webhook endpoint (we_…).' })
  webhookId!: string | null;
  @Field(() => [String], {
    description: 'USD amounts (decimal strings) the hosted top-up page offers; empty when not connected.',
  })
  topupAmounts!: string[];

  static from(i: StripeInfo): StripeInfoType {
    return Object.assign(new StripeInfoType(), i);
  }
}

@InputType()
export class ConnectStripeInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field({ description: 'The Stripe secret key (sk_… or rk_…). Stored encrypted; never returned.' })
  secretKey!: string;
  @Field(() => [String], {
    nullable: true,
    description: 'USD decimal strings the hosted top-up page offers (default ["5", "10", "20"]).',
  })
  topupAmounts?: string[];
}
