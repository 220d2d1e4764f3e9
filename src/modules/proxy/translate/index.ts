/**
 * Translation between OpenAI's formats (chat completions, Responses) and Anthropic's Messages API
 * (docs/reference.md §15 "Across formats"; what maps to what: docs/translation.md). Pure functions and
 * stateful stream transformers: no I/O.
 */
export {
  chatRequestToMessages,
  messagesAnswerToChat,
  MessagesToChatStream,
  type ChatToMessagesOptions,
  type MessagesToChatOptions,
  type MessagesToChatStreamOptions,
} from './chat-to-messages.js';
export {
  responsesRequestToMessages,
  messagesAnswerToResponse,
  MessagesToResponsesStream,
  type ResponsesToMessagesOptions,
  type MessagesToResponsesOptions,
} from './responses-to-messages.js';
export {
  messagesRequestToChat,
  chatAnswerToMessages,
  ChatToMessagesStream,
  type MessagesToChatRequestOptions,
  type ChatToMessagesAnswerOptions,
} from './messages-to-chat.js';
export type { MessagesUsageCounts } from './common.js';
