import type { Services } from '../../services.js';
import { DomainError, invalid } from '../../shared/errors.js';
import { PRICE_DECIMALS, endUserTokenPrice, formatDecimal, parseDecimal } from '../../shared/money.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { KeyedLoader } from '../../shared/keyed-loader.js';

/** The cost prices of one model of a paywall, as the request path needs them. */
export interface ModelPriceInfo {
  modelId: string;
  /** pico-USDC (10⁻¹² USDC) per prompt token, before markup */
  promptPico: bigint;
  /** pico-USDC per completion token, before markup */
  completionPico: bigint;
  /** pico-USDC per request (never marked up, CONTRACT §5.2) */
  requestPico: bigint;
  /** cap on completion tokens for a hold; null = the default (4096) */
  maxCompletionTokens: number | null;
  /** The built-in provider's cost prices when it serves this model (CONTRACT §8); else null/absent. */
  providerCost?: { requestPico: bigint; promptPico: bigint; completionPico: bigint } | null;
}

/** A catalogue row: the prices plus what the listing shows. */
export interface CatalogModel extends ModelPriceInfo {
  displayName: string | null;
  description: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** USDC decimal strings ("0.000003"), per token for prompt/completion, per request for request. */
export interface PricingStrings {
  prompt: string;
  completion: string;
  request: string;
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
  maxCompletionTokens: number | null;
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
  maxCompletionTokens?: number | null;
}

const CHANGED_CHANNEL = 'catalog_changed';
/** Safety net only: changes evict at once locally and through NOTIFY on other instances. */
const CACHE_TTL_MS = 60_000;
const MAX_CACHED_PAYWALLS = 10_000;
export const MAX_MODELS_PER_PAYWALL = 1000;
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
  models: ReadonlyMap<string, CatalogModel>;
  expires: number;
}

interface Row {
  model_id: string;
  display_name: string | null;
  description: string | null;
  prompt_pico: string | bigint;
  completion_pico: string | bigint;
  request_pico: string | bigint;
  max_completion_tokens: number | null;
  created_at: string | Date;
  updated_at: string | Date;
}

const COLUMNS = `model_id, display_name, description, prompt_pico, completion_pico, request_pico,
  max_completion_tokens, created_at, updated_at`;

const toModel = (r: Row): CatalogModel =>
  Object.freeze({
    modelId: r.model_id,
    promptPico: BigInt(r.prompt_pico),
    completionPico: BigInt(r.completion_pico),
    requestPico: BigInt(r.request_pico),
    maxCompletionTokens: r.max_completion_tokens === null ? null : Number(r.max_completion_tokens),
    displayName: r.display_name,
    description: r.description,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });

/**
 * Models a paywall sells and their cost prices (pico-USDC per token / per request), plus the listing with
 * end-user prices (CONTRACT §4: token prices x markup; the request price as is).
 *
 * The request path calls {@link getPrice} on every chat request. A paywall's whole catalogue is cached
 * as one Map (catalogues are small), so an unknown model is answered from memory too, and a client
 * sending random model names cannot grow the cache. setModelPricing / removeModelPricing evict at once
 * on this instance and through NOTIFY `catalog_changed` (payload: paywall id) on the others.
 */
export class CatalogService {
  private readonly cache = new Map<string, Catalogue>();
  private readonly loader = new KeyedLoader<Row[], Catalogue>(
    (paywallId) =>
      this.s.db.query<Row>(
        `select ${COLUMNS} from model_price where paywall_id = $1`,
        [paywallId],
        'catalog_load',
      ),
    (paywallId, rows) => this.remember(paywallId, rows),
  );
  private unlisten?: () => void;

  constructor(private readonly s: Services) {}

  async start(): Promise<void> {
    this.unlisten = await this.s.db.listen(CHANGED_CHANNEL, (paywallId) => this.evict(paywallId));
  }

  async stop(): Promise<void> {
    this.unlisten?.();
    this.cache.clear();
  }

  /**
   * The cost prices of a model, or null when the paywall does not sell it. A Map lookup once the
   * paywall's catalogue is cached. Do not call inside `db.transaction` (on PGlite a miss would wait for
   * the transaction's own connection).
   */
  async getPrice(paywallId: string, modelId: string): Promise<ModelPriceInfo | null> {
    return (await this.catalogue(paywallId)).models.get(modelId) ?? null;
  }

  private async catalogue(paywallId: string): Promise<Catalogue> {
    const hit = this.cache.get(paywallId);
    return hit && hit.expires > Date.now() ? hit : this.loader.load(paywallId);
  }

  private remember(paywallId: string, rows: Row[]): Catalogue {
    const catalogue: Catalogue = {
      models: new Map(rows.map((r) => [r.model_id, toModel(r)])),
      expires: Date.now() + CACHE_TTL_MS,
    };
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
    const paywall = await this.s.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const catalogue = await this.catalogue(paywall.id);
    return [...catalogue.models.values()]
      .sort((a, b) => (a.modelId < b.modelId ? -1 : a.modelId > b.modelId ? 1 : 0))
      .map((m) => toView(m, paywall));
  }

  /** One model of a paywall; `model_not_found` when it does not sell it. */
  async get(auth: Auth, paywallId: string | null | undefined, modelId: string): Promise<ModelView> {
    const paywall = await this.s.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const m = (await this.catalogue(paywall.id)).models.get(modelId);
    if (!m) throw modelNotFound(modelId);
    return toView(m, paywall);
  }

  /**
   * Creates or updates a model's prices. On update, a field left out (or a null price) keeps its value;
   * a null displayName / description / maxCompletionTokens clears it. On create, a missing price is 0.
   */
  async setPrice(auth: Auth, input: SetModelPricingInput): Promise<ModelView> {
    const paywall = await this.s.paywalls.resolve(auth, input.paywallId);
    const modelId = checkModelId(input.modelId);
    const prompt = parsePrice(input.prompt, 'prompt');
    const completion = parsePrice(input.completion, 'completion');
    const request = parsePrice(input.request, 'request');
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

    const row = await this.s.db.transaction(async (tx) => {
      // One statement: the insert is skipped (no row returned) when a new model would pass the cap.
      const rows = await tx.query<Row>(
        `insert into model_price as m (paywall_id, model_id, display_name, description, prompt_pico,
           completion_pico, request_pico, max_completion_tokens, created_at, updated_at)
         select $1::uuid, $2::text, $3::text, $4::text, coalesce($5::bigint, 0), coalesce($6::bigint, 0),
                coalesce($7::bigint, 0), $8::int, now(), now()
          where (select count(*) from model_price where paywall_id = $1::uuid) < $12::int
             or exists (select 1 from model_price where paywall_id = $1::uuid and model_id = $2::text)
         on conflict (paywall_id, model_id) do update set
           display_name = case when $9::boolean then excluded.display_name else m.display_name end,
           description = case when $10::boolean then excluded.description else m.description end,
           prompt_pico = coalesce($5::bigint, m.prompt_pico),
           completion_pico = coalesce($6::bigint, m.completion_pico),
           request_pico = coalesce($7::bigint, m.request_pico),
           max_completion_tokens = case when $11::boolean then excluded.max_completion_tokens
                                        else m.max_completion_tokens end,
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
        ],
      );
      if (rows.length === 0)
        throw invalid(
          `a paywall sells at most ${MAX_MODELS_PER_PAYWALL} models; remove one first`,
          'modelId',
          'too_many_models',
        );
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
      return rows[0];
    });
    this.evict(paywall.id);
    return toView(toModel(row), paywall);
  }

  /** Stops selling a model. True when it was there; false when there was nothing to remove. */
  async removePrice(auth: Auth, paywallId: string | null | undefined, modelId: string): Promise<boolean> {
    const paywall = await this.s.paywalls.resolve(auth, paywallId);
    if (typeof modelId !== 'string' || !MODEL_ID.test(modelId)) return false;
    const removed = await this.s.db.transaction(async (tx) => {
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

function toView(m: CatalogModel, paywall: PaywallInfo): ModelView {
  const name = m.displayName ?? m.modelId;
  return {
    id: m.modelId,
    name,
    displayName: name,
    description: m.description ?? '',
    pricing: {
      prompt: endUserTokenPrice(m.promptPico, paywall.markupPpm),
      completion: endUserTokenPrice(m.completionPico, paywall.markupPpm),
      // CONTRACT §5.2: charge = request + markup x tokens, so the request price is not marked up.
      request: formatPrice(m.requestPico),
    },
    costPricing: {
      prompt: formatPrice(m.promptPico),
      completion: formatPrice(m.completionPico),
      request: formatPrice(m.requestPico),
    },
    maxCompletionTokens: m.maxCompletionTokens,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}

function checkModelId(input: unknown): string {
  if (typeof input !== 'string' || !MODEL_ID.test(input))
    throw invalid('modelId must be 1 to 200 characters of letters, digits and . _ : / @ -', 'modelId');
  return input;
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
