import { Arg, Ctx, ID, Int, Mutation, Query, Resolver } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import {
  CreateWebhookSubscriptionInput,
  WebhookDeliveryConnection,
  WebhookDeliveryType,
  WebhookSubscriptionType,
} from './webhook.types.js';

/**
 * Webhook management. Every operation takes the paywall's API key (its own paywall) or an owner token
 * (`paywallId` names one of its paywalls where a list is asked for; by-id operations find the paywall
 * through the subscription or event). Others' records answer NOT_FOUND.
 */
@Resolver(() => WebhookSubscriptionType)
export class WebhookResolver {
  @Mutation(() => WebhookSubscriptionType, { description: 'Subscribe a URL; the secret is returned once.' })
  async createWebhookSubscription(
    @Ctx() ctx: AppContext,
    @Arg('input') input: CreateWebhookSubscriptionInput,
  ): Promise<WebhookSubscriptionType> {
    const sub = await ctx.services.webhooks.subscriptions.create(requireAuth(ctx), input);
    return WebhookSubscriptionType.from(sub);
  }

  @Query(() => [WebhookSubscriptionType], {
    description: 'Newest first. status: "active", "inactive", or both.',
  })
  async webhookSubscriptions(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
    @Arg('status', () => String, { nullable: true }) status?: string,
  ): Promise<WebhookSubscriptionType[]> {
    const subs = await ctx.services.webhooks.subscriptions.list(requireAuth(ctx), paywallId, status);
    return subs.map(WebhookSubscriptionType.from);
  }

  @Query(() => WebhookSubscriptionType)
  async webhookSubscription(
    @Ctx() ctx: AppContext,
    @Arg('id', () => ID) id: string,
  ): Promise<WebhookSubscriptionType> {
    return WebhookSubscriptionType.from(await ctx.services.webhooks.subscriptions.get(requireAuth(ctx), id));
  }

  @Mutation(() => WebhookSubscriptionType, { description: 'Soft deactivation: the record is kept.' })
  async deactivateWebhookSubscription(
    @Ctx() ctx: AppContext,
    @Arg('id', () => ID) id: string,
  ): Promise<WebhookSubscriptionType> {
    const sub = await ctx.services.webhooks.subscriptions.deactivate(requireAuth(ctx), id);
    return WebhookSubscriptionType.from(sub);
  }

  @Mutation(() => WebhookSubscriptionType, { description: 'Re-enable; resets consecutiveFailures to 0.' })
  async reactivateWebhookSubscription(
    @Ctx() ctx: AppContext,
    @Arg('id', () => ID) id: string,
  ): Promise<WebhookSubscriptionType> {
    const sub = await ctx.services.webhooks.subscriptions.reactivate(requireAuth(ctx), id);
    return WebhookSubscriptionType.from(sub);
  }

  @Mutation(() => WebhookSubscriptionType, {
    description: 'New signing secret (given, or generated when omitted), returned once in `secret`.',
  })
  async rotateWebhookSecret(
    @Ctx() ctx: AppContext,
    @Arg('id', () => ID) id: string,
    @Arg('secret', () => String, { nullable: true }) secret?: string,
  ): Promise<WebhookSubscriptionType> {
    const sub = await ctx.services.webhooks.subscriptions.rotateSecret(requireAuth(ctx), id, secret);
    return WebhookSubscriptionType.from(sub);
  }

  @Query(() => WebhookDeliveryConnection, { description: 'Delivery logs, newest first (cursor pagination).' })
  async webhookDeliveries(
    @Ctx() ctx: AppContext,
    @Arg('paywallId', () => ID, { nullable: true }) paywallId?: string,
    @Arg('subscriptionId', () => ID, { nullable: true }) subscriptionId?: string,
    @Arg('status', () => String, { nullable: true, description: '`pending`, `success` or `error`.' })
    status?: string,
    @Arg('eventType', () => String, { nullable: true, description: 'An exact event name.' })
    eventType?: string,
    @Arg('first', () => Int, { nullable: true, description: '1 to 100, default 20.' }) first?: number,
    @Arg('after', () => String, { nullable: true }) after?: string,
  ): Promise<WebhookDeliveryConnection> {
    const page = await ctx.services.webhooks.deliveries.list(requireAuth(ctx), paywallId, {
      subscriptionId,
      status,
      eventType,
      first,
      after,
    });
    return WebhookDeliveryConnection.from(page);
  }

  @Mutation(() => [WebhookDeliveryType], {
    description:
      'Manual resend of an event: to the given subscription, or to every active subscription matching it. ' +
      'The deliveries go back to pending, due now; attempts keep counting.',
  })
  async redeliverWebhookEvent(
    @Ctx() ctx: AppContext,
    @Arg('eventId', () => ID) eventId: string,
    @Arg('subscriptionId', () => ID, { nullable: true }) subscriptionId?: string,
  ): Promise<WebhookDeliveryType[]> {
    const rows = await ctx.services.webhooks.deliveries.redeliver(requireAuth(ctx), eventId, subscriptionId);
    return rows.map(WebhookDeliveryType.from);
  }
}
