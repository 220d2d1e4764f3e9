/**
 * The additional authenticated data of a subscription's encrypted signing secret (shared/crypto.ts): a
 * ciphertext copied into another subscription's row does not decrypt there.
 */
export const webhookSecretContext = (subscriptionId: string): string =>
  `webhook_subscription:${subscriptionId}`;
