import { Field, ID, InputType, ObjectType, registerEnumType } from 'type-graphql';
import { CAP_PARAMETERS, DEFAULT_CAP_PARAMETER, type CapParameter } from '../proxy/provider-client.js';
import type { ProviderInfo } from './provider.service.js';

export const CapParameterEnum = Object.fromEntries(CAP_PARAMETERS.map((c) => [c, c])) as {
  [K in CapParameter]: K;
};
registerEnumType(CapParameterEnum, {
  name: 'CapParameter',
  description:
    'The field a chat request carries its completion cap in when the client sent neither max_tokens nor ' +
    'max_completion_tokens (a client that sent one keeps its own).',
  valuesConfig: {
    MAX_COMPLETION_TOKENS: {
      description: "max_completion_tokens: OpenAI's current field (its reasoning models refuse max_tokens).",
    },
    MAX_TOKENS: { description: 'max_tokens: for older OpenAI-compatible servers that only know this one.' },
  },
});

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
  @Field(() => CapParameterEnum, {
    description: 'The cap field of a chat request whose client sent none (see CapParameter).',
  })
  capParameter!: CapParameter;
  @Field() connectedAt!: string;
  @Field() updatedAt!: string;

  static from(p: ProviderInfo): ProviderInfoType {
    return Object.assign(new ProviderInfoType(), {
      baseUrl: p.baseUrl,
      apiKeyLastFour: p.apiKeyLastFour,
      capParameter: p.capParameter,
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
  @Field(() => CapParameterEnum, {
    defaultValue: DEFAULT_CAP_PARAMETER,
    description:
      'The cap field of a chat request whose client sent none. MAX_TOKENS only for an older server that ' +
      'refuses max_completion_tokens. Omitted: MAX_COMPLETION_TOKENS (also when replacing a provider).',
  })
  capParameter?: CapParameter;
}
