import { Field, Float, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import {
  CAP_PARAMETERS,
  DEFAULT_CAP_PARAMETER,
  PROVIDER_KINDS,
  type CapParameter,
  type ProviderKind,
} from './provider-client.js';
import type { ProviderInfo } from './provider-records.js';

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

export const ProviderKindEnum = Object.fromEntries(PROVIDER_KINDS.map((k) => [k, k])) as {
  [K in ProviderKind]: K;
};
registerEnumType(ProviderKindEnum, {
  name: 'ProviderKind',
  description: 'The API a provider speaks.',
  valuesConfig: {
    OPENAI: { description: 'Any OpenAI-compatible API (chat completions, Responses, embeddings).' },
    ANTHROPIC: {
      description: "Anthropic's Messages API (base URL ending in /v1, e.g. https://api.anthropic.com/v1).",
    },
  },
});

@ObjectType('ProviderHealth', {
  description:
    'How a provider answered lately, as the instance that answers this query forwarded to it (each ' +
    'instance counts its own requests).',
})
export class ProviderHealthType {
  @Field(() => Int, { description: 'The minutes counted.' }) windowMinutes!: number;
  @Field(() => Int, { description: 'Requests sent to it in the window, fallback attempts included.' })
  requests!: number;
  @Field(() => Int, {
    description:
      'Of those, the ones it failed: unreachable, timed out before answering, 429, 5xx, 401 or 403.',
  })
  errors!: number;
  @Field(() => Float, { description: 'errors / requests (0 without requests).' }) errorRate!: number;
  @Field(() => String, {
    nullable: true,
    description: 'The last failure, e.g. "HTTP 503", "connection refused".',
  })
  lastError!: string | null;
  @Field(() => String, { nullable: true }) lastErrorAt!: string | null;
}

@ObjectType('ProviderInfo', {
  description: 'A model provider a paywall forwards requests to. The key itself is never shown.',
})
export class ProviderInfoType {
  @Field({ description: "The name models route to (`default` unless named; `builtin`: the platform's)." })
  name!: string;
  @Field(() => ProviderKindEnum) kind!: ProviderKind;
  @Field({
    description: "true for the platform's built-in provider (SHARED paywalls; no key of the paywall's).",
  })
  builtin!: boolean;
  @Field({
    description:
      "OpenAI-compatible base URL, without a trailing slash (e.g. https://api.openai.com/v1). Empty for the platform's built-in provider (the operator's URL is not shown).",
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
  /** For the health resolver. */
  paywallId!: string;

  static from(p: ProviderInfo): ProviderInfoType {
    return Object.assign(new ProviderInfoType(), {
      paywallId: p.paywallId,
      name: p.name,
      kind: p.kind,
      builtin: p.builtin,
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
  @Field(() => String, {
    nullable: true,
    description:
      'The name models route to: 1–40 of a–z 0–9 _ -. Omitted: `default` (the provider a model without ' +
      'one of its own uses); connecting an existing name replaces that provider.',
  })
  name?: string | null;
  @Field(() => ProviderKindEnum, { nullable: true, description: 'Omitted: OPENAI.' })
  kind?: ProviderKind | null;
  @Field(() => CapParameterEnum, {
    defaultValue: DEFAULT_CAP_PARAMETER,
    description:
      'The cap field of a chat request whose client sent none. MAX_TOKENS only for an older server that ' +
      'refuses max_completion_tokens. Omitted: MAX_COMPLETION_TOKENS (also when replacing a provider).',
  })
  capParameter?: CapParameter;
}

@InputType()
export class DisconnectProviderInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field(() => String, { nullable: true, description: 'Omitted: `default`.' })
  name?: string | null;
}
