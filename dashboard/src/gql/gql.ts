/* eslint-disable */
import * as types from './graphql';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "\n  query SignInPaywalls {\n    paywalls {\n      id\n    }\n  }\n": typeof types.SignInPaywallsDocument,
    "\n  query SignInOwnPaywall {\n    paywall {\n      id\n    }\n  }\n": typeof types.SignInOwnPaywallDocument,
    "\n  query DashboardPaywalls {\n    paywalls(includeArchived: true, first: 100) {\n      ...PaywallSummary\n    }\n  }\n": typeof types.DashboardPaywallsDocument,
    "\n  query DashboardPaywall($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSummary\n    }\n  }\n": typeof types.DashboardPaywallDocument,
    "\n  fragment ConnectionRow on Connection {\n    id\n    externalUserId\n    walletUserId\n    status\n    connectedAt\n    revokedAt\n  }\n": typeof types.ConnectionRowFragmentDoc,
    "\n  query Connections($id: ID, $after: String) {\n    paywall(id: $id) {\n      id\n      connections(first: 20, after: $after) {\n        edges {\n          node {\n            ...ConnectionRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n": typeof types.ConnectionsDocument,
    "\n  fragment WithdrawalRow on Withdrawal {\n    id\n    amount\n    destination\n    status\n    failureReason\n    createdAt\n  }\n": typeof types.WithdrawalRowFragmentDoc,
    "\n  fragment EarningsMovement on EarningsEntry {\n    id\n    kind\n    amount\n    model\n    createdAt\n  }\n": typeof types.EarningsMovementFragmentDoc,
    "\n  query Earnings($id: ID) {\n    paywall(id: $id) {\n      id\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n      withdrawals(first: 20) {\n        edges {\n          node {\n            ...WithdrawalRow\n          }\n        }\n      }\n      earningsHistory(first: 20) {\n        edges {\n          node {\n            ...EarningsMovement\n          }\n        }\n      }\n    }\n  }\n": typeof types.EarningsDocument,
    "\n  mutation Withdraw($input: RequestWithdrawalInput!) {\n    requestWithdrawal(input: $input) {\n      ...WithdrawalRow\n    }\n  }\n": typeof types.WithdrawDocument,
    "\n  mutation Cancel($paywallId: ID, $id: ID!) {\n    cancelWithdrawal(paywallId: $paywallId, id: $id) {\n      ...WithdrawalRow\n    }\n  }\n": typeof types.CancelDocument,
    "\n  subscription Live($id: ID, $types: [String!]) {\n    paywallEvents(paywallId: $id, types: $types) {\n      id\n      type\n      version\n      createdAt\n      data\n      subject\n    }\n  }\n": typeof types.LiveDocument,
    "\n  fragment PriceList on ModelPricing {\n    prompt\n    completion\n    request\n    cacheRead\n    cacheWrite\n    audioPrompt\n    reasoning\n    audioCompletion\n    imagePrompt\n    imageCompletion\n    image {\n      size\n      quality\n      price\n    }\n    audioSecond\n    characters1k\n  }\n": typeof types.PriceListFragmentDoc,
    "\n  fragment ModelRow on Model {\n    id\n    displayName\n    description\n    pricing {\n      ...PriceList\n    }\n    costPricing {\n      ...PriceList\n    }\n    maxCompletionTokens\n    maxCompletionTokensSource\n    reasoningModel\n    reasoningModelSource\n    dailyRequestLimit\n    builtinProvider\n    provider\n    upstreamModel\n    fallbacks\n  }\n": typeof types.ModelRowFragmentDoc,
    "\n  query Models($id: ID) {\n    paywall(id: $id) {\n      id\n      markup\n      providers {\n        name\n        kind\n        builtin\n      }\n    }\n    models(paywallId: $id) {\n      ...ModelRow\n    }\n  }\n": typeof types.ModelsDocument,
    "\n  mutation SetPrice($input: SetModelPricingInput!) {\n    setModelPricing(input: $input) {\n      ...ModelRow\n    }\n  }\n": typeof types.SetPriceDocument,
    "\n  mutation RemovePrice($id: ID, $modelId: String!) {\n    removeModelPricing(paywallId: $id, modelId: $modelId)\n  }\n": typeof types.RemovePriceDocument,
    "\n  fragment UsageBucketRow on UsageBucket {\n    key\n    userId\n    requests\n    revenue\n    providerCost\n    margin\n    promptTokens\n    completionTokens\n    cacheReadTokens\n    cacheWriteTokens\n    audioPromptTokens\n    reasoningTokens\n    audioCompletionTokens\n    imagePromptTokens\n    imageCompletionTokens\n    images\n    audioSeconds\n    characters\n  }\n": typeof types.UsageBucketRowFragmentDoc,
    "\n  query Usage($id: ID, $from: String!, $to: String!) {\n    paywall(id: $id) {\n      id\n      byDay: usage(from: $from, to: $to, groupBy: DAY) {\n        totals {\n          ...UsageBucketRow\n        }\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byModel: usage(from: $from, to: $to, groupBy: MODEL, limit: 12) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byUser: usage(from: $from, to: $to, groupBy: USER, limit: 10) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n    }\n  }\n": typeof types.UsageDocument,
    "\n  query OverviewEarnings($id: ID) {\n    paywall(id: $id) {\n      id\n      builtinProvider\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n    }\n  }\n": typeof types.OverviewEarningsDocument,
    "\n  mutation CreatePaywall($input: CreatePaywallInput!) {\n    createPaywall(input: $input) {\n      apiKey\n      paywall {\n        ...PaywallSummary\n      }\n    }\n  }\n": typeof types.CreatePaywallDocument,
    "\n  mutation RotateKey($id: ID) {\n    rotatePaywallSecret(paywallId: $id) {\n      apiKey\n      paywall {\n        id\n        apiKeyLastFour\n      }\n    }\n  }\n": typeof types.RotateKeyDocument,
    "\n  mutation Archive($id: ID) {\n    archivePaywall(paywallId: $id) {\n      id\n      archivedAt\n    }\n  }\n": typeof types.ArchiveDocument,
    "\n  fragment PaywallSettings on Paywall {\n    id\n    name\n    description\n    mode\n    markup\n    topupUrl\n    trialCredits\n    dailyRequestLimit\n    dailySpendLimit\n    lowBalanceThreshold\n    connectMessageTemplate\n    topupMessageTemplate\n    builtinProvider\n    providers {\n      ...ProviderRow\n    }\n    stripe {\n      connected\n      webhookId\n      topupAmounts\n    }\n  }\n": typeof types.PaywallSettingsFragmentDoc,
    "\n  query Settings($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.SettingsDocument,
    "\n  mutation Update($input: UpdatePaywallInput!) {\n    updatePaywall(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.UpdateDocument,
    "\n  mutation ConnectStripe($input: ConnectStripeInput!) {\n    connectStripe(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.ConnectStripeDocument,
    "\n  mutation RotateStripe($id: ID) {\n    rotateStripeWebhook(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.RotateStripeDocument,
    "\n  mutation DisconnectStripe($id: ID) {\n    disconnectStripe(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.DisconnectStripeDocument,
    "\n  fragment ProviderRow on ProviderInfo {\n    name\n    kind\n    builtin\n    baseUrl\n    apiKeyLastFour\n    capParameter\n    connectedAt\n    updatedAt\n    health {\n      windowMinutes\n      requests\n      errors\n      errorRate\n      lastError\n      lastErrorAt\n    }\n  }\n": typeof types.ProviderRowFragmentDoc,
    "\n  mutation ConnectProvider($input: ConnectProviderInput!) {\n    connectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.ConnectProviderDocument,
    "\n  mutation DisconnectProvider($input: DisconnectProviderInput!) {\n    disconnectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": typeof types.DisconnectProviderDocument,
    "\n  fragment UserKeyRow on UserKey {\n    id\n    name\n    externalUserId\n    lastFour\n    createdAt\n    lastUsedAt\n    expiresAt\n    revokedAt\n    limit {\n      amount\n      period\n      spent\n      resetsAt\n    }\n  }\n": typeof types.UserKeyRowFragmentDoc,
    "\n  query UserKeys($id: ID, $user: String) {\n    paywall(id: $id) {\n      id\n      userKeys(externalUserId: $user) {\n        ...UserKeyRow\n      }\n    }\n  }\n": typeof types.UserKeysDocument,
    "\n  mutation CreateUserKey($input: CreateUserKeyInput!) {\n    createUserKey(input: $input) {\n      key\n      userKey {\n        ...UserKeyRow\n      }\n    }\n  }\n": typeof types.CreateUserKeyDocument,
    "\n  mutation RevokeUserKey($input: RevokeUserKeyInput!) {\n    revokeUserKey(input: $input) {\n      ...UserKeyRow\n    }\n  }\n": typeof types.RevokeUserKeyDocument,
    "\n  fragment EndUserRow on EndUser {\n    id\n    externalId\n    balanceFormatted\n    held\n    connected\n    createdAt\n  }\n": typeof types.EndUserRowFragmentDoc,
    "\n  query Users($id: ID, $after: String) {\n    users(paywallId: $id, first: 20, after: $after) {\n      edges {\n        node {\n          ...EndUserRow\n        }\n      }\n      pageInfo {\n        ...PageCursor\n      }\n    }\n  }\n": typeof types.UsersDocument,
    "\n  query FindUser($id: ID, $externalId: String!) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n    }\n  }\n": typeof types.FindUserDocument,
    "\n  mutation Deposit($input: DepositInput!) {\n    deposit(input: $input) {\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n": typeof types.DepositDocument,
    "\n  mutation Charge($input: ChargeInput!) {\n    charge(input: $input) {\n      success\n      message\n      url\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n": typeof types.ChargeDocument,
    "\n  fragment LedgerEntryRow on LedgerEntry {\n    id\n    kind\n    amount\n    balanceAfter\n    chargeId\n    refundable\n    refunded\n    metadata\n    createdAt\n  }\n": typeof types.LedgerEntryRowFragmentDoc,
    "\n  mutation RefundCharge($input: RefundChargeInput!) {\n    refundCharge(input: $input) {\n      id\n      chargeId\n      amount\n      reason\n      createdAt\n    }\n  }\n": typeof types.RefundChargeDocument,
    "\n  query UserDetail($id: ID, $externalId: String!, $after: String) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n      heldRaw\n      connectedAt\n      ledgerEntries(first: 10, after: $after) {\n        edges {\n          node {\n            ...LedgerEntryRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n": typeof types.UserDetailDocument,
    "\n  fragment WebhookSubscriptionRow on WebhookSubscription {\n    id\n    url\n    events\n    isActive\n    description\n    secretSuffix\n    consecutiveFailures\n    lastDeliveredAt\n    createdAt\n  }\n": typeof types.WebhookSubscriptionRowFragmentDoc,
    "\n  fragment WebhookDeliveryRow on WebhookDelivery {\n    id\n    subscriptionId\n    eventId\n    eventType\n    status\n    attempts\n    nextAttemptAt\n    responseStatus\n    responseLatencyMs\n    responseBody\n    lastError\n    createdAt\n    updatedAt\n    event\n  }\n": typeof types.WebhookDeliveryRowFragmentDoc,
    "\n  query Subs($id: ID) {\n    webhookSubscriptions(paywallId: $id) {\n      ...WebhookSubscriptionRow\n    }\n  }\n": typeof types.SubsDocument,
    "\n  query Deliveries($id: ID, $status: String, $eventType: String, $subscriptionId: ID, $after: String) {\n    webhookDeliveries(\n      paywallId: $id\n      status: $status\n      eventType: $eventType\n      subscriptionId: $subscriptionId\n      first: 20\n      after: $after\n    ) {\n      nodes {\n        ...WebhookDeliveryRow\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n": typeof types.DeliveriesDocument,
    "\n  mutation CreateSub($input: CreateWebhookSubscriptionInput!) {\n    createWebhookSubscription(input: $input) {\n      ...WebhookSubscriptionRow\n      secret\n    }\n  }\n": typeof types.CreateSubDocument,
    "\n  mutation Deactivate($id: ID!) {\n    deactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n    }\n  }\n": typeof types.DeactivateDocument,
    "\n  mutation Reactivate($id: ID!) {\n    reactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n      consecutiveFailures\n    }\n  }\n": typeof types.ReactivateDocument,
    "\n  mutation Redeliver($eventId: ID!, $subscriptionId: ID) {\n    redeliverWebhookEvent(eventId: $eventId, subscriptionId: $subscriptionId) {\n      ...WebhookDeliveryRow\n    }\n  }\n": typeof types.RedeliverDocument,
    "\n  fragment PaywallSummary on Paywall {\n    id\n    name\n    mode\n    archivedAt\n    apiKeyLastFour\n    createdAt\n  }\n": typeof types.PaywallSummaryFragmentDoc,
    "\n  fragment PageCursor on PageInfo {\n    hasNextPage\n    endCursor\n  }\n": typeof types.PageCursorFragmentDoc,
};
const documents: Documents = {
    "\n  query SignInPaywalls {\n    paywalls {\n      id\n    }\n  }\n": types.SignInPaywallsDocument,
    "\n  query SignInOwnPaywall {\n    paywall {\n      id\n    }\n  }\n": types.SignInOwnPaywallDocument,
    "\n  query DashboardPaywalls {\n    paywalls(includeArchived: true, first: 100) {\n      ...PaywallSummary\n    }\n  }\n": types.DashboardPaywallsDocument,
    "\n  query DashboardPaywall($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSummary\n    }\n  }\n": types.DashboardPaywallDocument,
    "\n  fragment ConnectionRow on Connection {\n    id\n    externalUserId\n    walletUserId\n    status\n    connectedAt\n    revokedAt\n  }\n": types.ConnectionRowFragmentDoc,
    "\n  query Connections($id: ID, $after: String) {\n    paywall(id: $id) {\n      id\n      connections(first: 20, after: $after) {\n        edges {\n          node {\n            ...ConnectionRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n": types.ConnectionsDocument,
    "\n  fragment WithdrawalRow on Withdrawal {\n    id\n    amount\n    destination\n    status\n    failureReason\n    createdAt\n  }\n": types.WithdrawalRowFragmentDoc,
    "\n  fragment EarningsMovement on EarningsEntry {\n    id\n    kind\n    amount\n    model\n    createdAt\n  }\n": types.EarningsMovementFragmentDoc,
    "\n  query Earnings($id: ID) {\n    paywall(id: $id) {\n      id\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n      withdrawals(first: 20) {\n        edges {\n          node {\n            ...WithdrawalRow\n          }\n        }\n      }\n      earningsHistory(first: 20) {\n        edges {\n          node {\n            ...EarningsMovement\n          }\n        }\n      }\n    }\n  }\n": types.EarningsDocument,
    "\n  mutation Withdraw($input: RequestWithdrawalInput!) {\n    requestWithdrawal(input: $input) {\n      ...WithdrawalRow\n    }\n  }\n": types.WithdrawDocument,
    "\n  mutation Cancel($paywallId: ID, $id: ID!) {\n    cancelWithdrawal(paywallId: $paywallId, id: $id) {\n      ...WithdrawalRow\n    }\n  }\n": types.CancelDocument,
    "\n  subscription Live($id: ID, $types: [String!]) {\n    paywallEvents(paywallId: $id, types: $types) {\n      id\n      type\n      version\n      createdAt\n      data\n      subject\n    }\n  }\n": types.LiveDocument,
    "\n  fragment PriceList on ModelPricing {\n    prompt\n    completion\n    request\n    cacheRead\n    cacheWrite\n    audioPrompt\n    reasoning\n    audioCompletion\n    imagePrompt\n    imageCompletion\n    image {\n      size\n      quality\n      price\n    }\n    audioSecond\n    characters1k\n  }\n": types.PriceListFragmentDoc,
    "\n  fragment ModelRow on Model {\n    id\n    displayName\n    description\n    pricing {\n      ...PriceList\n    }\n    costPricing {\n      ...PriceList\n    }\n    maxCompletionTokens\n    maxCompletionTokensSource\n    reasoningModel\n    reasoningModelSource\n    dailyRequestLimit\n    builtinProvider\n    provider\n    upstreamModel\n    fallbacks\n  }\n": types.ModelRowFragmentDoc,
    "\n  query Models($id: ID) {\n    paywall(id: $id) {\n      id\n      markup\n      providers {\n        name\n        kind\n        builtin\n      }\n    }\n    models(paywallId: $id) {\n      ...ModelRow\n    }\n  }\n": types.ModelsDocument,
    "\n  mutation SetPrice($input: SetModelPricingInput!) {\n    setModelPricing(input: $input) {\n      ...ModelRow\n    }\n  }\n": types.SetPriceDocument,
    "\n  mutation RemovePrice($id: ID, $modelId: String!) {\n    removeModelPricing(paywallId: $id, modelId: $modelId)\n  }\n": types.RemovePriceDocument,
    "\n  fragment UsageBucketRow on UsageBucket {\n    key\n    userId\n    requests\n    revenue\n    providerCost\n    margin\n    promptTokens\n    completionTokens\n    cacheReadTokens\n    cacheWriteTokens\n    audioPromptTokens\n    reasoningTokens\n    audioCompletionTokens\n    imagePromptTokens\n    imageCompletionTokens\n    images\n    audioSeconds\n    characters\n  }\n": types.UsageBucketRowFragmentDoc,
    "\n  query Usage($id: ID, $from: String!, $to: String!) {\n    paywall(id: $id) {\n      id\n      byDay: usage(from: $from, to: $to, groupBy: DAY) {\n        totals {\n          ...UsageBucketRow\n        }\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byModel: usage(from: $from, to: $to, groupBy: MODEL, limit: 12) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byUser: usage(from: $from, to: $to, groupBy: USER, limit: 10) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n    }\n  }\n": types.UsageDocument,
    "\n  query OverviewEarnings($id: ID) {\n    paywall(id: $id) {\n      id\n      builtinProvider\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n    }\n  }\n": types.OverviewEarningsDocument,
    "\n  mutation CreatePaywall($input: CreatePaywallInput!) {\n    createPaywall(input: $input) {\n      apiKey\n      paywall {\n        ...PaywallSummary\n      }\n    }\n  }\n": types.CreatePaywallDocument,
    "\n  mutation RotateKey($id: ID) {\n    rotatePaywallSecret(paywallId: $id) {\n      apiKey\n      paywall {\n        id\n        apiKeyLastFour\n      }\n    }\n  }\n": types.RotateKeyDocument,
    "\n  mutation Archive($id: ID) {\n    archivePaywall(paywallId: $id) {\n      id\n      archivedAt\n    }\n  }\n": types.ArchiveDocument,
    "\n  fragment PaywallSettings on Paywall {\n    id\n    name\n    description\n    mode\n    markup\n    topupUrl\n    trialCredits\n    dailyRequestLimit\n    dailySpendLimit\n    lowBalanceThreshold\n    connectMessageTemplate\n    topupMessageTemplate\n    builtinProvider\n    providers {\n      ...ProviderRow\n    }\n    stripe {\n      connected\n      webhookId\n      topupAmounts\n    }\n  }\n": types.PaywallSettingsFragmentDoc,
    "\n  query Settings($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSettings\n    }\n  }\n": types.SettingsDocument,
    "\n  mutation Update($input: UpdatePaywallInput!) {\n    updatePaywall(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": types.UpdateDocument,
    "\n  mutation ConnectStripe($input: ConnectStripeInput!) {\n    connectStripe(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": types.ConnectStripeDocument,
    "\n  mutation RotateStripe($id: ID) {\n    rotateStripeWebhook(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n": types.RotateStripeDocument,
    "\n  mutation DisconnectStripe($id: ID) {\n    disconnectStripe(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n": types.DisconnectStripeDocument,
    "\n  fragment ProviderRow on ProviderInfo {\n    name\n    kind\n    builtin\n    baseUrl\n    apiKeyLastFour\n    capParameter\n    connectedAt\n    updatedAt\n    health {\n      windowMinutes\n      requests\n      errors\n      errorRate\n      lastError\n      lastErrorAt\n    }\n  }\n": types.ProviderRowFragmentDoc,
    "\n  mutation ConnectProvider($input: ConnectProviderInput!) {\n    connectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": types.ConnectProviderDocument,
    "\n  mutation DisconnectProvider($input: DisconnectProviderInput!) {\n    disconnectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n": types.DisconnectProviderDocument,
    "\n  fragment UserKeyRow on UserKey {\n    id\n    name\n    externalUserId\n    lastFour\n    createdAt\n    lastUsedAt\n    expiresAt\n    revokedAt\n    limit {\n      amount\n      period\n      spent\n      resetsAt\n    }\n  }\n": types.UserKeyRowFragmentDoc,
    "\n  query UserKeys($id: ID, $user: String) {\n    paywall(id: $id) {\n      id\n      userKeys(externalUserId: $user) {\n        ...UserKeyRow\n      }\n    }\n  }\n": types.UserKeysDocument,
    "\n  mutation CreateUserKey($input: CreateUserKeyInput!) {\n    createUserKey(input: $input) {\n      key\n      userKey {\n        ...UserKeyRow\n      }\n    }\n  }\n": types.CreateUserKeyDocument,
    "\n  mutation RevokeUserKey($input: RevokeUserKeyInput!) {\n    revokeUserKey(input: $input) {\n      ...UserKeyRow\n    }\n  }\n": types.RevokeUserKeyDocument,
    "\n  fragment EndUserRow on EndUser {\n    id\n    externalId\n    balanceFormatted\n    held\n    connected\n    createdAt\n  }\n": types.EndUserRowFragmentDoc,
    "\n  query Users($id: ID, $after: String) {\n    users(paywallId: $id, first: 20, after: $after) {\n      edges {\n        node {\n          ...EndUserRow\n        }\n      }\n      pageInfo {\n        ...PageCursor\n      }\n    }\n  }\n": types.UsersDocument,
    "\n  query FindUser($id: ID, $externalId: String!) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n    }\n  }\n": types.FindUserDocument,
    "\n  mutation Deposit($input: DepositInput!) {\n    deposit(input: $input) {\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n": types.DepositDocument,
    "\n  mutation Charge($input: ChargeInput!) {\n    charge(input: $input) {\n      success\n      message\n      url\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n": types.ChargeDocument,
    "\n  fragment LedgerEntryRow on LedgerEntry {\n    id\n    kind\n    amount\n    balanceAfter\n    chargeId\n    refundable\n    refunded\n    metadata\n    createdAt\n  }\n": types.LedgerEntryRowFragmentDoc,
    "\n  mutation RefundCharge($input: RefundChargeInput!) {\n    refundCharge(input: $input) {\n      id\n      chargeId\n      amount\n      reason\n      createdAt\n    }\n  }\n": types.RefundChargeDocument,
    "\n  query UserDetail($id: ID, $externalId: String!, $after: String) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n      heldRaw\n      connectedAt\n      ledgerEntries(first: 10, after: $after) {\n        edges {\n          node {\n            ...LedgerEntryRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n": types.UserDetailDocument,
    "\n  fragment WebhookSubscriptionRow on WebhookSubscription {\n    id\n    url\n    events\n    isActive\n    description\n    secretSuffix\n    consecutiveFailures\n    lastDeliveredAt\n    createdAt\n  }\n": types.WebhookSubscriptionRowFragmentDoc,
    "\n  fragment WebhookDeliveryRow on WebhookDelivery {\n    id\n    subscriptionId\n    eventId\n    eventType\n    status\n    attempts\n    nextAttemptAt\n    responseStatus\n    responseLatencyMs\n    responseBody\n    lastError\n    createdAt\n    updatedAt\n    event\n  }\n": types.WebhookDeliveryRowFragmentDoc,
    "\n  query Subs($id: ID) {\n    webhookSubscriptions(paywallId: $id) {\n      ...WebhookSubscriptionRow\n    }\n  }\n": types.SubsDocument,
    "\n  query Deliveries($id: ID, $status: String, $eventType: String, $subscriptionId: ID, $after: String) {\n    webhookDeliveries(\n      paywallId: $id\n      status: $status\n      eventType: $eventType\n      subscriptionId: $subscriptionId\n      first: 20\n      after: $after\n    ) {\n      nodes {\n        ...WebhookDeliveryRow\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n": types.DeliveriesDocument,
    "\n  mutation CreateSub($input: CreateWebhookSubscriptionInput!) {\n    createWebhookSubscription(input: $input) {\n      ...WebhookSubscriptionRow\n      secret\n    }\n  }\n": types.CreateSubDocument,
    "\n  mutation Deactivate($id: ID!) {\n    deactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n    }\n  }\n": types.DeactivateDocument,
    "\n  mutation Reactivate($id: ID!) {\n    reactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n      consecutiveFailures\n    }\n  }\n": types.ReactivateDocument,
    "\n  mutation Redeliver($eventId: ID!, $subscriptionId: ID) {\n    redeliverWebhookEvent(eventId: $eventId, subscriptionId: $subscriptionId) {\n      ...WebhookDeliveryRow\n    }\n  }\n": types.RedeliverDocument,
    "\n  fragment PaywallSummary on Paywall {\n    id\n    name\n    mode\n    archivedAt\n    apiKeyLastFour\n    createdAt\n  }\n": types.PaywallSummaryFragmentDoc,
    "\n  fragment PageCursor on PageInfo {\n    hasNextPage\n    endCursor\n  }\n": types.PageCursorFragmentDoc,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query SignInPaywalls {\n    paywalls {\n      id\n    }\n  }\n"): (typeof documents)["\n  query SignInPaywalls {\n    paywalls {\n      id\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query SignInOwnPaywall {\n    paywall {\n      id\n    }\n  }\n"): (typeof documents)["\n  query SignInOwnPaywall {\n    paywall {\n      id\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query DashboardPaywalls {\n    paywalls(includeArchived: true, first: 100) {\n      ...PaywallSummary\n    }\n  }\n"): (typeof documents)["\n  query DashboardPaywalls {\n    paywalls(includeArchived: true, first: 100) {\n      ...PaywallSummary\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query DashboardPaywall($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSummary\n    }\n  }\n"): (typeof documents)["\n  query DashboardPaywall($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSummary\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment ConnectionRow on Connection {\n    id\n    externalUserId\n    walletUserId\n    status\n    connectedAt\n    revokedAt\n  }\n"): (typeof documents)["\n  fragment ConnectionRow on Connection {\n    id\n    externalUserId\n    walletUserId\n    status\n    connectedAt\n    revokedAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Connections($id: ID, $after: String) {\n    paywall(id: $id) {\n      id\n      connections(first: 20, after: $after) {\n        edges {\n          node {\n            ...ConnectionRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n"): (typeof documents)["\n  query Connections($id: ID, $after: String) {\n    paywall(id: $id) {\n      id\n      connections(first: 20, after: $after) {\n        edges {\n          node {\n            ...ConnectionRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment WithdrawalRow on Withdrawal {\n    id\n    amount\n    destination\n    status\n    failureReason\n    createdAt\n  }\n"): (typeof documents)["\n  fragment WithdrawalRow on Withdrawal {\n    id\n    amount\n    destination\n    status\n    failureReason\n    createdAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment EarningsMovement on EarningsEntry {\n    id\n    kind\n    amount\n    model\n    createdAt\n  }\n"): (typeof documents)["\n  fragment EarningsMovement on EarningsEntry {\n    id\n    kind\n    amount\n    model\n    createdAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Earnings($id: ID) {\n    paywall(id: $id) {\n      id\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n      withdrawals(first: 20) {\n        edges {\n          node {\n            ...WithdrawalRow\n          }\n        }\n      }\n      earningsHistory(first: 20) {\n        edges {\n          node {\n            ...EarningsMovement\n          }\n        }\n      }\n    }\n  }\n"): (typeof documents)["\n  query Earnings($id: ID) {\n    paywall(id: $id) {\n      id\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n      withdrawals(first: 20) {\n        edges {\n          node {\n            ...WithdrawalRow\n          }\n        }\n      }\n      earningsHistory(first: 20) {\n        edges {\n          node {\n            ...EarningsMovement\n          }\n        }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Withdraw($input: RequestWithdrawalInput!) {\n    requestWithdrawal(input: $input) {\n      ...WithdrawalRow\n    }\n  }\n"): (typeof documents)["\n  mutation Withdraw($input: RequestWithdrawalInput!) {\n    requestWithdrawal(input: $input) {\n      ...WithdrawalRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Cancel($paywallId: ID, $id: ID!) {\n    cancelWithdrawal(paywallId: $paywallId, id: $id) {\n      ...WithdrawalRow\n    }\n  }\n"): (typeof documents)["\n  mutation Cancel($paywallId: ID, $id: ID!) {\n    cancelWithdrawal(paywallId: $paywallId, id: $id) {\n      ...WithdrawalRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  subscription Live($id: ID, $types: [String!]) {\n    paywallEvents(paywallId: $id, types: $types) {\n      id\n      type\n      version\n      createdAt\n      data\n      subject\n    }\n  }\n"): (typeof documents)["\n  subscription Live($id: ID, $types: [String!]) {\n    paywallEvents(paywallId: $id, types: $types) {\n      id\n      type\n      version\n      createdAt\n      data\n      subject\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment PriceList on ModelPricing {\n    prompt\n    completion\n    request\n    cacheRead\n    cacheWrite\n    audioPrompt\n    reasoning\n    audioCompletion\n    imagePrompt\n    imageCompletion\n    image {\n      size\n      quality\n      price\n    }\n    audioSecond\n    characters1k\n  }\n"): (typeof documents)["\n  fragment PriceList on ModelPricing {\n    prompt\n    completion\n    request\n    cacheRead\n    cacheWrite\n    audioPrompt\n    reasoning\n    audioCompletion\n    imagePrompt\n    imageCompletion\n    image {\n      size\n      quality\n      price\n    }\n    audioSecond\n    characters1k\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment ModelRow on Model {\n    id\n    displayName\n    description\n    pricing {\n      ...PriceList\n    }\n    costPricing {\n      ...PriceList\n    }\n    maxCompletionTokens\n    maxCompletionTokensSource\n    reasoningModel\n    reasoningModelSource\n    dailyRequestLimit\n    builtinProvider\n    provider\n    upstreamModel\n    fallbacks\n  }\n"): (typeof documents)["\n  fragment ModelRow on Model {\n    id\n    displayName\n    description\n    pricing {\n      ...PriceList\n    }\n    costPricing {\n      ...PriceList\n    }\n    maxCompletionTokens\n    maxCompletionTokensSource\n    reasoningModel\n    reasoningModelSource\n    dailyRequestLimit\n    builtinProvider\n    provider\n    upstreamModel\n    fallbacks\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Models($id: ID) {\n    paywall(id: $id) {\n      id\n      markup\n      providers {\n        name\n        kind\n        builtin\n      }\n    }\n    models(paywallId: $id) {\n      ...ModelRow\n    }\n  }\n"): (typeof documents)["\n  query Models($id: ID) {\n    paywall(id: $id) {\n      id\n      markup\n      providers {\n        name\n        kind\n        builtin\n      }\n    }\n    models(paywallId: $id) {\n      ...ModelRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation SetPrice($input: SetModelPricingInput!) {\n    setModelPricing(input: $input) {\n      ...ModelRow\n    }\n  }\n"): (typeof documents)["\n  mutation SetPrice($input: SetModelPricingInput!) {\n    setModelPricing(input: $input) {\n      ...ModelRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RemovePrice($id: ID, $modelId: String!) {\n    removeModelPricing(paywallId: $id, modelId: $modelId)\n  }\n"): (typeof documents)["\n  mutation RemovePrice($id: ID, $modelId: String!) {\n    removeModelPricing(paywallId: $id, modelId: $modelId)\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment UsageBucketRow on UsageBucket {\n    key\n    userId\n    requests\n    revenue\n    providerCost\n    margin\n    promptTokens\n    completionTokens\n    cacheReadTokens\n    cacheWriteTokens\n    audioPromptTokens\n    reasoningTokens\n    audioCompletionTokens\n    imagePromptTokens\n    imageCompletionTokens\n    images\n    audioSeconds\n    characters\n  }\n"): (typeof documents)["\n  fragment UsageBucketRow on UsageBucket {\n    key\n    userId\n    requests\n    revenue\n    providerCost\n    margin\n    promptTokens\n    completionTokens\n    cacheReadTokens\n    cacheWriteTokens\n    audioPromptTokens\n    reasoningTokens\n    audioCompletionTokens\n    imagePromptTokens\n    imageCompletionTokens\n    images\n    audioSeconds\n    characters\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Usage($id: ID, $from: String!, $to: String!) {\n    paywall(id: $id) {\n      id\n      byDay: usage(from: $from, to: $to, groupBy: DAY) {\n        totals {\n          ...UsageBucketRow\n        }\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byModel: usage(from: $from, to: $to, groupBy: MODEL, limit: 12) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byUser: usage(from: $from, to: $to, groupBy: USER, limit: 10) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n    }\n  }\n"): (typeof documents)["\n  query Usage($id: ID, $from: String!, $to: String!) {\n    paywall(id: $id) {\n      id\n      byDay: usage(from: $from, to: $to, groupBy: DAY) {\n        totals {\n          ...UsageBucketRow\n        }\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byModel: usage(from: $from, to: $to, groupBy: MODEL, limit: 12) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n      byUser: usage(from: $from, to: $to, groupBy: USER, limit: 10) {\n        buckets {\n          ...UsageBucketRow\n        }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query OverviewEarnings($id: ID) {\n    paywall(id: $id) {\n      id\n      builtinProvider\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n    }\n  }\n"): (typeof documents)["\n  query OverviewEarnings($id: ID) {\n    paywall(id: $id) {\n      id\n      builtinProvider\n      earnings {\n        available\n        pending\n        withdrawn\n        fees\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreatePaywall($input: CreatePaywallInput!) {\n    createPaywall(input: $input) {\n      apiKey\n      paywall {\n        ...PaywallSummary\n      }\n    }\n  }\n"): (typeof documents)["\n  mutation CreatePaywall($input: CreatePaywallInput!) {\n    createPaywall(input: $input) {\n      apiKey\n      paywall {\n        ...PaywallSummary\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RotateKey($id: ID) {\n    rotatePaywallSecret(paywallId: $id) {\n      apiKey\n      paywall {\n        id\n        apiKeyLastFour\n      }\n    }\n  }\n"): (typeof documents)["\n  mutation RotateKey($id: ID) {\n    rotatePaywallSecret(paywallId: $id) {\n      apiKey\n      paywall {\n        id\n        apiKeyLastFour\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Archive($id: ID) {\n    archivePaywall(paywallId: $id) {\n      id\n      archivedAt\n    }\n  }\n"): (typeof documents)["\n  mutation Archive($id: ID) {\n    archivePaywall(paywallId: $id) {\n      id\n      archivedAt\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment PaywallSettings on Paywall {\n    id\n    name\n    description\n    mode\n    markup\n    topupUrl\n    trialCredits\n    dailyRequestLimit\n    dailySpendLimit\n    lowBalanceThreshold\n    connectMessageTemplate\n    topupMessageTemplate\n    builtinProvider\n    providers {\n      ...ProviderRow\n    }\n    stripe {\n      connected\n      webhookId\n      topupAmounts\n    }\n  }\n"): (typeof documents)["\n  fragment PaywallSettings on Paywall {\n    id\n    name\n    description\n    mode\n    markup\n    topupUrl\n    trialCredits\n    dailyRequestLimit\n    dailySpendLimit\n    lowBalanceThreshold\n    connectMessageTemplate\n    topupMessageTemplate\n    builtinProvider\n    providers {\n      ...ProviderRow\n    }\n    stripe {\n      connected\n      webhookId\n      topupAmounts\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Settings($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  query Settings($id: ID) {\n    paywall(id: $id) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Update($input: UpdatePaywallInput!) {\n    updatePaywall(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  mutation Update($input: UpdatePaywallInput!) {\n    updatePaywall(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ConnectStripe($input: ConnectStripeInput!) {\n    connectStripe(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  mutation ConnectStripe($input: ConnectStripeInput!) {\n    connectStripe(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RotateStripe($id: ID) {\n    rotateStripeWebhook(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  mutation RotateStripe($id: ID) {\n    rotateStripeWebhook(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation DisconnectStripe($id: ID) {\n    disconnectStripe(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  mutation DisconnectStripe($id: ID) {\n    disconnectStripe(paywallId: $id) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment ProviderRow on ProviderInfo {\n    name\n    kind\n    builtin\n    baseUrl\n    apiKeyLastFour\n    capParameter\n    connectedAt\n    updatedAt\n    health {\n      windowMinutes\n      requests\n      errors\n      errorRate\n      lastError\n      lastErrorAt\n    }\n  }\n"): (typeof documents)["\n  fragment ProviderRow on ProviderInfo {\n    name\n    kind\n    builtin\n    baseUrl\n    apiKeyLastFour\n    capParameter\n    connectedAt\n    updatedAt\n    health {\n      windowMinutes\n      requests\n      errors\n      errorRate\n      lastError\n      lastErrorAt\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation ConnectProvider($input: ConnectProviderInput!) {\n    connectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  mutation ConnectProvider($input: ConnectProviderInput!) {\n    connectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation DisconnectProvider($input: DisconnectProviderInput!) {\n    disconnectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"): (typeof documents)["\n  mutation DisconnectProvider($input: DisconnectProviderInput!) {\n    disconnectProvider(input: $input) {\n      ...PaywallSettings\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment UserKeyRow on UserKey {\n    id\n    name\n    externalUserId\n    lastFour\n    createdAt\n    lastUsedAt\n    expiresAt\n    revokedAt\n    limit {\n      amount\n      period\n      spent\n      resetsAt\n    }\n  }\n"): (typeof documents)["\n  fragment UserKeyRow on UserKey {\n    id\n    name\n    externalUserId\n    lastFour\n    createdAt\n    lastUsedAt\n    expiresAt\n    revokedAt\n    limit {\n      amount\n      period\n      spent\n      resetsAt\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query UserKeys($id: ID, $user: String) {\n    paywall(id: $id) {\n      id\n      userKeys(externalUserId: $user) {\n        ...UserKeyRow\n      }\n    }\n  }\n"): (typeof documents)["\n  query UserKeys($id: ID, $user: String) {\n    paywall(id: $id) {\n      id\n      userKeys(externalUserId: $user) {\n        ...UserKeyRow\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateUserKey($input: CreateUserKeyInput!) {\n    createUserKey(input: $input) {\n      key\n      userKey {\n        ...UserKeyRow\n      }\n    }\n  }\n"): (typeof documents)["\n  mutation CreateUserKey($input: CreateUserKeyInput!) {\n    createUserKey(input: $input) {\n      key\n      userKey {\n        ...UserKeyRow\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RevokeUserKey($input: RevokeUserKeyInput!) {\n    revokeUserKey(input: $input) {\n      ...UserKeyRow\n    }\n  }\n"): (typeof documents)["\n  mutation RevokeUserKey($input: RevokeUserKeyInput!) {\n    revokeUserKey(input: $input) {\n      ...UserKeyRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment EndUserRow on EndUser {\n    id\n    externalId\n    balanceFormatted\n    held\n    connected\n    createdAt\n  }\n"): (typeof documents)["\n  fragment EndUserRow on EndUser {\n    id\n    externalId\n    balanceFormatted\n    held\n    connected\n    createdAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Users($id: ID, $after: String) {\n    users(paywallId: $id, first: 20, after: $after) {\n      edges {\n        node {\n          ...EndUserRow\n        }\n      }\n      pageInfo {\n        ...PageCursor\n      }\n    }\n  }\n"): (typeof documents)["\n  query Users($id: ID, $after: String) {\n    users(paywallId: $id, first: 20, after: $after) {\n      edges {\n        node {\n          ...EndUserRow\n        }\n      }\n      pageInfo {\n        ...PageCursor\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query FindUser($id: ID, $externalId: String!) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n    }\n  }\n"): (typeof documents)["\n  query FindUser($id: ID, $externalId: String!) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Deposit($input: DepositInput!) {\n    deposit(input: $input) {\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n"): (typeof documents)["\n  mutation Deposit($input: DepositInput!) {\n    deposit(input: $input) {\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Charge($input: ChargeInput!) {\n    charge(input: $input) {\n      success\n      message\n      url\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n"): (typeof documents)["\n  mutation Charge($input: ChargeInput!) {\n    charge(input: $input) {\n      success\n      message\n      url\n      balanceFormatted\n      replayed\n      user {\n        ...EndUserRow\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment LedgerEntryRow on LedgerEntry {\n    id\n    kind\n    amount\n    balanceAfter\n    chargeId\n    refundable\n    refunded\n    metadata\n    createdAt\n  }\n"): (typeof documents)["\n  fragment LedgerEntryRow on LedgerEntry {\n    id\n    kind\n    amount\n    balanceAfter\n    chargeId\n    refundable\n    refunded\n    metadata\n    createdAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation RefundCharge($input: RefundChargeInput!) {\n    refundCharge(input: $input) {\n      id\n      chargeId\n      amount\n      reason\n      createdAt\n    }\n  }\n"): (typeof documents)["\n  mutation RefundCharge($input: RefundChargeInput!) {\n    refundCharge(input: $input) {\n      id\n      chargeId\n      amount\n      reason\n      createdAt\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query UserDetail($id: ID, $externalId: String!, $after: String) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n      heldRaw\n      connectedAt\n      ledgerEntries(first: 10, after: $after) {\n        edges {\n          node {\n            ...LedgerEntryRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n"): (typeof documents)["\n  query UserDetail($id: ID, $externalId: String!, $after: String) {\n    user(paywallId: $id, externalId: $externalId) {\n      ...EndUserRow\n      heldRaw\n      connectedAt\n      ledgerEntries(first: 10, after: $after) {\n        edges {\n          node {\n            ...LedgerEntryRow\n          }\n        }\n        pageInfo {\n          ...PageCursor\n        }\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment WebhookSubscriptionRow on WebhookSubscription {\n    id\n    url\n    events\n    isActive\n    description\n    secretSuffix\n    consecutiveFailures\n    lastDeliveredAt\n    createdAt\n  }\n"): (typeof documents)["\n  fragment WebhookSubscriptionRow on WebhookSubscription {\n    id\n    url\n    events\n    isActive\n    description\n    secretSuffix\n    consecutiveFailures\n    lastDeliveredAt\n    createdAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment WebhookDeliveryRow on WebhookDelivery {\n    id\n    subscriptionId\n    eventId\n    eventType\n    status\n    attempts\n    nextAttemptAt\n    responseStatus\n    responseLatencyMs\n    responseBody\n    lastError\n    createdAt\n    updatedAt\n    event\n  }\n"): (typeof documents)["\n  fragment WebhookDeliveryRow on WebhookDelivery {\n    id\n    subscriptionId\n    eventId\n    eventType\n    status\n    attempts\n    nextAttemptAt\n    responseStatus\n    responseLatencyMs\n    responseBody\n    lastError\n    createdAt\n    updatedAt\n    event\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Subs($id: ID) {\n    webhookSubscriptions(paywallId: $id) {\n      ...WebhookSubscriptionRow\n    }\n  }\n"): (typeof documents)["\n  query Subs($id: ID) {\n    webhookSubscriptions(paywallId: $id) {\n      ...WebhookSubscriptionRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query Deliveries($id: ID, $status: String, $eventType: String, $subscriptionId: ID, $after: String) {\n    webhookDeliveries(\n      paywallId: $id\n      status: $status\n      eventType: $eventType\n      subscriptionId: $subscriptionId\n      first: 20\n      after: $after\n    ) {\n      nodes {\n        ...WebhookDeliveryRow\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n"): (typeof documents)["\n  query Deliveries($id: ID, $status: String, $eventType: String, $subscriptionId: ID, $after: String) {\n    webhookDeliveries(\n      paywallId: $id\n      status: $status\n      eventType: $eventType\n      subscriptionId: $subscriptionId\n      first: 20\n      after: $after\n    ) {\n      nodes {\n        ...WebhookDeliveryRow\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateSub($input: CreateWebhookSubscriptionInput!) {\n    createWebhookSubscription(input: $input) {\n      ...WebhookSubscriptionRow\n      secret\n    }\n  }\n"): (typeof documents)["\n  mutation CreateSub($input: CreateWebhookSubscriptionInput!) {\n    createWebhookSubscription(input: $input) {\n      ...WebhookSubscriptionRow\n      secret\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Deactivate($id: ID!) {\n    deactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n    }\n  }\n"): (typeof documents)["\n  mutation Deactivate($id: ID!) {\n    deactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Reactivate($id: ID!) {\n    reactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n      consecutiveFailures\n    }\n  }\n"): (typeof documents)["\n  mutation Reactivate($id: ID!) {\n    reactivateWebhookSubscription(id: $id) {\n      id\n      isActive\n      consecutiveFailures\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation Redeliver($eventId: ID!, $subscriptionId: ID) {\n    redeliverWebhookEvent(eventId: $eventId, subscriptionId: $subscriptionId) {\n      ...WebhookDeliveryRow\n    }\n  }\n"): (typeof documents)["\n  mutation Redeliver($eventId: ID!, $subscriptionId: ID) {\n    redeliverWebhookEvent(eventId: $eventId, subscriptionId: $subscriptionId) {\n      ...WebhookDeliveryRow\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment PaywallSummary on Paywall {\n    id\n    name\n    mode\n    archivedAt\n    apiKeyLastFour\n    createdAt\n  }\n"): (typeof documents)["\n  fragment PaywallSummary on Paywall {\n    id\n    name\n    mode\n    archivedAt\n    apiKeyLastFour\n    createdAt\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  fragment PageCursor on PageInfo {\n    hasNextPage\n    endCursor\n  }\n"): (typeof documents)["\n  fragment PageCursor on PageInfo {\n    hasNextPage\n    endCursor\n  }\n"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;