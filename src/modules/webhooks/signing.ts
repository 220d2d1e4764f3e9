import { createHmac, timingSafeEqual } from 'node:crypto';
import { webhookSigningKey } from './webhook-secrets.js';

/** How old an `X-Service-Timestamp` a receiver should still accept (spec: 5 minutes suggested). */
export const DEFAULT_TOLERANCE_MS = 5 * 60 * 1000;

/**
 * `X-Service-Signature`: hex-encoded HMAC-SHA256 of the raw request body, keyed with the subscription
 * secret's UTF-8 bytes (whatever its form: unchanged by docs/reference.md §17). The body passed here must be the exact bytes that are sent: a receiver re-serialising the JSON
 * would compute a different digest.
 */
export function sign(secret: string, rawBody: string | Buffer): string {
  return createHmac('sha256', secret).update(rawBody).digest('hex');
}

/**
 * What a receiver does (and what the README tells integrators): recompute the HMAC over the raw body and
 * compare it with the header in constant time, so the comparison leaks nothing about how many leading
 * characters matched. False for a missing or malformed header.
 */
export function verifySignature(
  secret: string,
  rawBody: string | Buffer,
  signature: string | null | undefined,
): boolean {
  if (typeof signature !== 'string' || !/^[0-9a-f]{64}$/i.test(signature)) return false;
  const expected = Buffer.from(sign(secret, rawBody), 'hex');
  const given = Buffer.from(signature, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Optional replay check: the `X-Service-Timestamp` is a valid ISO time no further than `toleranceMs` from now. */
export function isFreshTimestamp(
  timestamp: string | null | undefined,
  toleranceMs = DEFAULT_TOLERANCE_MS,
  now = Date.now(),
): boolean {
  if (typeof timestamp !== 'string') return false;
  const at = Date.parse(timestamp);
  return Number.isFinite(at) && Math.abs(now - at) <= toleranceMs;
}

/** The Standard Webhooks headers of one attempt (docs/reference.md §17). */
export interface StandardWebhookHeaders {
  /** The event id: the same on every attempt of the delivery, so receivers deduplicate on it. */
  'webhook-id': string;
  /** Unix seconds at which this attempt was signed. */
  'webhook-timestamp': string;
  /** `v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>">`. */
  'webhook-signature': string;
}

/**
 * `webhook-signature`'s value: `v1,` + standard base64 of HMAC-SHA256 over `<id>.<timestamp>.<raw body>`,
 * keyed with {@link webhookSigningKey} (the decoded bytes of a `whsec_<base64>` secret, the UTF-8 bytes of
 * any other). What `new Webhook(secret).verify(body, headers)` of the `standardwebhooks` package recomputes.
 */
export function standardSignature(
  secret: string,
  webhookId: string,
  timestampSeconds: number,
  rawBody: string | Buffer,
): string {
  const mac = createHmac('sha256', webhookSigningKey(secret))
    .update(`${webhookId}.${timestampSeconds}.`, 'utf8')
    .update(rawBody)
    .digest('base64');
  return `v1,${mac}`;
}

/**
 * The three Standard Webhooks headers for an attempt signed at `signedAt`. With a rotation's previous
 * secret still in its grace period, `webhook-signature` holds both signatures, space-separated, the
 * current one first (Standard Webhooks: a verifier accepts the message when any one of them matches).
 */
export function standardWebhookHeaders(
  secret: string,
  webhookId: string,
  rawBody: string | Buffer,
  signedAt: Date,
  previousSecret: string | null = null,
): StandardWebhookHeaders {
  const timestamp = Math.floor(signedAt.getTime() / 1000);
  const signatures = [secret, ...(previousSecret === null ? [] : [previousSecret])].map((s) =>
    standardSignature(s, webhookId, timestamp, rawBody),
  );
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatures.join(' '),
  };
}

/**
 * The `X-Service-*` signature headers of an attempt. `X-Service-Signature` stays ONE hex digest keyed with
 * the current secret, as the spec has it (receivers compare it whole, and one that deployed the new secret
 * before rotating goes on verifying); during a rotation's grace period `X-Service-Signature-Previous`
 * carries the replaced secret's digest, for receivers that have not switched yet.
 */
export function serviceSignatureHeaders(
  secret: string,
  rawBody: string | Buffer,
  previousSecret: string | null = null,
): Record<string, string> {
  const current = { 'x-service-signature': sign(secret, rawBody) };
  return previousSecret === null
    ? current
    : { ...current, 'x-service-signature-previous': sign(previousSecret, rawBody) };
}
