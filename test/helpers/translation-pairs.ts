import {
  AnthropicStreamDecoder,
  anthropicProvider,
} from '../../src/modules/proxy/formats/anthropic-provider.js';
import { chatClient, ChatStreamEncoder, chatUsage } from '../../src/modules/proxy/formats/chat-client.js';
import { Dropped, sortFields } from '../../src/modules/proxy/formats/field-policy.js';
import { TranslatedStream } from '../../src/modules/proxy/formats/hub.js';
import { messagesClient, MessagesStreamEncoder } from '../../src/modules/proxy/formats/messages-client.js';
import type { ClientAdapter, ProviderAdapter } from '../../src/modules/proxy/formats/neutral.js';
import { ChatStreamDecoder, openAiProvider } from '../../src/modules/proxy/formats/openai-provider.js';
import {
  responsesToolNames,
  responsesUsage,
  ResponsesStreamEncoder,
} from '../../src/modules/proxy/formats/responses-answer.js';
import { responsesClient } from '../../src/modules/proxy/formats/responses-client.js';

/**
 * The three translated routes the service serves (chat and Responses on an Anthropic provider, Messages
 * on an OpenAI-compatible one), each as client adapter → neutral → provider adapter, under names that say
 * which way they go: what test/translate.test.ts exercises directly.
 */

type Body = Record<string, any>;

interface RequestOptions {
  model: string;
  maxTokens: number;
  reasoning?: boolean;
  dropped?: Dropped;
  capField?: 'max_tokens' | 'max_completion_tokens';
}

function request(client: ClientAdapter, provider: ProviderAdapter, body: Body, o: RequestOptions): Body {
  const dropped = o.dropped ?? new Dropped();
  sortFields(client.format, body, dropped);
  const neutral = client.requestIn(body, { model: o.model, maxTokens: o.maxTokens, dropped });
  return provider.requestOut(neutral, {
    capParameter: o.capField === 'max_tokens' ? 'MAX_TOKENS' : 'MAX_COMPLETION_TOKENS',
    reasoning: o.reasoning ?? false,
    dropped,
  });
}

export const chatRequestToMessages = (body: Body, o: RequestOptions) =>
  request(chatClient, anthropicProvider, body, o);
export const responsesRequestToMessages = (body: Body, o: RequestOptions) =>
  request(responsesClient, anthropicProvider, body, o);
export const messagesRequestToChat = (body: Body, o: RequestOptions) =>
  request(messagesClient, openAiProvider, body, o);

export const messagesAnswerToChat = (
  json: Body,
  o: { model: string; jsonTool?: boolean; id?: string; created?: number },
) =>
  chatClient.answerOut(anthropicProvider.answerIn(json, { jsonSchema: o.jsonTool ?? false }), {
    model: o.model,
    body: {},
    id: o.id,
    created: o.created,
  });

export const messagesAnswerToResponse = (
  json: Body,
  o: { model: string; request?: Body; id?: string; createdAt?: number },
) =>
  responsesClient.answerOut(
    anthropicProvider.answerIn(json, { jsonSchema: responsesToolNames(o.request).jsonTool !== null }),
    { model: o.model, body: o.request ?? {}, id: o.id, created: o.createdAt },
  );

export const chatAnswerToMessages = (json: Body, o: { model: string; id?: string }) =>
  messagesClient.answerOut(openAiProvider.answerIn(json, { jsonSchema: false }), {
    model: o.model,
    body: {},
    id: o.id,
  });

export class MessagesToChatStream extends TranslatedStream {
  constructor(o: {
    model: string;
    includeUsage: boolean;
    jsonTool?: boolean;
    id?: string;
    created?: number;
  }) {
    super(
      new AnthropicStreamDecoder({ jsonSchema: o.jsonTool ?? false }),
      new ChatStreamEncoder({
        model: o.model,
        body: {},
        includeUsage: o.includeUsage,
        id: o.id,
        created: o.created,
      }),
    );
  }
  /** The provider's `stop_reason`. */
  get stopReason(): string | null {
    return (this.decoder as AnthropicStreamDecoder).stopReason;
  }
  chatUsage() {
    return this.usage ? chatUsage(this.usage) : null;
  }
}

export class MessagesToResponsesStream extends TranslatedStream {
  constructor(o: { model: string; request?: Body; id?: string; createdAt?: number }) {
    super(
      new AnthropicStreamDecoder({ jsonSchema: responsesToolNames(o.request).jsonTool !== null }),
      new ResponsesStreamEncoder({ model: o.model, body: o.request ?? {}, id: o.id, created: o.createdAt }),
    );
  }
  responsesUsage() {
    return this.usage ? responsesUsage(this.usage) : null;
  }
}

export class ChatToMessagesStream extends TranslatedStream {
  constructor(o: { model: string; inputTokens?: number; id?: string }) {
    super(new ChatStreamDecoder(), new MessagesStreamEncoder({ ...o, body: {} }));
  }
}
