import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../../shared/metrics.js';
import type { PaymentLinks } from './blocked-call.js';
import { chatFormat } from './chat-format.js';
import { embeddingsFormat } from './embeddings-format.js';
import { abortFlight, type ChatCall, type ChatJson, type Flight, type StreamSink } from './flight.js';
import { Forwarder } from './forward.js';
import { HoldSweeper } from './hold-sweeper.js';
import { LedgerBatch } from './ledger-batch.js';
import { meteredCall, type MeteredCallDeps } from './metered-call.js';
import type { EnsureUser } from './place-hold.js';
import { RelayedResponses } from './relayed-responses.js';
import { responsesFormat } from './responses-format.js';
import { Settlement, type SettlementDeps } from './settlement.js';
import { countMessagesPrompt, messagesFormat, withoutEndUser } from './messages-format.js';
import { checkBodyAndModel } from './chat-request.js';
import { modelNotFound } from '../catalog/catalog-model.js';
import { clientFor } from './provider-clients.js';
import { PROVIDER_ADAPTERS } from './formats/registry.js';
import { ProviderHealth } from '../providers/provider-health.js';
import { countRequest, MinuteCounter, RateLimitError, type RateState } from '../limits/rate-limit.js';
import { PromptTokenizer } from './prompt-tokenizer.js';
import { collectTexts } from './token-counter.js';
import type { WireFormat } from './wire-format.js';
import { isMultipart, MEDIA_FORMATS, type MediaKind } from './media-format.js';
import { probeAudio } from './audio-probe.js';
import { invalid } from '../../shared/errors.js';

export type { ChatCall, ChatJson, StreamSink } from './flight.js';
export { rejectionError } from './upstream-refusal.js';
export { MIN_COMPLETION_TOKENS } from './metered-call.js';

/** At shutdown, how long cut requests get to settle before their connections are closed. */
const CUT_WAIT_MS = 2_000;
/** A stream records what it produced on its hold at most this often (for the sweeper after a crash). */
export const PROGRESS_INTERVAL_MS = 5_000;

/** Waits for `p`, at most `ms`. */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** The configuration the proxy applies. */
export type ProxyLimits = Pick<
  Config,
  | 'SHUTDOWN_GRACE_MS'
  | 'UPSTREAM_TIMEOUT_MS'
  | 'UPSTREAM_MAX_DURATION_MS'
  | 'UPSTREAM_MAX_BYTES'
  | 'RATE_LIMIT_PER_MINUTE'
  | 'MAX_UNCOLLECTED_PER_USER'
  | 'PLATFORM_FEE_BPS'
  | 'COUNT_TOKENS_PER_MINUTE'
  | 'TOKEN_COUNT_DEADLINE_MS'
>;

/** What the proxy needs: the database, prices, providers, the end users' links, and the process's clock, log and metrics. */
export interface ProxyDeps {
  db: Database;
  catalog: MeteredCallDeps['prices'];
  providers: MeteredCallDeps['upstreams'];
  /** Connect and top-up links for blocked replies; first-time end users (UserService). */
  users: PaymentLinks & { ensureUser: EnsureUser };
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  limits: ProxyLimits;
  /** docs/reference.md §16 "Low balance": checked after each settlement that charged. */
  lowBalance?: SettlementDeps['lowBalance'];
  /** Auto top-up (docs/reference.md §16): told the free balance after each chat charge. */
  autoTopup?: SettlementDeps['autoTopup'];
}

/**
 * The metered proxy: chat completions, the Responses API and embeddings, each request held, forwarded, metered and
 * settled (metered-call.ts and its steps). This class owns what lives longer than one request: the
 * requests in flight (for a graceful stop), the group-commit ledger batch and the hold sweeper.
 */
export class ProxyService {
  private readonly flights = new Map<string, Flight>();
  private readonly ledger: LedgerBatch;
  private readonly sweeper: HoldSweeper;
  private readonly call: MeteredCallDeps;
  /** Every call to a provider goes through it (metered ones, and `count_tokens`). */
  private readonly forwarder: Forwarder;
  /** How each provider answered lately, as this instance forwarded (GraphQL `ProviderInfo.health`). */
  readonly health = new ProviderHealth();
  /** How often a stream records its progress on the hold (tests shorten it). */
  progressIntervalMs = PROGRESS_INTERVAL_MS;
  /** Counts prompts with bounded CPU on the event loop (small ones inline, large ones in workers). */
  readonly tokens: PromptTokenizer;
  /** COUNT_TOKENS_PER_MINUTE, per paywall key on this instance. */
  private readonly countCalls = new MinuteCounter();

  constructor(private readonly d: ProxyDeps) {
    const { db, log, metrics, limits } = d;
    this.tokens = new PromptTokenizer({ deadlineMs: limits.TOKEN_COUNT_DEADLINE_MS });
    this.ledger = new LedgerBatch(db);
    this.sweeper = new HoldSweeper({
      db,
      log,
      maxDurationMs: limits.UPSTREAM_MAX_DURATION_MS,
      inFlight: () => [...this.flights.keys()],
    });
    const settlement = new Settlement({
      db,
      ledger: this.ledger,
      log,
      metrics,
      platformFeeBps: limits.PLATFORM_FEE_BPS,
      health: this.health,
      lowBalance: d.lowBalance,
      autoTopup: d.autoTopup,
    });
    const relayed = new RelayedResponses(db);
    this.forwarder = new Forwarder({
      settlement,
      clients: clientFor,
      health: this.health,
      relayed,
      log,
      limits,
      progressIntervalMs: () => this.progressIntervalMs,
    });
    this.call = {
      db,
      clock: d.clock,
      prices: d.catalog,
      upstreams: d.providers,
      clients: clientFor,
      tokens: this.tokens,
      links: d.users,
      ensureUser: (sql, paywall, externalUserId, trigger) =>
        d.users.ensureUser(sql, paywall, externalUserId, trigger),
      ledger: this.ledger,
      relayed,
      forward: this.forwarder,
      limits,
      flights: this.flights,
    };
  }

  /** Releases holds a crashed instance left behind, now and every minute. */
  async start(): Promise<void> {
    await this.sweeper.start();
  }

  /**
   * Graceful stop: in-flight requests (streams included) finish and settle within SHUTDOWN_GRACE_MS;
   * the rest are aborted upstream and settled for what they produced.
   */
  async stop(): Promise<void> {
    this.sweeper.stop();
    const pending = () => [...this.flights.values()].map((f) => f.done);
    if (this.flights.size > 0) await within(Promise.all(pending()), this.d.limits.SHUTDOWN_GRACE_MS);
    for (const f of this.flights.values()) abortFlight(f, 'shutdown');
    await Promise.all(pending());
    await this.tokens.close();
  }

  /**
   * Aborts every request in flight (`shutdown`: a stream ends with the shutdown's error event) and
   * waits until they have settled and answered, at most CUT_WAIT_MS.
   */
  async cutInFlight(): Promise<void> {
    const pending = [...this.flights.values()].map((f) => {
      abortFlight(f, 'shutdown');
      return f.done;
    });
    await within(Promise.all(pending), CUT_WAIT_MS);
  }

  /** Number of requests between hold and settlement on this instance. */
  get inFlight(): number {
    return this.flights.size;
  }

  /** Group-commit counters: ledger statements run, the holds and settlements they carried, time spent. */
  get batchStats(): { batches: number; items: number; ms: number } {
    return this.ledger.stats;
  }

  /**
   * Settles abandoned holds (older than UPSTREAM_MAX_DURATION_MS + 5 min, not in flight here): for the
   * progress a stream recorded, else voided with nothing charged; returns how many.
   */
  sweep(): Promise<number> {
    return this.sweeper.sweep();
  }

  /**
   * Serves one chat completion. Returns the JSON answer, or null when it was streamed to `sink`
   * (`stream: true`). Validation, unknown model, missing provider and provider failures before any
   * output throw DomainErrors (nothing held or charged afterwards).
   */
  chat(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null> {
    return this.metered(chatFormat, call, sink);
  }

  /** Serves one Responses API call, like `chat`. */
  responses(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null> {
    return this.metered(responsesFormat, call, sink);
  }

  /**
   * Serves one embeddings call (never streamed): the JSON answer, or a 402 / 429 when payment blocked it
   * (docs/reference.md §14).
   */
  async embeddings(call: ChatCall): Promise<ChatJson> {
    return (await this.metered(embeddingsFormat, call))!;
  }

  /**
   * Serves one Messages API call (Anthropic's, docs/reference.md §15), like `chat`: a model on an
   * ANTHROPIC provider is forwarded as it is, the hold capping `max_tokens`.
   */
  messages(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null> {
    return this.metered(messagesFormat, call, sink);
  }

  /**
   * POST /v1/messages/count_tokens (docs/reference.md §15): forwarded to the model's provider as it is,
   * without the end user's id, and answered as the provider answered. Not charged: no hold, no events.
   * It needs a model the paywall sells and a provider that speaks the Messages API, as `messages` does.
   * Free, so limited: COUNT_TOKENS_PER_MINUTE calls per paywall key and minute on this instance (429).
   */
  async countTokens(call: ChatCall): Promise<ChatJson> {
    const { paywall } = call;
    const limit = this.d.limits.COUNT_TOKENS_PER_MINUTE;
    if (limit > 0) {
      const state = this.countCalls.take(paywall.id, limit, this.d.clock.now());
      if (state.over) throw new RateLimitError(state, 'token counts');
    }
    const { body, model } = checkBodyAndModel(call.body);
    const price = await this.d.catalog.getPrice(paywall, model);
    if (!price) throw modelNotFound(model);
    // The model's own provider (fallbacks are not tried: a count is not worth a second provider).
    const [upstream] = await this.d.providers.route(paywall, price);
    call.answeredBy?.(upstream.name);
    // A kind that does not speak the Messages API has no count endpoint: the count is this service's
    // tokenizer's, the same one that sizes the hold (docs/reference.md §15 "Across formats").
    if (!PROVIDER_ADAPTERS[upstream.kind].native(messagesFormat.name)) {
      const { value: fixed, texts } = collectTexts(() => countMessagesPrompt(body, 'OPENAI'));
      return { status: 200, body: { input_tokens: fixed + (await this.tokens.count(texts)) } };
    }
    return this.forwarder.unmetered(
      call,
      messagesFormat,
      upstream,
      `${messagesFormat.upstreamPath}/count_tokens`,
      JSON.stringify({ ...withoutEndUser(body), model: price.upstreamModel ?? model }),
      this.d.limits.UPSTREAM_MAX_DURATION_MS,
    );
  }

  /**
   * Serves one image or audio call (docs/reference.md §22): the JSON answer, a transcription's text, or
   * null when speech was relayed to `call.mediaSink`; a 402 when payment blocked it. An audio upload's
   * length is read from its header first (the hold covers it).
   */
  async media(kind: MediaKind, call: ChatCall): Promise<ChatJson | null> {
    if (kind === 'transcriptions' || kind === 'translations') {
      const upload = call.body;
      if (!isMultipart(upload))
        throw invalid('an audio file is sent as multipart/form-data', null, 'invalid_body');
      const file = upload.files.find((f) => f.field === 'file');
      if (!file) throw invalid("missing required parameter: 'file'", 'file', 'missing_required_parameter');
      call = { ...call, body: { ...upload, probe: await probeAudio(file) } };
    }
    return this.metered(MEDIA_FORMATS[kind], call);
  }

  /**
   * Counts a metered request refused before its hold (an unknown model, no user, a bad body) against
   * `RATE_LIMIT_PER_MINUTE` (docs/reference.md §10), as every other request of the key is counted: the
   * state, or null when there is no limit.
   */
  async countUnheld(paywallId: string): Promise<RateState | null> {
    const limit = this.d.limits.RATE_LIMIT_PER_MINUTE;
    return limit ? countRequest(this.d.db, paywallId, limit, this.d.clock.now()) : null;
  }

  /** Serves one call in the wire format `fmt` (a new client API plugs in here with its WireFormat). */
  metered(fmt: WireFormat<any>, call: ChatCall, sink?: StreamSink): Promise<ChatJson | null> {
    return meteredCall(this.call, fmt, call, sink);
  }
}
