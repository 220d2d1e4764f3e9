import type { ReportedUsage, UsageBuckets } from '../../shared/usage-buckets.js';
import type { BlockedReply } from './blocked-reply.js';
import type { FormData } from 'undici';
import type { UpstreamTarget } from '../providers/provider-client.js';
import type { MediaUnits } from '../../shared/media-units.js';
import type { ModelPriceInfo } from '../catalog/catalog-model.js';
import type { ImageBiller } from './token-counter.js';

import type { Charged } from './sse-relay.js';

export type { Charged };

/** How the body sent to one provider differs from the client's. */
export interface UpstreamBodyOptions extends Pick<UpstreamTarget, 'capParameter'> {
  /** The model id sent to the provider. */
  model: string;
}

/** What the metered core needs of a validated request, whatever its wire format. */
export interface MeteredRequest {
  model: string;
  stream: boolean;
  /** Choices the hold covers (chat `n`; 1 for the Responses API; 0 for embeddings, which complete nothing). */
  n: number;
  /** The client's own output cap, or null. */
  clientMaxTokens: number | null;
  /** Prompt tokens counted with the tokenizer (the hold, and settlement without usage). */
  promptEstimate: number;
  /** The client's body, passed through except for the fields the format manages. */
  body: Record<string, unknown>;
}

/** Relays one upstream event stream to the client, metering it. */
export interface StreamRelay {
  /** Feeds upstream text; returns what to write to the client now ('' when nothing). */
  feed(text: string): string;
  /** The upstream's terminal event arrived (stop reading). */
  readonly done: boolean;
  /** The answer ended normally even without a terminal event (chat: a finish_reason was seen). */
  readonly finished: boolean;
  /** The upstream sent an error event (chat: or a choice ended with `finish_reason: "error"`). */
  readonly upstreamError: boolean;
  /** The upstream's usage, or null when it sent none. */
  usageTokens(): ReportedUsage | null;
  /** Completion tokens of what was relayed, counted with the tokenizer. */
  producedTokens(): number;
  /**
   * The same, counted incrementally (only what arrived since the last call is tokenized): for the
   * progress a long stream records now and then. May differ from producedTokens by a token per call.
   */
  progressTokens(): number;
  /** The answer's id (Responses: `resp_…`), when the format keeps one. */
  responseId?(): unknown;
}

/**
 * One client wire format served by the metered core (ProxyService): chat completions, the Responses
 * API, embeddings (OpenAI's) or Messages (Anthropic's). The core owns the money (hold, cap, settlement, events); a format only knows how
 * its requests, answers, streams and payment-blocked replies look.
 */
export interface WireFormat<R extends MeteredRequest = MeteredRequest> {
  readonly name:
    | 'chat'
    | 'responses'
    | 'embeddings'
    | 'messages'
    | 'image_generations'
    | 'image_edits'
    | 'transcriptions'
    | 'translations'
    | 'speech';
  /** Path under the provider's base URL, e.g. `/chat/completions`. */
  readonly upstreamPath: string;
  /** Validates the client's body (400s name the field). */
  parse(body: unknown): R;
  /**
   * The prompt estimate when another provider kind than the format's own bills it (a translated
   * request: its images are billed by that kind's formula, docs/reference.md §13). Optional: parse's.
   */
  countPrompt?(req: R, biller: ImageBiller): number;
  /**
   * The body sent upstream with the completion cap `cap` (never the end user's id): `up.model` is the
   * model id the provider knows (docs/reference.md §15 "Routing"); `up.capParameter` names chat's cap
   * field when the client sent none. `cap` is the hold's: the cap sent is the cap held (§20).
   */
  upstreamBody(req: R, cap: number, up: UpstreamBodyOptions): string;
  /** A multipart body to send instead (image edits, transcription; docs/reference.md §22). Optional. */
  upstreamForm?(req: R, model: string): FormData;
  /**
   * What a whole answer (null: a non-JSON one) is charged for besides tokens (docs/reference.md §22:
   * images, seconds of audio, characters), given the usage it reported; null when charged by tokens
   * only. Optional: chat-like formats charge tokens.
   */
  units?(
    req: R,
    json: Record<string, any> | null,
    reported: ReportedUsage | null,
    price: ModelPriceInfo,
  ): MediaUnits | null;
  /** The usage a whole answer reports (absent fields when the provider did not send them). */
  jsonUsage(json: Record<string, any>): ReportedUsage | null;
  /**
   * The token buckets a whole answer without `usage` is charged, for a model priced per token and
   * charged no units (images and audio, docs/reference.md §22): what can be counted is counted, the rest
   * taken at the hold's bound. Optional: chat-like formats count the completion (`countJson`).
   */
  countedUsage?(req: R, json: Record<string, any>): UsageBuckets;
  /**
   * The whole answer ended as an answer does (chat: a choice has a finish_reason; Responses: status
   * completed or incomplete), not in an error or with an empty finish reason.
   */
  jsonFinished(json: Record<string, any>): boolean;
  /**
   * The whole answer ended in the provider's error (chat: `finish_reason: "error"` or an `error` field;
   * Responses: status `failed`): with no output it is a failed request, charged nothing. Optional.
   */
  jsonEndedInError?(json: Record<string, any>): boolean;
  /**
   * Why a whole 2xx answer is not an answer of this format at all (embeddings: no `data` list), or null.
   * Such an answer is a failed request: nothing is charged and the client gets a 502. Optional.
   */
  malformed?(json: Record<string, any>): string | null;
  /** Completion tokens of a whole answer, counted with the tokenizer. */
  countJson(json: Record<string, any>): number;
  /**
   * Writes usage (the upstream's, else the metered counts) with `cost` and `cost_details` into a whole
   * answer.
   */
  addCost(json: Record<string, any>, usage: UsageBuckets, charged: Charged): void;
  /** A relay for a stream (its final usage is written by `streamEnd`, after settlement). */
  relay(req: R): StreamRelay;
  /** What ends a completed stream, written after settlement (`[DONE]`, the held-back completed event). */
  streamEnd(req: R, relay: StreamRelay, usage: UsageBuckets, charged: Charged): string;
  /**
   * The terminal error event of a stream cut mid-way: `code` is `upstream_error` when the provider
   * failed or timed out, `shutdown` when this service stopped.
   */
  streamError(relay: StreamRelay, message: string, code: string): string;
  /** A payment-blocked reply as a whole answer, and as a whole event stream (docs/reference.md §6, §11). */
  blockedJson(reply: BlockedReply): Record<string, unknown>;
  /** The status and headers of that whole answer: 200 and none unless given (embeddings: 402 or 429). */
  blockedHttp?(reply: BlockedReply): { status: number; headers?: Record<string, string> };
  blockedStream(reply: BlockedReply, req: R): string;
  /**
   * The body of a provider's 4xx passed on to the client, in this format's error shape (`body`: the
   * provider's parsed answer, or null). Optional: OpenAI's error object (upstream-refusal.ts) otherwise.
   */
  refusalBody?(status: number, body: unknown): Record<string, any>;
}

export const isObject = (v: unknown): v is Record<string, any> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
/**
 * Token counts are stored as int4 (`charge.prompt_tokens`): a provider's count above it is taken as this
 * maximum. Its cost is far beyond any hold, so the charge is the hold and the whole free balance either
 * way, and the rest is recorded as uncollected.
 */
export const MAX_TOKEN_COUNT = 2_147_483_647;

/** A provider's token count: a non-negative integer (huge or unsafe ones clamped), else null (counted here). */
export const tokenCount = (v: unknown): number | null =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? Math.min(v, MAX_TOKEN_COUNT) : null;
