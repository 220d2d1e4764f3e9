import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261122002823 } from './Migration20261122002823.js';
import { Migration20261122002900_triggers } from './Migration20261122002900_triggers.js';
import { Migration20261123204134_accounts } from './Migration20261123204134_accounts.js';
import { Migration20261123213143_limits } from './Migration20261123213143_limits.js';
import { Migration20261123213204_stripe } from './Migration20261123213204_stripe.js';
import { Migration20261123215114_wallet_stripe } from './Migration20261123215114_wallet_stripe.js';
import { Migration20261123233000_webhook_secrets } from './Migration20261123233000_webhook_secrets.js';
import { Migration20261123234348_usage } from './Migration20261123234348_usage.js';
import { Migration20261124000000_event_fanout_statement } from './Migration20261124000000_event_fanout_statement.js';
import { Migration20261124100000_event_matches_plpgsql } from './Migration20261124100000_event_matches_plpgsql.js';
import { Migration20261124200000_request_path_writes } from './Migration20261124200000_request_path_writes.js';
import { Migration20261125100000_stripe_endpoints } from './Migration20261125100000_stripe_endpoints.js';
import { Migration20261125200000_uncollected } from './Migration20261125200000_uncollected.js';
import { Migration20261125400000_sign_in_challenge } from './Migration20261125400000_sign_in_challenge.js';
import { Migration20261125500000_usage_provider_cost } from './Migration20261125500000_usage_provider_cost.js';
import { Migration20261126000000_usage_buckets } from './Migration20261126000000_usage_buckets.js';
import { Migration20261126200000_cap_parameter } from './Migration20261126200000_cap_parameter.js';
import { Migration20261129150000_reasoning_model } from './Migration20261129150000_reasoning_model.js';
import { Migration20261126400000_usage_bucket_tokens } from './Migration20261126400000_usage_bucket_tokens.js';
import { Migration20261127000000_named_providers } from './Migration20261127000000_named_providers.js';
import { Migration20261127100000_refunds } from './Migration20261127100000_refunds.js';
import { Migration20261127200000_allowance } from './Migration20261127200000_allowance.js';
import { Migration20261127300000_low_balance } from './Migration20261127300000_low_balance.js';
import { Migration20261127400000_auto_topup } from './Migration20261127400000_auto_topup.js';
import { Migration20261128000000_retention } from './Migration20261128000000_retention.js';
import { Migration20261128100000_lean_ledger } from './Migration20261128100000_lean_ledger.js';
import { Migration20261129060000_webhook_secret_grace } from './Migration20261129060000_webhook_secret_grace.js';
import { Migration20261129061000_wallet_known_browser } from './Migration20261129061000_wallet_known_browser.js';
import { Migration20261129100000_user_keys } from './Migration20261129100000_user_keys.js';
import { Migration20261129200000_media_prices } from './Migration20261129200000_media_prices.js';
import { Migration20261130200000_delivery_event_unique } from './Migration20261130200000_delivery_event_unique.js';
import { Migration20261130210000_fanout_one_paywall } from './Migration20261130210000_fanout_one_paywall.js';
import { Migration20261201300000_lean_ledger_restored } from './Migration20261201300000_lean_ledger_restored.js';
import { Migration20261202100000_ledger_tick } from './Migration20261202100000_ledger_tick.js';
import { Migration20261203100000_charge_response_owner } from './Migration20261203100000_charge_response_owner.js';
import { Migration20261203200000_ledger_running_balance } from './Migration20261203200000_ledger_running_balance.js';

/** Every migration, in order. `npm run migration:create` writes a new file; add it here. */
export const migrationsList: MigrationObject[] = [
  { name: 'Migration20261122002823', class: Migration20261122002823 },
  { name: 'Migration20261122002900_triggers', class: Migration20261122002900_triggers },
  { name: 'Migration20261123204134_accounts', class: Migration20261123204134_accounts },
  { name: 'Migration20261123213143_limits', class: Migration20261123213143_limits },
  { name: 'Migration20261123213204_stripe', class: Migration20261123213204_stripe },
  { name: 'Migration20261123215114_wallet_stripe', class: Migration20261123215114_wallet_stripe },
  { name: 'Migration20261123233000_webhook_secrets', class: Migration20261123233000_webhook_secrets },
  { name: 'Migration20261123234348_usage', class: Migration20261123234348_usage },
  {
    name: 'Migration20261124000000_event_fanout_statement',
    class: Migration20261124000000_event_fanout_statement,
  },
  {
    name: 'Migration20261124100000_event_matches_plpgsql',
    class: Migration20261124100000_event_matches_plpgsql,
  },
  { name: 'Migration20261124200000_request_path_writes', class: Migration20261124200000_request_path_writes },
  { name: 'Migration20261125100000_stripe_endpoints', class: Migration20261125100000_stripe_endpoints },
  { name: 'Migration20261125200000_uncollected', class: Migration20261125200000_uncollected },
  { name: 'Migration20261125400000_sign_in_challenge', class: Migration20261125400000_sign_in_challenge },
  { name: 'Migration20261125500000_usage_provider_cost', class: Migration20261125500000_usage_provider_cost },
  { name: 'Migration20261126000000_usage_buckets', class: Migration20261126000000_usage_buckets },
  { name: 'Migration20261126200000_cap_parameter', class: Migration20261126200000_cap_parameter },
  { name: 'Migration20261126400000_usage_bucket_tokens', class: Migration20261126400000_usage_bucket_tokens },
  { name: 'Migration20261127000000_named_providers', class: Migration20261127000000_named_providers },
  { name: 'Migration20261127100000_refunds', class: Migration20261127100000_refunds },
  { name: 'Migration20261127200000_allowance', class: Migration20261127200000_allowance },
  { name: 'Migration20261127300000_low_balance', class: Migration20261127300000_low_balance },
  { name: 'Migration20261127400000_auto_topup', class: Migration20261127400000_auto_topup },
  { name: 'Migration20261128000000_retention', class: Migration20261128000000_retention },
  { name: 'Migration20261128100000_lean_ledger', class: Migration20261128100000_lean_ledger },
  {
    name: 'Migration20261129060000_webhook_secret_grace',
    class: Migration20261129060000_webhook_secret_grace,
  },
  {
    name: 'Migration20261129061000_wallet_known_browser',
    class: Migration20261129061000_wallet_known_browser,
  },
  { name: 'Migration20261129100000_user_keys', class: Migration20261129100000_user_keys },
  { name: 'Migration20261129150000_reasoning_model', class: Migration20261129150000_reasoning_model },
  { name: 'Migration20261129200000_media_prices', class: Migration20261129200000_media_prices },
  {
    name: 'Migration20261130200000_delivery_event_unique',
    class: Migration20261130200000_delivery_event_unique,
  },
  {
    name: 'Migration20261130210000_fanout_one_paywall',
    class: Migration20261130210000_fanout_one_paywall,
  },
  {
    name: 'Migration20261201300000_lean_ledger_restored',
    class: Migration20261201300000_lean_ledger_restored,
  },
  { name: 'Migration20261202100000_ledger_tick', class: Migration20261202100000_ledger_tick },
  {
    name: 'Migration20261203100000_charge_response_owner',
    class: Migration20261203100000_charge_response_owner,
  },
  {
    name: 'Migration20261203200000_ledger_running_balance',
    class: Migration20261203200000_ledger_running_balance,
  },
];
