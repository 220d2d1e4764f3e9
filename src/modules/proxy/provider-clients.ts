import { invalid } from '../../shared/errors.js';
import type { ProviderClient, UpstreamTarget } from './provider-client.js';
import { anthropicClient } from './anthropic-client.js';
import { openAiCompatibleClient } from './upstream-client.js';
import type { WireFormat } from './wire-format.js';

/**
 * Which ProviderClient carries a wire format's request to a provider of a kind (docs/reference.md §15
 * "Across formats"): the provider's own API as is where the client speaks it, else a translating one.
 * A pairing that cannot be served is a 400 before anything is held.
 */
export type ClientFor = (fmt: Pick<WireFormat, 'name'>, up: Pick<UpstreamTarget, 'kind'>) => ProviderClient;

export const clientFor: ClientFor = (fmt, up) => {
  if (fmt.name === 'messages') {
    if (up.kind === 'ANTHROPIC') return anthropicClient;
    throw invalid(
      'This model is served by an OpenAI-compatible provider; the Messages API (POST /v1/messages) needs a model on an ANTHROPIC provider.',
      'model',
      'unsupported_parameter',
    );
  }
  if (up.kind === 'OPENAI') return openAiCompatibleClient;
  throw invalid(
    `This model is served by an Anthropic provider, which the ${fmt.name} API cannot reach; use POST /v1/messages.`,
    'model',
    'unsupported_parameter',
  );
};
