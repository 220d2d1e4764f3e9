import { defineEntity, p } from '@mikro-orm/core';

/**
 * A recorded event (the envelope of the spec). Written in the transaction of the change it reports;
 * an insert trigger fans it out to webhook deliveries (the outbox) and NOTIFYs live subscribers.
 */
export const EventSchema = defineEntity({
  name: 'Event',
  tableName: 'event',
  indexes: [{ properties: ['paywallId', 'seq'] }],
  properties: {
    seq: p.bigint('string').primary().autoincrement(),
    id: p.uuid().unique(),
    paywallId: p.uuid(),
    ownerUserId: p.uuid(),
    type: p.string().length(100),
    version: p.string().length(10).default('1.0'),
    trigger: p.json<Record<string, unknown>>(),
    subject: p.json<Record<string, unknown>>(),
    data: p.json<Record<string, unknown>>(),
    metadata: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
export class Event extends EventSchema.class {}
EventSchema.setClass(Event);
