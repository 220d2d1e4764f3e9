import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';

/** A model a paywall sells, with its cost prices in pico-USDC (10⁻¹² USDC). End-user prices add the markup. */
export const ModelPriceSchema = defineEntity({
  name: 'ModelPrice',
  tableName: 'model_price',
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary(),
    modelId: p.string().length(200).primary(),
    displayName: p.string().length(200).nullable(),
    description: p.text().nullable(),
    promptPico: p.bigint('bigint').defaultRaw('0').check('prompt_pico >= 0'),
    completionPico: p.bigint('bigint').defaultRaw('0').check('completion_pico >= 0'),
    requestPico: p.bigint('bigint').defaultRaw('0').check('request_pico >= 0'),
    /** docs/reference.md §13: per-bucket prices; null = the prompt (input) or completion (output) price. */
    cacheReadPico: p.bigint('bigint').nullable().check('cache_read_pico >= 0'),
    cacheWritePico: p.bigint('bigint').nullable().check('cache_write_pico >= 0'),
    audioPromptPico: p.bigint('bigint').nullable().check('audio_prompt_pico >= 0'),
    reasoningPico: p.bigint('bigint').nullable().check('reasoning_pico >= 0'),
    audioCompletionPico: p.bigint('bigint').nullable().check('audio_completion_pico >= 0'),
    /** docs/reference.md §22: image input / output token prices; null = the prompt / completion price. */
    imagePromptPico: p.bigint('bigint').nullable().check('image_prompt_pico >= 0'),
    imageCompletionPico: p.bigint('bigint').nullable().check('image_completion_pico >= 0'),
    /** Prices per image: `[{size, quality, pico}]` (pico-USDC as a decimal string; "*" matches any). */
    imagePrices: p.json<{ size: string; quality: string; pico: string }[]>().defaultRaw(`'[]'`),
    /** Per second of input audio, per 1,000 input characters; null = not priced so. */
    audioSecondPico: p.bigint('bigint').nullable().check('audio_second_pico >= 0'),
    characters1kPico: p
      .bigint('bigint')
      .nullable()
      .fieldName('characters_1k_pico')
      .check('characters_1k_pico >= 0'),
    maxCompletionTokens: p.integer().nullable(),
    /** docs/reference.md §21: the owner says the model reasons (null: the catalogue of known models decides). */
    reasoningModel: p.boolean().nullable(),
    /** docs/reference.md §10: requests of this model per end user per UTC day (null = no limit). */
    dailyRequestLimit: p.integer().nullable().check('daily_request_limit >= 0'),
    /** docs/reference.md §15 "Routing": the provider's name (null = `default`, then the built-in one). */
    provider: p.string().length(40).nullable(),
    /** The model id sent to the provider (null = the model id). */
    upstreamModel: p.string().length(200).nullable(),
    /** Provider names tried in order when the provider fails before answering. */
    fallbacks: p.array().columnType('text[]').default([]),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class ModelPrice extends ModelPriceSchema.class {}
ModelPriceSchema.setClass(ModelPrice);
