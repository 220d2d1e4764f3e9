import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import { loadSecretBox, type SecretBox } from '../../shared/crypto.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { DEFAULT_PROVIDER } from './provider-client.js';
import { ProviderRoutes, type ModelRoute, type PaywallRef, type Upstream } from './provider-routes.js';
import { ProviderRecords, type ConnectProviderInput, type ProviderInfo } from './provider-records.js';

/** What the provider service needs (it reaches paywalls to check the caller may manage one). */
export interface ProviderServiceDeps {
  db: Database;
  config: Pick<
    Config,
    | 'BUILTIN_PROVIDER'
    | 'UPSTREAM_TIMEOUT_MS'
    | 'PROVIDER_ALLOW_PRIVATE_NETWORKS'
    | 'ENCRYPTION_KEY'
    | 'DATA_DIR'
  >;
  log: Logger;
  paywalls: Pick<PaywallService, 'resolve'>;
}

/**
 * The model providers of paywalls, as the rest of the service sees them: the provider rows and their
 * keys (provider-records.ts), the routes a request is forwarded on (provider-routes.ts) and the
 * platform's built-in provider (builtin-provider.ts). It owns the one key box both halves share: a key is
 * encrypted by the records and decrypted by the routes.
 */
export class ProviderService {
  private secretBox?: SecretBox;
  private readonly routes: ProviderRoutes;
  private readonly records: ProviderRecords;

  constructor(private readonly deps: ProviderServiceDeps) {
    const box = () => this.box();
    this.routes = new ProviderRoutes({ db: deps.db, config: deps.config, log: deps.log, box });
    this.records = new ProviderRecords({
      db: deps.db,
      config: deps.config,
      log: deps.log,
      paywalls: deps.paywalls,
      box,
      changed: (paywallId) => this.routes.evict(paywallId),
    });
  }

  async start(): Promise<void> {
    this.box(); // fail at start, not on the first request, when the key file cannot be read or written
    await this.routes.start();
  }

  /** Closes every pool; in-flight requests get a few seconds to finish, then are cut. */
  stop(): Promise<void> {
    return this.routes.stop();
  }

  private box(): SecretBox {
    if (!this.secretBox) {
      const loaded = loadSecretBox(this.deps.config);
      if (loaded.generated)
        this.deps.log.warn(
          { path: loaded.path },
          'ENCRYPTION_KEY is not set: generated a key file for provider keys. Production must set ENCRYPTION_KEY (the same on every instance).',
        );
      this.secretBox = loaded.box;
    }
    return this.secretBox;
  }

  /** See {@link ProviderRoutes.getUpstream}. */
  getUpstream(paywall: PaywallRef, name: string = DEFAULT_PROVIDER): Promise<Upstream | null> {
    return this.routes.getUpstream(paywall, name);
  }

  /** See {@link ProviderRoutes.route}. */
  route(paywall: PaywallRef, model: ModelRoute): Promise<Upstream[]> {
    return this.routes.route(paywall, model);
  }

  /** See {@link ProviderRoutes.servedByBuiltin}. */
  servedByBuiltin(paywall: PaywallRef): Promise<boolean> {
    return this.routes.servedByBuiltin(paywall);
  }

  /** See {@link ProviderRoutes.builtinMayServe}. */
  builtinMayServe(paywall: PaywallRef): boolean {
    return this.routes.builtinMayServe(paywall);
  }

  /** See {@link ProviderRoutes.builtinNeedsMarkup}. */
  builtinNeedsMarkup(paywall: PaywallRef): Promise<boolean> {
    return this.routes.builtinNeedsMarkup(paywall);
  }

  /** See {@link ProviderRecords.builtinInfo}. */
  builtinInfo(paywall: PaywallRef): ProviderInfo | null {
    return this.records.builtinInfo(paywall);
  }

  /** See {@link ProviderRecords.connect}. */
  connect(auth: Auth, input: ConnectProviderInput): Promise<PaywallInfo> {
    return this.records.connect(auth, input);
  }

  /** See {@link ProviderRecords.disconnect}. */
  disconnect(auth: Auth, paywallId?: string | null, providerName?: string | null): Promise<PaywallInfo> {
    return this.records.disconnect(auth, paywallId, providerName);
  }

  /** See {@link ProviderRecords.infoMany}. */
  infoMany(paywallIds: readonly string[]): Promise<ProviderInfo[][]> {
    return this.records.infoMany(paywallIds);
  }
}
