import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { SecretBox } from '../../shared/crypto.js';
import { invalid } from '../../shared/errors.js';
import { recordEvents, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import type { PaywallRef } from './provider-routes.js';
import { checkProviderName } from './provider-name.js';
import { BUILTIN_PROVIDER, type CapParameter, type ProviderKind } from './provider-client.js';
import { builtinApplies } from './builtin-provider.js';
import {
  checkApiKey,
  checkCapParameter,
  checkKind,
  checkPublicBaseUrl,
  normalizeBaseUrl,
} from './provider-input.js';
import { CHANGED_CHANNEL } from './provider-routes.js';

export const MAX_PROVIDERS_PER_PAYWALL = 20;
const INTEGRATION_KEY = 'provider';

/** What the API shows about a connected provider: never the key itself. */
export interface ProviderInfo {
  paywallId: string;
  name: string;
  kind: ProviderKind;
  /** The platform's built-in provider (no key of the paywall's). */
  builtin: boolean;
  baseUrl: string;
  apiKeyLastFour: string;
  capParameter: CapParameter;
  connectedAt: Date;
  updatedAt: Date;
}

export interface ConnectProviderInput {
  paywallId?: string | null;
  baseUrl: string;
  apiKey: string;
  /** Omitted or null: `default` (the provider replaced by a connect that names none). */
  name?: string | null;
  /** Omitted or null: OPENAI. */
  kind?: ProviderKind | null;
  /** Omitted or null: MAX_COMPLETION_TOKENS (a connect states the whole provider, this field included). */
  capParameter?: CapParameter | null;
}

export interface ProviderRecordsDeps {
  db: Database;
  config: Pick<Config, 'PROVIDER_ALLOW_PRIVATE_NETWORKS' | 'BUILTIN_PROVIDER'>;
  log: Logger;
  /** To check the caller may manage the paywall. */
  paywalls: Pick<PaywallService, 'resolve'>;
  /** Encrypts a key bound to its paywall (the same box the routes decrypt with). */
  box: () => SecretBox;
  /** Told after a change is committed: the cached routes of this instance are dropped at once. */
  changed: (paywallId: string) => void;
}

/**
 * A paywall's provider rows (docs/reference.md §15 "Providers"): connecting and disconnecting them, the
 * key encrypted at rest (AES-256-GCM, see shared/crypto.ts), never returned and never logged, and what
 * the API shows of them. Every change records its event and notifies `provider_changed` in the same
 * transaction, so the other instances drop their cached routes too.
 */
export class ProviderRecords {
  constructor(private readonly deps: ProviderRecordsDeps) {}

  /**
   * Connects (or replaces) a named provider of a paywall (docs/reference.md §15 "Providers"); records
   * `paywall.integration.connected` naming it.
   */
  async connect(auth: Auth, input: ConnectProviderInput): Promise<PaywallInfo> {
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId);
    const name = checkProviderName(input.name);
    const kind = checkKind(input.kind);
    const baseUrl = normalizeBaseUrl(input.baseUrl);
    const apiKey = checkApiKey(input.apiKey);
    const capParameter = checkCapParameter(input.capParameter);
    if (!this.deps.config.PROVIDER_ALLOW_PRIVATE_NETWORKS) await checkPublicBaseUrl(baseUrl);
    // Bound to the paywall id: a ciphertext copied to another paywall's row does not decrypt there.
    const ciphertext = this.deps.box().encrypt(apiKey, paywall.id);
    const lastFour = apiKey.length >= 12 ? apiKey.slice(-4) : '';
    const trigger = actorOf(auth);
    await this.deps.db.transaction(async (tx) => {
      // One statement: a new name is not inserted when the paywall already has the maximum.
      const rows = await tx.query<{ inserted: boolean }>(
        `insert into provider (paywall_id, name, kind, base_url, api_key_ciphertext, api_key_last_four, cap_parameter, created_at, updated_at)
         select $1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, now(), now()
          where (select count(*) from provider where paywall_id = $1::uuid) < $8::int
             or exists (select 1 from provider where paywall_id = $1::uuid and name = $2::text)
         on conflict (paywall_id, name) do update
           set kind = excluded.kind, base_url = excluded.base_url,
               api_key_ciphertext = excluded.api_key_ciphertext,
               api_key_last_four = excluded.api_key_last_four, cap_parameter = excluded.cap_parameter,
               updated_at = now()
         returning (xmax = 0) as inserted`,
        [paywall.id, name, kind, baseUrl, ciphertext, lastFour, capParameter, MAX_PROVIDERS_PER_PAYWALL],
      );
      if (rows.length === 0)
        throw invalid(
          `a paywall has at most ${MAX_PROVIDERS_PER_PAYWALL} providers; disconnect one first`,
          'name',
          'too_many_providers',
        );
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.connected',
          {
            paywall,
            trigger,
            subject: { type: 'paywall', id: paywall.id },
            metadata: { baseUrl, replaced: !rows[0].inserted },
          },
          { integrationKey: INTEGRATION_KEY, enabledBy: trigger.actorId, provider: name, kind },
        ),
      ]);
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
    });
    this.deps.changed(paywall.id);
    this.deps.log.info(
      { paywallId: paywall.id, provider: name, kind, baseUrl, capParameter },
      'provider connected',
    );
    return paywall;
  }

  /**
   * Removes a named provider of a paywall (`default` when none is named); records
   * `paywall.integration.disconnected` naming it. Idempotent: with no such provider nothing changes and
   * no event is recorded. Allowed on an archived paywall, so an owner can always withdraw a key.
   */
  async disconnect(
    auth: Auth,
    paywallId?: string | null,
    providerName?: string | null,
  ): Promise<PaywallInfo> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const name = checkProviderName(providerName);
    const trigger = actorOf(auth);
    const removed = await this.deps.db.transaction(async (tx) => {
      const rows = await tx.query<{ base_url: string; kind: ProviderKind }>(
        'delete from provider where paywall_id = $1 and name = $2 returning base_url, kind',
        [paywall.id, name],
      );
      if (rows.length === 0) return false;
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.disconnected',
          {
            paywall,
            trigger,
            subject: { type: 'paywall', id: paywall.id },
            metadata: { baseUrl: rows[0].base_url },
          },
          {
            integrationKey: INTEGRATION_KEY,
            disabledBy: trigger.actorId,
            provider: name,
            kind: rows[0].kind,
          },
        ),
      ]);
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
      return true;
    });
    if (removed) {
      this.deps.changed(paywall.id);
      this.deps.log.info({ paywallId: paywall.id, provider: name }, 'provider disconnected');
    }
    return paywall;
  }

  /** The providers of several paywalls (in the order asked, each by name), for a DataLoader. */
  async infoMany(paywallIds: readonly string[]): Promise<ProviderInfo[][]> {
    const rows = await this.deps.db.query<{
      paywall_id: string;
      name: string;
      kind: ProviderKind;
      base_url: string;
      api_key_last_four: string;
      cap_parameter: CapParameter;
      created_at: string | Date;
      updated_at: string | Date;
    }>(
      `select paywall_id, name, kind, base_url, api_key_last_four, cap_parameter, created_at, updated_at
         from provider where paywall_id = any($1::uuid[]) order by paywall_id, name`,
      [paywallIds],
    );
    const byId = new Map<string, ProviderInfo[]>(paywallIds.map((id) => [id, []]));
    for (const r of rows)
      byId.get(r.paywall_id)?.push({
        paywallId: r.paywall_id,
        name: r.name,
        kind: r.kind,
        builtin: false,
        baseUrl: r.base_url,
        apiKeyLastFour: r.api_key_last_four,
        capParameter: r.cap_parameter,
        connectedAt: new Date(r.created_at),
        updatedAt: new Date(r.updated_at),
      });
    return paywallIds.map((id) => byId.get(id)!);
  }

  /** The built-in provider as a SHARED paywall's providers list shows it (no key of the paywall's), or null. */
  builtinInfo(paywall: PaywallRef): ProviderInfo | null {
    const b = this.deps.config.BUILTIN_PROVIDER;
    if (!b || !builtinApplies(this.deps.config, paywall, false)) return null;
    const since = new Date(0);
    return {
      paywallId: paywall.id,
      name: BUILTIN_PROVIDER,
      kind: 'OPENAI',
      builtin: true,
      // The operator's URL is not an app's to read (it may name a host of the operator's network).
      baseUrl: '',
      apiKeyLastFour: '',
      capParameter: b.capParameter,
      connectedAt: since,
      updatedAt: since,
    };
  }
}

const actorOf = (auth: Auth): EventTrigger =>
  auth.kind === 'owner'
    ? { source: 'graphql', actorType: 'owner', actorId: auth.ownerId }
    : { source: 'api', actorType: 'api_key', actorId: auth.paywall.id };
