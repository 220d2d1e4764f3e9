import { GraphQLJSONObject } from 'graphql-scalars';
import { Field, ID, InputType, Int, ObjectType } from 'type-graphql';
import type { DeliveryPage, DeliveryView } from './delivery-log.js';
import type { SubscriptionView } from './subscription.service.js';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

@ObjectType('WebhookSubscription', {
  description: 'Where signed event notifications are POSTed (spec "Webhook subscription").',
})
export class WebhookSubscriptionType {
  @Field(() => ID) id!: string;
  @Field(() => ID) paywallId!: string;
  @Field({ description: 'HTTPS endpoint receiving deliveries.' }) url!: string;
  @Field(() => [String], { description: 'Exact event names, `prefix.*` families, or the lone `*`.' })
  events!: string[];
  @Field({ description: 'False after deactivation: no new deliveries are written for it.' })
  isActive!: boolean;
  @Field(() => String, { nullable: true, description: 'Trimmed to 512 characters.' }) description!:
    string | null;
  @Field(() => GraphQLJSONObject, { description: 'Extra headers sent with every delivery (at most 10).' })
  customHeaders!: Record<string, string>;
  @Field() createdAt!: string;
  @Field() updatedAt!: string;
  @Field(() => String, {
    nullable: true,
    description:
      'The signing secret: only in the answers of createWebhookSubscription and rotateWebhookSecret, null elsewhere. Store it then.',
  })
  secret!: string | null;
  @Field({ description: 'Last 4 characters of the secret, for telling secrets apart.' })
  secretSuffix!: string;
  @Field({ description: '`api_key:<paywall id>` or `owner:<owner id>`.' }) createdBy!: string;
  @Field(() => Int, { description: 'Failed deliveries in a row since the last success or reactivation.' })
  consecutiveFailures!: number;
  @Field(() => String, { nullable: true }) lastDeliveredAt!: string | null;

  static from(v: SubscriptionView): WebhookSubscriptionType {
    return Object.assign(new WebhookSubscriptionType(), {
      ...v,
      createdAt: v.createdAt.toISOString(),
      updatedAt: v.updatedAt.toISOString(),
      lastDeliveredAt: iso(v.lastDeliveredAt),
    });
  }
}

@InputType()
export class CreateWebhookSubscriptionInput {
  @Field(() => ID, { nullable: true, description: 'Required with an owner token; implied by an API key.' })
  paywallId?: string | null;
  @Field({ description: 'https:// URL whose host resolves to public addresses.' }) url!: string;
  @Field(() => [String], {
    description: 'Event names from the catalogue, `prefix.*` families, or `["*"]` alone.',
  })
  events!: string[];
  @Field(() => String, { nullable: true, description: 'Trimmed to 512 characters.' }) description?:
    string | null;
  @Field(() => GraphQLJSONObject, {
    nullable: true,
    description:
      'Header name → string value, at most 10; not Content-Type, Host, User-Agent, hop-by-hop headers, X-Service-* or webhook-id/-timestamp/-signature.',
  })
  customHeaders?: Record<string, unknown> | null;
  @Field(() => String, {
    nullable: true,
    description:
      'Pre-shared signing secret (16–256 printable characters, no whitespace); generated when omitted: `whsec_` + standard base64 of 32 random bytes.',
  })
  secret?: string | null;
}

@ObjectType('WebhookDelivery', {
  description: 'One delivery of one event to one subscription: the delivery log entry.',
})
export class WebhookDeliveryType {
  @Field(() => ID) id!: string;
  @Field(() => ID) subscriptionId!: string;
  @Field(() => ID) eventId!: string;
  @Field() eventType!: string;
  @Field({ description: '`pending`, `success` or `error`.' }) status!: string;
  @Field(() => Int, { description: 'Attempts made so far.' }) attempts!: number;
  @Field(() => String, { nullable: true, description: 'When the next attempt is due; null once finished.' })
  nextAttemptAt!: string | null;
  @Field(() => Int, { nullable: true, description: "HTTP status of the receiver's last answer." })
  responseStatus!: number | null;
  @Field(() => Int, { nullable: true }) responseLatencyMs!: number | null;
  @Field(() => String, { nullable: true, description: "The receiver's last answer body, first 4 KiB." })
  responseBody!: string | null;
  @Field(() => String, {
    nullable: true,
    description: 'Why the last attempt got no answer (timeout, connection refused, address refused).',
  })
  lastError!: string | null;
  @Field() createdAt!: string;
  @Field() updatedAt!: string;
  @Field(() => GraphQLJSONObject, { description: 'The `event` object of the delivery payload, as sent.' })
  event!: Record<string, unknown>;

  static from(v: DeliveryView): WebhookDeliveryType {
    return Object.assign(new WebhookDeliveryType(), {
      id: v.id,
      subscriptionId: v.subscriptionId,
      eventId: v.eventId,
      eventType: v.eventType,
      status: v.status,
      attempts: v.attempts,
      nextAttemptAt: iso(v.nextAttemptAt),
      responseStatus: v.responseStatus,
      responseLatencyMs: v.responseLatencyMs,
      responseBody: v.responseBody,
      lastError: v.lastError,
      createdAt: v.createdAt.toISOString(),
      updatedAt: v.updatedAt.toISOString(),
      event: v.event,
    });
  }
}

@ObjectType()
export class WebhookDeliveryEdge {
  @Field() cursor!: string;
  @Field(() => WebhookDeliveryType) node!: WebhookDeliveryType;
}

@ObjectType()
export class WebhookDeliveryPageInfo {
  @Field() hasNextPage!: boolean;
  @Field(() => String, { nullable: true, description: 'Pass as `after` for the next (older) page.' })
  endCursor!: string | null;
}

@ObjectType({ description: 'Delivery log entries, newest first.' })
export class WebhookDeliveryConnection {
  @Field(() => [WebhookDeliveryEdge]) edges!: WebhookDeliveryEdge[];
  @Field(() => [WebhookDeliveryType]) nodes!: WebhookDeliveryType[];
  @Field(() => WebhookDeliveryPageInfo) pageInfo!: WebhookDeliveryPageInfo;

  static from(page: DeliveryPage): WebhookDeliveryConnection {
    const edges = page.entries.map((e) =>
      Object.assign(new WebhookDeliveryEdge(), { cursor: e.cursor, node: WebhookDeliveryType.from(e) }),
    );
    return Object.assign(new WebhookDeliveryConnection(), {
      edges,
      nodes: edges.map((e) => e.node),
      pageInfo: Object.assign(new WebhookDeliveryPageInfo(), {
        hasNextPage: page.hasNextPage,
        endCursor: page.endCursor,
      }),
    });
  }
}
