import { createHmac, timingSafeEqual } from 'node:crypto';

/** How old an `X-Service-Timestamp` a receiver should still accept (spec: 5 minutes suggested). */
export const DEFAULT_TOLERANCE_MS = 5 * 60 * 1000;

/**
 * `X-Service-Signature`: hex-encoded HMAC-SHA256 of the raw request body, keyed with the subscription
 * secret. The body passed here must be the exact bytes that are sent: a receiver re-serialising the JSON
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
