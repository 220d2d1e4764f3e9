import { PaywallResolver } from '../modules/paywalls/paywall.resolver.js';
import { ProviderHealthResolver, ProviderResolver } from '../modules/providers/provider.resolver.js';
import { UserResolver } from '../modules/users/user.resolver.js';
import { ConnectionResolver } from '../modules/users/connection.resolver.js';
import { LedgerResolver } from '../modules/ledger/ledger.resolver.js';
import { EarningsResolver } from '../modules/ledger/earnings.resolver.js';
import {
  LedgerEntryRefundResolver,
  ReceiptRefundResolver,
  RefundResolver,
} from '../modules/ledger/refund.resolver.js';
import { CatalogResolver } from '../modules/catalog/catalog.resolver.js';
import { ProxyResolver } from '../modules/proxy/proxy.resolver.js';
import { WebhookResolver } from '../modules/webhooks/webhook.resolver.js';
import { StripeResolver } from '../modules/payments/stripe/stripe.resolver.js';
import { AutoTopupResolver } from '../modules/payments/auto-topup/auto-topup.resolver.js';
import { UsageResolver } from '../modules/usage/usage.resolver.js';
import { LiveEventsResolver } from '../modules/live-events/live-events.resolver.js';
import { UserKeyResolver } from '../modules/keys/user-key.resolver.js';

/** Every resolver class of every module. */
export const resolvers = [
  PaywallResolver,
  ProviderResolver,
  ProviderHealthResolver,
  UserResolver,
  ConnectionResolver,
  LedgerResolver,
  EarningsResolver,
  CatalogResolver,
  ProxyResolver,
  WebhookResolver,
  LiveEventsResolver,
  StripeResolver,
  UsageResolver,
  RefundResolver,
  ReceiptRefundResolver,
  LedgerEntryRefundResolver,
  AutoTopupResolver,
  UserKeyResolver,
] as const;
