import type { Config } from '../../config.js';
import type { Database, Sql } from '../../db/database.js';
import { invalid } from '../../shared/errors.js';
import { KeyedLoader } from '../../shared/keyed-loader.js';
import type { ModelPrice } from '../../shared/money.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { BUILTIN_PROVIDER, DEFAULT_PROVIDER } from '../providers/provider-client.js';
import type { ProviderService } from '../providers/provider.service.js';
import type { PaywallRef } from '../providers/provider-routes.js';
import { builtinRefusal, isBuiltinName } from './builtin-refusal.js';
import type { CatalogModel, ModelPriceInfo } from './catalog-model.js';
import { byId, COLUMNS, costOf, fromBuiltin, toModel, type Row } from './model-row.js';

const CHANGED_CHANNEL = 'catalog_changed';
/** Safety net only: changes evict at once locally and through NOTIFY on other instances. */
const CACHE_TTL_MS = 60_000;
const MAX_CACHED_PAYWALLS = 10_000;

interface Catalogue {
  /** The paywall's own rows (served by its own provider). */
  models: ReadonlyMap<string, CatalogModel>;
  /**
   * Its own rows for built-in model ids, carrying the built-in cost (what it sells when the built-in
   * provider serves it: the paywall's price wins over the built-in one).
   */
  builtinOverrides: ReadonlyMap<string, CatalogModel>;
  expires: number;
}

/** What the prices need: the database, the built-in models, whether the built-in provider serves. */
export interface ModelPricesDeps {
  db: Database;
  config: Pick<Config, 'BUILTIN_PROVIDER'>;
  providers: Pick<ProviderService, 'servedByBuiltin'>;
}

/**
 * The models each paywall sells and their cost prices (pico-USDC per token / per request), as the request
 * path reads them: {@link getPrice} on every chat request. A paywall's whole catalogue is cached as one Map
 * (catalogues are small), so an unknown model is answered from memory too, and a client sending random
 * model names cannot grow the cache. A change ({@link changed}, in the writer's transaction) evicts at once
 * on this instance and through NOTIFY `catalog_changed` (payload: paywall id) on the others.
 *
 * Built-in provider (docs/reference.md §8, docs/catalog.md): while it serves a SHARED paywall (no provider of
 * its own, see ProviderService.servedByBuiltin), the paywall sells exactly the built-in models — at the
 * operator's cost x the paywall's markup, or at the paywall's own price where it priced that model id.
 * Its own rows for other ids are kept but neither listed nor served (the built-in provider could not
 * serve them) until it connects a provider. The built-in models are held once for all paywalls.
 */
export class ModelPrices {
  private readonly cache = new Map<string, Catalogue>();
  /** The built-in models at cost, by id (empty when the built-in provider is off). */
  private readonly builtin: ReadonlyMap<string, CatalogModel>;
  private readonly builtinSorted: readonly CatalogModel[];
  /** The built-in models' cost prices, by id (empty when the built-in provider is off). */
  readonly builtinCost: ReadonlyMap<string, ModelPrice>;
  private readonly loader = new KeyedLoader<Row[], Catalogue>(
    (paywallId) =>
      this.deps.db.query<Row>(
        `select ${COLUMNS} from model_price where paywall_id = $1`,
        [paywallId],
        'catalog_load',
      ),
    (paywallId, rows) => this.remember(paywallId, rows),
  );
  private unlisten?: () => void;
  private unReconnect?: () => void;

  constructor(private readonly deps: ModelPricesDeps) {
    const models = deps.config.BUILTIN_PROVIDER?.models ?? [];
    this.builtin = new Map(models.map((b) => [b.id, fromBuiltin(b)]));
    this.builtinSorted = [...this.builtin.values()].sort(byId);
    this.builtinCost = new Map(models.map((b) => [b.id, costOf(b)]));
  }

  async start(): Promise<void> {
    this.unlisten = await this.deps.db.listen(CHANGED_CHANNEL, (paywallId) => this.evict(paywallId));
    // Changes notified while the LISTEN connection was down were missed: forget every catalogue.
    this.unReconnect = this.deps.db.onReconnect(() => {
      this.loader.invalidateAll();
      this.cache.clear();
    });
  }

  async stop(): Promise<void> {
    this.unlisten?.();
    this.unReconnect?.();
    this.cache.clear();
  }

  /**
   * The prices of a model (before markup), or null when the paywall does not sell it; `providerCost` is
   * set when the built-in provider serves it. Map lookups once the paywall's catalogue and provider are
   * cached. Do not call inside `db.transaction` (on PGlite a miss would wait for the transaction's own
   * connection).
   */
  async getPrice(paywall: PaywallRef, modelId: string): Promise<ModelPriceInfo | null> {
    const { model, servedByBuiltin } = await this.lookup(paywall, modelId);
    return model && this.servable(model, paywall, servedByBuiltin);
  }

  /** The model's row as the paywall sells it now (its own catalogue or the built-in one). */
  async lookup(paywall: PaywallRef, modelId: string) {
    const catalogue = await this.catalogue(paywall.id);
    const servedByBuiltin = await this.usesBuiltin(paywall);
    const model = servedByBuiltin
      ? (catalogue.builtinOverrides.get(modelId) ?? this.builtin.get(modelId) ?? null)
      : (catalogue.models.get(modelId) ?? null);
    return { model, servedByBuiltin };
  }

  /**
   * A price as the request path may use it (docs/reference.md §8 "Built-in provider"): a model that
   * reaches the built-in provider must be one of the operator's models, under its own id, sold at or
   * above its cost (`builtinRefusal`). A pricing row that breaks this (written before the rule, or made
   * so by a later markup) is refused when its own provider is the built-in one (400, nothing held), and
   * loses `builtin` from its fallbacks: nothing old rides the operator's key.
   */
  private servable(m: ModelPriceInfo, paywall: PaywallRef, servedByBuiltin: boolean): ModelPriceInfo {
    const primary = isBuiltinName(m.provider ?? DEFAULT_PROVIDER, servedByBuiltin);
    if (!primary && !m.fallbacks.some((f) => isBuiltinName(f, servedByBuiltin))) return m;
    const refusal = builtinRefusal(m, this.builtinCost.get(m.modelId), paywall.markupPpm);
    if (!refusal) return m;
    if (primary)
      throw invalid(
        `model ${m.modelId} cannot be served by the built-in provider: ${refusal.message}`,
        'model',
        refusal.code,
      );
    return { ...m, fallbacks: m.fallbacks.filter((f) => !isBuiltinName(f, servedByBuiltin)) };
  }

  async usesBuiltin(paywall: PaywallRef): Promise<boolean> {
    return this.builtin.size > 0 && (await this.deps.providers.servedByBuiltin(paywall));
  }

  /** What the paywall sells now (own provider or built-in), ordered by id. */
  async selling(paywall: PaywallInfo): Promise<{ models: CatalogModel[]; builtin: boolean }> {
    const catalogue = await this.catalogue(paywall.id);
    if (await this.usesBuiltin(paywall))
      return {
        models: this.builtinSorted.map((b) => catalogue.builtinOverrides.get(b.modelId) ?? b),
        builtin: true,
      };
    return { models: [...catalogue.models.values()].sort(byId), builtin: false };
  }

  private async catalogue(paywallId: string): Promise<Catalogue> {
    const hit = this.cache.get(paywallId);
    return hit && hit.expires > Date.now() ? hit : this.loader.load(paywallId);
  }

  private remember(paywallId: string, rows: Row[]): Catalogue {
    const models = new Map(rows.map((r) => [r.model_id, toModel(r)]));
    const builtinOverrides = new Map<string, CatalogModel>();
    for (const [id, m] of models) {
      const cost = this.builtinCost.get(m.modelId);
      if (cost) builtinOverrides.set(m.modelId, Object.freeze({ ...m, providerCost: cost }));
      // Routed to the built-in provider by name: its answers pay the provider's cost too (settlement).
      if (cost && [m.provider, ...m.fallbacks].includes(BUILTIN_PROVIDER))
        models.set(id, { ...m, providerCost: cost });
    }
    const catalogue: Catalogue = { models, builtinOverrides, expires: Date.now() + CACHE_TTL_MS };
    this.cache.delete(paywallId); // re-insert at the end: the Map's order is the eviction order
    this.cache.set(paywallId, catalogue);
    if (this.cache.size > MAX_CACHED_PAYWALLS) this.cache.delete(this.cache.keys().next().value!);
    return catalogue;
  }

  evict(paywallId: string): void {
    this.loader.invalidate(paywallId);
    this.cache.delete(paywallId);
  }

  /** The models of a paywall with end-user and cost prices, ordered by id. */

  /** Tells every instance, at commit, that a paywall's catalogue changed (call {@link evict} after it). */
  async changed(tx: Pick<Sql, 'query'>, paywallId: string): Promise<void> {
    await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywallId]);
  }
}
