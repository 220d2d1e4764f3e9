import { unavailableOr } from '../../db/db-errors.js';
import { DomainError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { formatUsdc, usdcDecimal, ZERO_COST_DETAILS } from '../../shared/money.js';
import {
  abortFlight,
  isTimeout,
  type ChatCall,
  type ChatJson,
  type Flight,
  type MediaSink,
  type Outcome,
  type StreamSink,
} from './flight.js';
import { createParser } from 'eventsource-parser';
import { hasTokenPrices, hasUnits } from '../../shared/media-units.js';
import {
  inputTokens,
  outputTokens,
  splitUsage,
  textUsage,
  type ReportedUsage,
  type UsageBuckets,
} from '../../shared/usage-buckets.js';
import { speechSseUsage, speechUnits, transcriptCountedUsage, type MediaRequest } from './media-format.js';
import {
  BUILTIN_PROVIDER,
  type UpstreamResponse,
  type UpstreamTarget,
} from '../providers/provider-client.js';
import type { RelayedResponses } from './relayed-responses.js';
import { clampUnits, usageOf, type Settlement } from './settlement.js';
import { passedThrough, refusalAnswer } from './upstream-refusal.js';
import { describeFailure, readLimited, TooLargeError, upstreamError } from './upstream-client.js';
import { UrlGuardError } from '../../shared/url-guard.js';
import { isObject, type WireFormat } from './wire-format.js';
import type { ClientFor } from './provider-clients.js';
import type { ProviderHealth } from '../providers/provider-health.js';

export interface ForwardDeps {
  settlement: Settlement;
  /** The adapter for a wire format on a provider's kind. */
  clients: ClientFor;
  /** Where each attempt's outcome is counted (provider health). */
  health: Pick<ProviderHealth, 'record'>;
  relayed: RelayedResponses;
  log: Logger;
  /** UPSTREAM_TIMEOUT_MS and UPSTREAM_MAX_BYTES. */
  limits: { UPSTREAM_TIMEOUT_MS: number; UPSTREAM_MAX_BYTES: number };
  /** How often a stream records its progress on the hold. */
  progressIntervalMs(): number;
}

/** How much of the built-in provider's refusal body the log keeps. */
const MAX_LOGGED_REFUSAL = 4096;

/**
 * The client's top-level fields that carry the end user's id (`user`, `metadata`): a translated request
 * names them in `x-paywall-dropped-fields` (docs/reference.md §21), since the payload never has `user`
 * nor a `metadata` that held only `metadata.user_id`, and the other API has no such field.
 */
const takenOut = (body: Record<string, unknown>): string[] | undefined => {
  const names = ['user', 'metadata'].filter((k) => body[k] != null);
  return names.length > 0 ? names : undefined;
};

/**
 * The forward and meter steps of a metered call: the request goes to the provider (through the flight's
 * ProviderClient), the answer comes back whole (JSON) or relayed chunk by chunk (a stream), is metered
 * in the flight's WireFormat, and the hold is settled before the answer's end reaches the client.
 */
export class Forwarder {
  constructor(private readonly d: ForwardDeps) {}

  /**
   * Sends the request along the flight's route (docs/reference.md §15 "Fallbacks"): a provider that
   * cannot be reached, times out before answering, or answers 429 or 5xx hands the same request to the
   * next one. Nothing has reached the client yet, and the one hold covers every attempt. The last
   * provider's answer, whatever it is, is the answer.
   */
  private async send(f: Flight): Promise<UpstreamResponse> {
    const model = f.price.upstreamModel ?? f.req.model;
    for (let i = 0; ; i++) {
      const up = f.route[i];
      const last = i === f.route.length - 1;
      f.upstream = up;
      let res: UpstreamResponse;
      try {
        // The route holds only providers that serve the format (metered-call.ts).
        f.provider = this.d.clients(f.fmt, up)!;
        // The client's body with the completion cap the hold affords (docs/reference.md §20: the hold's
        // cap is the cap sent) and never the end user's id.
        const payload = f.fmt.upstreamBody(f.req, f.hold.cap, { capParameter: up.capParameter, model });
        res = await f.provider.post(up, f.fmt.upstreamPath, payload, {
          // A multipart upload (image edits, transcription) goes as multipart (docs/reference.md §22).
          form: f.fmt.upstreamForm?.(f.req, model),
          accept: (f.req as Partial<MediaRequest>).answer ? '*/*' : undefined,
          stream: f.req.stream,
          signal: f.controller.signal,
          timeoutMs: this.d.limits.UPSTREAM_TIMEOUT_MS,
          via: f.via,
          maxBytes: this.d.limits.UPSTREAM_MAX_BYTES,
          clientHeaders: f.clientHeaders,
          holdCap: f.hold.cap,
          clientModel: f.req.model,
          reasoning: f.reasons,
          inputTokens: f.req.promptEstimate,
          clientDropped: takenOut(f.req.body),
          clientFields: Object.keys(f.req.body).filter((k) => f.req.body[k] != null),
        });
      } catch (e) {
        // A DomainError is a refusal of the client's request, not the provider's failure.
        if (!f.reason && !(e instanceof DomainError))
          this.d.health.record(f.paywall.id, up.name, describeFailure(e));
        // The operator's cause, which the client's 502 does not name: a provider on a private network.
        if (e instanceof UrlGuardError)
          this.d.log.warn(
            { paywallId: f.paywall.id, provider: up.name, reason: e.message },
            'provider refused by the address guard (PROVIDER_ALLOW_PRIVATE_NETWORKS=true allows private and loopback addresses)',
          );
        if (!last && !f.reason && !(e instanceof DomainError) && !(e instanceof TooLargeError)) continue;
        throw await this.failedBeforeOutput(f, e);
      }
      const failed = res.status === 429 || res.status >= 500;
      this.d.health.record(
        f.paywall.id,
        up.name,
        failed || res.status === 401 || res.status === 403 ? `HTTP ${res.status}` : null,
      );
      if (failed && !last && !f.reason) {
        // Not read: the connection is closed (its error, if any, is of no interest now).
        res.body.on('error', () => {});
        res.body.destroy();
        continue;
      }
      return res;
    }
  }

  /** Nothing was produced: void the hold (nothing charged) and say why. */
  private async failedBeforeOutput(f: Flight, e: unknown): Promise<DomainError> {
    if (e instanceof DomainError) {
      await this.d.settlement.settle(f, 'failed', e.code, null);
      return e;
    }
    const canceled = f.reason === 'client' || f.reason === 'shutdown';
    const timedOut = f.reason === 'deadline' || isTimeout(e);
    const code = timedOut
      ? 'upstream_timeout'
      : canceled
        ? 'canceled'
        : e instanceof TooLargeError
          ? 'upstream_too_large'
          : 'upstream_error';
    await this.d.settlement.settle(f, canceled ? 'canceled' : 'failed', code, null);
    if (timedOut) return upstreamError('timed out');
    // Cut by this service's own stop, not by the provider: a 503 the client may send again (another
    // instance), as a stream cut then ends with the `shutdown` error event.
    if (f.reason === 'shutdown')
      return new DomainError(
        'unavailable',
        'The service is shutting down; the request was cut before its answer. Send it again.',
        null,
        'shutdown',
      );
    if (canceled) return upstreamError('request canceled');
    return upstreamError(describeFailure(e));
  }

  /** A provider error status: the hold is voided, the answer is the refusal passed on (or a 502). */
  private async rejected(
    f: Flight,
    status: number,
    text: string,
    retryAfter: string | null,
  ): Promise<ChatJson> {
    await this.d.settlement.settle(
      f,
      'failed',
      passedThrough(status) ? `upstream_${status}` : 'upstream_error',
      null,
    );
    if (f.upstream.name === BUILTIN_PROVIDER && passedThrough(status)) {
      // The operator's provider answers on the operator's key: its refusal may echo the key or say
      // more about the operator's account than an app developer may read. The client gets the status
      // with a generic message in its format's shape; the operator's log keeps the body.
      this.d.log.warn(
        { paywallId: f.paywall.id, chargeId: f.chargeId, status, body: text.slice(0, MAX_LOGGED_REFUSAL) },
        'the built-in provider refused a request',
      );
      return refusalAnswer(status, '', retryAfter, f.fmt.refusalBody);
    }
    return refusalAnswer(status, text, retryAfter, f.fmt.refusalBody);
  }

  /** A whole answer: read, metered, settled, and returned with its cost. */
  async json(f: Flight): Promise<ChatJson> {
    const res = await this.send(f);
    let text: string;
    try {
      text = await readLimited(res, this.d.limits.UPSTREAM_MAX_BYTES);
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
    const malformed = isObject(json) ? (f.fmt.malformed?.(json) ?? null) : 'the answer was not a JSON object';
    if (malformed !== null || !isObject(json)) {
      await this.d.settlement.settle(f, 'failed', 'upstream_invalid_response', null);
      throw upstreamError(malformed ?? 'the answer was not a JSON object');
    }
    const answer = json;
    const reported = f.fmt.jsonUsage(answer);
    // Images and audio: what the answer counts besides tokens (docs/reference.md §22).
    f.units = f.fmt.units?.(f.req, answer, reported, f.price) ?? null;
    // An image or audio answer charged by tokens that reports none: counted here, the rest at its bound.
    const usage =
      reported === null && !hasUnits(f.units) && f.fmt.countedUsage && hasTokenPrices(f.price)
        ? f.fmt.countedUsage(f.req, answer)
        : usageOf(f, reported, () => f.fmt.countJson(answer));
    // After usageOf, which starts the flight's record of over-reported usage that this adds to.
    clampUnits(f);
    // An answer with no output that ended in an error or without a finish reason costs nothing, the
    // request price included (the client still gets it as the provider sent it).
    const empty = outputTokens(usage) === 0 && !hasUnits(f.units) && !f.fmt.jsonFinished(answer);
    // Nothing produced because the provider failed: a failed request (docs/reference.md §5.4).
    const failed = empty && f.fmt.jsonEndedInError?.(answer) === true;
    const { captured, freeAfterRaw, costDetails, unsettled } = await this.d.settlement.settle(
      f,
      failed ? 'failed' : 'completed',
      failed ? 'upstream_error' : null,
      empty ? null : usage,
      empty ? null : this.d.relayed.record(f, answer.id, usage),
    );
    // Its charge could not be written (the database went away after the provider answered): a 503
    // that charges nothing (the sweeper releases the hold), never the answer handed out free.
    if (unsettled && !empty) throw unavailableOr(unsettled);
    const cost = usdcDecimal(captured);
    // Charged nothing (an empty answer, or a hold a sweeper settled first): every part 0.
    f.fmt.addCost(answer, usage, {
      cost,
      costDetails: costDetails ?? { ...ZERO_COST_DETAILS },
      balance: null,
    });
    const headers: Record<string, string> = {
      ...f.answerHeaders,
      ...res.answerHeaders,
      ...this.costHeaders(f, captured, freeAfterRaw),
    };
    return { status: 200, body: answer, headers };
  }

  /**
   * An answer that is not JSON (docs/reference.md §22): a transcription's text, srt or vtt is read whole,
   * settled and returned as text with its cost headers; speech is relayed to `sink` as it arrives and
   * settled when it ends (the whole answer's cost and balance in its headers when the request decides
   * them, and in trailers). A client that leaves mid-speech is charged
   * pro rata for the bytes relayed of the bytes the provider sent: the rest is read, not relayed, to
   * know how many that is (unless the provider announced its length).
   */
  async relayMedia(f: Flight, sink: MediaSink | undefined): Promise<ChatJson | null> {
    const req = f.req as MediaRequest;
    const res = await this.send(f);
    const limit = this.d.limits.UPSTREAM_MAX_BYTES;
    if (res.status < 200 || res.status >= 300) {
      let text = '';
      try {
        text = await readLimited(res, Math.min(limit, 1024 * 1024));
      } catch {
        /* the status says enough */
      }
      return this.rejected(f, res.status, text, res.retryAfter);
    }
    if (req.answer === 'text' || !sink) {
      let text: string;
      try {
        text = await readLimited(res, limit);
      } catch (e) {
        throw await this.failedBeforeOutput(f, e);
      }
      f.units = f.fmt.units?.(req, null, null, f.price) ?? null;
      // A model priced per token only, answering text (no usage): the transcript counted here, the
      // audio at its bound.
      const usage =
        !hasUnits(f.units) && hasTokenPrices(f.price) ? transcriptCountedUsage(req, text) : textUsage(0, 0);
      const { captured, freeAfterRaw, unsettled } = await this.d.settlement.settle(
        f,
        'completed',
        null,
        usage,
      );
      // Nothing could be charged (the database went away): the answer is not handed out free.
      if (unsettled) throw unavailableOr(unsettled);
      return {
        status: 200,
        body: {},
        raw: { contentType: res.contentType || 'text/plain; charset=utf-8', text },
        headers: this.costHeaders(f, captured, freeAfterRaw),
      };
    }

    const announced = res.contentLength;
    const sse = res.contentType.toLowerCase().startsWith('text/event-stream');
    let sseUsage: ReportedUsage | null = null;
    const parser = sse
      ? createParser({
          onEvent: (e) => {
            try {
              sseUsage = speechSseUsage(JSON.parse(e.data)) ?? sseUsage;
            } catch {
              /* not JSON: relayed, not metered */
            }
          },
        })
      : null;
    const decoder = new TextDecoder();
    // docs/reference.md §22: a whole answer names its cost and the balance after it. Binary speech is
    // charged what the request decides (its characters, or its tokens at their bound): known now, so
    // the headers carry them; the trailers confirm them, and a client that leaves early is charged pro
    // rata instead. An SSE answer's usage comes at its end: its cost is in the trailers only.
    const whole = sse ? null : await this.d.settlement.foretell(f, this.speechUsage(f, req, null, 1, 1));
    sink.open({
      'content-type': res.contentType || 'application/octet-stream',
      ...(whole ? this.costHeaders(f, whole.captured, whole.freeAfterRaw) : {}),
      'x-paywall-charge-id': f.chargeId,
    });
    let received = 0;
    let relayed = 0;
    let failure: unknown = null;
    try {
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        received += b.length;
        if (received > limit) throw new TooLargeError(limit);
        parser?.feed(decoder.decode(b, { stream: true }));
        if (!f.clientGone) {
          relayed += b.length;
          f.relayedBytes = relayed;
          if (!sink.write(b)) await sink.drain();
        } else if (announced !== null) {
          // The length is known: nothing more to read.
          abortFlight(f, 'client');
          break;
        }
      }
    } catch (e) {
      failure = e;
      if (!f.reason) this.d.log.warn({ err: e, chargeId: f.chargeId }, 'upstream audio answer failed');
    }
    if (f.clientGone || failure instanceof TooLargeError) res.body.destroy();
    const complete = failure === null && !f.clientGone;
    const outcome: Outcome = complete ? 'completed' : f.clientGone ? 'canceled' : 'failed';
    const total = f.clientGone && announced !== null ? announced : received;
    const usage = relayed > 0 ? this.speechUsage(f, req, sseUsage, relayed, total) : null;
    const { captured, freeAfterRaw } = await this.d.settlement.settle(
      f,
      outcome,
      outcome === 'failed'
        ? failure instanceof TooLargeError
          ? 'upstream_too_large'
          : 'upstream_error'
        : null,
      usage,
    );
    if (!f.clientGone) {
      // The charge id went with the headers; the cost and the balance are known only now.
      const { 'x-paywall-charge-id': _id, ...trailers } = this.costHeaders(f, captured, freeAfterRaw);
      sink.end(trailers);
    }
    return null;
  }

  /**
   * What relayed speech is charged for: the characters of `input` (pro rata when only part was
   * relayed); a model priced per token, the provider's usage (`stream_format: "sse"`) or else the input
   * counted here and the audio output at its bound, the output pro rata too.
   */
  private speechUsage(
    f: Flight,
    req: MediaRequest,
    reported: ReportedUsage | null,
    relayed: number,
    total: number,
  ): UsageBuckets {
    const share = (n: number) =>
      relayed >= total ? n : Number((BigInt(n) * BigInt(relayed) + BigInt(total) - 1n) / BigInt(total));
    if (reported && hasTokenPrices(f.price)) {
      f.units = null;
      // The provider's counts within what the request could produce (§5.7: the audio tokens its
      // characters can make), then the output pro rata.
      const bounded = usageOf(f, { input: reported.input ?? 0, output: reported.output ?? 0 }, () => 0);
      const output = share(outputTokens(bounded));
      return splitUsage(inputTokens(bounded), output, { audioCompletion: output });
    }
    f.units = speechUnits(req, f.price, relayed, total);
    if (hasUnits(f.units) || !hasTokenPrices(f.price)) return textUsage(0, 0);
    const output = share(req.media.tokens?.audioCompletion ?? 0);
    return splitUsage(req.media.tokens?.prompt ?? 0, output, { audioCompletion: output });
  }

  /**
   * `x-paywall-cost`, `x-paywall-charge-id` (docs/reference.md §16 "Charge ids"), `x-paywall-balance` of
   * an answer that charged; of an image or audio answer always, also when it cost nothing (an empty
   * list of images): every whole answer of those routes names them (§22).
   */
  private costHeaders(f: Flight, captured: bigint, freeAfterRaw: bigint | null): Record<string, string> {
    const headers: Record<string, string> = {};
    if (captured > 0n || f.fmt.units !== undefined) {
      headers['x-paywall-cost'] = usdcDecimal(captured);
      headers['x-paywall-charge-id'] = f.chargeId;
      // A balance, so written as balances are (exactly 6 fraction digits).
      if (freeAfterRaw !== null) headers['x-paywall-balance'] = formatUsdc(freeAfterRaw);
    }
    return headers;
  }

  /** A stream: relayed to `sink` as it comes, settled before its last event; null once written. */
  async stream(f: Flight, sink: StreamSink): Promise<ChatJson | null> {
    const res = await this.send(f);
    if (res.status < 200 || res.status >= 300) {
      let text = '';
      try {
        text = await readLimited(res, Math.min(this.d.limits.UPSTREAM_MAX_BYTES, 1024 * 1024));
      } catch {
        /* the status says enough */
      }
      // Nothing was sent yet: the error is a plain JSON answer (the SDK raises it as an APIError).
      return this.rejected(f, res.status, text, res.retryAfter);
    }
    sink.open({ ...f.answerHeaders, ...res.answerHeaders });
    const relay = f.fmt.relay(f.req);
    let failure: unknown = null;
    const limit = this.d.limits.UPSTREAM_MAX_BYTES;
    let bytes = 0;
    let nextProgress = Date.now() + this.d.progressIntervalMs();
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
          progress = this.d.settlement.recordProgress(f, relay).finally(() => {
            progress = null;
            nextProgress = Date.now() + this.d.progressIntervalMs();
          });
        }
      }
    } catch (e) {
      failure = e;
      if (!f.reason) this.d.log.warn({ err: e, chargeId: f.chargeId }, 'upstream stream failed');
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
    const reported = relay.usageTokens();
    const usage = usageOf(f, reported, () => relay.producedTokens());
    // Output tokens, or an answer that ended with a finish reason (usage for a prompt answered by
    // nothing): else nothing is charged, the request price included, whatever usage the provider sent.
    const producedSomething =
      outputTokens(usage) > 0 || (reported !== null && outcome === 'completed' && relay.finished);
    // A stream that produced nothing and ended in the provider's error (an error event, or chat's
    // `finish_reason: "error"`) is a failed request, whatever its terminal event.
    const failedEmpty = !producedSomething && outcome === 'completed' && relay.upstreamError;
    const { captured, freeAfterRaw, costDetails, unsettled } = await this.d.settlement.settle(
      f,
      failedEmpty ? 'failed' : outcome,
      failedEmpty ? 'upstream_error' : errorCode,
      producedSomething ? usage : null,
      producedSomething ? this.d.relayed.record(f, relay.responseId?.(), usage) : null,
    );

    if (f.reason !== 'client') {
      if (unsettled && producedSomething) {
        // Its charge could not be written (the database went away): the stream does not end as a
        // charged answer; the sweeper settles it for what it last recorded as produced.
        sink.write(
          f.fmt.streamError(
            relay,
            'The database is temporarily unavailable; the answer could not be charged and was cut. Retry shortly.',
            'database_unavailable',
          ),
        );
      } else if (outcome === 'completed') {
        const balance = freeAfterRaw === null ? null : usdcDecimal(freeAfterRaw);
        const details = costDetails ?? { ...ZERO_COST_DETAILS };
        sink.write(
          f.fmt.streamEnd(f.req, relay, usage, {
            cost: usdcDecimal(captured),
            costDetails: details,
            balance,
          }),
        );
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
   * One unmetered call to a provider (Messages `count_tokens`, docs/reference.md §15): the format's
   * ProviderClient, the upstream limits and the loop detection of a metered attempt, within
   * `maxDurationMs`; no hold, no fallback, no settlement. A refusal is passed on in the format's shape;
   * a 2xx answer must be a JSON object.
   */
  async unmetered(
    call: Pick<ChatCall, 'signal' | 'via' | 'clientHeaders'>,
    fmt: WireFormat<any>,
    up: UpstreamTarget,
    endpoint: string,
    payload: string,
    maxDurationMs: number,
  ): Promise<ChatJson> {
    const provider = this.d.clients(fmt, up);
    if (!provider) throw upstreamError('the provider cannot serve this API');
    const controller = new AbortController();
    const deadline = setTimeout(() => controller.abort(), maxDurationMs);
    const onGone = () => controller.abort();
    call.signal?.addEventListener('abort', onGone);
    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const res = await provider.post(up, endpoint, payload, {
        stream: false,
        signal: controller.signal,
        timeoutMs: this.d.limits.UPSTREAM_TIMEOUT_MS,
        via: call.via,
        clientHeaders: call.clientHeaders,
      });
      ({ status, retryAfter } = res);
      text = await readLimited(res, this.d.limits.UPSTREAM_MAX_BYTES);
    } catch (e) {
      if (e instanceof DomainError) throw e;
      throw upstreamError(controller.signal.aborted ? 'request canceled' : describeFailure(e));
    } finally {
      clearTimeout(deadline);
      call.signal?.removeEventListener('abort', onGone);
    }
    if (status < 200 || status >= 300) return refusalAnswer(status, text, retryAfter, fmt.refusalBody);
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* checked below */
    }
    if (!isObject(json)) throw upstreamError('the answer was not a JSON object');
    return { status: 200, body: json };
  }
}
