import { createHmac, randomBytes } from 'node:crypto';
import { loadSecretBox } from '../../shared/crypto.js';
import { safeEqual, sha256Hex } from '../../shared/ids.js';

/**
 * Keys of the hosted wallet, derived from the service's one configured secret (ENCRYPTION_KEY, or the
 * generated key file): a pepper for sign-in code hashes (a leaked table of 6-digit hashes cannot be
 * brute-forced offline without it) and a key for CSRF tokens. Every instance with the same
 * ENCRYPTION_KEY derives the same keys, so a code sent by one instance verifies on another.
 */
export class WalletSecrets {
  private readonly pepper: Buffer;
  private readonly csrfKey: Buffer;

  constructor(config: { ENCRYPTION_KEY?: string; DATA_DIR: string }) {
    const { box } = loadSecretBox(config);
    this.pepper = box.derive('wallet:sign-in-code:v1');
    this.csrfKey = box.derive('wallet:csrf:v1');
  }

  /** Hash of a sign-in code, bound to the address it was sent to. */
  codeHash(email: string, code: string): string {
    return createHmac('sha256', this.pepper).update(`${email}\n${code}`).digest('hex');
  }

  /** A CSRF token bound to `binding` (a session id, or the pre-sign-in cookie's value). */
  csrfToken(binding: string): string {
    return createHmac('sha256', this.csrfKey).update(binding).digest('base64url');
  }

  checkCsrf(binding: string, token: unknown): boolean {
    return typeof token === 'string' && token.length > 0 && safeEqual(this.csrfToken(binding), token);
  }
}

/** A random bearer secret (sessions, the pre-sign-in CSRF cookie) and its stored digest. */
export const newToken = (): string => randomBytes(32).toString('base64url');
export const tokenHash = (token: string): string => sha256Hex(token);
