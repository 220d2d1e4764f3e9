import { z } from 'zod';
import { PRICE_DECIMALS, RAW_DECIMALS, parseAmount, parseDecimal, type CostPrices } from './shared/money.js';
import { parseTrustedProxies } from './shared/client-ip.js';
import {
  CAP_PARAMETERS,
  DEFAULT_CAP_PARAMETER,
  type CapParameter,
} from './modules/providers/provider-client.js';

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

const blankIsUnset = z
  .string()
  .optional()
  .transform((v) => (v ? v : undefined));

function isPlainHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (
      (u.protocol === 'http:' || u.protocol === 'https:') &&
      !u.username &&
      !u.password &&
      !v.includes('?') &&
      !v.includes('#')
    );
  } catch {
    return false;
  }
}

/** One model of the built-in provider, its cost prices parsed exactly into pico-USDC (10⁻¹² USDC). */
export interface BuiltinModel extends CostPrices {
  id: string;
  displayName: string | null;
  description: string | null;
  /** completion-token cap for a hold; null = the default (4096) */
  maxCompletionTokens: number | null;
}

/** The operator's built-in provider (docs/reference.md §8); null when not configured. */
export interface BuiltinProvider {
  /** Absolute http(s) URL without a trailing slash, e.g. https://api.openai.com/v1 */
  baseUrl: string;
  apiKey: string;
  /** BUILTIN_PROVIDER_CAP_PARAMETER: the chat cap field when the client sent none (MAX_COMPLETION_TOKENS). */
  capParameter: CapParameter;
  /** In the order configured; ids are unique. */
  models: readonly BuiltinModel[];
}

const MAX_BUILTIN_MODELS = 1000;
const MAX_PRICE_PICO = 1000n * 10n ** BigInt(PRICE_DECIMALS);
/** Same rules as setModelPricing (catalog/pricing-input.ts). */
const MODEL_ID = /^[A-Za-z0-9._:/@-]{1,200}$/;
const BUILTIN_MODEL_KEYS = new Set([
  'id',
  'prompt',
  'completion',
  'request',
  'cacheRead',
  'cacheWrite',
  'audioPrompt',
  'reasoning',
  'audioCompletion',
  'maxCompletionTokens',
  'displayName',
  'description',
]);

/**
 * BUILTIN_MODELS: a JSON array of `{"id", "prompt", "completion", "request"?, "cacheRead"?, "cacheWrite"?,
 * "audioPrompt"?, "reasoning"?, "audioCompletion"?, "maxCompletionTokens"?, "displayName"?,
 * "description"?}`; prices are USDC decimal strings (per token / per request), parsed
 * exactly (no floats). Every problem is reported with the model's index so the operator can find it.
 */
function parseBuiltinModels(text: string, ctx: z.RefinementCtx): BuiltinModel[] | undefined {
  const fail = (message: string) => {
    ctx.addIssue({ code: 'custom', message });
    return undefined;
  };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail(
      'must be JSON: an array of {"id", "prompt", "completion", "request"?, "maxCompletionTokens"?}',
    );
  }
  if (!Array.isArray(json) || json.length === 0) return fail('must be a non-empty JSON array of models');
  if (json.length > MAX_BUILTIN_MODELS) return fail(`must list at most ${MAX_BUILTIN_MODELS} models`);
  const models: BuiltinModel[] = [];
  const seen = new Set<string>();
  for (const [i, m] of json.entries()) {
    const at = `[${i}]`;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return fail(`${at} must be an object`);
    const o = m as Record<string, unknown>;
    const unknown = Object.keys(o).filter((k) => !BUILTIN_MODEL_KEYS.has(k));
    if (unknown.length) return fail(`${at} has unknown field(s): ${unknown.join(', ')}`);
    if (typeof o.id !== 'string' || !MODEL_ID.test(o.id))
      return fail(`${at}.id must be 1 to 200 characters of letters, digits and . _ : / @ -`);
    if (seen.has(o.id)) return fail(`${at}.id "${o.id}" is listed twice`);
    seen.add(o.id);
    const price = (
      field: string,
      required: boolean,
      unset: bigint | null = 0n,
    ): bigint | null | undefined => {
      const v = o[field];
      if (v === undefined && !required) return unset;
      const pico = parseDecimal(v, PRICE_DECIMALS);
      if (pico === null || pico > MAX_PRICE_PICO) {
        fail(
          `${at}.${field} must be a USDC decimal string from 0 to 1000 with at most ${PRICE_DECIMALS} fraction digits (e.g. "0.000002")`,
        );
        return undefined;
      }
      return pico;
    };
    const promptPico = price('prompt', true);
    const completionPico = price('completion', true);
    const requestPico = price('request', false);
    if (
      promptPico === undefined ||
      promptPico === null ||
      completionPico === undefined ||
      completionPico === null ||
      requestPico === undefined ||
      requestPico === null
    )
      return undefined;
    // Bucket prices: unset follows the prompt / completion price (docs/reference.md §13).
    const cacheReadPico = price('cacheRead', false, null);
    const cacheWritePico = price('cacheWrite', false, null);
    const audioPromptPico = price('audioPrompt', false, null);
    const reasoningPico = price('reasoning', false, null);
    const audioCompletionPico = price('audioCompletion', false, null);
    if (
      cacheReadPico === undefined ||
      cacheWritePico === undefined ||
      audioPromptPico === undefined ||
      reasoningPico === undefined ||
      audioCompletionPico === undefined
    )
      return undefined;
    const max = o.maxCompletionTokens;
    if (
      max !== undefined &&
      max !== null &&
      (!Number.isInteger(max) || (max as number) < 16 || (max as number) > 1_000_000)
    )
      return fail(`${at}.maxCompletionTokens must be an integer from 16 to 1000000`);
    const text = (field: string, limit: number): string | null | undefined => {
      const v = o[field];
      if (v === undefined || v === null) return null;
      if (typeof v !== 'string' || v.length > limit) {
        fail(`${at}.${field} must be a string of at most ${limit} characters`);
        return undefined;
      }
      return v.trim() || null;
    };
    const displayName = text('displayName', 200);
    const description = text('description', 4000);
    if (displayName === undefined || description === undefined) return undefined;
    models.push(
      Object.freeze({
        id: o.id,
        displayName,
        description,
        promptPico,
        completionPico,
        requestPico,
        cacheReadPico,
        cacheWritePico,
        audioPromptPico,
        reasoningPico,
        audioCompletionPico,
        maxCompletionTokens: (max as number | null | undefined) ?? null,
      }),
    );
  }
  return models;
}

/** An optional postgres:// URL (empty = unset). */
const optionalPostgresUrl = (name: string) =>
  z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined))
    .refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), `${name} must be a postgres:// URL`);

/** Every environment variable the service reads (docs/reference.md §1). Nothing else reads process.env. */
const ConfigSchema = z.object({
  NODE_ENV: z.string().optional().default('development'),
  PORT: intFrom(8080, 0),
  HOST: z.string().optional().default('0.0.0.0'),
  DATABASE_URL: optionalPostgresUrl('DATABASE_URL'),
  /**
   * A streaming replica of DATABASE_URL's database: lag-tolerant GraphQL reads (lists, usage, logs) go
   * there (docs/operations.md "Read replica"). Ignored without DATABASE_URL (the embedded database has none).
   */
  DATABASE_READ_URL: optionalPostgresUrl('DATABASE_READ_URL'),
  DATA_DIR: z.string().optional().default('./data'),
  /**
   * PostgreSQL: longest a statement may run (server `statement_timeout`; the client gives up 1 s later,
   * which also bounds a frozen or unreachable server). Over it the request answers 503.
   */
  DATABASE_STATEMENT_TIMEOUT_MS: intFrom(10000, 100),
  /** PostgreSQL: longest wait for a pool connection (a new connection's connect included); then 503. */
  DATABASE_ACQUIRE_TIMEOUT_MS: intFrom(5000, 100),
  /** PostgreSQL: connections of the API's pool. */
  DATABASE_POOL_MAX: intFrom(20, 2),
  /**
   * PostgreSQL: connections of the separate pool of background work (the in-process webhook worker, the
   * hold sweeper), so API traffic cannot starve it (docs/operations.md).
   */
  DATABASE_BACKGROUND_POOL_MAX: intFrom(4, 1),
  /** Paywalls an owner may have (archived ones not counted); createPaywall over it: `paywall_limit_reached`. */
  MAX_PAYWALLS_PER_OWNER: intFrom(100, 1),
  /**
   * Expensive GraphQL reads (`Paywall.usage`) running at once per instance, and per tenant (an owner, or a
   * paywall's API key); more wait their turn, so the pool's other connections stay free for everyone else.
   */
  GRAPHQL_HEAVY_READS: intFrom(4, 1),
  GRAPHQL_HEAVY_READS_PER_TENANT: intFrom(2, 1),
  /**
   * Where nothing autovacuums (embedded PGlite, or PostgreSQL with `autovacuum = off`): the API vacuums and
   * analyses its tables this often (src/db/maintenance.ts). 0 = never. Ignored where autovacuum is on.
   */
  DATABASE_VACUUM_INTERVAL_MS: intFrom(60000, 0),
  /**
   * Events and their webhook deliveries older than this many days are removed (docs/reference.md §18
   * "Retention"), in batches, every 5 minutes. 0 = kept forever. The ledger is never removed.
   */
  EVENT_RETENTION_DAYS: intFrom(30, 0),
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
  /** docs/reference.md §1: also allow loopback/private provider base URLs (self-hosted models, development, tests). */
  PROVIDER_ALLOW_PRIVATE_NETWORKS: bool,
  /** Run the webhook delivery worker inside the API process (default); set false when `npm run worker` runs apart. */
  WEBHOOK_WORKER: z
    .enum(['true', 'false', '1', '0', ''])
    .optional()
    .transform((v) => v === undefined || v === '' || v === 'true' || v === '1'),
  WEBHOOK_POLL_MS: intFrom(1000, 10),
  SHUTDOWN_GRACE_MS: intFrom(10000, 0),
  /** Idle limit on a provider request: to the response headers, and between two body chunks (streams stay open while data flows). */
  UPSTREAM_TIMEOUT_MS: intFrom(120000, 1),
  /**
   * Absolute limit on one proxied request, active streams included: the stream is cut and settled for
   * what it produced. The abandoned-hold sweeper relies on it (holds older than this + 5 min are dead).
   */
  UPSTREAM_MAX_DURATION_MS: intFrom(1_800_000, 1),
  /** Largest provider answer read (a whole JSON answer, or a whole stream), in bytes; never buffered beyond it. */
  UPSTREAM_MAX_BYTES: intFrom(32 * 1024 * 1024, 1024),
  /**
   * graphql-ws connections per instance that have authenticated (docs/graphql.md). Sockets still
   * authenticating do not take these slots; at most this many more may be waiting, each for at most
   * WS_CONNECTION_INIT_TIMEOUT_MS.
   */
  MAX_WS_CONNECTIONS: intFrom(1000, 1),
  /** A socket that has not sent `connection_init` by then is closed with 4408. */
  WS_CONNECTION_INIT_TIMEOUT_MS: intFrom(3000, 1),
  /** graphql-ws connections per tenant (a paywall's API key, or an owner token) per instance. */
  MAX_WS_CONNECTIONS_PER_TENANT: intFrom(50, 1),
  /** Concurrent subscriptions on one graphql-ws connection. */
  MAX_SUBSCRIPTIONS_PER_CONNECTION: intFrom(20, 1),
  /** Live subscriptions per tenant (a paywall's API key, or an owner token) per instance, all its connections together. */
  MAX_SUBSCRIPTIONS_PER_TENANT: intFrom(200, 1),
  // The network edge (docs/operations.md "The network edge").
  /**
   * Comma-separated IP addresses or CIDR ranges of the reverse proxies in front of the service. Only a
   * peer in this list may name the client with X-Forwarded-For; none by default (the TCP peer is the client).
   */
  TRUSTED_PROXIES: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const { list, error } = parseTrustedProxies(v ?? '');
      if (error) ctx.addIssue({ code: 'custom', message: error });
      return list;
    }),
  /** Longest wait for a request's headers, from its first byte; then 408 and the connection is closed. */
  HTTP_HEADERS_TIMEOUT_MS: intFrom(10_000, 100),
  /** Longest wait for a whole request (headers and body); then 408. Answers (streams) are not bounded by it. */
  HTTP_REQUEST_TIMEOUT_MS: intFrom(30_000, 100),
  /**
   * Open TCP connections per client address (the TCP peer; TRUSTED_PROXIES are exempt), HTTP and
   * graphql-ws together. Beyond it a new connection gets 429 and is closed.
   */
  MAX_CONNECTIONS_PER_IP: intFrom(256, 1),
  /**
   * graphql-ws sockets per client IP that have not yet authenticated (`connection_init` with a valid
   * credential); beyond it the upgrade gets HTTP 429. Authenticated connections do not count.
   */
  MAX_WS_UNAUTHENTICATED_PER_IP: intFrom(8, 1),
  /**
   * docs/reference.md §15: `POST /v1/messages/count_tokens` calls per minute per paywall key on each
   * instance (the count is free, and costs this service's CPU or the provider's quota); 0 = no limit.
   */
  COUNT_TOKENS_PER_MINUTE: intFrom(120, 0),
  /**
   * docs/proxy.md "The prompt estimate": how long a large prompt's count may take (queue included) before
   * its estimate is the prompt's UTF-8 byte count instead, the CPU a request may cost at most.
   */
  TOKEN_COUNT_DEADLINE_MS: intFrom(2000, 1),
  /** docs/reference.md §10: requests per minute per paywall key, all instances together; unset = no limit. */
  RATE_LIMIT_PER_MINUTE: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' ? undefined : Number(v)))
    .pipe(z.number().int().min(1, 'RATE_LIMIT_PER_MINUTE must be at least 1').optional()),
  /**
   * Outstanding uncollected usage (USDC) an end user (a wallet in SHARED mode) may carry and still be
   * served: usage beyond a request's hold that the free balance could not pay. Above it, metered
   * requests get the top-up reply until a deposit repays it (docs/proxy.md). Default 0: any debt blocks.
   */
  MAX_UNCOLLECTED_PER_USER: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return 0n;
      const raw = parseDecimal(v, RAW_DECIMALS);
      if (raw === null) {
        ctx.addIssue({
          code: 'custom',
          message:
            'MAX_UNCOLLECTED_PER_USER must be a USDC amount (a decimal with at most 6 fraction digits)',
        });
        return z.NEVER;
      }
      return raw;
    }),
  /** SHARED mode: the platform's fee on what a developer receives, in basis points (docs/reference.md §8). */
  PLATFORM_FEE_BPS: intFrom(0, 0).pipe(z.number().max(10000, 'PLATFORM_FEE_BPS is at most 10000')),
  /** The built-in provider of SHARED paywalls (docs/reference.md §8): active when base URL and models are set. */
  BUILTIN_PROVIDER_BASE_URL: blankIsUnset.refine(
    (v) => v === undefined || isPlainHttpUrl(v),
    'BUILTIN_PROVIDER_BASE_URL must be an absolute http(s) URL without credentials, query or fragment',
  ),
  BUILTIN_PROVIDER_API_KEY: blankIsUnset.refine(
    (v) => v === undefined || /^[\x21-\x7e]{1,4096}$/.test(v),
    'BUILTIN_PROVIDER_API_KEY must be 1 to 4096 printable ASCII characters without spaces',
  ),
  /**
   * The built-in provider's chat cap field when a client sent none (docs/reference.md §13 "Cap sent
   * upstream"): MAX_COMPLETION_TOKENS (default) or MAX_TOKENS for an older OpenAI-compatible server.
   */
  BUILTIN_PROVIDER_CAP_PARAMETER: blankIsUnset.refine(
    (v) => v === undefined || (CAP_PARAMETERS as readonly string[]).includes(v),
    `BUILTIN_PROVIDER_CAP_PARAMETER must be ${CAP_PARAMETERS.join(' or ')}`,
  ),
  BUILTIN_MODELS: blankIsUnset.transform((v, ctx) =>
    v === undefined ? undefined : parseBuiltinModels(v, ctx),
  ),

  // Hosted wallet (SHARED mode, docs/reference.md §8).
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
  /**
   * The most one manual charge may take from a wallet (SHARED paywalls), in USDC; default 5. Larger
   * charges are refused (`success: false`, `charge_limit_exceeded`). Parsed to raw units (10⁻⁶ USDC).
   */
  SHARED_MAX_MANUAL_CHARGE: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const raw = parseAmount(v === undefined || v === '' ? '5' : v);
      if (raw === null)
        ctx.addIssue({
          code: 'custom',
          message:
            'SHARED_MAX_MANUAL_CHARGE must be a USDC decimal string > 0 with at most 6 fraction digits (e.g. "5")',
        });
      return raw ?? 0n;
    }),
  /**
   * Where the `stripe` package sends API calls (default: Stripe's own, https://api.stripe.com). Tests
   * point it at a fake Stripe on loopback.
   */
  STRIPE_API_BASE: z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined))
    .pipe(
      z
        .string()
        .refine(isPlainHttpUrl, 'must be an absolute http(s) URL without credentials, query or fragment')
        .optional(),
    ),
  /**
   * The platform's Stripe secret key: card top-ups of the hosted wallet (docs/reference.md §8 "Top-up"). Goes
   * with STRIPE_WEBHOOK_SECRET.
   */
  STRIPE_SECRET_KEY: z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined)),
  /**
   * Signing secret (`whsec_…`) of the platform's webhook endpoint `PUBLIC_BASE_URL/v1/stripe/webhooks/wallet`,
   * created by the operator in the Stripe dashboard for the three Checkout events (docs/stripe.md).
   */
  STRIPE_WEBHOOK_SECRET: z
    .string()
    .optional()
    .transform((v) => (v ? v : undefined)),
  // The public DEFAULT top-up page and the Checkout Sessions it starts (docs/stripe.md "Limits").
  /** Views of the hosted DEFAULT top-up page and "Pay" clicks per client IP and minute (per instance). */
  TOPUP_IP_VIEWS_PER_MINUTE: intFrom(60, 1),
  /** Checkout Sessions started from the hosted DEFAULT top-up page per client IP and hour (per instance). */
  TOPUP_IP_CHECKOUTS_PER_HOUR: intFrom(20, 1),
  /** Checkout Sessions started per top-up link (paywall + end user) and hour (per instance). */
  TOPUP_USER_CHECKOUTS_PER_HOUR: intFrom(10, 1),
  /** Checkout Sessions created per second with one Stripe key (a token bucket, burst = rate; per instance). */
  STRIPE_CHECKOUTS_PER_SECOND: intFrom(5, 1),
  /** Checkout Sessions created per second with all Stripe keys together (token bucket; per instance). */
  STRIPE_CHECKOUTS_PER_SECOND_ALL: intFrom(20, 1),
});

export type Config = z.infer<typeof ConfigSchema> & {
  PUBLIC_BASE_URL: string;
  /** BUILTIN_PROVIDER_* and BUILTIN_MODELS together; null when the built-in provider is off. */
  BUILTIN_PROVIDER: BuiltinProvider | null;
};

/** Parse the environment once; a bad value stops the start with a message naming the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = ConfigSchema.superRefine((c, ctx) => {
    if (c.HTTP_HEADERS_TIMEOUT_MS > c.HTTP_REQUEST_TIMEOUT_MS)
      ctx.addIssue({
        code: 'custom',
        path: ['HTTP_HEADERS_TIMEOUT_MS'],
        message: 'HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS',
      });
    // A key without the endpoint secret would take payments that are never credited (and vice versa).
    if (!c.STRIPE_SECRET_KEY !== !c.STRIPE_WEBHOOK_SECRET)
      ctx.addIssue({
        code: 'custom',
        path: [c.STRIPE_SECRET_KEY ? 'STRIPE_WEBHOOK_SECRET' : 'STRIPE_SECRET_KEY'],
        message:
          'STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET go together (card top-ups of the hosted wallet; see docs/stripe.md)',
      });
    // The three go together: half a configuration is a mistake, not "off".
    const any =
      c.BUILTIN_PROVIDER_BASE_URL ||
      c.BUILTIN_PROVIDER_API_KEY ||
      env.BUILTIN_MODELS ||
      c.BUILTIN_PROVIDER_CAP_PARAMETER;
    if (!any) return;
    for (const name of ['BUILTIN_PROVIDER_BASE_URL', 'BUILTIN_PROVIDER_API_KEY', 'BUILTIN_MODELS'] as const)
      if (!env[name])
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `${name} is required when the built-in provider is configured (BUILTIN_PROVIDER_BASE_URL, BUILTIN_PROVIDER_API_KEY and BUILTIN_MODELS go together)`,
        });
  }).safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  const builtin =
    c.BUILTIN_PROVIDER_BASE_URL && c.BUILTIN_PROVIDER_API_KEY && c.BUILTIN_MODELS
      ? Object.freeze({
          baseUrl: c.BUILTIN_PROVIDER_BASE_URL.replace(/\/+$/, ''),
          apiKey: c.BUILTIN_PROVIDER_API_KEY,
          capParameter:
            (c.BUILTIN_PROVIDER_CAP_PARAMETER as CapParameter | undefined) ?? DEFAULT_CAP_PARAMETER,
          models: Object.freeze(c.BUILTIN_MODELS),
        })
      : null;
  return {
    ...c,
    PUBLIC_BASE_URL: (c.PUBLIC_BASE_URL ?? `http://localhost:${c.PORT}`).replace(/\/$/, ''),
    BUILTIN_PROVIDER: builtin,
  };
}
