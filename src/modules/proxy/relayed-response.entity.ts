import { defineEntity, p } from '@mikro-orm/core';

/**
 * A Responses API answer the proxy relayed: its input + output tokens. A later request that continues
 * it (`previous_response_id`) makes the provider bill that context again as input, so the hold adds
 * it. Kept without a foreign key (a lookup table, removed with the events' retention).
 */
export const RelayedResponseSchema = defineEntity({
  name: 'RelayedResponse',
  tableName: 'relayed_response',
  indexes: [{ properties: ['createdAt'] }],
  properties: {
    paywallId: p.uuid().primary(),
    id: p.string().length(255).primary(),
    tokens: p.bigint('bigint'),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class RelayedResponse extends RelayedResponseSchema.class {}
RelayedResponseSchema.setClass(RelayedResponse);
