import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import type { ProviderService } from '../providers/provider.service.js';
import { DomainError, invalid } from '../../shared/errors.js';
import type { BuiltinModel } from '../../config.js';
import type { Bucket } from '../../shared/usage-buckets.js';
import {
  PRICE_DECIMALS,
  bucketPico,
  endUserTokenPrice,
  formatDecimal,
  parseDecimal,
  type ModelPrice,
} from '../../shared/money.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import type { PaywallRef } from '../providers/provider-routes.js';
import { KeyedLoader } from '../../shared/keyed-loader.js';
import { checkProviderName } from '../providers/provider-name.js';
import type { ImagePrice, UnitPrices } from '../../shared/media-units.js';
import { BUILTIN_PROVIDER, DEFAULT_PROVIDER } from '../providers/provider-client.js';
import { maxOutputOf, reasonsOf, type MaxOutputSource } from './known-models.js';

/** The cost prices of one model of a paywall, as the request path needs them. */
export interface ModelPriceInfo {
  modelId: string;
  /** pico-USDC (10⁻¹² USDC) per prompt token, before markup */
  promptPico: bigint;
  /** pico-USDC per completion token, before markup */
  completionPico: bigint;
  /** pico-USDC per request (never marked up, docs/reference.md §5.2) */
  requestPico: bigint;
  /** pico-USDC per bucket token (docs/reference.md §13); null = the prompt / completion price. */
  cacheReadPico: bigint | null;
  cacheWritePico: bigint | null;
  audioPromptPico: bigint | null;
  reasoningPico: bigint | null;
  audioCompletionPico: bigint | null;
  /** docs/reference.md §10: requests of this model per end user per UTC day; null = no limit. */
  dailyRequestLimit: number | null;
  /** the owner's cap on completion tokens; null = the catalogue's maximum, else 4096 (known-models.ts) */
  maxCompletionTokens: number | null;
  /** docs/reference.md §21 "Mapped": the owner marked the model as reasoning (true) or not; null = the catalogue's. */
  reasoningModel: boolean | null;
  /**
   * The built-in provider's cost prices when it serves this request (docs/reference.md §8): the settlement
   * moves `providerCostRaw(providerCost, tokens)` (request + tokens x these, rounded up, no markup) to
   * the platform's provider account and the rest of the charge to the paywall's earnings. null when the
   * paywall's own provider serves it (the whole charge is the developer's).
   */
  providerCost: ModelPrice | null;
  /** docs/reference.md §15 "Routing": the provider's name; null = `default` (then the built-in one). */
  provider: string | null;
  /** The model id sent to the provider; null = the model id. */
  upstreamModel: string | null;
  /** Provider names tried in order when the provider fails before answering. */
  fallbacks: readonly string[];
  /** docs/reference.md §22: image token prices (null = prompt / completion) and prices per unit. */
  imagePromptPico?: bigint | null;
  imageCompletionPico?: bigint | null;
  imagePrices?: readonly ImagePrice[];
  audioSecondPico?: bigint | null;
  characters1kPico?: bigint | null;
}

/** A catalogue row: the prices plus what the listing shows. */
export interface CatalogModel extends ModelPriceInfo {
  displayName: string | null;
  description: string | null;
  /** null for a built-in model the paywall does not price itself: the listing shows the paywall's dates. */
  createdAt: Date | null;
  updatedAt: Date | null;
}

/**
 * USDC decimal strings ("0.000003"): per token for prompt, completion and each usage bucket (docs/reference.md §13,
 * resolved: an unset bucket shows the price it follows), per request for request.
 */
export interface PricingStrings {
  prompt: string;
  completion: string;
  request: string;
  cacheRead: string;
  cacheWrite: string;
  audioPrompt: string;
  reasoning: string;
  audioCompletion: string;
  /** docs/reference.md §22: per image input / output token; per image (by size and quality); per unit. */
  imagePrompt: string;
  imageCompletion: string;
  image: { size: string; quality: string; price: string }[];
  audioSecond: string | null;
  characters1k: string | null;
}

/** A model as the API shows it. */
export interface ModelView {
  id: string;
  name: string;
  displayName: string;
  description: string;
  /** What the end user pays: token prices x markup; the request price as configured. */
  pricing: PricingStrings;
  /** What the provider costs the paywall (the configured prices). */
  costPricing: PricingStrings;
  /** The maximum output in force (docs/reference.md §20 "No cap") and where it comes from. */
  maxCompletionTokens: number;
  maxCompletionTokensSource: MaxOutputSource;
  /** The model reasons: the owner's setting, else the catalogue's. */
  reasoningModel: boolean;
  dailyRequestLimit: number | null;
  /** docs/reference.md §15 "Routing". */
  provider: string;
  upstreamModel: string;
  fallbacks: readonly string[];
  /** Served by the platform's built-in provider (SHARED paywall without a provider of its own). */
  builtinProvider: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export interface SetModelPricingInput {
  paywallId?: string | null;
  modelId: string;
  displayName?: string | null;
  description?: string | null;
  prompt?: string | null;
  completion?: string | null;
  request?: string | null;
  cacheRead?: string | null;
  cacheWrite?: string | null;
  audioPrompt?: string | null;
  reasoning?: string | null;
  audioCompletion?: string | null;
  maxCompletionTokens?: number | null;
  /** Omitted: unchanged; null: the catalogue decides. */
  reasoningModel?: boolean | null;
  dailyRequestLimit?: number | null;
  /** Omitted: unchanged (new: `default`); null: `default`. */
  provider?: string | null;
  /** Omitted: unchanged; null: the model id. */
  upstreamModel?: string | null;
  /** Omitted: unchanged (new: none); null or []: none. */
  fallbacks?: readonly string[] | null;
  /** docs/reference.md §22. Omitted: unchanged; null: follows prompt / completion (buckets), none (units). */
  imagePrompt?: string | null;
  imageCompletion?: string | null;
  imagePrices?: readonly { size: string; quality: string; price: string }[] | null;
  audioSecond?: string | null;
  characters1k?: string | null;
}

/** The per-bucket prices setModelPricing takes, and their columns. */
const BUCKET_PRICES = [
  ['cacheRead', 'cache_read_pico'],
  ['cacheWrite', 'cache_write_pico'],
  ['audioPrompt', 'audio_prompt_pico'],
  ['reasoning', 'reasoning_pico'],
  ['audioCompletion', 'audio_completion_pico'],
] as const;

const CHANGED_CHANNEL = 'catalog_changed';
/** Safety net only: changes evict at once locally and through NOTIFY on other instances. */
const CACHE_TTL_MS = 60_000;
const MAX_CACHED_PAYWALLS = 10_000;
export const MAX_MODELS_PER_PAYWALL = 1000;
const MAX_FALLBACKS = 5;
const MAX_PRICE_PICO = 1000n * 10n ** BigInt(PRICE_DECIMALS);
const MODEL_ID = /^[A-Za-z0-9._:/@-]{1,200}$/;
const MIN_COMPLETION_TOKENS = 16;
const MAX_COMPLETION_TOKENS = 1_000_000;
const MAX_DISPLAY_NAME = 200;
const MAX_DESCRIPTION = 4000;

/** OpenAI's answer for a model the paywall does not sell (chat requests and GET /v1/models/{id}). */
export const modelNotFound = (modelId: string): DomainError =>
  new DomainError(
    'model_not_found',
    `The model \`${modelId.slice(0, 200)}\` does not exist or you do not have access to it.`,
    'model',
    'model_not_found',
  );

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

interface Row {
  model_id: string;
  display_name: string | null;
  description: string | null;
  prompt_pico: string | bigint;
  completion_pico: string | bigint;
  request_pico: string | bigint;
  cache_read_pico: string | bigint | null;
  cache_write_pico: string | bigint | null;
  audio_prompt_pico: string | bigint | null;
  reasoning_pico: string | bigint | null;
  audio_completion_pico: string | bigint | null;
  max_completion_tokens: number | null;
  reasoning_model: boolean | null;
  daily_request_limit: number | null;
  provider: string | null;
  upstream_model: string | null;
  fallbacks: string[];
  created_at: string | Date;
  updated_at: string | Date;
  image_prompt_pico: string | bigint | null;
  image_completion_pico: string | bigint | null;
  image_prices: { size: string; quality: string; pico: string }[] | string | null;
  audio_second_pico: string | bigint | null;
  characters_1k_pico: string | bigint | null;
}

/** docs/reference.md §22: the image buckets' and the units' prices. */
const UNIT_COLUMNS =
  'image_prompt_pico, image_completion_pico, image_prices, audio_second_pico, characters_1k_pico';

const COLUMNS = `model_id, display_name, description, prompt_pico, completion_pico, request_pico,
  cache_read_pico, cache_write_pico, audio_prompt_pico, reasoning_pico, audio_completion_pico,
  max_completion_tokens, reasoning_model, daily_request_limit, provider, upstream_model, fallbacks, created_at,
  updated_at, ${UNIT_COLUMNS}`;

const picoOrNull = (v: string | bigint | null): bigint | null => (v === null ? null : BigInt(v));

/** A row's image-bucket and unit prices (docs/reference.md §22). */
function unitPricesOf(r: Row) {
  const list = typeof r.image_prices === 'string' ? JSON.parse(r.image_prices) : (r.image_prices ?? []);
  return {
    imagePromptPico: picoOrNull(r.image_prompt_pico ?? null),
    imageCompletionPico: picoOrNull(r.image_completion_pico ?? null),
    imagePrices: Object.freeze(
      (list as { size: string; quality: string; pico: string }[]).map((p) =>
        Object.freeze({ size: p.size, quality: p.quality, pico: BigInt(p.pico) }),
      ),
    ),
    audioSecondPico: picoOrNull(r.audio_second_pico ?? null),
    characters1kPico: picoOrNull(r.characters_1k_pico ?? null),
  };
}

/** A built-in model's cost prices, every bucket included (null: follows prompt / completion). */
const pricesOf = (b: BuiltinModel) => ({
  promptPico: b.promptPico,
  completionPico: b.completionPico,
  requestPico: b.requestPico,
  cacheReadPico: b.cacheReadPico,
  cacheWritePico: b.cacheWritePico,
  audioPromptPico: b.audioPromptPico,
  reasoningPico: b.reasoningPico,
  audioCompletionPico: b.audioCompletionPico,
});

const costOf = (b: BuiltinModel): ModelPrice => Object.freeze(pricesOf(b));

/** A built-in model at the operator's cost prices (the paywall's markup applies on top). */
const fromBuiltin = (b: BuiltinModel): CatalogModel =>
  Object.freeze({
    modelId: b.id,
    ...pricesOf(b),
    maxCompletionTokens: b.maxCompletionTokens,
    reasoningModel: null,
    dailyRequestLimit: null,
    providerCost: costOf(b),
    provider: null,
    upstreamModel: null,
    fallbacks: [],
    displayName: b.displayName,
    description: b.description,
    createdAt: null,
    updatedAt: null,
  });

const byId = (a: { modelId: string }, b: { modelId: string }) =>
  a.modelId < b.modelId ? -1 : a.modelId > b.modelId ? 1 : 0;

const toModel = (r: Row): CatalogModel =>
  Object.freeze({
    modelId: r.model_id,
    promptPico: BigInt(r.prompt_pico),
    completionPico: BigInt(r.completion_pico),
    requestPico: BigInt(r.request_pico),
    cacheReadPico: picoOrNull(r.cache_read_pico),
    cacheWritePico: picoOrNull(r.cache_write_pico),
    audioPromptPico: picoOrNull(r.audio_prompt_pico),
    reasoningPico: picoOrNull(r.reasoning_pico),
    audioCompletionPico: picoOrNull(r.audio_completion_pico),
    maxCompletionTokens: r.max_completion_tokens === null ? null : Number(r.max_completion_tokens),
    reasoningModel: r.reasoning_model ?? null,
    dailyRequestLimit: r.daily_request_limit === null ? null : Number(r.daily_request_limit),
    providerCost: null,
    provider: r.provider,
    upstreamModel: r.upstream_model,
    fallbacks: Object.freeze([...(r.fallbacks ?? [])]),
    ...unitPricesOf(r),
    displayName: r.display_name,
    description: r.description,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });

/** What the catalogue needs: paywalls to authorize, providers to know whether the built-in one serves. */
export interface CatalogServiceDeps {
  db: Database;
  config: Pick<Config, 'BUILTIN_PROVIDER'>;
  paywalls: Pick<PaywallService, 'resolve'>;
  providers: Pick<ProviderService, 'servedByBuiltin'>;
}

/**
 * Models a paywall sells and their cost prices (pico-USDC per token / per request), plus the listing with
 * end-user prices (docs/reference.md §4: token prices x markup; the request price as is).
 *
 * The request path calls {@link getPrice} on every chat request. A paywall's whole catalogue is cached
 * as one Map (catalogues are small), so an unknown model is answered from memory too, and a client
 * sending random model names cannot grow the cache. setModelPricing / removeModelPricing evict at once
 * on this instance and through NOTIFY `catalog_changed` (payload: paywall id) on the others.
 *
 * Built-in provider (docs/reference.md §8, docs/catalog.md): while it serves a SHARED paywall (no provider of
 * its own, see ProviderService.servedByBuiltin), the paywall sells exactly the built-in models — at the
 * operator's cost x the paywall's markup, or at the paywall's own price where it priced that model id.
 * Its own rows for other ids are kept but neither listed nor served (the built-in provider could not
 * serve them) until it connects a provider. The built-in models are held once for all paywalls.
 */
export class CatalogService {
  private readonly cache = new Map<string, Catalogue>();
  /** The built-in models at cost, by id (empty when the built-in provider is off). */
  private readonly builtin: ReadonlyMap<string, CatalogModel>;
  private readonly builtinSorted: readonly CatalogModel[];
  private readonly builtinCost: ReadonlyMap<string, ModelPrice>;
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

  constructor(private readonly deps: CatalogServiceDeps) {
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
  private async lookup(paywall: PaywallRef, modelId: string) {
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

  private async usesBuiltin(paywall: PaywallRef): Promise<boolean> {
    return this.builtin.size > 0 && (await this.deps.providers.servedByBuiltin(paywall));
  }

  /** What the paywall sells now (own provider or built-in), ordered by id. */
  private async selling(paywall: PaywallInfo): Promise<{ models: CatalogModel[]; builtin: boolean }> {
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

  private evict(paywallId: string): void {
    this.loader.invalidate(paywallId);
    this.cache.delete(paywallId);
  }

  /** The models of a paywall with end-user and cost prices, ordered by id. */
  async list(auth: Auth, paywallId?: string | null): Promise<ModelView[]> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const { models, builtin } = await this.selling(paywall);
    return models.map((m) => toView(m, paywall, builtin));
  }

  /** One model of a paywall; `model_not_found` when it does not sell it. */
  async get(auth: Auth, paywallId: string | null | undefined, modelId: string): Promise<ModelView> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    // As stored: a row the request path refuses (getPrice) is still shown to its owner to fix.
    const { model: m, servedByBuiltin } = await this.lookup(paywall, modelId);
    if (!m) throw modelNotFound(modelId);
    return toView(m as CatalogModel, paywall, servedByBuiltin);
  }

  /**
   * Creates or updates a model's prices. On update, a field left out (or a null prompt, completion or
   * request price) keeps its value; a null displayName / description / maxCompletionTokens clears it, and a
   * null bucket price clears it (the bucket follows the prompt or completion price again, docs/reference.md
   * §13). On create, a missing price is 0, a missing bucket price follows.
   */
  async setPrice(auth: Auth, input: SetModelPricingInput): Promise<ModelView> {
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId);
    const modelId = checkModelId(input.modelId);
    const prompt = parsePrice(input.prompt, 'prompt');
    const completion = parsePrice(input.completion, 'completion');
    const request = parsePrice(input.request, 'request');
    const buckets = BUCKET_PRICES.map(([field]) => parsePrice(input[field], field)?.toString() ?? null);
    const displayName = optionalText(input.displayName, 'displayName', MAX_DISPLAY_NAME);
    const description = optionalText(input.description, 'description', MAX_DESCRIPTION);
    const maxTokens = input.maxCompletionTokens;
    if (
      maxTokens !== undefined &&
      maxTokens !== null &&
      (!Number.isInteger(maxTokens) || maxTokens < MIN_COMPLETION_TOKENS || maxTokens > MAX_COMPLETION_TOKENS)
    )
      throw invalid(
        `maxCompletionTokens must be an integer from ${MIN_COMPLETION_TOKENS} to ${MAX_COMPLETION_TOKENS}`,
        'maxCompletionTokens',
      );

    const reasoningModel = input.reasoningModel;
    if (reasoningModel !== undefined && reasoningModel !== null && typeof reasoningModel !== 'boolean')
      throw invalid('reasoningModel must be true, false or null', 'reasoningModel');

    const dailyLimit = input.dailyRequestLimit;
    if (
      dailyLimit !== undefined &&
      dailyLimit !== null &&
      (!Number.isInteger(dailyLimit) || dailyLimit < 0 || dailyLimit > 1_000_000_000)
    )
      throw invalid(
        'dailyRequestLimit must be an integer from 0 to 1000000000, or null for none',
        'dailyRequestLimit',
      );

    const provider =
      input.provider === undefined ? undefined : checkProviderName(input.provider ?? null, 'provider', true);
    const upstreamModel =
      input.upstreamModel === undefined || input.upstreamModel === null
        ? input.upstreamModel
        : checkModelId(input.upstreamModel, 'upstreamModel');
    const fallbacks = input.fallbacks === undefined ? undefined : checkFallbacks(input.fallbacks, provider);
    const units = unitPriceInput(input);
    // Known before the transaction (a provider lookup must not wait inside it, see getPrice).
    const servedByBuiltin = await this.usesBuiltin(paywall);

    const row = await this.deps.db.transaction(async (tx) => {
      // One statement: the insert is skipped (no row returned) when a new model would pass the cap.
      // Bucket prices ($15–$19, null: follows the default), written where given ($20–$24), null included.
      const rows = await tx.query<Row>(
        `insert into model_price as m (paywall_id, model_id, display_name, description, prompt_pico,
           completion_pico, request_pico, max_completion_tokens, daily_request_limit,
           ${BUCKET_PRICES.map(([, c]) => c).join(', ')}, provider, upstream_model, fallbacks,
           reasoning_model, created_at, updated_at)
         select $1::uuid, $2::text, $3::text, $4::text, coalesce($5::bigint, 0), coalesce($6::bigint, 0),
                coalesce($7::bigint, 0), $8::int, $13::int, $15::bigint, $16::bigint, $17::bigint,
                $18::bigint, $19::bigint, $25::text, $27::text, coalesce($29::text[], '{}'), $31::boolean,
                now(), now()
          where (select count(*) from model_price where paywall_id = $1::uuid) < $12::int
             or exists (select 1 from model_price where paywall_id = $1::uuid and model_id = $2::text)
         on conflict (paywall_id, model_id) do update set
           display_name = case when $9::boolean then excluded.display_name else m.display_name end,
           description = case when $10::boolean then excluded.description else m.description end,
           prompt_pico = coalesce($5::bigint, m.prompt_pico),
           completion_pico = coalesce($6::bigint, m.completion_pico),
           request_pico = coalesce($7::bigint, m.request_pico),
           ${BUCKET_PRICES.map(([, c], i) => `${c} = case when $${20 + i}::boolean then excluded.${c} else m.${c} end`).join(',\n           ')},
           max_completion_tokens = case when $11::boolean then excluded.max_completion_tokens
                                        else m.max_completion_tokens end,
           daily_request_limit = case when $14::boolean then excluded.daily_request_limit
                                      else m.daily_request_limit end,
           provider = case when $26::boolean then excluded.provider else m.provider end,
           upstream_model = case when $28::boolean then excluded.upstream_model else m.upstream_model end,
           fallbacks = case when $30::boolean then excluded.fallbacks else m.fallbacks end,
           reasoning_model = case when $32::boolean then excluded.reasoning_model else m.reasoning_model end,
           updated_at = now()
         returning ${COLUMNS}`,
        [
          paywall.id,
          modelId,
          displayName ?? null,
          description ?? null,
          prompt?.toString() ?? null,
          completion?.toString() ?? null,
          request?.toString() ?? null,
          maxTokens ?? null,
          displayName !== undefined,
          description !== undefined,
          maxTokens !== undefined,
          MAX_MODELS_PER_PAYWALL,
          dailyLimit ?? null,
          dailyLimit !== undefined,
          ...buckets,
          ...BUCKET_PRICES.map(([field]) => input[field] !== undefined),
          provider === DEFAULT_PROVIDER ? null : (provider ?? null),
          provider !== undefined,
          upstreamModel ?? null,
          upstreamModel !== undefined,
          fallbacks ?? null,
          fallbacks !== undefined,
          reasoningModel ?? null,
          reasoningModel !== undefined,
        ],
      );
      if (rows.length === 0)
        throw invalid(
          `a paywall sells at most ${MAX_MODELS_PER_PAYWALL} models; remove one first`,
          'modelId',
          'too_many_models',
        );
      // The row as it now stands (a partial update keeps earlier fields): refused, and rolled back,
      // when it would let the built-in provider serve another model or sell one below its cost.
      // (A row of another model is not sold while the built-in provider serves the paywall: only a
      // route named `builtin` can take it there.)
      const stored = toModel(rows[0]);
      const routes = [stored.provider ?? DEFAULT_PROVIDER, ...stored.fallbacks];
      if (
        routes.includes(BUILTIN_PROVIDER) ||
        (this.builtinCost.has(modelId) && routes.some((p) => isBuiltinName(p, servedByBuiltin)))
      ) {
        const refusal = builtinRefusal(stored, this.builtinCost.get(modelId), paywall.markupPpm);
        if (refusal) throw invalid(refusal.message, refusal.param, refusal.code);
      }
      const withUnits = units ? await setUnitPrices(tx, paywall.id, modelId, units) : rows[0];
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
      return withUnits;
    });
    this.evict(paywall.id);
    const model = toModel(row);
    const builtin = this.builtinCost.has(model.modelId) && (await this.usesBuiltin(paywall));
    return toView(model, paywall, builtin);
  }

  /** Stops selling a model. True when it was there; false when there was nothing to remove. */
  async removePrice(auth: Auth, paywallId: string | null | undefined, modelId: string): Promise<boolean> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId);
    if (typeof modelId !== 'string' || !MODEL_ID.test(modelId)) return false;
    const removed = await this.deps.db.transaction(async (tx) => {
      const rows = await tx.query(
        'delete from model_price where paywall_id = $1 and model_id = $2 returning model_id',
        [paywall.id, modelId],
      );
      if (rows.length > 0) await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
      return rows.length > 0;
    });
    if (removed) this.evict(paywall.id);
    return removed;
  }
}

const formatPrice = (pico: bigint): string => formatDecimal(pico, PRICE_DECIMALS);

/** Token prices per bucket (cost x `markupPpm`), the request price as is. */
function pricingOf(m: ModelPrice, markupPpm: bigint): PricingStrings {
  const token = (b: Bucket) => endUserTokenPrice(bucketPico(m, b), markupPpm);
  return {
    prompt: token('prompt'),
    completion: token('completion'),
    // docs/reference.md §5.2: charge = request + markup x tokens, so the request price is not marked up.
    request: formatPrice(m.requestPico),
    cacheRead: token('cacheRead'),
    cacheWrite: token('cacheWrite'),
    audioPrompt: token('audioPrompt'),
    reasoning: token('reasoning'),
    audioCompletion: token('audioCompletion'),
    ...unitPricing(m, markupPpm),
  };
}

/**
 * docs/reference.md §22: the image buckets per token, and the prices per unit (cost x `markupPpm`,
 * exact): per image, per second of audio, per 1,000 characters (null: the model is not priced so).
 */
function unitPricing(m: ModelPrice & UnitPrices, markupPpm: bigint) {
  const marked = (pico: bigint) => endUserTokenPrice(pico, markupPpm);
  return {
    imagePrompt: marked(bucketPico(m, 'imagePrompt')),
    imageCompletion: marked(bucketPico(m, 'imageCompletion')),
    image: (m.imagePrices ?? []).map((p) => ({ size: p.size, quality: p.quality, price: marked(p.pico) })),
    audioSecond: m.audioSecondPico == null ? null : marked(m.audioSecondPico),
    characters1k: m.characters1kPico == null ? null : marked(m.characters1kPico),
  };
}

interface UnitPriceInput {
  imagePrompt?: bigint | null;
  imageCompletion?: bigint | null;
  imagePrices?: { size: string; quality: string; pico: string }[];
  audioSecond?: bigint | null;
  characters1k?: bigint | null;
}

const MAX_IMAGE_PRICES = 50;
const IMAGE_SIZE = /^(\*|\d{1,5}x\d{1,5}|[a-z]{1,20})$/;
const IMAGE_QUALITY = /^(\*|[a-z]{1,20})$/;

/** The §22 fields of setModelPricing, checked; null when none was given (nothing to write). */
function unitPriceInput(input: SetModelPricingInput): UnitPriceInput | null {
  const out: UnitPriceInput = {};
  const nullable = (field: 'imagePrompt' | 'imageCompletion' | 'audioSecond' | 'characters1k') => {
    const v = input[field];
    if (v === undefined) return;
    out[field] = v === null ? null : parsePrice(v, field)!;
  };
  nullable('imagePrompt');
  nullable('imageCompletion');
  nullable('audioSecond');
  nullable('characters1k');
  if (input.imagePrices !== undefined) {
    const list = input.imagePrices ?? [];
    if (!Array.isArray(list) || list.length > MAX_IMAGE_PRICES)
      throw invalid(`imagePrices must be a list of at most ${MAX_IMAGE_PRICES} prices`, 'imagePrices');
    const seen = new Set<string>();
    out.imagePrices = list.map((p, i) => {
      const at = `imagePrices[${i}]`;
      if (typeof p?.size !== 'string' || !IMAGE_SIZE.test(p.size))
        throw invalid(`${at}.size must be a size such as "1024x1024", or "*" for any`, `${at}.size`);
      if (typeof p.quality !== 'string' || !IMAGE_QUALITY.test(p.quality))
        throw invalid(
          `${at}.quality must be a quality such as "high" or "hd", or "*" for any`,
          `${at}.quality`,
        );
      const key = `${p.size} ${p.quality}`;
      if (seen.has(key)) throw invalid(`${at} repeats size ${p.size} and quality ${p.quality}`, at);
      seen.add(key);
      return { size: p.size, quality: p.quality, pico: parsePrice(p.price ?? '', `${at}.price`)!.toString() };
    });
  }
  return Object.keys(out).length > 0 ? out : null;
}

/** Writes the §22 prices that were given (one statement after the upsert, in its transaction). */
async function setUnitPrices(
  tx: Pick<Database, 'query'>,
  paywallId: string,
  modelId: string,
  u: UnitPriceInput,
): Promise<Row> {
  const set: string[] = [];
  const params: unknown[] = [paywallId, modelId];
  const put = (column: string, value: unknown, cast: string) => {
    params.push(value);
    set.push(`${column} = $${params.length}::${cast}`);
  };
  if (u.imagePrompt !== undefined) put('image_prompt_pico', u.imagePrompt?.toString() ?? null, 'bigint');
  if (u.imageCompletion !== undefined)
    put('image_completion_pico', u.imageCompletion?.toString() ?? null, 'bigint');
  if (u.imagePrices !== undefined) put('image_prices', JSON.stringify(u.imagePrices), 'jsonb');
  if (u.audioSecond !== undefined) put('audio_second_pico', u.audioSecond?.toString() ?? null, 'bigint');
  if (u.characters1k !== undefined) put('characters_1k_pico', u.characters1k?.toString() ?? null, 'bigint');
  const rows = await tx.query<Row>(
    `update model_price set ${set.join(', ')} where paywall_id = $1 and model_id = $2 returning ${COLUMNS}`,
    params,
  );
  return rows[0];
}

const ONE_PPM = 1_000_000n;

function toView(m: CatalogModel, paywall: PaywallInfo, builtinProvider: boolean): ModelView {
  const name = m.displayName ?? m.modelId;
  const maxOut = maxOutputOf(m);
  return {
    id: m.modelId,
    name,
    displayName: name,
    description: m.description ?? '',
    pricing: pricingOf(m, paywall.markupPpm),
    costPricing: pricingOf(m, ONE_PPM),
    maxCompletionTokens: maxOut.tokens,
    maxCompletionTokensSource: maxOut.source,
    reasoningModel: reasonsOf(m),
    dailyRequestLimit: m.dailyRequestLimit,
    provider: m.provider ?? (builtinProvider ? BUILTIN_PROVIDER : DEFAULT_PROVIDER),
    upstreamModel: m.upstreamModel ?? m.modelId,
    fallbacks: m.fallbacks,
    builtinProvider,
    createdAt: m.createdAt ?? paywall.createdAt,
    updatedAt: m.updatedAt ?? paywall.createdAt,
  };
}

function checkModelId(input: unknown, param = 'modelId'): string {
  if (typeof input !== 'string' || !MODEL_ID.test(input))
    throw invalid(`${param} must be 1 to 200 characters of letters, digits and . _ : / @ -`, param);
  return input;
}

/** A provider name that reaches the built-in provider (`default` does while it serves the paywall). */
const isBuiltinName = (name: string, servedByBuiltin: boolean): boolean =>
  name === BUILTIN_PROVIDER || (servedByBuiltin && name === DEFAULT_PROVIDER);

/** The token prices checked against the built-in cost, each named as its setModelPricing field (the
 * prompt and completion prices first: an unset bucket follows one of them). */
const PRICED_BUCKETS: Bucket[] = [
  'prompt',
  'completion',
  'cacheRead',
  'cacheWrite',
  'audioPrompt',
  'reasoning',
  'audioCompletion',
];

/**
 * Why a model may not reach the built-in provider (docs/reference.md §8), or null when it may: it is
 * not one of the operator's models (`cost` undefined), it names another upstream model, or what the
 * end user pays for a request or a token of some bucket (the price, x the markup for tokens) is below
 * what the built-in provider costs the platform. So every built-in answer pays its cost leg in full.
 */
export function builtinRefusal(
  m: ModelPriceInfo,
  cost: ModelPrice | undefined,
  markupPpm: bigint,
): { message: string; param: string; code: 'invalid_value' | 'markup_below_cost' } | null {
  if (!cost)
    return {
      message: `only the platform's built-in models can be served by the built-in provider; ${m.modelId} is not one`,
      param: m.provider === BUILTIN_PROVIDER ? 'provider' : 'fallbacks',
      code: 'invalid_value',
    };
  if (m.upstreamModel !== null && m.upstreamModel !== m.modelId)
    return {
      message: `a built-in model is served under its own id: upstreamModel must be ${m.modelId} or null`,
      param: 'upstreamModel',
      code: 'invalid_value',
    };
  if (m.requestPico < cost.requestPico)
    return {
      message: `request is below the built-in provider's cost (${formatPrice(cost.requestPico)} USDC)`,
      param: 'request',
      code: 'markup_below_cost',
    };
  for (const bucket of PRICED_BUCKETS) {
    const floor = bucketPico(cost, bucket);
    if (bucketPico(m, bucket) * markupPpm < floor * ONE_PPM)
      return {
        message: `${bucket} x markup is below the built-in provider's cost (${formatPrice(floor)} USDC per token)`,
        param: bucket,
        code: 'markup_below_cost',
      };
  }
  return null;
}

/** At most 5 distinct provider names, none of them the model's own provider. */
function checkFallbacks(input: readonly string[] | null, provider: string | undefined): string[] {
  if (input === null) return [];
  if (!Array.isArray(input) || input.length > MAX_FALLBACKS)
    throw invalid(`fallbacks must be a list of at most ${MAX_FALLBACKS} provider names`, 'fallbacks');
  const names = input.map((n) => checkProviderName(n, 'fallbacks', true));
  if (new Set(names).size !== names.length)
    throw invalid('fallbacks must not repeat a provider', 'fallbacks');
  if (provider !== undefined && names.includes(provider))
    throw invalid("fallbacks must not include the model's own provider", 'fallbacks');
  return names;
}

/** A price in USDC: decimal string ≥ 0, ≤ 1000, at most 12 fraction digits → pico-USDC. */
function parsePrice(input: string | null | undefined, param: string): bigint | undefined {
  if (input === undefined || input === null) return undefined;
  const pico = parseDecimal(input, PRICE_DECIMALS);
  if (pico === null || pico > MAX_PRICE_PICO)
    throw invalid(
      `${param} must be a USDC decimal string from 0 to 1000 with at most ${PRICE_DECIMALS} fraction digits (e.g. "0.000002")`,
      param,
      'invalid_price',
    );
  return pico;
}

/** undefined = leave as is; null or blank = clear; otherwise trimmed and length-checked. */
function optionalText(
  input: string | null | undefined,
  param: string,
  max: number,
): string | null | undefined {
  if (input === undefined) return undefined;
  if (input === null) return null;
  const t = input.trim();
  if (t.length > max) throw invalid(`${param} must be at most ${max} characters`, param);
  return t === '' ? null : t;
}
