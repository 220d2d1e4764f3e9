import { Field, ID, ObjectType } from 'type-graphql';
import { JSONScalar } from '../../graphql/scalars.js';
import type { LiveEvent } from './live-event-hub.js';

@ObjectType('PaywallEvent', {
  description: 'A recorded event, as webhooks deliver it (the `event` of the delivery payload).',
})
export class PaywallEventType {
  @Field(() => ID) id!: string;
  @Field({ description: 'Event name from the catalogue, e.g. paywall.balance.deposit.created.' })
  type!: string;
  @Field({ description: 'Event version, e.g. "1.0".' }) version!: string;
  @Field({ description: 'ISO 8601 timestamp.' }) createdAt!: string;
  @Field(() => JSONScalar, { description: 'Event-specific fields (see the catalogue).' })
  data!: Record<string, unknown>;
  @Field(() => ID) paywallId!: string;
  @Field(() => ID) ownerUserId!: string;
  @Field(() => JSONScalar, { description: '{ source, actorType, actorId }' }) trigger!: Record<
    string,
    unknown
  >;
  @Field(() => JSONScalar, { description: '{ type, id, externalId }' }) subject!: Record<string, unknown>;
  @Field(() => JSONScalar) metadata!: Record<string, unknown>;

  static from(e: LiveEvent): PaywallEventType {
    return Object.assign(new PaywallEventType(), {
      id: e.id,
      type: e.type,
      version: e.version,
      createdAt: e.createdAt.toISOString(),
      data: e.data,
      paywallId: e.paywallId,
      ownerUserId: e.ownerUserId,
      trigger: e.trigger,
      subject: e.subject,
      metadata: e.metadata,
    });
  }
}
