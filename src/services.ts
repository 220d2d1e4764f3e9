import type { Config } from './config.js';
import { systemClock, type Clock } from './shared/clock.js';
import type { Database } from './db/database.js';
import { DatabaseMaintenance } from './db/maintenance.js';
import { ReadReplica } from './db/read-replica.js';
import { EventRetention } from './db/retention.js';
import type { Logger } from './shared/logger.js';
import type { Metrics } from './shared/metrics.js';
import { OwnerService } from './modules/owners/owner.service.js';
import { PaywallService } from './modules/paywalls/paywall.service.js';
import { ProviderService } from './modules/providers/provider.service.js';
import { UserService } from './modules/users/user.service.js';
import { LedgerService } from './modules/ledger/ledger.service.js';
import { EarningsService } from './modules/ledger/earnings.service.js';
import { LowBalanceAlerts } from './modules/ledger/low-balance.js';
import { RefundService } from './modules/ledger/refund.service.js';
import { UsageService } from './modules/usage/usage.service.js';
import { CatalogService } from './modules/catalog/catalog.service.js';
import { ModelPrices } from './modules/catalog/model-prices.js';
import { ProxyService } from './modules/proxy/proxy.service.js';
import { WebhookService } from './modules/webhooks/webhook.service.js';
import { createMailer, type Mailer } from './shared/mailer.js';
import { SignInService } from './modules/wallet/sign-in.service.js';
import { AuthorizationService } from './modules/wallet/authorization.service.js';
import { WalletService } from './modules/wallet/wallet.service.js';
import { WalletSecrets } from './modules/wallet/wallet-secrets.js';
import { createStripeGateway } from './modules/payments/stripe/stripe-gateway.js';
import { StripeSecrets } from './modules/payments/stripe/stripe-integration.store.js';
import { StripeIntegrationService } from './modules/payments/stripe/stripe-integration.service.js';
import { StripeCheckoutService } from './modules/payments/stripe/stripe-checkout.service.js';
import { StripeWebhookIngestService } from './modules/payments/stripe/stripe-webhook-ingest.service.js';
import { TopupLimiter } from './modules/payments/stripe/topup-limits.js';
import { AutoTopupAttempts } from './modules/payments/auto-topup/attempt-runner.js';
import { InFlight } from './modules/payments/auto-topup/auto-topup-rows.js';
import { AutoTopupStates } from './modules/payments/auto-topup/auto-topup-state.js';
import { AutoTopupFailures } from './modules/payments/auto-topup/failure-policy.js';
import { AutoTopupIngest } from './modules/payments/auto-topup/ingest-port.js';
import { AutoTopupCustomers } from './modules/payments/auto-topup/stripe-customers.js';
import { AutoTopupThresholds } from './modules/payments/auto-topup/threshold-cache.js';
import { UserKeyService } from './modules/keys/user-key.service.js';

/**
 * Every service, built once per process: the bag the transports (GraphQL context, REST routes, pages)
 * use. Services themselves never see it: `createServices`, the one composition root, gives each the few
 * collaborators it names in its constructor.
 */
export interface Services {
  config: Config;
  /** The time the rules see (tests move it). */
  clock: Clock;
  db: Database;
  /**
   * The read side (DATABASE_READ_URL): lag-tolerant reads of a GraphQL query go to the replica, every other
   * read to `db` (src/db/read-replica.ts). The GraphQL route marks which operations tolerate lag.
   */
  reads: ReadReplica;
  log: Logger;
  metrics: Metrics;
  /** VACUUM and ANALYZE where the database has no autovacuum (PGlite, or autovacuum = off). */
  maintenance: DatabaseMaintenance;
  /** Removes events and deliveries past EVENT_RETENTION_DAYS (docs/reference.md §18). */
  retention: EventRetention;
  owners: OwnerService;
  paywalls: PaywallService;
  providers: ProviderService;
  users: UserService;
  ledger: LedgerService;
  earnings: EarningsService;
  /** Refunds of charges (docs/reference.md §16 "Refunds"). */
  refunds: RefundService;
  usage: UsageService;
  catalog: CatalogService;
  /** The prices each paywall's models sell at, cached for the request path (docs/catalog.md). */
  modelPrices: ModelPrices;
  proxy: ProxyService;
  webhooks: WebhookService;
  // Hosted wallet (SHARED mode).
  mailer: Mailer;
  /** docs/reference.md §16 "Low balance": the check after a charge, and the wallet's e-mail. */
  lowBalance: LowBalanceAlerts;
  walletSecrets: WalletSecrets;
  signIn: SignInService;
  authorizations: AuthorizationService;
  wallet: WalletService;
  /** Stripe top-ups (docs/stripe.md): a paywall's connection, the two Checkouts, incoming Stripe events. */
  stripeIntegration: StripeIntegrationService;
  stripeCheckout: StripeCheckoutService;
  stripeEvents: StripeWebhookIngestService;
  /** Auto top-up with a saved card (docs/reference.md §16): what the pages and GraphQL show, turning off. */
  autoTopup: AutoTopupStates;
  /** The thresholds of accounts whose auto top-up is on (kept fresh by NOTIFY). */
  autoTopupThresholds: AutoTopupThresholds;
  /** The payments auto top-up starts after a charge, and their retries. */
  autoTopupAttempts: AutoTopupAttempts;
  /** End-user keys (docs/reference.md §19). */
  userKeys: UserKeyService;
}

interface Lifecycle {
  start?(): Promise<void>;
  stop?(): Promise<void>;
}

export function createServices(config: Config, db: Database, log: Logger, metrics: Metrics): Services {
  const s = { config, db, log, metrics, clock: systemClock() } as Services;
  // Given only to the services with lag-tolerant reads: users' and connections' lists, ledger and charge
  // pages, usage, earnings history and withdrawals, webhook delivery logs (docs/operations.md "Read replica").
  const reads = (s.reads = new ReadReplica(db, log, metrics));
  s.maintenance = new DatabaseMaintenance(db, log, config.DATABASE_VACUUM_INTERVAL_MS);
  s.retention = new EventRetention(db, log, config.EVENT_RETENTION_DAYS);
  s.owners = new OwnerService({ db });
  // Paywalls ask providers one question (does the built-in provider need a markup?): a port, called
  // later, so paywalls do not depend on providers (which depend on paywalls).
  s.paywalls = new PaywallService(db, {
    builtinNeedsMarkup: (paywall) => s.providers.builtinNeedsMarkup(paywall),
    maxPerOwner: config.MAX_PAYWALLS_PER_OWNER,
  });
  s.providers = new ProviderService({ db, config, log, paywalls: s.paywalls });
  s.authorizations = new AuthorizationService({ db, clock: s.clock });
  s.users = new UserService({
    db,
    reads,
    config,
    metrics,
    authorizations: s.authorizations,
    // Stripe credits end users, and users ask Stripe which card top-ups a paywall offers: a port.
    stripe: { topupAmounts: (paywallId, sql) => s.stripeCheckout.topupAmounts(paywallId, sql) },
  });
  // Low-balance alerts (docs/reference.md §16): checked after chat and manual charges; the wallet's e-mail.
  s.mailer = createMailer(config, log);
  s.lowBalance = new LowBalanceAlerts({ db, log, mailer: s.mailer, config });
  // Auto top-up hears of every charge (a port: it is built with the Stripe services below).
  const afterCharge = {
    afterCharge: (endUserId: string, accountId: string | null, freeAfterRaw: bigint) =>
      s.autoTopupAttempts.afterCharge(endUserId, accountId, freeAfterRaw),
  };
  s.ledger = new LedgerService({
    db,
    reads,
    log,
    config,
    metrics,
    paywalls: s.paywalls,
    users: s.users,
    lowBalance: s.lowBalance,
    clock: s.clock,
    autoTopup: afterCharge,
  });
  s.earnings = new EarningsService(db, reads);
  s.refunds = new RefundService({
    db,
    paywalls: s.paywalls,
    idempotency: s.ledger.idempotency,
    metrics,
  });
  s.usage = new UsageService(
    db,
    { total: config.GRAPHQL_HEAVY_READS, perTenant: config.GRAPHQL_HEAVY_READS_PER_TENANT },
    reads,
  );
  s.userKeys = new UserKeyService({
    db,
    clock: s.clock,
    ensureUser: (sql, paywall, externalId, trigger) => s.users.ensureUser(sql, paywall, externalId, trigger),
  });
  s.modelPrices = new ModelPrices({ db, config, providers: s.providers });
  s.catalog = new CatalogService({ db, paywalls: s.paywalls, prices: s.modelPrices });
  s.proxy = new ProxyService({
    db,
    catalog: s.modelPrices,
    providers: s.providers,
    users: s.users,
    clock: s.clock,
    log,
    metrics,
    limits: config,
    lowBalance: s.lowBalance,
    autoTopup: afterCharge,
  });
  s.webhooks = new WebhookService({ db, reads, config, log, metrics, paywalls: s.paywalls, clock: s.clock });
  s.walletSecrets = new WalletSecrets(config);
  s.signIn = new SignInService({ db, log, mailer: s.mailer, secrets: s.walletSecrets });
  s.wallet = new WalletService({
    db,
    config,
    clock: s.clock,
    stripe: {
      startWalletCheckout: (walletUser, amount, autoTopup) =>
        s.stripeCheckout.startWalletCheckout(walletUser, amount, autoTopup),
    },
  });
  // Each Stripe service declares the few of these it uses (its *Deps interface).
  const { paywalls, users, clock } = s;
  const stripe = {
    ...{ db, config, log, clock, paywalls, users },
    gateway: createStripeGateway(config.STRIPE_API_BASE),
    secrets: new StripeSecrets(config, log),
  };
  s.stripeIntegration = new StripeIntegrationService(stripe);
  // Auto top-up, one part per job; the e-mails and payments it starts are waited for together.
  const inFlight = new InFlight();
  const failures = new AutoTopupFailures({ db, config, log, mailer: s.mailer, inFlight });
  s.autoTopup = new AutoTopupStates({ db, clock });
  s.autoTopupThresholds = new AutoTopupThresholds({ db, log });
  s.autoTopupAttempts = new AutoTopupAttempts({
    ...stripe,
    thresholds: s.autoTopupThresholds,
    failures,
    inFlight,
  });
  s.stripeCheckout = new StripeCheckoutService({
    ...stripe,
    limits: new TopupLimiter(config, s.clock),
    autoTopup: new AutoTopupCustomers(stripe),
  });
  s.stripeEvents = new StripeWebhookIngestService({
    ...stripe,
    autoTopup: new AutoTopupIngest({ log, failures }),
    retireReplacedEndpoints: (paywallId) => s.stripeIntegration.retireReplacedEndpoints(paywallId),
  });
  return s;
}

const lifecycles = (s: Services): Lifecycle[] =>
  [
    s.maintenance,
    s.retention,
    s.paywalls,
    s.userKeys,
    s.providers,
    s.users,
    s.ledger,
    s.modelPrices,
    s.proxy,
    s.webhooks,
    s.signIn,
    s.stripeIntegration,
    s.autoTopupThresholds,
    s.autoTopupAttempts,
  ] as Lifecycle[];

/** Starts background parts (cache-invalidation listeners, the webhook worker) of every service that has them. */
export async function startServices(s: Services): Promise<void> {
  for (const svc of lifecycles(s)) await svc.start?.();
}

/** Stops them in reverse order (the proxy first finishes in-flight settlements). */
export async function stopServices(s: Services): Promise<void> {
  for (const svc of lifecycles(s).reverse()) await svc.stop?.();
  s.mailer.close();
}
