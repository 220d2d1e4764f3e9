import type { BlockedReply } from './blocked-reply.js';
import type { UpstreamTarget } from './provider-client.js';

/** Token counts a request is charged for (docs/reference.md §5.2). */
export interface Tokens {
  prompt: number;
  completion: number;
}

/** What the metered core needs of a validated request, whatever its wire format. */
export interface MeteredRequest {
  model: string;
  stream: boolean;
  /** Choices the hold covers (chat `n`; 1 for the Responses API). */
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
  /** The upstream sent an error event. */
  readonly upstreamError: boolean;
  /** Token counts from the upstream's usage, or null when it sent none. */
  usageTokens(): Partial<Tokens> | null;
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
 * One OpenAI wire format served by the metered core (ProxyService): chat completions or the
 * Responses API. The core owns the money (hold, cap, settlement, events); a format only knows how
 * its requests, answers, streams and payment-blocked replies look.
 */
export interface WireFormat<R extends MeteredRequest = MeteredRequest> {
  readonly name: 'chat' | 'responses';
  /** Path under the provider's base URL, e.g. `/chat/completions`. */
  readonly upstreamPath: string;
  /** Validates the client's body (400s name the field). */
  parse(body: unknown): R;
  /**
   * The body sent upstream with the completion cap `cap` (never the end user's id); `up.capParameter`
   * names chat's cap field when the client sent none.
   */
  upstreamBody(req: R, cap: number, up: Pick<UpstreamTarget, 'capParameter'>): string;
  /** Token counts from a whole answer's usage (null fields when absent). */
  jsonUsage(json: Record<string, any>): Partial<Tokens> | null;
  /**
   * The whole answer ended as an answer does (chat: a choice has a finish_reason; Responses: status
   * completed or incomplete), not in an error or with an empty finish reason.
   */
  jsonFinished(json: Record<string, any>): boolean;
  /** Completion tokens of a whole answer, counted with the tokenizer. */
  countJson(json: Record<string, any>): number;
  /** Writes usage (the upstream's, else the metered counts) with `cost` into a whole answer. */
  addCost(json: Record<string, any>, tokens: Tokens, cost: string): void;
  /** A relay for a stream (its final usage is written by `streamEnd`, after settlement). */
  relay(req: R): StreamRelay;
  /** What ends a completed stream, written after settlement (`[DONE]`, the held-back completed event). */
  streamEnd(
    req: R,
    relay: StreamRelay,
    tokens: Tokens,
    charged: { cost: string; balance: string | null },
  ): string;
  /**
   * The terminal error event of a stream cut mid-way: `code` is `upstream_error` when the provider
   * failed or timed out, `shutdown` when this service stopped.
   */
  streamError(relay: StreamRelay, message: string, code: string): string;
  /** A payment-blocked reply as a whole answer, and as a whole event stream (docs/reference.md §6, §11). */
  blockedJson(reply: BlockedReply): Record<string, unknown>;
  blockedStream(reply: BlockedReply, req: R): string;
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
