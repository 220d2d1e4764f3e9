import { OwnerSchema } from '../modules/owners/owner.entity.js';
import { PaywallSchema } from '../modules/paywalls/paywall.entity.js';
import { ProviderSchema } from '../modules/paywalls/provider.entity.js';
import { ModelPriceSchema } from '../modules/catalog/model-price.entity.js';
import { EndUserSchema } from '../modules/users/end-user.entity.js';
import { LedgerEntrySchema, ChargeSchema, IdempotencyKeySchema } from '../modules/ledger/ledger.entity.js';
import { EventSchema } from '../modules/events/event.entity.js';
import { WebhookSubscriptionSchema, WebhookDeliverySchema } from '../modules/webhooks/webhook.entity.js';

export const entities = [
  OwnerSchema,
  PaywallSchema,
  ProviderSchema,
  ModelPriceSchema,
  EndUserSchema,
  LedgerEntrySchema,
  ChargeSchema,
  IdempotencyKeySchema,
  EventSchema,
  WebhookSubscriptionSchema,
  WebhookDeliverySchema,
];
