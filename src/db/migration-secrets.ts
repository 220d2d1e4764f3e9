import { loadSecretBox, type SecretBox } from '../shared/crypto.js';

/** Where the encryption key comes from (the service's config: ENCRYPTION_KEY, else DATA_DIR's key file). */
export interface SecretsConfig {
  ENCRYPTION_KEY?: string;
  DATA_DIR: string;
}

let current: SecretsConfig | undefined;

/**
 * Runs `fn` (a migration run) with the key available to migrations that must encrypt or decrypt existing
 * rows in Node (SQL cannot run the service's AES-GCM): `Database.migrate(config)` wraps its run in this.
 */
export async function withMigrationSecrets<T>(
  config: SecretsConfig | undefined,
  fn: () => Promise<T>,
): Promise<T> {
  const previous = current;
  current = config;
  try {
    return await fn();
  } finally {
    current = previous;
  }
}

/**
 * The box for a migration that has rows to encrypt or decrypt. Loaded only then: a fresh (empty) database
 * migrates without any key, e.g. the tests' template database.
 */
export function migrationSecretBox(why: string): SecretBox {
  if (!current)
    throw new Error(
      `${why}: this migration needs the encryption key; run it through the service (npm start, npm run migrate), which passes ENCRYPTION_KEY or DATA_DIR's key file`,
    );
  return loadSecretBox(current).box;
}
