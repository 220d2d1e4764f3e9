import { invalid } from '../../shared/errors.js';
import type { ProviderClient, UpstreamTarget } from '../providers/provider-client.js';
import { CLIENT_ADAPTERS, PROVIDER_ADAPTERS } from './formats/registry.js';
import { translatingClient } from './translating-client.js';
import type { WireFormat } from './wire-format.js';

/**
 * Which ProviderClient carries a wire format's request to a provider of a kind (docs/reference.md §15
 * "Across formats"): the provider's own API as is where the client speaks it, else a translating one;
 * null when the provider's kind cannot serve that API at all (embeddings on Anthropic).
 */
export type ClientFor = (
  fmt: Pick<WireFormat, 'name'>,
  up: Pick<UpstreamTarget, 'kind'>,
) => ProviderClient | null;

/** Per provider kind, the translating client of each client format it does not speak (formats/registry.ts). */
const TRANSLATED = Object.fromEntries(
  Object.entries(PROVIDER_ADAPTERS).map(([kind, entry]) => [
    kind,
    Object.fromEntries(
      Object.entries(CLIENT_ADAPTERS)
        .filter(([format]) => !entry.native(format))
        .map(([format, client]) => [format, translatingClient({ client, provider: entry.adapter })]),
    ) as Partial<Record<string, ProviderClient>>,
  ]),
) as Record<string, Partial<Record<string, ProviderClient>>>;

export const clientFor: ClientFor = (fmt, up) => {
  const entry = PROVIDER_ADAPTERS[up.kind];
  if (entry.native(fmt.name)) return entry.adapter.client;
  return TRANSLATED[up.kind][fmt.name] ?? null;
};

/** The 400 for a model whose own provider cannot serve the client's API (before anything is held). */
export const unservable = (fmt: Pick<WireFormat, 'name'>) =>
  invalid(
    `This model is served by an Anthropic provider, which has no ${fmt.name} API.`,
    'model',
    'unsupported_parameter',
  );
