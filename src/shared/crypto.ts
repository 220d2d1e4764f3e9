import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Encryption of secrets at rest (provider API keys): AES-256-GCM with a random 96-bit IV per value and
 * the 128-bit tag, so a tampered or foreign ciphertext fails to decrypt instead of yielding garbage.
 *
 * Ciphertext format: `v1.<key id>.<iv>.<tag>.<ciphertext>` (base64url parts). The key id (first 8 hex
 * digits of SHA-256 of the key) lets a decrypt failure say "encrypted with another key" rather than
 * "corrupt", which is the usual cause (ENCRYPTION_KEY changed, or instances with different keys).
 *
 * An optional `context` (e.g. the paywall id) is bound as additional authenticated data: a ciphertext
 * copied into another paywall's row does not decrypt there.
 */
export class SecretBox {
  readonly keyId: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
    this.keyId = createHash('sha256').update(key).digest('hex').slice(0, 8);
  }

  /** Any string (of any length) stretched to an AES-256 key with SHA-256. */
  static fromPassphrase(passphrase: string): SecretBox {
    return new SecretBox(createHash('sha256').update(passphrase, 'utf8').digest());
  }

  /**
   * A 32-byte key for another purpose (`label`), derived with HMAC-SHA-256 from this box's key, so one
   * configured secret serves encryption, code hashing and CSRF tokens without reusing the same bytes.
   */
  derive(label: string): Buffer {
    return createHmac('sha256', this.key).update(label, 'utf8').digest();
  }

  encrypt(plain: string, context = ''): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [
      'v1',
      this.keyId,
      iv.toString('base64url'),
      tag.toString('base64url'),
      ct.toString('base64url'),
    ].join('.');
  }

  /** The plaintext; throws {@link SecretBoxError} when the value was made with another key or was altered. */
  decrypt(value: string, context = ''): string {
    const parts = value.split('.');
    if (parts.length !== 5 || parts[0] !== 'v1') throw new SecretBoxError('malformed', 'not a v1 ciphertext');
    const [, keyId, iv, tag, ct] = parts;
    if (keyId !== this.keyId)
      throw new SecretBoxError(
        'wrong_key',
        `encrypted with key ${keyId}, this instance has key ${this.keyId}`,
      );
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    } catch (e) {
      throw new SecretBoxError('tampered', 'authentication failed (altered value or other context)', {
        cause: e,
      });
    }
  }
}

export class SecretBoxError extends Error {
  constructor(
    readonly reason: 'malformed' | 'wrong_key' | 'tampered',
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'SecretBoxError';
  }
}

export const KEY_FILE_NAME = 'encryption.key';

/**
 * The box for secrets at rest. `ENCRYPTION_KEY` (any string of ≥ 16 characters, stretched with SHA-256)
 * is what production must set: the same value on every instance, kept outside the database.
 *
 * Without it, a random key is generated once and kept in `${DATA_DIR}/encryption.key` (mode 0600), so a
 * single-machine install (`npm start` with the embedded database) survives restarts. `generated` tells
 * the caller to warn: several instances each generating their own file could not read each other's
 * values, and a lost file makes stored provider keys unreadable (they must then be reconnected).
 */
export function loadSecretBox(config: { ENCRYPTION_KEY?: string; DATA_DIR: string }): {
  box: SecretBox;
  source: 'config' | 'file';
  generated: boolean;
  path?: string;
} {
  if (config.ENCRYPTION_KEY)
    return { box: SecretBox.fromPassphrase(config.ENCRYPTION_KEY), source: 'config', generated: false };
  const path = join(config.DATA_DIR, KEY_FILE_NAME);
  let generated = false;
  let passphrase: string;
  try {
    passphrase = readFileSync(path, 'utf8').trim();
  } catch (e: any) {
    if (e?.code !== 'ENOENT') throw new Error(`cannot read ${path}: ${e?.message ?? e}`, { cause: e });
    mkdirSync(config.DATA_DIR, { recursive: true });
    const fresh = randomBytes(32).toString('base64url');
    try {
      // `wx`: never overwrite a key another process wrote meanwhile (that would orphan its ciphertexts).
      writeFileSync(path, fresh + '\n', { mode: 0o600, flag: 'wx' });
      passphrase = fresh;
      generated = true;
    } catch (w: any) {
      if (w?.code !== 'EEXIST') throw new Error(`cannot write ${path}: ${w?.message ?? w}`, { cause: w });
      passphrase = readFileSync(path, 'utf8').trim();
    }
  }
  if (passphrase.length < 16) throw new Error(`${path} holds no usable key (fewer than 16 characters)`);
  return { box: SecretBox.fromPassphrase(passphrase), source: 'file', generated, path };
}
