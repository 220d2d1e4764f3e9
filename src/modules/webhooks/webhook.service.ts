import type { Services } from '../../services.js';
import { SubscriptionService } from './subscription.service.js';

/** Webhook subscriptions, delivery logs, redelivery. */
export class WebhookService {
  /** Management API: subscriptions, delivery logs, manual resend (subscription.service.ts). */
  readonly subscriptions: SubscriptionService;

  constructor(private readonly s: Services) {
    this.subscriptions = new SubscriptionService(s);
  }
}
