import { invalid } from '../../shared/errors.js';
import type { ProviderClient, UpstreamTarget } from '../providers/provider-client.js';
import { anthropicClient } from './anthropic-client.js';
import {
  chatToMessages,
  messagesToChat,
  responsesToMessages,
  translatingClient,
} from './translating-client.js';
import { openAiCompatibleClient } from './upstream-client.js';
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

const messagesOnOpenAi = translatingClient(openAiCompatibleClient, messagesToChat);
const chatOnAnthropic = translatingClient(anthropicClient, chatToMessages);
const responsesOnAnthropic = translatingClient(anthropicClient, responsesToMessages);

export const clientFor: ClientFor = (fmt, up) => {
  if (fmt.name === 'messages') return up.kind === 'ANTHROPIC' ? anthropicClient : messagesOnOpenAi;
  if (up.kind === 'OPENAI') return openAiCompatibleClient;
  if (fmt.name === 'chat') return chatOnAnthropic;
  if (fmt.name === 'responses') return responsesOnAnthropic;
  return null;
};

/** The 400 for a model whose own provider cannot serve the client's API (before anything is held). */
export const unservable = (fmt: Pick<WireFormat, 'name'>) =>
  invalid(
    `This model is served by an Anthropic provider, which has no ${fmt.name} API.`,
    'model',
    'unsupported_parameter',
  );
