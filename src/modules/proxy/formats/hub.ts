import type { Json } from './common.js';
import { sortFields } from './field-policy.js';
import type {
  ClientAdapter,
  ClientAnswerContext,
  NeutralRequest,
  ProviderAdapter,
  RequestOutContext,
  StreamDecoder,
  StreamEncoder,
  StreamEvent,
  Usage,
} from './neutral.js';

/**
 * The hub (docs/translation.md, docs/architecture.md "Adding a provider kind"): a translated call is the
 * client format's adapter → the neutral model → the provider kind's adapter, and back for answers, streams
 * and errors. The field policy (field-policy.ts) is applied here, once, before the client adapter reads
 * the body. Pure functions and stream transformers: no I/O.
 */

/** A client format served by a provider kind that speaks another. */
export interface Route {
  client: ClientAdapter;
  provider: ProviderAdapter;
}

/** The completion cap the client's body sets (chat: the smaller of its two fields), else the hold's. */
function capOf(body: Json, fields: string[], holdCap: number): number {
  const caps = fields.map((f) => body[f]).filter((v): v is number => typeof v === 'number');
  return caps.length > 0 ? Math.min(...caps) : holdCap;
}

/** What a request translation needs besides the body. */
export interface TranslateContext extends RequestOutContext {
  /** The hold's cap, for a client body without one (Anthropic requires `max_tokens`). */
  holdCap: number;
}

/**
 * The client's body as the neutral request and the provider's body: throws the 400 of a refused field
 * (the field policy) or of one an adapter cannot carry; notes the dropped fields in `ctx.dropped`.
 */
export function translateRequest(
  route: Route,
  body: Json,
  ctx: TranslateContext,
): { neutral: NeutralRequest; request: Json } {
  sortFields(route.client.format, body, ctx.dropped);
  const neutral = route.client.requestIn(body, {
    model: body.model as string,
    maxTokens: capOf(body, route.client.capFields, ctx.holdCap),
    dropped: ctx.dropped,
  });
  return { neutral, request: route.provider.requestOut(neutral, ctx) };
}

/** The provider's answer as the client's. */
export function translateAnswer(
  route: Route,
  json: Json,
  neutral: NeutralRequest,
  ctx: ClientAnswerContext,
): Json {
  const answer = route.provider.answerIn(json, { jsonSchema: neutral.jsonSchema !== undefined });
  return route.client.answerOut(answer, ctx);
}

/** The provider's error body as the client's (the text as is when it is not one of the provider's errors). */
export function translateError(route: Route, text: string, status?: number): string {
  const error = route.provider.errorIn(text);
  return error ? route.client.errorOut(error, status) : text;
}

/**
 * The provider's stream as the client's, fed in pieces split anywhere: the provider adapter's decoder
 * reads neutral events, the client adapter's encoder writes them.
 */
export class TranslatedStream {
  constructor(
    protected readonly decoder: StreamDecoder,
    protected readonly encoder: StreamEncoder,
  ) {}

  private out = '';
  private readonly write = (e: StreamEvent): void => {
    this.out += this.encoder.write(e);
  };

  private take(): string {
    const out = this.out;
    this.out = '';
    return out;
  }

  /** Feeds the provider's text; returns the client's text for it ('' when nothing). */
  feed(text: string): string {
    this.decoder.feed(text, this.write);
    return this.take();
  }

  /** The provider's body ended: what the client still reads (a closing event, chat's `[DONE]`). */
  end(): string {
    this.decoder.end(this.write);
    return this.take() + this.encoder.tail();
  }

  /** The client's terminal event was written. */
  get done(): boolean {
    return this.encoder.done;
  }
  get finished(): boolean {
    return this.encoder.finished;
  }
  get upstreamError(): boolean {
    return this.encoder.upstreamError;
  }
  get usage(): Usage | null {
    return this.encoder.usage;
  }
}

/** The stream of a translated call. */
export function translateStream(
  route: Route,
  neutral: NeutralRequest,
  ctx: ClientAnswerContext,
): TranslatedStream {
  return new TranslatedStream(
    route.provider.streamIn({ jsonSchema: neutral.jsonSchema !== undefined }),
    route.client.streamOut(ctx),
  );
}
