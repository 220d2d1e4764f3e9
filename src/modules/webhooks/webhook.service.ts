import type { Services } from '../../services.js';

/** Webhook subscriptions, delivery logs, redelivery. */
export class WebhookService {
  constructor(private readonly s: Services) {}
}
