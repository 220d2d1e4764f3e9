import { Field, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import type { ModelView, PricingStrings } from './model-view.js';
import type { MaxOutputSource } from './known-models.js';
import { PriceOrBooleanScalar } from '../../graphql/scalars.js';

export enum MaxCompletionTokensSource {
  PRICING = 'PRICING',
  CATALOGUE = 'CATALOGUE',
  DEFAULT = 'DEFAULT',
}
registerEnumType(MaxCompletionTokensSource, {
  name: 'MaxCompletionTokensSource',
  description:
    "Where a model's maximum output comes from: PRICING (setModelPricing's maxCompletionTokens), CATALOGUE " +
    "(the service's catalogue of known models), DEFAULT (4096).",
});

export enum ReasoningModelSource {
  PRICING = 'PRICING',
  CATALOGUE = 'CATALOGUE',
  DEFAULT = 'DEFAULT',
}
registerEnumType(ReasoningModelSource, {
  name: 'ReasoningModelSource',
  description:
    "Who says whether a model reasons: PRICING (setModelPricing's reasoningModel), CATALOGUE (the " +
    "service's catalogue of known models), DEFAULT (neither: it does not).",
});

@ObjectType('ImagePrice', {
  description: 'A price per image (docs/reference.md §22): for a size and a quality ("*" matches any).',
})
export class ImagePriceType {
  @Field({ description: 'e.g. "1024x1024", or "*".' }) size!: string;
  @Field({ description: 'e.g. "standard", "hd", "low", "medium", "high", or "*".' }) quality!: string;
  @Field({ description: 'USDC per image.' }) price!: string;
}

@InputType('ImagePriceInput', { description: 'A cost price per image for a size and a quality ("*": any).' })
export class ImagePriceInput {
  @Field() size!: string;
  @Field() quality!: string;
  @Field({ description: 'USDC per image, e.g. "0.04".' }) price!: string;
}

@ObjectType('ModelPricing', {
  description:
    'USDC decimal strings: prompt, completion and each usage bucket per token, request per request ' +
    '(e.g. "0.000003"). A bucket without a price of its own shows the one it follows (docs/reference.md §13).',
})
export class ModelPricingType {
  @Field() prompt!: string;
  @Field() completion!: string;
  @Field() request!: string;
  @Field({ description: 'Per cached input token read (default: prompt).' }) cacheRead!: string;
  @Field({ description: 'Per input token written to a cache (default: prompt).' }) cacheWrite!: string;
  @Field({ description: 'Per audio input token (default: prompt).' }) audioPrompt!: string;
  @Field({ description: 'Per reasoning token (default: completion).' }) reasoning!: string;
  @Field({ description: 'Per audio output token (default: completion).' }) audioCompletion!: string;
  @Field({ description: 'Per image input token (default: prompt).' }) imagePrompt!: string;
  @Field({ description: 'Per image output token (default: completion).' }) imageCompletion!: string;
  @Field(() => [ImagePriceType], {
    description: 'Per image, by size and quality (empty: not priced per image).',
  })
  image!: ImagePriceType[];
  @Field(() => String, { nullable: true, description: 'Per second of input audio; null: not priced so.' })
  audioSecond!: string | null;
  @Field(() => String, { nullable: true, description: 'Per 1,000 input characters; null: not priced so.' })
  characters1k!: string | null;

  static from(p: PricingStrings): ModelPricingType {
    return Object.assign(new ModelPricingType(), {
      ...p,
      image: p.image.map((i) => Object.assign(new ImagePriceType(), i)),
    });
  }
}

@ObjectType('Model', { description: 'A model a paywall sells, with its prices.' })
export class ModelType {
  @Field(() => ID, { description: 'The model id clients send as `model`, e.g. "gpt-4o-mini".' }) id!: string;
  @Field({ description: 'Always "model".' }) object!: string;
  @Field() name!: string;
  @Field({ description: 'Same as displayName (OpenAI-style name).' })
  display_name!: string;
  @Field() displayName!: string;
  @Field({ description: 'Empty when none was set.' }) description!: string;
  @Field(() => ModelPricingType, {
    description: 'End-user prices: token prices x the paywall markup; the request price as configured.',
  })
  pricing!: ModelPricingType;
  @Field(() => ModelPricingType, { description: 'The configured cost prices (before markup).' })
  costPricing!: ModelPricingType;
  @Field(() => Int, {
    nullable: true,
    description:
      'The maximum output in force: held and sent when the client sends no cap, and the most a client cap ' +
      'is lowered to when set with setModelPricing (maxCompletionTokensSource says where it comes from).',
  })
  maxCompletionTokens!: number | null;
  @Field(() => MaxCompletionTokensSource)
  maxCompletionTokensSource!: MaxOutputSource;
  @Field({
    description:
      'The model reasons: thinking and reasoning effort are translated for it across formats (set with ' +
      "setModelPricing's reasoningModel, else the catalogue of known models says).",
  })
  reasoningModel!: boolean;
  @Field(() => ReasoningModelSource)
  reasoningModelSource!: MaxOutputSource;
  @Field(() => Int, { nullable: true, description: 'Requests per end user per UTC day; null = no limit.' })
  dailyRequestLimit!: number | null;
  @Field({
    description:
      "true when the platform's built-in provider serves this model (a SHARED paywall without a provider " +
      'of its own); costPricing is then the built-in cost, and part of each charge pays the provider.',
  })
  builtinProvider!: boolean;
  @Field({
    description:
      'The provider that serves this model (a name in Paywall.providers: `default` unless set, `builtin` ' +
      "for the platform's built-in provider).",
  })
  provider!: string;
  @Field({ description: 'The model id sent to the provider (the model id unless set).' })
  upstreamModel!: string;
  @Field(() => [String], {
    description: 'Providers tried in order when the provider fails before answering (429, 5xx, unreachable).',
  })
  fallbacks!: string[];
  @Field() createdAt!: string;
  @Field() updatedAt!: string;

  static from(m: ModelView): ModelType {
    return Object.assign(new ModelType(), {
      id: m.id,
      object: 'model',
      name: m.name,
      display_name: m.displayName,
      displayName: m.displayName,
      description: m.description,
      pricing: ModelPricingType.from(m.pricing),
      costPricing: ModelPricingType.from(m.costPricing),
      maxCompletionTokens: m.maxCompletionTokens,
      maxCompletionTokensSource: m.maxCompletionTokensSource,
      reasoningModel: m.reasoningModel,
      reasoningModelSource: m.reasoningModelSource,
      dailyRequestLimit: m.dailyRequestLimit,
      builtinProvider: m.builtinProvider,
      provider: m.provider,
      upstreamModel: m.upstreamModel,
      fallbacks: [...m.fallbacks],
      createdAt: m.createdAt.toISOString(),
      updatedAt: m.updatedAt.toISOString(),
    });
  }
}

@InputType({
  description:
    'Create or update a model. Prices are USDC decimal strings (≥ 0, ≤ 1000, up to 12 fraction digits): ' +
    'prompt, completion and the usage buckets per token, request per request. On update, omitted fields ' +
    'keep their value; a null bucket price makes the bucket follow the prompt or completion price again.',
})
export class SetModelPricingInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string;
  @Field({ description: '1–200 characters of letters, digits and . _ : / @ -' }) modelId!: string;
  @Field(() => String, { nullable: true, description: 'null clears it.' }) displayName?: string | null;
  @Field(() => String, { nullable: true, description: 'null clears it.' }) description?: string | null;
  @Field(() => String, { nullable: true, description: 'Cost per prompt token, e.g. "0.000002".' })
  prompt?: string | null;
  @Field(() => String, { nullable: true, description: 'Cost per completion token.' }) completion?:
    string | null;
  @Field(() => String, { nullable: true, description: 'Price per request (not marked up).' }) request?:
    string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per cached input token read; null (or unset on create): the prompt price applies.',
  })
  cacheRead?: string | null;
  @Field(() => String, {
    nullable: true,
    description:
      'Cost per input token written to a cache; null (or unset on create): the prompt price applies.',
  })
  cacheWrite?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per audio input token; null (or unset on create): the prompt price applies.',
  })
  audioPrompt?: string | null;
  @Field(() => PriceOrBooleanScalar, {
    nullable: true,
    description:
      'Cost per reasoning token; null (or unset on create): the completion price applies. true / false ' +
      'instead: whether the model reasons, as reasoningModel (the price is then left as it is).',
  })
  reasoning?: string | boolean | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per audio output token; null (or unset on create): the completion price applies.',
  })
  audioCompletion?: string | null;
  @Field(() => Int, {
    nullable: true,
    description:
      "16 to 1,000,000: the most output a request gets (a client's lower cap is kept); null: the catalogue's " +
      'maximum for the model, else 4096.',
  })
  maxCompletionTokens?: number | null;
  @Field(() => Boolean, {
    nullable: true,
    description:
      'true: the model reasons (Anthropic thinking and OpenAI reasoning effort are mapped to each other for ' +
      'it); false: it does not (they are dropped); null: the catalogue of known models decides.',
  })
  reasoningModel?: boolean | null;
  @Field(() => Int, {
    nullable: true,
    description:
      'Requests of this model per end user per UTC day (docs/reference.md §10); null removes the limit.',
  })
  dailyRequestLimit?: number | null;
  @Field(() => String, {
    nullable: true,
    description:
      'The provider (by name) that serves the model; null: `default` (in SHARED mode without one, the ' +
      "platform's built-in provider). The provider may be connected later.",
  })
  provider?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'The model id sent to the provider; null: the model id.',
  })
  upstreamModel?: string | null;
  @Field(() => [String], {
    nullable: true,
    description:
      'Up to 5 provider names tried in order when the provider refuses the connection, times out before ' +
      'answering, or answers 429 or 5xx; null or []: none.',
  })
  fallbacks?: string[] | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per image input token (gpt-image-1); null: the prompt price applies.',
  })
  imagePrompt?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per image output token (gpt-image-1); null: the completion price applies.',
  })
  imageCompletion?: string | null;
  @Field(() => [ImagePriceInput], {
    nullable: true,
    description:
      'Cost prices per image by size and quality (docs/reference.md §22), replacing the list; null or []: none.',
  })
  imagePrices?: ImagePriceInput[] | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per second of input audio (transcription, translation); null: not priced so.',
  })
  audioSecond?: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Cost per 1,000 input characters (speech); null: not priced so.',
  })
  characters1k?: string | null;
}
