import type { EventTrigger } from '../events/event.service.js';
import type { ModelPriceInfo } from '../catalog/catalog-model.js';
import type { ReserveResult } from '../ledger/holds.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import type { MeteredRequest, WireFormat } from './wire-format.js';
import type { MediaUnits } from '../../shared/media-units.js';
import type { ProviderClient, UpstreamTarget } from '../providers/provider-client.js';

/** One metered call (chat completion or Responses), from REST or GraphQL. */
export interface ChatCall {
  paywall: PaywallInfo;
  externalUserId: string;
  /** The client's JSON body (validated here). */
  body: unknown;
  /** Who acts, for events; default: the paywall's API key through the proxy. */
  trigger?: EventTrigger;
  /** Fires when the client goes away before the answer ended: the upstream request is aborted. */
  signal?: AbortSignal;
  /** Paywall Proxy instances the request already went through (VIA_HEADER), for loop detection. */
  via?: string[];
  /**
   * The client's headers a provider kind may pass on (Messages: `anthropic-version`, `anthropic-beta`;
   * see anthropic-client.ts), lower-case names. Never the client's key.
   */
  clientHeaders?: Record<string, string>;
  /** Told the name of the provider that answered (for the access log). */
  answeredBy?(provider: string): void;
  /** The end-user key the request came with (docs/reference.md §19): its limit applies, charges name it. */
  userKeyId?: string;
  /** Where an audio answer (speech) is relayed as it arrives (docs/reference.md §22). */
  mediaSink?: MediaSink;
  /**
   * `counted` is set when the hold's statement is run for this request: that statement counts it against
   * `RATE_LIMIT_PER_MINUTE` (docs/reference.md §10). A request refused before it is counted by its entry.
   * An object, so a copy of the call (`{...call}`) shares it.
   */
  rate?: { counted: boolean };
}

/** Where a binary answer goes as it arrives (speech), its cost in trailers once it ended. */
export interface MediaSink {
  /** Status 200 and the headers, flushed at once; the cost headers are announced as trailers. */
  open(headers: Record<string, string>): void;
  /** Writes at once; false when the client is slow (wait for `drain()`). */
  write(chunk: Uint8Array): boolean;
  drain(): Promise<void>;
  /** Ends the answer with these trailers (`x-paywall-cost`, `x-paywall-balance`). */
  end(trailers: Record<string, string>): void;
}

/** A whole answer: the completion, a payment-blocked reply, or a provider's 4xx passed through. */
export interface ChatJson {
  status: number;
  body: Record<string, any>;
  /**
   * Set when the answer charged the user: `x-paywall-cost` (USDC, = usage.cost) and
   * `x-paywall-balance` (the free balance after the charge, USDC). Also a provider's `retry-after`, and
   * an embeddings payment block's `x-should-retry: false`.
   */
  headers?: Record<string, string>;
  /** A text answer relayed as it came (a transcription's text, srt or vtt): written instead of `body`. */
  raw?: { contentType: string; text: string };
}

/** Where a streamed answer goes (the REST layer adapts the HTTP response to it). */
export interface StreamSink {
  /** Status 200 and the SSE headers (and `headers`, the answer's own), flushed at once. */
  open(headers?: Record<string, string>): void;
  /** Writes at once; false when the client is slow (wait for `drain()`). */
  write(chunk: string): boolean;
  /** Resolves when the client can take more, or has gone. */
  drain(): Promise<void>;
  end(): void;
}

/** `deadline`: UPSTREAM_MAX_DURATION_MS reached (idle timeouts are undici's, seen as failures). */
export type AbortReason = 'client' | 'deadline' | 'shutdown';
export type Outcome = 'completed' | 'failed' | 'canceled';

/** A forwarded request, from its hold to its settlement. */
export interface Flight {
  paywall: PaywallInfo;
  fmt: WireFormat<any>;
  req: MeteredRequest;
  externalUserId: string;
  /** ChatCall.userKeyId (null when none). */
  userKeyId: string | null;
  price: ModelPriceInfo;
  /** The providers to try, in order (docs/reference.md §15 "Fallbacks"); at least one. */
  route: UpstreamTarget[];
  /** The provider tried now, then the one that answered. */
  upstream: UpstreamTarget;
  /** The adapter that speaks to that provider's kind. */
  provider: ProviderClient;
  chargeId: string;
  trigger: EventTrigger;
  hold: ReserveResult;
  /** The prompt estimate the hold was computed from (the Responses API's earlier context included). */
  promptEstimate: number;
  /**
   * Usage the provider reported beyond what the request could produce, clamped away before charging
   * (settlement.usageOf; docs/reference.md §5.7): tokens over each bound, null when none.
   */
  overReported?: {
    input: number;
    output: number;
    /** Images answered beyond the `n` asked (docs/reference.md §22). */
    images?: number;
    /** Seconds reported beyond what the uploaded file can play. */
    audioSeconds?: number;
  } | null;
  /**
   * The model reasons (catalog `reasonsOf`, read once per request): its reasoning fields are translated
   * for a provider of the other kind, else dropped (docs/reference.md §21).
   */
  reasons: boolean;
  /** Headers every answer carries (`x-paywall-cap` when the cap sent differs from the client's). */
  answerHeaders: Record<string, string>;
  via: string[];
  /** ChatCall.clientHeaders (empty when none). */
  clientHeaders: Record<string, string>;
  controller: AbortController;
  reason: AbortReason | null;
  /** docs/reference.md §22: the images, seconds of audio or characters the answer is charged for. */
  units?: MediaUnits | null;
  /** A relayed audio answer's client left: the rest is read (not relayed) to size what was relayed. */
  clientGone?: boolean;
  /** Bytes of a binary answer relayed to the client so far. */
  relayedBytes?: number;
  settled: boolean;
  /** Resolves when the request has settled and answered. */
  done: Promise<void>;
  finish(): void;
}

/** Aborts the upstream request of a flight (once; not after it settled). */
export function abortFlight(f: Flight, reason: AbortReason): void {
  if (f.reason || f.settled) return;
  f.reason = reason;
  f.controller.abort();
}

/** undici's idle limits (UPSTREAM_TIMEOUT_MS): no headers, or no body data, in time. */
export const isTimeout = (e: unknown): boolean => {
  const code = (e as { code?: string } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
};
