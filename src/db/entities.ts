import { OwnerSchema } from '../modules/owners/owner.entity.js';
import { PaywallSchema } from '../modules/paywalls/paywall.entity.js';
import { ProviderSchema } from '../modules/providers/provider.entity.js';
import { ModelPriceSchema } from '../modules/catalog/model-price.entity.js';
import { EndUserSchema } from '../modules/users/end-user.entity.js';
import { ChargeSchema, IdempotencyKeySchema } from '../modules/ledger/ledger.entity.js';
import { LedgerAccountSchema, TransferSchema, WithdrawalSchema } from '../modules/accounts/account.entity.js';
import { ConnectRequestSchema, WalletConnectionSchema } from '../modules/users/connection.entity.js';
import {
  WalletSessionSchema,
  WalletKnownBrowserSchema,
  WalletSignInSchema,
  WalletUserSchema,
} from '../modules/wallet/wallet.entity.js';
import { RateWindowSchema, UsageCounterSchema } from '../modules/limits/limits.entity.js';
import {
  StripeCheckoutSchema,
  StripeEventSchema,
  StripeIntegrationSchema,
} from '../modules/payments/stripe/stripe.entity.js';
import { AutoTopupAttemptSchema, AutoTopupSchema } from '../modules/payments/auto-topup/auto-topup.entity.js';
import { UsageDayModelSchema, UsageDayUserSchema, UsageRollupSchema } from '../modules/usage/usage.entity.js';
import { EventSchema } from '../modules/events/event.entity.js';
import { RefundSchema } from '../modules/ledger/refund.entity.js';
import { RelayedResponseSchema } from '../modules/proxy/relayed-response.entity.js';
import { WebhookSubscriptionSchema, WebhookDeliverySchema } from '../modules/webhooks/webhook.entity.js';
import { UserKeySchema } from '../modules/keys/user-key.entity.js';

export const entities = [
  OwnerSchema,
  PaywallSchema,
  ProviderSchema,
  ModelPriceSchema,
  EndUserSchema,
  LedgerAccountSchema,
  TransferSchema,
  WithdrawalSchema,
  ChargeSchema,
  IdempotencyKeySchema,
  RelayedResponseSchema,
  EventSchema,
  WebhookSubscriptionSchema,
  WebhookDeliverySchema,
  WalletUserSchema,
  WalletSignInSchema,
  WalletSessionSchema,
  WalletKnownBrowserSchema,
  ConnectRequestSchema,
  WalletConnectionSchema,
  UsageCounterSchema,
  RateWindowSchema,
  StripeIntegrationSchema,
  StripeCheckoutSchema,
  StripeEventSchema,
  UsageDayModelSchema,
  UsageDayUserSchema,
  UsageRollupSchema,
  RefundSchema,
  AutoTopupSchema,
  AutoTopupAttemptSchema,
  UserKeySchema,
];
