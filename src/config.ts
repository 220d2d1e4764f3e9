import { z } from 'zod';

const bool = z
  .enum(['true', 'false', '1', '0', ''])
  .optional()
  .transform((v) => v === 'true' || v === '1');

const intFrom = (def: number, min = 0) =>
  z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' ? def : Number(v)))
    .pipe(z.number().int().min(min));

/** Every environment variable the service reads (CONTRACT §1). Nothing else reads process.env. */
const ConfigSchema = z.object({
  NODE_ENV: z.string().optional().default('development'),
  PORT: intFrom(8080, 0),
  HOST: z.string().optional().default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined))
    .refine(
      (v) => v === undefined || /^postgres(ql)?:\/\//.test(v),
      'DATABASE_URL must be a postgres:// URL',
    ),
  DATA_DIR: z.string().optional().default('./data'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  BOOTSTRAP_OWNER_TOKEN: z
    .string()
    .min(16, 'BOOTSTRAP_OWNER_TOKEN must be at least 16 characters')
    .optional(),
  METRICS_TOKEN: z.string().optional(),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  /** Key (any string, stretched with SHA-256) that encrypts provider keys at rest. Generated under DATA_DIR when unset. */
  ENCRYPTION_KEY: z.string().min(16).optional(),
  WEBHOOK_MAX_ATTEMPTS: intFrom(8, 1),
  WEBHOOK_BACKOFF_BASE_MS: intFrom(30000, 0),
  WEBHOOK_TIMEOUT_MS: intFrom(10000, 1),
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: bool,
  /** Run the webhook delivery worker inside the API process (default); set false when `npm run worker` runs apart. */
  WEBHOOK_WORKER: z
    .enum(['true', 'false', '1', '0', ''])
    .optional()
    .transform((v) => v === undefined || v === '' || v === 'true' || v === '1'),
  WEBHOOK_POLL_MS: intFrom(1000, 10),
  SHUTDOWN_GRACE_MS: intFrom(10000, 0),
  UPSTREAM_TIMEOUT_MS: intFrom(120000, 1),
  MAX_WS_CONNECTIONS: intFrom(1000, 1),
  /** SHARED mode: the platform's fee on what a developer receives, in basis points (CONTRACT §8). */
  PLATFORM_FEE_BPS: intFrom(0, 0).pipe(z.number().max(10000, 'PLATFORM_FEE_BPS is at most 10000')),

  // Hosted wallet (SHARED mode, CONTRACT §8).
  /** `smtp://[user:pass@]host:port` or `smtps://…`; unset: sign-in e-mails are written to the log (development). */
  SMTP_URL: z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined))
    .refine(
      (v) => v === undefined || /^smtps?:\/\/[^/]+/.test(v),
      'SMTP_URL must be an smtp:// or smtps:// URL',
    ),
  MAIL_FROM: z.string().min(3).optional().default('Paywall Proxy <no-reply@localhost>'),
  /** Development and tests only: the wallet's top-up page credits test funds at once. Never the default. */
  WALLET_TEST_FUNDS: bool,
  /** Platform payment key for card top-ups of the hosted wallet (the Stripe issue fills the seam). */
  STRIPE_SECRET_KEY: z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined)),
});

export type Config = z.infer<typeof ConfigSchema> & { PUBLIC_BASE_URL: string };

/** Parse the environment once; a bad value stops the start with a message naming the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  return { ...c, PUBLIC_BASE_URL: (c.PUBLIC_BASE_URL ?? `http://localhost:${c.PORT}`).replace(/\/$/, '') };
}
