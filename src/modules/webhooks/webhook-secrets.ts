import { randomBytes } from 'node:crypto';

/**
 * The additional authenticated data of a subscription's encrypted signing secret (shared/crypto.ts): a
 * ciphertext copied into another subscription's row does not decrypt there.
 */
export const webhookSecretContext = (subscriptionId: string): string =>
  `webhook_subscription:${subscriptionId}`;

/**
 * After a rotation, the replaced secret goes on signing for this long, next to the new one (24 h: Stripe's
 * rollover for its own webhook secrets), so a receiver can deploy the new secret at any time in it.
 */
export const SECRET_ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** What every generated signing secret starts with (the Standard Webhooks convention). */
export const SECRET_PREFIX = 'whsec_';

/** Random bytes behind a generated signing secret: the HMAC key of the Standard Webhooks signature. */
export const GENERATED_SECRET_BYTES = 32;

/**
 * A new signing secret (docs/reference.md §17): `whsec_` + STANDARD base64 (with `+`, `/` and the `=`
 * padding) of 32 random bytes, 50 characters in all. This is the form `new Webhook(secret)` of the
 * `standardwebhooks` package decodes, so its key is the 32 bytes. Secrets generated before §17 were
 * base64url without padding; those keep signing with their UTF-8 bytes (see {@link webhookSigningKey}).
 */
export const generateWebhookSecret = (): string =>
  `${SECRET_PREFIX}${randomBytes(GENERATED_SECRET_BYTES).toString('base64')}`;

/**
 * Standard base64 as Standard Webhooks writes it: groups of four characters of `A–Z a–z 0–9 + /`, the last
 * group possibly ending in one or two `=`. Length a multiple of 4, nothing else (no `-` or `_`, no
 * whitespace, no missing padding). Every string of this form decodes to the same bytes in Node and in the
 * `standardwebhooks` package.
 */
const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$/;

/**
 * The HMAC key of the Standard Webhooks signature (`webhook-signature`, docs/reference.md §17). The
 * `X-Service-Signature` stays keyed with the secret's UTF-8 bytes, whatever its form, as before §17.
 *
 * - `whsec_` followed by non-empty standard base64 ({@link STANDARD_BASE64}): the decoded bytes (32 for a
 *   generated secret; a pre-shared secret of this form too, as Standard Webhooks reads it);
 * - anything else, whole, prefix included: its UTF-8 bytes. That covers pre-shared secrets of the developer's
 *   choosing and the base64url secrets generated before §17 (`whsec_` + 43 characters: never a multiple
 *   of 4, so never read as base64, whatever characters they happen to hold).
 */
export function webhookSigningKey(secret: string): Buffer {
  if (secret.startsWith(SECRET_PREFIX)) {
    const encoded = secret.slice(SECRET_PREFIX.length);
    if (encoded !== '' && STANDARD_BASE64.test(encoded)) return Buffer.from(encoded, 'base64');
  }
  return Buffer.from(secret, 'utf8');
}
