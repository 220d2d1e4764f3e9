import type { Dropped, Effort, SourceFormat } from './field-policy.js';
import type { ProviderClient } from '../../providers/provider-client.js';
import type { Json } from './common.js';

/**
 * The neutral model every translation goes through (docs/translation.md, docs/architecture.md "Adding a
 * provider kind"): a client format's adapter reads its request into a {@link NeutralRequest}, a provider
 * kind's adapter writes that as its own wire body; the provider's answer and stream come back as a
 * {@link NeutralAnswer} and {@link StreamEvent}s, which the client format's adapter writes in its own
 * shape. A translated call is client adapter → neutral → provider adapter, and back. Native calls (the
 * client speaks the provider's API) never come here.
 */

// ---------------------------------------------------------------------------------------------------
// Requests

/** An image, as a client sent it. */
export type ImageSource =
  | { kind: 'base64'; mediaType: string; data: string }
  | { kind: 'url'; url: string }
  /** A file uploaded to the provider (Anthropic's `file` source): only its own kind can take it. */
  | { kind: 'file'; raw: Json };

/** The content of a tool result: text, or (Messages) blocks some providers take. */
export type ToolResultContent = string | Json[];

/** One part of a message. `param` names where the client sent it (a 400 about it names that). */
export type Part =
  | { type: 'text'; text: string }
  | { type: 'image'; source: ImageSource; param: string }
  /** A tool call (in an answer: the provider's id and name, as it sent them). */
  | { type: 'tool_use'; id: string; name: string; input: Json }
  | { type: 'tool_result'; toolUseId: string; content: ToolResultContent; param: string }
  /** An earlier answer's thinking (kept for the kinds that take it back; others leave it out). */
  | { type: 'thinking'; text: string; signature?: string; redacted?: boolean };

/**
 * A turn of the conversation. Tool results are parts of a user turn (consecutive results answer one
 * assistant turn). `content` is a string where the client sent plain text.
 */
export interface Message {
  role: 'user' | 'assistant';
  content: string | Part[];
}

/** A function tool the model may call. */
export interface Tool {
  name: string;
  description?: string;
  /** Its input's JSON schema (an empty object schema when the client gave none). */
  inputSchema: Json;
}

/** How the model must use the tools: as it likes, at least one, a named one, none. */
export type ToolChoice =
  { type: 'auto' } | { type: 'any' } | { type: 'none' } | { type: 'tool'; name: string };

/** A request for reasoning (OpenAI's effort, Anthropic's thinking). */
export interface Reasoning {
  /** The effort asked for; null when the client's value names none of the three. */
  effort: Effort | null;
  /** A thinking budget the client gave in tokens, if it did. */
  budgetTokens?: number;
  /** The client's fields that asked for it: named as dropped when it cannot be sent. */
  fields: string[];
}

export interface NeutralRequest {
  /** The model id sent to the provider. */
  model: string;
  /** The system prompt's pieces, in order (joined by the provider adapter; empty pieces are possible). */
  system: string[];
  messages: Message[];
  tools?: Tool[];
  toolChoice?: ToolChoice;
  /** false: at most one tool call per turn (the client said so). */
  parallelToolCalls?: boolean;
  /** The completion cap (the client's, else the hold's). */
  maxTokens: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  stop?: string[];
  reasoning?: Reasoning;
  /** The answer's text must be a JSON object of this schema. */
  jsonSchema?: Json;
  stream?: boolean;
}

// ---------------------------------------------------------------------------------------------------
// Answers

/**
 * Why the answer ended: it was complete (`end`, a stop sequence included), it hit the cap or the context
 * window (`length`), it calls tools (`tool_use`), the provider refused (`refusal`).
 */
export type StopReason = 'end' | 'length' | 'tool_use' | 'refusal';

/** Token counts: the input read neither from nor into the cache, the cache parts, the output. */
export interface Usage {
  input: number;
  cacheRead: number;
  cacheWrite: number;
  output: number;
  /** The part of the output spent thinking / reasoning. */
  thinking: number;
}

/** The parts an answer holds: text, tool calls, thinking. */
export type AnswerPart = Extract<Part, { type: 'text' | 'tool_use' | 'thinking' }>;

export interface NeutralAnswer {
  /** The provider's id without its format's prefix (`msg_`, `chatcmpl-`), or null when it sent none. */
  id: string | null;
  content: AnswerPart[];
  /** null: the generation ended in the provider's error. */
  stop: StopReason | null;
  usage: Usage | null;
}

/** A provider's error body, read. */
export interface NeutralError {
  type: string | null;
  message: string | null;
}

// ---------------------------------------------------------------------------------------------------
// Streams

/**
 * What a provider's stream says, in order. `index` numbers the answer's parts; a part starts, gets
 * deltas, ends. `usage` carries the counts so far (the latest replaces the earlier); `stop` says why the
 * generation ended (null: in the provider's error); `finish` is the provider's terminal event.
 */
export type StreamEvent =
  | { type: 'start'; id: string | null }
  | { type: 'part_start'; index: number; part: StreamPartStart }
  | { type: 'text_delta'; index: number; text: string }
  | { type: 'tool_delta'; index: number; args: string }
  | { type: 'thinking_delta'; index: number; text: string }
  | { type: 'part_end'; index: number }
  | { type: 'usage'; usage: Usage }
  | { type: 'stop'; stop: StopReason | null }
  | { type: 'finish' }
  | { type: 'error'; error: NeutralError };

/** A part as its stream opens it (a tool call's arguments so far, as JSON text). */
export type StreamPartStart =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: unknown; name: unknown; args: string }
  | { type: 'thinking' }
  /** A part no client format has an equivalent for (a provider's server tool call). */
  | { type: 'other' };

/** Reads a provider's SSE text, fed in pieces split anywhere, as neutral events. */
export interface StreamDecoder {
  feed(text: string, emit: (e: StreamEvent) => void): void;
  /** The provider's body ended (with or without its terminal event): what is still owed. */
  end(emit: (e: StreamEvent) => void): void;
}

/** Writes neutral events as a client format's SSE text. */
export interface StreamEncoder {
  /** The text for one event ('' when nothing). */
  write(e: StreamEvent): string;
  /** The client's terminal event was written. */
  readonly done: boolean;
  /** The answer finished (it was not cut off, not ended in an error). */
  readonly finished: boolean;
  /** The provider reported an error in the stream. */
  readonly upstreamError: boolean;
  /** The latest counts. */
  readonly usage: Usage | null;
  /** What the client reads after the provider's stream ended (chat's `[DONE]`), if anything. */
  tail(): string;
}

// ---------------------------------------------------------------------------------------------------
// Adapters

/** What a client adapter needs to read a request besides the body. */
export interface RequestInContext {
  /** The model id sent to the provider. */
  model: string;
  /** The output cap (the client's, else the hold's). */
  maxTokens: number;
  dropped: Dropped;
}

/** What a client adapter needs to write an answer or a stream. */
export interface ClientAnswerContext {
  /** The model the client asked for (the answer names it). */
  model: string;
  /** The client's request body (a Responses answer echoes its settings). */
  body: Json;
  /** The service's count of the input (a Messages stream's `message_start` carries it). */
  inputTokens?: number;
  /** The answer's id (default: the provider's, with the client format's prefix). */
  id?: string;
  /** The answer's time (Unix seconds; default: now). */
  created?: number;
}

/** One client format (chat completions, Responses, Messages) to and from the neutral model. */
export interface ClientAdapter {
  format: SourceFormat;
  /** The body's fields that carry the completion cap (the smallest is taken). */
  capFields: string[];
  /** The client's body (its fields already sorted by the field policy) as a neutral request, or a 400. */
  requestIn(body: Json, ctx: RequestInContext): NeutralRequest;
  answerOut(answer: NeutralAnswer, ctx: ClientAnswerContext): Json;
  streamOut(ctx: ClientAnswerContext): StreamEncoder;
  /** A provider's error in the client's shape (`status`: the provider's HTTP status, when known). */
  errorOut(error: NeutralError, status?: number): string;
}

/** What a provider adapter needs to write a request besides the neutral one. */
export interface RequestOutContext {
  /** Where an OpenAI-compatible provider takes the cap (docs/reference.md §13 "Cap sent upstream"). */
  capParameter: 'MAX_COMPLETION_TOKENS' | 'MAX_TOKENS';
  /** The model reasons (reasoning is sent only then, else dropped and named). */
  reasoning: boolean;
  dropped: Dropped;
}

/** What a provider adapter needs to read an answer or a stream. */
export interface ProviderAnswerContext {
  /** The request asked for a JSON schema answer (a kind may have sent it as a forced tool). */
  jsonSchema: boolean;
}

/** One provider kind's wire (OpenAI's chat completions, Anthropic's Messages) to and from the neutral model. */
export interface ProviderAdapter {
  /** How a body reaches the provider (its auth headers). */
  client: ProviderClient;
  /** The provider's endpoint under its base URL for this request. */
  endpoint(request: NeutralRequest): string;
  /** The provider's body for a neutral request, or a 400 naming the client's field it cannot take. */
  requestOut(request: NeutralRequest, ctx: RequestOutContext): Json;
  answerIn(json: Json, ctx: ProviderAnswerContext): NeutralAnswer;
  streamIn(ctx: ProviderAnswerContext): StreamDecoder;
  /** A provider's error body, read; null when it is not one of its errors. */
  errorIn(text: string): NeutralError | null;
}
