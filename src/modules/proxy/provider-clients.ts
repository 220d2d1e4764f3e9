import { invalid } from '../../shared/errors.js';
import {
  PROVIDER_KINDS,
  type ProviderClient,
  type ProviderKind,
  type UpstreamTarget,
} from '../providers/provider-client.js';
import type { SourceFormat } from './formats/field-policy.js';
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

/** The client for a wire format on a kind: the kind's own (native), a translating one, or none. */
function choose(format: string, kind: ProviderKind): ProviderClient | null {
  const entry = PROVIDER_ADAPTERS[kind];
  if (entry.native(format)) return entry.adapter.client;
  const client = Object.hasOwn(CLIENT_ADAPTERS, format) ? CLIENT_ADAPTERS[format as SourceFormat] : null;
  return client ? translatingClient({ client, provider: entry.adapter }) : null;
}

/** The choices made, per kind and wire format (a lookup per request on the hot path, not a decision). */
const CHOSEN = new Map<ProviderKind, Map<string, ProviderClient | null>>(
  PROVIDER_KINDS.map((kind) => [kind, new Map()]),
);

export const clientFor: ClientFor = (fmt, up) => {
  const byFormat = CHOSEN.get(up.kind)!;
  let client = byFormat.get(fmt.name);
  if (client === undefined) byFormat.set(fmt.name, (client = choose(fmt.name, up.kind)));
  return client;
};

/** The 400 for a model whose own provider cannot serve the client's API (before anything is held). */
export const unservable = (fmt: Pick<WireFormat, 'name'>) =>
  invalid(
    `This model is served by an Anthropic provider, which has no ${fmt.name} API.`,
    'model',
    'unsupported_parameter',
  );
