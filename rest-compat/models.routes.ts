import { Router } from 'express';
import type { PricingStrings } from '../src/modules/catalog/model-view.js';
import type { Services } from '../src/services.js';
import { Operation } from './graphql-bridge.js';
import { restContext, route, userOf } from './http.js';

const FIELDS =
  'id object name display_name description createdAt pricing { prompt completion request cacheRead cacheWrite audioPrompt reasoning audioCompletion imagePrompt imageCompletion image { size quality price } audioSecond characters1k }';
const LIST = new Operation(`query { models { ${FIELDS} } }`);
const ONE = new Operation(`query($id: String!) { model(id: $id) { ${FIELDS} } }`);

interface GqlModel {
  id: string;
  object: string;
  name: string;
  display_name: string;
  description: string;
  createdAt: string;
  /** The GraphQL ModelPricing, field for field the catalogue's PricingStrings. */
  pricing: PricingStrings;
}

/** The spec's Model plus `created` and `owned_by`, so OpenAI SDKs' models.list() / retrieve() work. */
const openAiModel = ({ createdAt, ...m }: GqlModel, ownedBy: string) => ({
  id: m.id,
  object: m.object,
  created: Math.floor(Date.parse(createdAt) / 1000),
  owned_by: ownedBy,
  name: m.name,
  display_name: m.display_name,
  description: m.description,
  // docs/reference.md §13: the bucket prices under their REST names, always present.
  pricing: {
    prompt: m.pricing.prompt,
    completion: m.pricing.completion,
    request: m.pricing.request,
    input_cache_read: m.pricing.cacheRead,
    input_cache_write: m.pricing.cacheWrite,
    internal_reasoning: m.pricing.reasoning,
    audio_prompt: m.pricing.audioPrompt,
    audio_completion: m.pricing.audioCompletion,
    // docs/reference.md §22: image tokens, and the prices per image, per second of audio, per 1,000
    // characters (null when the model is not priced so).
    image_prompt: m.pricing.imagePrompt,
    image_completion: m.pricing.imageCompletion,
    image: m.pricing.image,
    audio_second: m.pricing.audioSecond,
    characters_1k: m.pricing.characters1k,
  },
});

/**
 * Anthropic's SDK (every request names `anthropic-version`) reads a model as `{type: "model", id,
 * display_name, created_at}` and a list page as `{data, has_more, first_id, last_id}`: for it, those
 * fields are added to the same objects (OpenAI's are kept), so `models.list()` and `retrieve()` of either
 * SDK work. Other clients get OpenAI's list unchanged.
 */
const anthropicClient = (headers: Record<string, unknown>) =>
  typeof headers['anthropic-version'] === 'string';
const withAnthropicFields = <M extends { id: string; created: number }>(m: M) => ({
  ...m,
  type: 'model' as const,
  created_at: new Date(m.created * 1000).toISOString(),
});

/**
 * `GET /v1/models` and `GET /v1/models/{id}` (ids may contain "/", e.g. "openai/gpt-4o"). Prices do not
 * depend on the user, so none is needed; but an end-user key naming another user (header, query, path)
 * is refused here as on every proxy route (docs/reference.md §19).
 */
export function modelsRoutes(services: Services): Router {
  const r = Router();
  r.get(
    '/models',
    route(async (req, res) => {
      if (req.userKey) userOf(req);
      const { models } = await LIST.run<{ models: GqlModel[] }>(restContext(req, services), {});
      const data = models.map((m) => openAiModel(m, req.paywall!.name));
      if (!anthropicClient(req.headers)) return void res.json({ object: 'list', data });
      res.json({
        object: 'list',
        data: data.map(withAnthropicFields),
        has_more: false,
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
      });
    }),
  );
  r.get(
    '/models/*id',
    route(async (req, res) => {
      if (req.userKey) userOf(req);
      const id = ([] as string[]).concat((req.params as any).id).join('/');
      const { model } = await ONE.run<{ model: GqlModel }>(restContext(req, services), { id });
      const one = openAiModel(model, req.paywall!.name);
      res.json(anthropicClient(req.headers) ? withAnthropicFields(one) : one);
    }),
  );
  return r;
}
