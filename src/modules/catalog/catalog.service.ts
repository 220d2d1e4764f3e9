import type { Database } from '../../db/database.js';
import { invalid } from '../../shared/errors.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import type { Auth } from '../paywalls/paywall-info.js';
import { BUILTIN_PROVIDER, DEFAULT_PROVIDER } from '../providers/provider-client.js';
import { builtinRefusal, isBuiltinName } from './builtin-refusal.js';
import { modelNotFound, type CatalogModel } from './catalog-model.js';
import type { ModelPrices } from './model-prices.js';
import { BUCKET_PRICES, COLUMNS, toModel, type Row } from './model-row.js';
import { toView, type ModelView } from './model-view.js';
import {
  checkPricingInput,
  isModelId,
  MAX_MODELS_PER_PAYWALL,
  type SetModelPricingInput,
  type UnitPriceInput,
} from './pricing-input.js';

/** What the catalogue's API needs: paywalls to authorize, the prices it lists and changes. */
export interface CatalogServiceDeps {
  db: Database;
  paywalls: Pick<PaywallService, 'resolve'>;
  prices: Pick<ModelPrices, 'lookup' | 'selling' | 'usesBuiltin' | 'builtinCost' | 'changed' | 'evict'>;
}

/**
 * The catalogue as its owner reads and edits it (GraphQL `models`, `model`, `setModelPricing`,
 * `removeModelPricing`): the listing with end-user prices (docs/reference.md §4: token prices x markup;
 * the request price as is) and the writes. The request path reads the prices from {@link ModelPrices}.
 */
export class CatalogService {
  constructor(private readonly deps: CatalogServiceDeps) {}

  /** The models of a paywall with end-user and cost prices, ordered by id. */
  async list(auth: Auth, paywallId?: string | null): Promise<ModelView[]> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const { models, builtin } = await this.deps.prices.selling(paywall);
    return models.map((m) => toView(m, paywall, builtin));
  }

  /** One model of a paywall; `model_not_found` when it does not sell it. */
  async get(auth: Auth, paywallId: string | null | undefined, modelId: string): Promise<ModelView> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    // As stored: a row the request path refuses (getPrice) is still shown to its owner to fix.
    const { model: m, servedByBuiltin } = await this.deps.prices.lookup(paywall, modelId);
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
    const change = checkPricingInput(input);
    const { modelId } = change;
    // Known before the transaction (a provider lookup must not wait inside it, see getPrice).
    const servedByBuiltin = await this.deps.prices.usesBuiltin(paywall);

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
          change.displayName ?? null,
          change.description ?? null,
          change.prompt?.toString() ?? null,
          change.completion?.toString() ?? null,
          change.request?.toString() ?? null,
          change.maxTokens ?? null,
          change.displayName !== undefined,
          change.description !== undefined,
          change.maxTokens !== undefined,
          MAX_MODELS_PER_PAYWALL,
          change.dailyLimit ?? null,
          change.dailyLimit !== undefined,
          ...change.buckets,
          ...change.bucketsGiven,
          change.provider === DEFAULT_PROVIDER ? null : (change.provider ?? null),
          change.provider !== undefined,
          change.upstreamModel ?? null,
          change.upstreamModel !== undefined,
          change.fallbacks ?? null,
          change.fallbacks !== undefined,
          change.reasoningModel ?? null,
          change.reasoningModel !== undefined,
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
      // Checked with the unit and image-token prices written too: they are token buckets of their own.
      const withUnits = change.units ? await setUnitPrices(tx, paywall.id, modelId, change.units) : rows[0];
      const stored = toModel(withUnits);
      const routes = [stored.provider ?? DEFAULT_PROVIDER, ...stored.fallbacks];
      if (
        routes.includes(BUILTIN_PROVIDER) ||
        (this.deps.prices.builtinCost.has(modelId) && routes.some((p) => isBuiltinName(p, servedByBuiltin)))
      ) {
        const refusal = builtinRefusal(stored, this.deps.prices.builtinCost.get(modelId), paywall.markupPpm);
        if (refusal) throw invalid(refusal.message, refusal.param, refusal.code);
      }
      await this.deps.prices.changed(tx, paywall.id);
      return withUnits;
    });
    this.deps.prices.evict(paywall.id);
    const model = toModel(row);
    const builtin =
      this.deps.prices.builtinCost.has(model.modelId) && (await this.deps.prices.usesBuiltin(paywall));
    return toView(model, paywall, builtin);
  }

  /** Stops selling a model. True when it was there; false when there was nothing to remove. */
  async removePrice(auth: Auth, paywallId: string | null | undefined, modelId: string): Promise<boolean> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId);
    if (!isModelId(modelId)) return false;
    const removed = await this.deps.db.transaction(async (tx) => {
      const rows = await tx.query(
        'delete from model_price where paywall_id = $1 and model_id = $2 returning model_id',
        [paywall.id, modelId],
      );
      if (rows.length > 0) await this.deps.prices.changed(tx, paywall.id);
      return rows.length > 0;
    });
    if (removed) this.deps.prices.evict(paywall.id);
    return removed;
  }
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
