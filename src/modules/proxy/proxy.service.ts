import { randomUUID } from 'node:crypto';
import type { Services } from '../../services.js';
import { DomainError, invalid, providerCode } from '../../shared/errors.js';
import { chatCost, providerCostRaw, usdcDecimal } from '../../shared/money.js';
import type { EventTrigger, NewEvent } from '../events/event.service.js';
import { recordEvents } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import {
  collectDebt,
  ledgerTick,
  recordHoldProgress,
  settleBeyondHold,
  sweepAbandonedHolds,
  SCALE_PER_RAW,
  type DailyLimit,
  type ReserveInput,
  type ReserveResult,
  type SettleInput,
} from '../ledger/holds.js';
import { GroupCommit } from './group-commit.js';
import { nextUtcMidnight, utcDay } from '../../shared/clock.js';
import { RateLimitError, rateState, windowOf } from '../limits/rate-limit.js';
import { splitCharge } from '../ledger/accounts.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import type { ModelPriceInfo } from '../catalog/catalog.service.js';
import { blockedReply, blockedText, rateLimitedText, type BlockReason } from './blocked-reply.js';
import { modelNotFound } from '../catalog/catalog.service.js';
import { chatFormat } from './chat-format.js';
import { responsesFormat } from './responses-format.js';
import {
  MAX_TOKEN_COUNT,
  type MeteredRequest,
  type StreamRelay,
  type Tokens,
  type WireFormat,
} from './wire-format.js';
import { UNKNOWN_INPUT_BOUND } from './token-counter.js';
import {
  describeFailure,
  postUpstream,
  readLimited,
  TooLargeError,
  upstreamError,
  type UpstreamResponse,
  type UpstreamTarget,
} from './upstream-client.js';

/** A model without a configured maximum output is assumed to produce at most this many tokens. */
export const DEFAULT_MAX_COMPLETION_TOKENS = 4096;
/** CONTRACT §5.3: below this affordable completion the user gets the top-up reply. */
export const MIN_COMPLETION_TOKENS = 16;
const SWEEP_INTERVAL_MS = 60_000;
/**
 * Ledger operations (holds and settlements) of one end user in one group-commit statement at most. The
 * statement decides several holds of one balance at once when it covers them all; when it does not, the
 * later ones come back to be decided first in the next statement. The bound keeps such a statement small.
 */
const LEDGER_OPS_PER_USER = 64;
const SWEEP_MARGIN_MS = 5 * 60_000;
/** At shutdown, how long cut requests get to settle before their connections are closed. */
const CUT_WAIT_MS = 2_000;
/** A stream records what it produced on its hold at most this often (for the sweeper after a crash). */
export const PROGRESS_INTERVAL_MS = 5_000;
/** bigint's maximum (`uncollected_raw` is a bigint column). */
const INT8_MAX = 2n ** 63n - 1n;
const PPM = 1_000_000n;

type PriceInfo = ModelPriceInfo;

/** One chat-completion call, from REST or GraphQL. */
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
}

/** A whole answer: the completion, a payment-blocked reply, or a provider's 4xx passed through. */
export interface ChatJson {
  status: number;
  body: Record<string, any>;
  /**
   * CONTRACT §11: set when the answer charged the user: `x-paywall-cost` (USDC, = usage.cost) and
   * `x-paywall-balance` (the free balance after the charge, USDC).
   */
  headers?: Record<string, string>;
}

/** Where a streamed answer goes (the REST layer adapts the HTTP response to it). */
export interface StreamSink {
  /** Status 200 and the SSE headers, flushed at once. */
  open(): void;
  /** Writes at once; false when the client is slow (wait for `drain()`). */
  write(chunk: string): boolean;
  /** Resolves when the client can take more, or has gone. */
  drain(): Promise<void>;
  end(): void;
}

/** `deadline`: UPSTREAM_MAX_DURATION_MS reached (idle timeouts are undici's, seen as failures). */
type AbortReason = 'client' | 'deadline' | 'shutdown';
type LedgerOp =
  { kind: 'hold'; key: string; input: ReserveInput } | { kind: 'settle'; key: string; input: SettleInput };
type Outcome = 'completed' | 'failed' | 'canceled';

/** A forwarded request, from its hold to its settlement. */
interface Flight {
  paywall: PaywallInfo;
  fmt: WireFormat<any>;
  req: MeteredRequest;
  externalUserId: string;
  price: PriceInfo;
  upstream: UpstreamTarget;
  chargeId: string;
  trigger: EventTrigger;
  hold: ReserveResult;
  via: string[];
  controller: AbortController;
  reason: AbortReason | null;
  settled: boolean;
  /** Resolves when the request has settled and answered. */
  done: Promise<void>;
  finish(): void;
}

/** cost − captured, within a bigint column (a provider reporting absurd usage cannot overflow it). */
const uncollectedOf = (cost: bigint, captured: bigint): bigint =>
  cost - captured > INT8_MAX ? INT8_MAX : cost - captured;

/** undici's idle limits (UPSTREAM_TIMEOUT_MS): no headers, or no body data, in time. */
const isTimeout = (e: unknown): boolean => {
  const code = (e as { code?: string } | null)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
};

/** OpenAI's error `type` for a provider status, when the provider's answer has no error body of its own. */
const UPSTREAM_ERROR_TYPES: Record<number, string> = {
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
};

const isObject = (v: unknown): v is Record<string, any> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The DomainError for a non-200 JSON answer (a provider's 4xx passed through), for transports that
 * cannot relay the provider's status and body as they are (GraphQL).
 */
export function rejectionError(out: ChatJson | null): DomainError {
  const err = isObject(out?.body?.error) ? out!.body.error : {};
  const message = typeof err.message === 'string' ? err.message : 'The model provider refused the request.';
  const param = typeof err.param === 'string' ? err.param : null;
  const code = typeof err.code === 'string' ? err.code : 'upstream_error';
  if (out?.status === 429) return new DomainError('rate_limited', message, param, providerCode(code));
  return new DomainError('invalid_request', message, param, providerCode(code));
}

/**
 * The metered call: authorize → hold → forward → meter → settle (CONTRACT §5, §6, §7, §11), for chat
 * completions and the Responses API alike. What differs between the two (request fields, usage names,
 * stream events, the shape of a blocked reply) is a WireFormat (chat-format.ts, responses-format.ts);
 * the money is here, once.
 *
 * The hot path is two statements: the hold (which also checks the connection, caps the completion at
 * what the free balance affords, and records `started`) and the settlement (capture, release, ledger
 * entry and the terminal events). Keys, prices and provider pools come from in-memory caches. Streams
 * are relayed chunk by chunk and settled before their last event, so a client that reads to the end
 * sees its balance already charged.
 */
export class ProxyService {
  private readonly flights = new Map<string, Flight>();
  private sweeper?: NodeJS.Timeout;
  private stopping = false;
  /** How often a stream records its progress on the hold (tests shorten it). */
  progressIntervalMs = PROGRESS_INTERVAL_MS;
  /**
   * Holds and settlements of concurrent requests share one statement and one commit (GroupCommit,
   * holds.ledgerTick), several of one end user too (a hot user: see holds.tickSql for how its holds are
   * decided against one balance).
   */
  private readonly ledger: GroupCommit<LedgerOp, ReserveResult | null | bigint | boolean>;

  constructor(private readonly s: Services) {
    this.ledger = new GroupCommit(
      async (ops) => {
        const holds: ReserveInput[] = [];
        const settlements: SettleInput[] = [];
        for (const op of ops) {
          if (op.kind === 'hold') holds.push(op.input);
          else settlements.push(op.input);
        }
        const r = await ledgerTick(s.db, holds, settlements);
        let h = 0;
        let st = 0;
        // A settlement answers the free balance after it (or false when it was already settled).
        return ops.map((op) => {
          if (op.kind === 'hold') return r.holds[h++];
          const i = st++;
          return r.settlements[i] ? (r.freeAfter[i] ?? true) : false;
        });
      },
      (op) => op.key,
      { perKey: LEDGER_OPS_PER_USER },
    );
  }

  /** Releases holds a crashed instance left behind, now and every minute. */
  async start(): Promise<void> {
    await this.sweep();
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  /**
   * Graceful stop (CONTRACT §1): in-flight requests (streams included) finish and settle within
   * SHUTDOWN_GRACE_MS; the rest are aborted upstream and settled for what they produced.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweeper) clearInterval(this.sweeper);
    const pending = () => [...this.flights.values()].map((f) => f.done);
    if (this.flights.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(pending()),
        new Promise((r) => {
          timer = setTimeout(r, this.s.config.SHUTDOWN_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
    }
    for (const f of this.flights.values()) this.abort(f, 'shutdown');
    await Promise.all(pending());
  }

  /**
   * Aborts every request in flight (`shutdown`: a stream ends with the shutdown's error event) and
   * waits until they have settled and answered, at most CUT_WAIT_MS.
   */
  async cutInFlight(): Promise<void> {
    const pending = [...this.flights.values()].map((f) => {
      this.abort(f, 'shutdown');
      return f.done;
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(pending),
      new Promise((r) => {
        timer = setTimeout(r, CUT_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Number of requests between hold and settlement on this instance. */
  get inFlight(): number {
    return this.flights.size;
  }

  /** Group-commit counters: ledger statements run, the holds and settlements they carried, time spent. */
  get batchStats(): { batches: number; items: number; ms: number } {
    return { ...this.ledger.stats };
  }

  /**
   * Settles abandoned holds (older than UPSTREAM_MAX_DURATION_MS + 5 min, not in flight here): for the
   * progress a stream recorded, else released with nothing charged; returns how many.
   */
  async sweep(): Promise<number> {
    try {
      const n = await sweepAbandonedHolds(
        await this.s.db.background(), // background work: the small pool of its own
        this.s.config.UPSTREAM_MAX_DURATION_MS + SWEEP_MARGIN_MS,
        [...this.flights.keys()],
      );
      if (n > 0) this.s.log.warn({ settled: n }, 'settled abandoned chat holds');
      // Relayed responses are kept as long as OpenAI keeps a stored response (30 days).
      await this.s.db.query(
        `delete from relayed_response where ctid = any(array(
           select ctid from relayed_response where created_at < now() - interval '30 days' limit 1000))`,
      );
      return n;
    } catch (err) {
      if (!this.stopping) this.s.log.error({ err }, 'hold sweep failed');
      return 0;
    }
  }

  /**
   * Serves one chat completion. Returns the JSON answer, or null when it was streamed to `sink`
   * (`stream: true`). Validation, unknown model, missing provider and provider failures before any
   * output throw DomainErrors (nothing held or charged afterwards).
   */
  async chat(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null> {
    return this.metered(chatFormat, call, sink);
  }

  /** Serves one Responses API call (CONTRACT §11), like `chat`. */
  async responses(call: ChatCall, sink?: StreamSink): Promise<ChatJson | null> {
    return this.metered(responsesFormat, call, sink);
  }

  private async metered<R extends MeteredRequest>(
    fmt: WireFormat<R>,
    call: ChatCall,
    sink?: StreamSink,
  ): Promise<ChatJson | null> {
    const req = fmt.parse(call.body);
    if (req.stream && !sink)
      throw invalid(
        'streaming is served by POST /v1/chat/completions; this operation returns whole completions',
        'stream',
        'unsupported_parameter',
      );
    const { paywall } = call;
    const price = await this.s.catalog.getPrice(paywall, req.model);
    if (!price) throw modelNotFound(req.model);
    const upstream = await this.s.providers.getUpstream(paywall);
    if (!upstream)
      throw new DomainError(
        'provider_not_connected',
        'This paywall has no model provider connected.',
        null,
        'provider_not_connected',
      );

    // Responses API: a continued response makes the provider bill the earlier context as input again.
    const context =
      fmt.name === 'responses' ? await this.earlierContext(paywall.id, req.body) : { known: 0, unknown: 0 };
    req.promptEstimate += context.known;
    const promptEstimate = req.promptEstimate + context.unknown;
    const modelMax = price.maxCompletionTokens ?? DEFAULT_MAX_COMPLETION_TOKENS;
    const maxCap = Math.min(req.clientMaxTokens ?? modelMax, modelMax);
    const chargeId = randomUUID();
    const trigger: EventTrigger = call.trigger ?? {
      source: 'proxy',
      actorType: 'api_key',
      actorId: paywall.id,
    };
    const ctx = {
      paywall,
      trigger,
      subject: { type: 'request' as const, id: chargeId, externalId: call.externalUserId },
    };
    const startEvents: NewEvent[] = [
      buildEvent('paywall.proxy.request.started', ctx, {
        requestId: chargeId,
        model: req.model,
        stream: req.stream,
      }),
    ];
    if (req.stream)
      startEvents.push(
        buildEvent('paywall.usage.charge.deferred', ctx, { deferredRequestId: chargeId, model: req.model }),
      );

    const markup = paywall.markupPpm;
    const now = this.s.clock.now();
    const holdInput: ReserveInput = {
      chargeId,
      paywallId: paywall.id,
      externalUserId: call.externalUserId,
      requireConnected: paywall.mode === 'SHARED',
      fixedScaled: price.requestPico * PPM + markup * BigInt(promptEstimate) * price.promptPico,
      perTokenScaled: markup * price.completionPico * BigInt(req.n),
      maxCap,
      minCap: MIN_COMPLETION_TOKENS,
      model: req.model,
      stream: req.stream,
      metadata: { promptEstimate, choices: req.n },
      events: startEvents,
      day: utcDay(now),
      requestLimit: paywall.dailyRequestLimit,
      spendLimitRaw: paywall.dailySpendLimitRaw,
      modelRequestLimit: price.dailyRequestLimit,
      rateLimit: this.s.config.RATE_LIMIT_PER_MINUTE ?? null,
      rateWindow: windowOf(now),
      maxDebtRaw: this.s.config.MAX_UNCOLLECTED_PER_USER,
    };
    // Hot path: one statement against an existing user; a first-time user is created, then retried.
    const userKey = `${paywall.id}\n${call.externalUserId}`;
    const reserve = async (input = holdInput) => {
      for (let again = false; ; again = true) {
        const r = (await this.ledger.submit(
          { kind: 'hold', key: userKey, input },
          again,
        )) as ReserveResult | null;
        // Holds before it on the same account or user in that statement left its answer open: it is
        // decided first in the next statement (submitted ahead of the queue).
        if (!r?.retry) return r;
      }
    };
    let hold = await reserve();
    if (!hold) {
      await this.s.users.ensureUser(this.s.db, paywall, call.externalUserId, trigger);
      hold = await reserve();
      if (!hold) throw new DomainError('internal', 'end user could not be created');
    }
    const rateLimit = this.s.config.RATE_LIMIT_PER_MINUTE;
    if (rateLimit && hold.ratePosition !== null && hold.ratePosition > rateLimit)
      throw new RateLimitError(rateState(rateLimit, hold.ratePosition, now));
    // The account owes uncollected usage: what is free besides this request's hold repays it (a deposit
    // since). Above MAX_UNCOLLECTED_PER_USER the request was refused: once repaid it is decided again
    // (not counted twice by the rate limit).
    const freeBesides = hold.held ? hold.freeRaw - hold.holdRaw : hold.freeRaw;
    if (hold.debtRaw > 0n && hold.accountId && hold.connected && freeBesides > 0n) {
      const repaid = await collectDebt(this.s.db, hold.accountId, this.s.config.PLATFORM_FEE_BPS);
      if (repaid > 0n && hold.indebted) hold = (await reserve({ ...holdInput, rateLimit: null })) ?? hold;
    }
    if (!hold.connected || !hold.held) {
      const reason: BlockReason = !hold.connected
        ? 'not_connected'
        : hold.limit
          ? 'rate_limited'
          : 'insufficient_balance';
      const needed =
        (holdInput.fixedScaled +
          BigInt(MIN_COMPLETION_TOKENS) * holdInput.perTokenScaled +
          SCALE_PER_RAW -
          1n) /
        SCALE_PER_RAW;
      return this.blocked(fmt, call, req, hold, reason, chargeId, trigger, needed, now, price, sink);
    }

    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    const flight: Flight = {
      paywall,
      fmt,
      req,
      externalUserId: call.externalUserId,
      price,
      upstream,
      chargeId,
      trigger,
      hold,
      via: call.via ?? [],
      controller: new AbortController(),
      reason: null,
      settled: false,
      done,
      finish,
    };
    this.flights.set(chargeId, flight);
    // The whole request is bounded (idle limits are undici's: UPSTREAM_TIMEOUT_MS), so the sweeper
    // (UPSTREAM_MAX_DURATION_MS + 5 min) never meets a live hold.
    const deadline = setTimeout(() => this.abort(flight, 'deadline'), this.s.config.UPSTREAM_MAX_DURATION_MS);
    const onClientGone = () => this.abort(flight, 'client');
    call.signal?.addEventListener('abort', onClientGone);
    try {
      return req.stream ? await this.forwardStream(flight, sink!) : await this.forwardJson(flight);
    } finally {
      clearTimeout(deadline);
      call.signal?.removeEventListener('abort', onClientGone);
      this.flights.delete(chargeId);
      finish();
    }
  }

  /**
   * Tokens of the context a Responses request continues (`previous_response_id`, or a stored
   * `conversation`), which the provider bills as input again: `known` for a response this paywall relayed
   * (its input + output tokens, counted in the estimate), `unknown` (UNKNOWN_INPUT_BOUND, held only)
   * for one it did not relay or a conversation, whose size it cannot see.
   */
  private async earlierContext(
    paywallId: string,
    body: Record<string, unknown>,
  ): Promise<{ known: number; unknown: number }> {
    const previous = body.previous_response_id;
    const conversation = body.conversation;
    if (conversation !== undefined && conversation !== null)
      return { known: 0, unknown: UNKNOWN_INPUT_BOUND };
    if (previous === undefined || previous === null) return { known: 0, unknown: 0 };
    if (typeof previous !== 'string' || previous === '' || previous.length > 255)
      throw invalid("'previous_response_id' must be a response id", 'previous_response_id', 'invalid_value');
    const rows = await this.s.db.query(
      `select tokens::text as tokens from relayed_response where paywall_id = $1 and id = $2`,
      [paywallId, previous],
      'proxy_relayed_response',
    );
    if (rows.length === 0) return { known: 0, unknown: UNKNOWN_INPUT_BOUND };
    const tokens = Number(rows[0].tokens);
    return { known: Math.min(tokens, MAX_TOKEN_COUNT), unknown: 0 };
  }

  /** Remembers a relayed Responses answer's context size (input + output tokens), best effort. */
  private async rememberResponse(f: Flight, id: unknown, tokens: Tokens): Promise<void> {
    // A response the provider does not store (`store: false`) cannot be continued.
    if (f.fmt.name !== 'responses' || f.req.body.store === false) return;
    if (typeof id !== 'string' || id === '' || id.length > 255) return;
    try {
      await this.s.db.query(
        `insert into relayed_response (paywall_id, id, tokens) values ($1, $2, $3::bigint)
           on conflict (paywall_id, id) do update set tokens = excluded.tokens`,
        [f.paywall.id, id, String(tokens.prompt + tokens.completion)],
        'proxy_remember_response',
      );
    } catch (err) {
      this.s.log.warn({ err, chargeId: f.chargeId }, 'recording a relayed response failed');
    }
  }

  private abort(f: Flight, reason: AbortReason): void {
    if (f.reason || f.settled) return;
    f.reason = reason;
    f.controller.abort();
  }

  private async send(f: Flight): Promise<UpstreamResponse> {
    try {
      // The client's body with the completion cap the hold affords (and never the end user's id).
      return await postUpstream(f.upstream, f.fmt.upstreamPath, f.fmt.upstreamBody(f.req, f.hold.cap), {
        stream: f.req.stream,
        signal: f.controller.signal,
        timeoutMs: this.s.config.UPSTREAM_TIMEOUT_MS,
        via: f.via,
      });
    } catch (e) {
      throw await this.failedBeforeOutput(f, e);
    }
  }

  /** Nothing was produced: release the hold (nothing charged) and say why. */
  private async failedBeforeOutput(f: Flight, e: unknown): Promise<DomainError> {
    if (e instanceof DomainError) return e;
    const canceled = f.reason === 'client' || f.reason === 'shutdown';
    const timedOut = f.reason === 'deadline' || isTimeout(e);
    const code = timedOut
      ? 'upstream_timeout'
      : canceled
        ? 'canceled'
        : e instanceof TooLargeError
          ? 'upstream_too_large'
          : 'upstream_error';
    await this.settle(f, canceled ? 'canceled' : 'failed', code, null);
    if (timedOut) return upstreamError('timed out');
    if (canceled) return upstreamError('request canceled');
    return upstreamError(describeFailure(e));
  }

  /**
   * A provider error status: 4xx passed through (CONTRACT §4); 5xx, and anything else that is not a 2xx
   * (a 3xx: redirects are never followed, nor handed to the client), → 502; nothing charged.
   */
  private async rejected(
    f: Flight,
    status: number,
    text: string,
    retryAfter: string | null,
  ): Promise<ChatJson> {
    const passThrough = status >= 400 && status < 500;
    await this.settle(f, 'failed', passThrough ? `upstream_${status}` : 'upstream_error', null);
    if (!passThrough) throw upstreamError(`the provider answered HTTP ${status}`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    // A provider 4xx without OpenAI's error body gets one, typed by its status as ours are (CONTRACT §4).
    if (!isObject(body) || !isObject(body.error))
      body = {
        error: {
          message: `The model provider refused the request (HTTP ${status}).`,
          type: UPSTREAM_ERROR_TYPES[status] ?? 'invalid_request_error',
          param: null,
          code: 'upstream_error',
        },
      };
    // The provider's own back-off (a 429 or 503 says when to retry): SDKs wait for it.
    return {
      status,
      body: body as Record<string, any>,
      headers: retryAfter === null ? {} : { 'retry-after': retryAfter },
    };
  }

  private async forwardJson(f: Flight): Promise<ChatJson> {
    const res = await this.send(f);
    let text: string;
    try {
      text = await readLimited(res, this.s.config.UPSTREAM_MAX_BYTES);
    } catch (e) {
      throw await this.failedBeforeOutput(f, e);
    }
    if (res.status < 200 || res.status >= 300) return this.rejected(f, res.status, text, res.retryAfter);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    if (!isObject(json)) {
      await this.settle(f, 'failed', 'upstream_invalid_response', null);
      throw upstreamError('the answer was not a JSON object');
    }
    const answer = json;
    const tokens = this.tokensOf(f, f.fmt.jsonUsage(answer), () => f.fmt.countJson(answer));
    // An answer with no output that ended in an error or without a finish reason costs nothing, the
    // request price included (the client still gets it as the provider sent it).
    const empty = tokens.completion === 0 && !f.fmt.jsonFinished(answer);
    const { captured, freeAfterRaw } = await this.settle(f, 'completed', null, empty ? null : tokens);
    if (!empty) await this.rememberResponse(f, answer.id, tokens);
    const cost = usdcDecimal(captured);
    f.fmt.addCost(answer, tokens, cost);
    const headers: Record<string, string> = {};
    if (captured > 0n) {
      headers['x-paywall-cost'] = cost;
      if (freeAfterRaw !== null) headers['x-paywall-balance'] = usdcDecimal(freeAfterRaw);
    }
    return { status: 200, body: answer, headers };
  }

  private async forwardStream(f: Flight, sink: StreamSink): Promise<ChatJson | null> {
    const res = await this.send(f);
    if (res.status < 200 || res.status >= 300) {
      let text = '';
      try {
        text = await readLimited(res, Math.min(this.s.config.UPSTREAM_MAX_BYTES, 1024 * 1024));
      } catch {
        /* the status says enough */
      }
      // Nothing was sent yet: the error is a plain JSON answer (the SDK raises it as an APIError).
      return this.rejected(f, res.status, text, res.retryAfter);
    }
    sink.open();
    const relay = f.fmt.relay(f.req);
    let failure: unknown = null;
    const limit = this.s.config.UPSTREAM_MAX_BYTES;
    let bytes = 0;
    let nextProgress = Date.now() + this.progressIntervalMs;
    let progress: Promise<void> | null = null;
    try {
      // A streaming decoder: a multi-byte character split across two network reads stays whole.
      const decoder = new TextDecoder();
      for await (const chunk of res.body) {
        bytes += (chunk as Buffer).length;
        // Over the limit: this chunk is neither relayed nor metered; the stream is cut below.
        if (bytes > limit) throw new TooLargeError(limit);
        const out = relay.feed(decoder.decode(chunk as Buffer, { stream: true }));
        if (out && f.reason !== 'client' && !sink.write(out)) await sink.drain();
        if (relay.done) break;
        // A long stream records what it produced on its hold now and then (one UPDATE, never per chunk).
        if (!progress && Date.now() >= nextProgress) {
          progress = this.recordProgress(f, relay).finally(() => {
            progress = null;
            nextProgress = Date.now() + this.progressIntervalMs;
          });
        }
      }
    } catch (e) {
      failure = e;
      if (!f.reason) this.s.log.warn({ err: e, chargeId: f.chargeId }, 'upstream stream failed');
    }
    if (relay.done || failure instanceof TooLargeError) res.body.destroy();
    if (progress) await progress;

    const complete = relay.done || (failure === null && relay.finished && !relay.upstreamError);
    const outcome: Outcome = complete ? 'completed' : f.reason === 'client' ? 'canceled' : 'failed';
    const errorCode =
      outcome !== 'failed'
        ? null
        : f.reason === 'deadline' || (!f.reason && isTimeout(failure))
          ? 'upstream_timeout'
          : f.reason === 'shutdown'
            ? 'shutdown'
            : failure instanceof TooLargeError
              ? 'upstream_too_large'
              : 'upstream_error';
    const usage = relay.usageTokens();
    const tokens = this.tokensOf(f, usage, () => relay.producedTokens());
    // Output tokens, or an answer that ended with a finish reason (usage for a prompt answered by
    // nothing): else nothing is charged, the request price included, whatever usage the provider sent.
    const producedSomething =
      tokens.completion > 0 || (usage !== null && outcome === 'completed' && relay.finished);
    const { captured, freeAfterRaw } = await this.settle(
      f,
      outcome,
      errorCode,
      producedSomething ? tokens : null,
    );

    if (producedSomething) await this.rememberResponse(f, relay.responseId?.(), tokens);
    if (f.reason !== 'client') {
      if (outcome === 'completed') {
        const balance = freeAfterRaw === null ? null : usdcDecimal(freeAfterRaw);
        sink.write(f.fmt.streamEnd(f.req, relay, tokens, { cost: usdcDecimal(captured), balance }));
      } else if (!relay.upstreamError) {
        const message =
          f.reason === 'deadline'
            ? 'The request reached its maximum duration (UPSTREAM_MAX_DURATION_MS); the stream was cut.'
            : errorCode === 'upstream_timeout'
              ? 'The model provider timed out mid-stream.'
              : errorCode === 'shutdown'
                ? 'The service is shutting down; the stream was cut.'
                : errorCode === 'upstream_too_large'
                  ? `The model provider's answer exceeded the ${limit}-byte limit (UPSTREAM_MAX_BYTES); the stream was cut.`
                  : 'The model provider failed mid-stream.';
        sink.write(
          f.fmt.streamError(relay, message, errorCode === 'shutdown' ? 'shutdown' : 'upstream_error'),
        );
      }
      sink.end();
    }
    return null;
  }

  /**
   * Records on the hold what the stream produced so far, as the settlement it would be (tokens, the
   * amount min(cost, hold) and its split): if this instance dies, the sweeper settles the hold for it
   * instead of releasing it with nothing charged (output already delivered is paid for). Best effort:
   * a failed update only means the sweeper falls back to an older record, or to releasing.
   */
  private async recordProgress(f: Flight, relay: StreamRelay): Promise<void> {
    if (f.settled) return;
    try {
      const usage = relay.usageTokens();
      const tokens = this.tokensOf(f, usage, () => relay.progressTokens());
      if (usage === null && tokens.completion === 0) return;
      const { cost, captured } = this.charge(f, tokens);
      const split = splitCharge(
        f.paywall.mode,
        captured,
        this.providerCost(f, tokens),
        this.s.config.PLATFORM_FEE_BPS,
      );
      await recordHoldProgress(this.s.db, f.chargeId, {
        promptTokens: tokens.prompt,
        completionTokens: tokens.completion,
        capturedRaw: captured,
        ...split,
        uncollectedRaw: uncollectedOf(cost, captured),
      });
    } catch (err) {
      this.s.log.warn({ err, chargeId: f.chargeId }, 'recording stream progress failed');
    }
  }

  /** Token counts for settlement: the upstream's usage, else counted here. */
  private tokensOf(f: Flight, usage: Partial<Tokens> | null, countCompletion: () => number): Tokens {
    const prompt = usage?.prompt ?? f.req.promptEstimate;
    const completion = usage?.completion ?? countCompletion();
    return { prompt, completion };
  }

  /** The exact cost (CONTRACT §5.2) and what the hold can capture of it. */
  private charge(
    f: Flight,
    tokens: { prompt: number; completion: number },
  ): { cost: bigint; captured: bigint } {
    const cost = chatCost(f.price, f.paywall.markupPpm, tokens.prompt, tokens.completion);
    return { cost, captured: cost < f.hold.holdRaw ? cost : f.hold.holdRaw };
  }

  /**
   * What the built-in provider costs the platform for these tokens (its cost prices, no markup, rounded
   * up); 0 when the paywall's own provider served the request.
   */
  private providerCost(f: Flight, tokens: { prompt: number; completion: number }): bigint {
    const cost = f.price.providerCost;
    return cost ? providerCostRaw(cost, tokens.prompt, tokens.completion) : 0n;
  }

  /**
   * Settles the hold: `tokens` null = nothing produced (released, nothing charged). Records the
   * terminal proxy event and, when something is charged, `paywall.usage.charge.created`. Returns the
   * amount taken from the balance and the free balance of the spending account after the settlement
   * (null when unknown: already settled, or the settlement failed).
   */
  private async settle(
    f: Flight,
    outcome: Outcome,
    errorCode: string | null,
    tokens: Tokens | null,
  ): Promise<{ captured: bigint; freeAfterRaw: bigint | null }> {
    if (f.settled) return { captured: 0n, freeAfterRaw: null };
    f.settled = true;
    const cost = tokens ? this.charge(f, tokens).cost : 0n;
    const providerCostRaw = tokens ? this.providerCost(f, tokens) : 0n;
    const walletUserId = f.hold.walletUserId;
    const model = f.req.model;
    const ctx = {
      paywall: f.paywall,
      trigger: f.trigger,
      subject: { type: 'request' as const, id: f.chargeId, externalId: f.externalUserId },
    };
    const data = { requestId: f.chargeId, walletUserId, model };
    // The settlement for a captured amount (its split, uncollected rest and events depend on it).
    const build = (captured: bigint): SettleInput => {
      const uncollected = uncollectedOf(cost, captured);
      const events: NewEvent[] = [
        outcome === 'completed'
          ? buildEvent('paywall.proxy.request.completed', ctx, data)
          : outcome === 'canceled'
            ? buildEvent('paywall.proxy.request.canceled', ctx, data)
            : buildEvent('paywall.proxy.request.failed', ctx, { ...data, errorCode: errorCode ?? 'failed' }),
      ];
      if (cost > 0n)
        events.push(
          buildEvent(
            'paywall.usage.charge.created',
            { ...ctx, subject: { type: 'charge', id: f.chargeId, externalId: f.externalUserId } },
            {
              walletUserId,
              activityId: f.chargeId,
              model,
              promptTokens: tokens!.prompt,
              completionTokens: tokens!.completion,
              cost: usdcDecimal(captured),
              ...(uncollected > 0n ? { uncollected: usdcDecimal(uncollected) } : {}),
            },
          ),
        );
      const split = splitCharge(f.paywall.mode, captured, providerCostRaw, this.s.config.PLATFORM_FEE_BPS);
      return {
        chargeId: f.chargeId,
        paywallId: f.paywall.id,
        status: cost > 0n ? ('completed' as const) : ('released' as const),
        capturedRaw: captured,
        ...split,
        uncollectedRaw: uncollected,
        promptTokens: tokens?.prompt ?? null,
        completionTokens: tokens?.completion ?? null,
        errorCode: outcome === 'completed' ? null : (errorCode ?? outcome),
        ledgerEntryId: randomUUID(),
        // A debt repaid later pays the built-in provider's unpaid cost first (collectDebt).
        metadata: {
          model,
          outcome,
          ...(uncollected > 0n ? { providerCost: providerCostRaw.toString() } : {}),
        },
        events,
      };
    };
    // A failed settlement leaves the hold for the sweeper; retry briefly first (e.g. a pool hiccup).
    let captured = cost < f.hold.holdRaw ? cost : f.hold.holdRaw;
    let freeAfterRaw: bigint | null = null;
    for (let attempt = 1; ; attempt++) {
      try {
        let settled: boolean;
        if (cost > f.hold.holdRaw) {
          // Beyond the hold (the estimate was short): the rest comes from the free balance, in its own
          // transaction (rare: never on the group-commit path).
          const r = await settleBeyondHold(this.s.db, f.chargeId, f.paywall.id, cost, build);
          settled = r.settled;
          captured = r.settled ? r.capturedRaw : 0n;
          freeAfterRaw = r.freeAfter;
        } else {
          const r = await this.ledger.submit({
            kind: 'settle',
            key: `${f.paywall.id}\n${f.externalUserId}`,
            input: build(captured),
          });
          settled = r !== false;
          freeAfterRaw = typeof r === 'bigint' ? r : null;
        }
        // Only a sweeper can have settled it first (the request outlived UPSTREAM_MAX_DURATION_MS + 5 min,
        // or its instance was presumed dead): the sweeper's settlement stands, nothing is charged twice.
        if (!settled)
          this.s.log.warn({ chargeId: f.chargeId }, 'chat hold was already settled (by the sweeper)');
        if (captured > 0n) {
          this.s.metrics.ledgerEntries.inc({ kind: 'usage' });
          this.s.metrics.ledgerAmountRaw.inc({ kind: 'usage' }, Number(captured));
        }
        break;
      } catch (err) {
        if (attempt >= 3) {
          this.s.log.error(
            { err, chargeId: f.chargeId },
            'chat settlement failed; the sweeper will release the hold',
          );
          break;
        }
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
    return { captured, freeAfterRaw };
  }

  /** A daily limit in words and as the value events carry. */
  private describeLimit(
    limit: DailyLimit,
    paywall: PaywallInfo,
    price: PriceInfo,
  ): { what: string; value: string } {
    if (limit === 'dailySpendLimit') {
      const v = usdcDecimal(paywall.dailySpendLimitRaw ?? 0n);
      return { what: `${v} USDC of usage per day`, value: v };
    }
    const n = limit === 'dailyRequestLimit' ? paywall.dailyRequestLimit : price.dailyRequestLimit;
    return {
      what: `${n} requests per day${limit === 'modelDailyRequestLimit' ? ` with ${price.modelId}` : ''}`,
      value: String(n),
    };
  }

  private async blocked<R extends MeteredRequest>(
    fmt: WireFormat<R>,
    call: ChatCall,
    req: R,
    hold: ReserveResult,
    reason: BlockReason,
    requestId: string,
    trigger: EventTrigger,
    neededRaw: bigint,
    now: Date,
    price: PriceInfo,
    sink?: StreamSink,
  ): Promise<ChatJson | null> {
    const { paywall, externalUserId } = call;
    const url =
      reason === 'not_connected'
        ? await this.s.users.connectLink(paywall, externalUserId, trigger)
        : reason === 'insufficient_balance'
          ? await this.s.users.topupLink(paywall, externalUserId, trigger)
          : null;
    const walletUserId = hold.walletUserId;
    const onRequest = {
      paywall,
      trigger,
      subject: { type: 'request' as const, id: requestId, externalId: externalUserId },
    };
    const onUser = {
      paywall,
      trigger,
      subject: { type: 'end_user' as const, id: hold.userId, externalId: externalUserId },
    };
    const events: NewEvent[] = [
      buildEvent('paywall.proxy.request.started', onRequest, {
        requestId,
        walletUserId,
        model: req.model,
        stream: req.stream,
      }),
      buildEvent('paywall.request.blocked', onUser, { walletUserId, reason, requestId }),
      buildEvent('paywall.proxy.request.blocked', onRequest, {
        requestId,
        walletUserId,
        reason,
        model: req.model,
      }),
    ];
    if (reason === 'insufficient_balance')
      events.push(
        buildEvent('paywall.balance.depleted', onUser, {
          walletUserId,
          requestedAmount: usdcDecimal(neededRaw),
          availableBalance: usdcDecimal(hold.freeRaw > 0n ? hold.freeRaw : 0n),
        }),
      );
    const limit = hold.limit ? this.describeLimit(hold.limit, paywall, price) : null;
    if (reason === 'rate_limited' && limit)
      events.push(
        buildEvent('paywall.usage.rate.limited', onUser, {
          limit: hold.limit!,
          value: limit.value,
          date: utcDay(now),
          model: req.model,
          walletUserId,
        }),
      );
    await recordEvents(this.s.db, events);

    const reply =
      reason === 'rate_limited' || url === null
        ? blockedReply(
            req.model,
            reason,
            null,
            rateLimitedText(limit?.what ?? 'requests', nextUtcMidnight(now)),
            nextUtcMidnight(now),
          )
        : blockedReply(
            req.model,
            reason,
            url,
            blockedText(
              reason === 'not_connected' ? paywall.connectMessageTemplate : paywall.topupMessageTemplate,
              reason,
              url,
            ),
          );
    if (!req.stream || !sink) return { status: 200, body: fmt.blockedJson(reply) };
    sink.open();
    sink.write(fmt.blockedStream(reply, req));
    sink.end();
    return null;
  }
}
