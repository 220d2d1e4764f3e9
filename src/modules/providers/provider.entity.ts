import { defineEntity, p } from '@mikro-orm/core';
import { Paywall } from '../paywalls/paywall.entity.js';
import { CAP_PARAMETERS, DEFAULT_CAP_PARAMETER, PROVIDER_KINDS } from './provider-client.js';

/**
 * A named model provider of a paywall (docs/reference.md §15). The key is AES-256-GCM ciphertext, never
 * returned.
 */
export const ProviderSchema = defineEntity({
  name: 'Provider',
  tableName: 'provider',
  properties: {
    paywall: () => p.manyToOne(Paywall).mapToPk().primary().updateRule('cascade').deleteRule('cascade'),
    /** `default` unless named: a model without a `provider` of its own is served by `default`. */
    name: p.string().length(40).primary().default('default'),
    kind: p.enum(PROVIDER_KINDS).default('OPENAI'),
    baseUrl: p.text(),
    apiKeyCiphertext: p.text(),
    apiKeyLastFour: p.string().length(4),
    /** The chat cap field when the client sent none (docs/reference.md §13 "Cap sent upstream"). */
    capParameter: p.enum(CAP_PARAMETERS).default(DEFAULT_CAP_PARAMETER),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export class Provider extends ProviderSchema.class {}
ProviderSchema.setClass(Provider);
