import { randomBytes, randomUUID, createHash, timingSafeEqual } from 'node:crypto';

export const newId = (): string => randomUUID();

/** A UUID in its text form (any version; either case): what an id parameter must look like before a query. */
export const isUuid = (s: unknown): s is string =>
  typeof s === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s);

/** A random secret with a readable prefix, e.g. `pk_live_…` (32 bytes of entropy, base62-ish). */
export const newSecret = (prefix: string): string => `${prefix}${randomBytes(32).toString('base64url')}`;

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * A random secret of `length` base62 characters after `prefix` (e.g. `uk_…`): letters and digits only, so
 * it survives any copy, shell or config file. Each character is drawn without bias (bytes ≥ 248 are
 * skipped), 5.95 bits each.
 */
export function newBase62Secret(prefix: string, length: number): string {
  let out = '';
  while (out.length < length)
    for (const b of randomBytes(length)) if (b < 248 && out.length < length) out += BASE62[b % 62];
  return prefix + out;
}

export const sha256Hex = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

/** Constant-time comparison of two hex digests (or any equal-length strings). */
export function safeEqual(a: string, b: string): boolean {
  const ba = Buffer.from(a);
  const bb = Buffer.from(b);
  return ba.length === bb.length && timingSafeEqual(ba, bb);
}
