import { randomBytes, randomUUID, createHash, timingSafeEqual } from 'node:crypto';

export const newId = (): string => randomUUID();

/** A random secret with a readable prefix, e.g. `pk_live_…` (32 bytes of entropy, base62-ish). */
export const newSecret = (prefix: string): string => `${prefix}${randomBytes(32).toString('base64url')}`;

export const sha256Hex = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

/** Constant-time comparison of two hex digests (or any equal-length strings). */
export function safeEqual(a: string, b: string): boolean {
  const ba = Buffer.from(a);
  const bb = Buffer.from(b);
  return ba.length === bb.length && timingSafeEqual(ba, bb);
}
