import type { Config } from '../../config.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import { DeliveryWorker } from './delivery-worker.js';
import { loadSecretBox } from '../../shared/crypto.js';
import { SubscriptionService, type SubscriptionServiceDeps } from './subscription.service.js';
import { DeliveryLog, type DeliveryLogDeps } from './delivery-log.js';

/** What outgoing webhooks need (subscriptions and the in-process delivery worker). */
export interface WebhookServiceDeps extends SubscriptionServiceDeps, DeliveryLogDeps {
  config: SubscriptionServiceDeps['config'] &
    Pick<
      Config,
      | 'WEBHOOK_WORKER'
      | 'WEBHOOK_MAX_ATTEMPTS'
      | 'WEBHOOK_BACKOFF_BASE_MS'
      | 'WEBHOOK_TIMEOUT_MS'
      | 'WEBHOOK_POLL_MS'
    >;
  log: Logger;
  metrics: Pick<Metrics, 'registry'>;
}

/** Webhook subscriptions, delivery logs, redelivery. */
export class WebhookService {
  /** Management API: subscriptions (subscription.service.ts). */
  readonly subscriptions: SubscriptionService;
  /** The delivery log and manual resend (delivery-log.ts). */
  readonly deliveries: DeliveryLog;

  constructor(private readonly deps: WebhookServiceDeps) {
    const { db, reads, config, paywalls, clock } = deps;
    this.subscriptions = new SubscriptionService({ db, config, paywalls, clock });
    this.deliveries = new DeliveryLog({ db, reads, paywalls });
  }

  /** The outbox consumer running in this process (unset when WEBHOOK_WORKER=false or before start). */
  worker?: DeliveryWorker;

  /** Starts the in-process delivery worker unless WEBHOOK_WORKER=false (then `npm run worker` runs it apart). */
  async start(): Promise<void> {
    const c = this.deps.config;
    if (!c.WEBHOOK_WORKER || this.worker) return;
    this.worker = new DeliveryWorker({
      // Its own small pool: a flood of API reads cannot starve deliveries (Database.background).
      db: await this.deps.db.background(),
      log: this.deps.log.child({ component: 'webhook-worker' }),
      maxAttempts: c.WEBHOOK_MAX_ATTEMPTS,
      backoffBaseMs: c.WEBHOOK_BACKOFF_BASE_MS,
      timeoutMs: c.WEBHOOK_TIMEOUT_MS,
      pollMs: c.WEBHOOK_POLL_MS,
      allowPrivate: c.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
      secretBox: loadSecretBox(c).box,
      metrics: this.deps.metrics.registry,
      clock: this.deps.clock,
    });
    await this.worker.start();
  }

  /** Stops claiming; deliveries in flight get a few seconds to finish, the rest return after their lease. */
  async stop(): Promise<void> {
    await this.worker?.stop(5000);
  }
}
