import { Field, ID, InputType, ObjectType } from 'type-graphql';
import type { ProviderInfo } from './provider.service.js';

@ObjectType('ProviderInfo', {
  description: 'The model provider a paywall forwards chat requests to. The key itself is never shown.',
})
export class ProviderInfoType {
  @Field({
    description: 'OpenAI-compatible base URL, without a trailing slash (e.g. https://api.openai.com/v1).',
  })
  baseUrl!: string;
  @Field({ description: 'Last four characters of the provider key (empty for keys shorter than 12).' })
  apiKeyLastFour!: string;
  @Field() connectedAt!: string;
  @Field() updatedAt!: string;

  static from(p: ProviderInfo): ProviderInfoType {
    return Object.assign(new ProviderInfoType(), {
      baseUrl: p.baseUrl,
      apiKeyLastFour: p.apiKeyLastFour,
      connectedAt: p.connectedAt.toISOString(),
      updatedAt: p.updatedAt.toISOString(),
    });
  }
}

@InputType()
export class ConnectProviderInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field({ description: 'Absolute http(s) URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1.' })
  baseUrl!: string;
  @Field({ description: 'The provider key. Stored encrypted; never returned.' })
  apiKey!: string;
}
