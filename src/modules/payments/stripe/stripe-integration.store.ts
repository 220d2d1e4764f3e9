import type { Sql } from '../../../db/database.js';
import { loadSecretBox, type SecretBox } from '../../../shared/crypto.js';
import { DomainError } from '../../../shared/errors.js';
import type { Logger } from '../../../shared/logger.js';
import type { PaywallInfo } from '../../paywalls/paywall-info.js';
import { usdOfCents } from './stripe-amounts.js';

/**
 * What the three Stripe services share: the `stripe_integration` row of a paywall, its secrets (kept
 * encrypted, never returned or logged) and how a Stripe failure becomes a clear error.
 */

/** The endpoint key of the platform's own Stripe events endpoint (wallet top-ups) in `stripe_event`. */
export const WALLET_ENDPOINT = 'wallet';

export interface IntegrationRow {
  secret_key_ciphertext: string;
  webhook_endpoint_id: string;
  webhook_secret_ciphertext: string;
  topup_amounts_cents: number[];
  previous_webhook_endpoint_id: string | null;
  previous_webhook_secret_ciphertext: string | null;
  previous_secret_expires_at: Date | null;
}

export const INTEGRATION_COLUMNS = `secret_key_ciphertext, webhook_endpoint_id, webhook_secret_ciphertext, topup_amounts_cents,
  previous_webhook_endpoint_id, previous_webhook_secret_ciphertext, previous_secret_expires_at`;

/** What the API shows of a paywall's Stripe integration: never the key or the endpoint secret. */
export interface StripeInfo {
  connected: boolean;
  webhookId: string | null;
  topupAmounts: string[];
}

export async function readIntegration(sql: Sql, paywallId: string): Promise<IntegrationRow | undefined> {
  return (
    await sql.query<IntegrationRow>(
      `select ${INTEGRATION_COLUMNS} from stripe_integration where paywall_id = $1`,
      [paywallId],
    )
  )[0];
}

/** The Stripe integrations of several paywalls (in the order asked). */
export async function integrationInfo(sql: Sql, paywallIds: readonly string[]): Promise<StripeInfo[]> {
  const rows = await sql.query<{
    paywall_id: string;
    webhook_endpoint_id: string;
    topup_amounts_cents: number[];
  }>(
    `select paywall_id, webhook_endpoint_id, topup_amounts_cents from stripe_integration
      where paywall_id = any($1::uuid[])`,
    [paywallIds],
  );
  const byId = new Map(rows.map((r) => [r.paywall_id, r]));
  return paywallIds.map((id) => {
    const r = byId.get(id);
    return r
      ? {
          connected: true,
          webhookId: r.webhook_endpoint_id,
          topupAmounts: r.topup_amounts_cents.map(usdOfCents),
        }
      : { connected: false, webhookId: null, topupAmounts: [] };
  });
}

/**
 * A paywall's Stripe secret key and endpoint signing secrets: AES-256-GCM ciphertext at rest
 * (shared/crypto.ts, bound to the paywall id, the same box as provider keys). The box is loaded on
 * first use.
 */
export class StripeSecrets {
  private secretBox?: SecretBox;

  constructor(
    private readonly config: { ENCRYPTION_KEY?: string; DATA_DIR: string },
    private readonly log: Logger,
  ) {}

  box(): SecretBox {
    this.secretBox ??= loadSecretBox(this.config).box;
    return this.secretBox;
  }

  encrypt(paywallId: string, plain: string): string {
    return this.box().encrypt(plain, paywallId);
  }

  /** Decrypts, or fails with `stripe_not_connected` (409) when the key differs from the one it was stored with. */
  decrypt(paywallId: string, ciphertext: string): string {
    try {
      return this.box().decrypt(ciphertext, paywallId);
    } catch (e) {
      this.log.error(
        { paywallId, reason: (e as any)?.reason },
        'Stripe secret cannot be decrypted: ENCRYPTION_KEY differs from the one it was stored with',
      );
      throw new DomainError(
        'conflict',
        'The Stripe key of this paywall cannot be decrypted on this server; connect Stripe again.',
        null,
        'stripe_not_connected',
      );
    }
  }
}

/** A failed Stripe call as the error the caller sees; logged without the key. */
export function stripeFailed(log: Logger, e: unknown, paywallId: string, what: string): DomainError {
  // The library's message names the problem (bad key, network); it never contains the key.
  log.warn({ paywallId, status: (e as any)?.statusCode, type: (e as any)?.type }, `Stripe ${what} failed`);
  if ((e as any)?.statusCode === 429)
    return new DomainError(
      'rate_limited',
      `Stripe is busy right now (${what}); nothing was charged. Wait a few seconds, then try again.`,
      null,
      'stripe_rate_limited',
    );
  return new DomainError(
    'upstream_error',
    `Stripe refused or could not be reached (${what}): ${(e as any)?.message ?? 'unknown error'}`,
    null,
    'stripe_error',
  );
}

export function requireDefault(paywall: PaywallInfo): void {
  if (paywall.mode !== 'DEFAULT')
    throw new DomainError(
      'unsupported_in_mode',
      'Stripe top-ups apply only to DEFAULT-mode paywalls; SHARED-mode users top up their hosted wallet.',
      null,
      'unsupported_in_mode',
    );
}

export const notConnected = () =>
  new DomainError('conflict', 'Stripe is not connected to this paywall', null, 'stripe_not_connected');
