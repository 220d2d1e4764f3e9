import type { ProviderKind } from '../../providers/provider-client.js';
import { anthropicProvider } from './anthropic-provider.js';
import { chatClient } from './chat-client.js';
import type { SourceFormat } from './field-policy.js';
import { messagesClient } from './messages-client.js';
import type { ClientAdapter, ProviderAdapter } from './neutral.js';
import { openAiProvider } from './openai-provider.js';
import { responsesClient } from './responses-client.js';

/**
 * The adapters of the hub (docs/architecture.md "Adding a provider kind"): one per client format, one per
 * provider kind, with the client formats each kind speaks natively (those calls never come to the hub).
 */

export const CLIENT_ADAPTERS: Readonly<Record<SourceFormat, ClientAdapter>> = {
  chat: chatClient,
  responses: responsesClient,
  messages: messagesClient,
};

export interface ProviderEntry {
  adapter: ProviderAdapter;
  /** The wire formats (wire-format.ts names) the kind serves as they are, untranslated. */
  native: (format: string) => boolean;
}

export const PROVIDER_ADAPTERS: Readonly<Record<ProviderKind, ProviderEntry>> = {
  OPENAI: { adapter: openAiProvider, native: (f) => f !== 'messages' },
  ANTHROPIC: { adapter: anthropicProvider, native: (f) => f === 'messages' },
};
