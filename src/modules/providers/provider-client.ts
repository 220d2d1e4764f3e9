import type { Dispatcher, FormData } from 'undici';

/**
 * The field that carries the completion cap of a chat request whose client sent none (docs/reference.md
 * §13 "Cap sent upstream"): `max_completion_tokens` (OpenAI's current field; its reasoning models refuse
 * `max_tokens`), or `max_tokens` for older OpenAI-compatible servers that only know that one.
 */
export const CAP_PARAMETERS = ['MAX_COMPLETION_TOKENS', 'MAX_TOKENS'] as const;
export type CapParameter = (typeof CAP_PARAMETERS)[number];
export const DEFAULT_CAP_PARAMETER: CapParameter = 'MAX_COMPLETION_TOKENS';

/**
 * docs/reference.md §15 "Providers": `OPENAI` is any OpenAI-compatible API (chat completions, Responses,
 * embeddings); `ANTHROPIC` is Anthropic's Messages API.
 */
export const PROVIDER_KINDS = ['OPENAI', 'ANTHROPIC'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** The provider a model without a `provider` of its own is served by (docs/reference.md §15 "Routing"). */
export const DEFAULT_PROVIDER = 'default';
/** The platform's built-in provider, as a SHARED paywall's routes name it (docs/reference.md §8, §15). */
export const BUILTIN_PROVIDER = 'builtin';

/** What the proxy needs of a paywall's provider (see ProviderService.route). */
export interface UpstreamTarget {
  /** The provider's name in its paywall (`default`, `builtin` for the platform's built-in provider). */
  name: string;
  kind: ProviderKind;
  /** e.g. `http://127.0.0.1:PORT/v1`, no trailing slash. */
  baseUrl: string;
  /** The provider's key (decrypted); sent upstream, never shown to clients. */
  apiKey: string;
  /** A keep-alive connection pool to the provider's origin. */
  dispatcher?: Dispatcher | null;
  /** Where a chat request's cap goes when the client sent none (see {@link CAP_PARAMETERS}). */
  capParameter: CapParameter;
}

export interface UpstreamResponse {
  status: number;
  contentType: string;
  /** The announced `content-length`, or null. */
  contentLength: number | null;
  /** The provider's `retry-after` (passed on with a refusal), or null. */
  retryAfter: string | null;
  body: Dispatcher.ResponseData['body'];
  /** Headers this service adds to the client's answer (a translation's `x-paywall-dropped-fields`). */
  answerHeaders?: Record<string, string>;
}

export interface UpstreamOptions {
  stream: boolean;
  signal: AbortSignal;
  /** Idle limit: time to the response headers, and between two body chunks (UPSTREAM_TIMEOUT_MS). */
  timeoutMs: number;
  /** Paywall Proxy instances the request already went through (loop detection). */
  via?: string[];
  /** UPSTREAM_MAX_BYTES: a client that reads a whole answer itself (translation) stops there. */
  maxBytes?: number;
  /**
   * Headers of the client's request that a provider kind passes on (Anthropic: `anthropic-version`,
   * `anthropic-beta`); each kind takes only the ones it knows, never the client's key.
   */
  clientHeaders?: Record<string, string>;
  /** A multipart body sent instead of the JSON payload (image edits, transcription). */
  form?: FormData;
  /** The `accept` header (default: JSON, or SSE for a stream); audio answers take any type. */
  accept?: string;
  /**
   * The completion cap the hold affords, for a translation that must send one when the client's body has
   * none (Anthropic requires `max_tokens`).
   */
  holdCap?: number;
  /** The model the client asked for (a translated answer names it, not the provider's model). */
  clientModel?: string;
  /** The model reasons (a translation maps thinking ↔ reasoning effort only then, docs/reference.md §21). */
  reasoning?: boolean;
  /** The service's count of the input (a translated Messages stream's `message_start` carries it). */
  inputTokens?: number;
  /**
   * Top-level fields of the client's body that hold the end user's id (`user`, `metadata`) and so may be
   * missing from the payload: a translation names them in `x-paywall-dropped-fields` (docs/reference.md
   * §21).
   */
  clientDropped?: readonly string[];
  /**
   * The top-level fields the client's body holds (not null): a translation names in
   * `x-paywall-dropped-fields` only what the client sent, never a field the service itself added to the
   * payload (a stream's `stream_options.include_usage`, which meters it).
   */
  clientFields?: readonly string[];
}

/**
 * One kind of model provider, as the metered call sees it: how a request body reaches it. The
 * OpenAI-compatible kind (upstream-client.ts) takes each OpenAI wire format's body as it is; the
 * Anthropic kind (anthropic-client.ts) takes Messages bodies, with Anthropic's own auth and version
 * headers. A client format the kind does not speak goes through the proxy's translation hub
 * (proxy/formats/: one adapter per client format and per provider kind, to and from a neutral model).
 */
export interface ProviderClient {
  readonly kind: ProviderKind;
  /**
   * Throws the 400 naming the field when the client's body cannot be sent to this provider (a
   * translation's limits), before anything is held. Absent: every body can. `reasons`: the model reasons
   * (its reasoning fields are translated). Answers whether the body, as translated for this provider,
   * asks for extended thinking (then the cap it is sent with must leave room for thinking's budget).
   */
  validate?(
    body: Record<string, unknown>,
    up: Pick<UpstreamTarget, 'capParameter'>,
    reasons: boolean,
  ): { thinks: boolean };
  /** POSTs `payload` to `endpoint` under the provider's base URL; only the provider's own key goes along. */
  post(
    up: UpstreamTarget,
    endpoint: string,
    payload: string,
    opts: UpstreamOptions,
  ): Promise<UpstreamResponse>;
}
