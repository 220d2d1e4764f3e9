import { randomUUID } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../shared/clock.js';
import { utcDay } from '../../shared/clock.js';
import { invalid } from '../../shared/errors.js';
import { bucketPico, type ModelPrice } from '../../shared/money.js';
import type { ModelPriceInfo } from '../catalog/catalog-model.js';
import type { ModelRoute, PaywallRef } from '../providers/provider-routes.js';
import { modelNotFound } from '../catalog/catalog-model.js';
import { maxOutputOf, reasonsOf } from '../catalog/known-models.js';
import type { EventTrigger, NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { SCALE_PER_RAW, type ReserveInput } from '../ledger/holds.js';
import { windowOf } from '../limits/rate-limit.js';
import { answerBlocked, type PaymentLinks } from './blocked-call.js';
import { abortFlight, type ChatCall, type ChatJson, type Flight, type StreamSink } from './flight.js';
import type { Forwarder } from './forward.js';
import type { LedgerBatch } from './ledger-batch.js';
import { placeHold, type EnsureUser } from './place-hold.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';
import { collectTexts } from './token-counter.js';
import { BUILTIN_PROVIDER, type UpstreamTarget } from '../providers/provider-client.js';
import { unservable, type ClientFor } from './provider-clients.js';
import type { RelayedResponses } from './relayed-responses.js';
import type { MeteredRequest, WireFormat } from './wire-format.js';
import { mediaHoldScaled, type MediaRequest } from './media-format.js';
import { MIN_THINKING_BUDGET } from './formats/field-policy.js';
import { refuseOnBuiltin } from './builtin-fields.js';
import { thinkingBudget } from './messages-format.js';

/** Below this affordable completion the user gets the top-up reply. */
export const MIN_COMPLETION_TOKENS = 16;

const PPM = 1_000_000n;

/** The limits a metered call applies (from the validated configuration). */
export interface MeteredLimits {
  UPSTREAM_MAX_DURATION_MS: number;
  RATE_LIMIT_PER_MINUTE?: number | null;
  MAX_UNCOLLECTED_PER_USER: bigint;
  PLATFORM_FEE_BPS: number;
}

export interface MeteredCallDeps {
  db: Database;
  clock: Clock;
  /** The model's price (ModelPrices, catalog/model-prices.ts). */
  prices: { getPrice(paywall: PaywallRef, modelId: string): Promise<ModelPriceInfo | null> };
  /** The providers a model is tried on, in order (ProviderService). */
  upstreams: { route(paywall: PaywallRef, model: ModelRoute): Promise<UpstreamTarget[]> };
  /** The adapter for a wire format on a provider's kind. */
  clients: ClientFor;
  /** Counts the prompt's texts with bounded CPU on the event loop. */
  tokens: Pick<PromptTokenizer, 'count'>;
  links: PaymentLinks;
  ensureUser: EnsureUser;
  ledger: LedgerBatch;
  relayed: RelayedResponses;
  forward: Forwarder;
  limits: MeteredLimits;
  /** Requests between hold and settlement on this instance, by charge id. */
  flights: Map<string, Flight>;
}

const max = (a: bigint, b: bigint): bigint => (a > b ? a : b);

/**
 * The price a hold counts an input token at (docs/reference.md §13): the dearest a provider may bill it
 * as, prompt or cache write (a provider decides what it caches; audio parts are already counted at
 * their upper bound in tokens).
 */
const inputHoldPico = (price: ModelPrice): bigint =>
  max(bucketPico(price, 'prompt'), bucketPico(price, 'cacheWrite'));

/**
 * The price a hold counts an output token at: completion or reasoning (a reasoning model may spend the
 * whole cap thinking), and audio completion when the request asks for audio output.
 */
function outputHoldPico(price: ModelPrice, body: Record<string, unknown>): bigint {
  const out = max(bucketPico(price, 'completion'), bucketPico(price, 'reasoning'));
  const audio = Array.isArray(body.modalities) && body.modalities.includes('audio');
  return audio ? max(out, bucketPico(price, 'audioCompletion')) : out;
}

/**
 * The metered call: authorize → hold → forward → meter → settle, for every wire format. The request is
 * validated by its format, priced, held (place-hold.ts; a refused hold is answered by blocked-call.ts),
 * forwarded and metered (forward.ts), and settled (settlement.ts). The money is here and in those
 * steps, once; what differs between client APIs is the WireFormat.
 */
export async function meteredCall<R extends MeteredRequest>(
  d: MeteredCallDeps,
  fmt: WireFormat<R>,
  call: ChatCall,
  sink?: StreamSink,
): Promise<ChatJson | null> {
  // The texts of the prompt are set aside and counted below, once the request is known to be servable.
  const { value: req, texts: promptTexts } = collectTexts(() => fmt.parse(call.body));
  // Images and audio (docs/reference.md §22) carry their hold and answer kind; other formats have neither.
  const { media, answer: mediaAnswer } = req as Partial<MediaRequest>;
  if (req.stream && !sink)
    throw invalid(
      'streaming is served by POST /v1/chat/completions; this operation returns whole completions',
      'stream',
      'unsupported_parameter',
    );
  const { paywall } = call;
  const price = await d.prices.getPrice(paywall, req.model);
  if (!price) throw modelNotFound(req.model);
  const routed = await d.upstreams.route(paywall, price);
  // The model's own provider must serve this API (else a 400 naming why, before anything is held);
  // a fallback that cannot is skipped.
  const provider = d.clients(fmt, routed[0]);
  if (!provider) throw unservable(fmt);
  const route = routed.filter((up, i) => i === 0 || d.clients(fmt, up) !== null);
  // Every provider the request may reach must take the body (a translation's refusals): a refusal is
  // the client's 400 now, not after the hold and a call to the providers before it.
  const reasons = reasonsOf(price);
  const validated = route.map((up) => d.clients(fmt, up)!.validate?.(req.body, up, reasons));
  const viaBuiltin = route.some((up) => up.name === BUILTIN_PROVIDER);
  if (viaBuiltin) refuseOnBuiltin(fmt.name, req.body);
  const translatedThinks = validated[0]?.thinks === true;
  // A translated request's images are billed by the provider's kind, not the client format's: the parts
  // that are not text are counted again for it (texts set aside as before, then counted with bounded CPU).
  const ownKind = fmt.name === 'messages' ? 'ANTHROPIC' : 'OPENAI';
  let texts = promptTexts;
  if (fmt.countPrompt && routed[0].kind !== ownKind) {
    const recount = collectTexts(() => fmt.countPrompt!(req, routed[0].kind));
    req.promptEstimate = recount.value;
    texts = recount.texts;
  }
  req.promptEstimate += await d.tokens.count(texts);
  // Images and audio (docs/reference.md §22): their texts (an image prompt, speech input) bound the hold's
  // text-input tokens, not a chat prompt estimate: a units-priced answer is charged no tokens for them.
  const mediaTokens = media?.tokens;
  if (mediaTokens) {
    mediaTokens.prompt = (mediaTokens.prompt ?? 0) + req.promptEstimate;
    req.promptEstimate = 0;
  }

  // Responses API: a continued response makes the provider bill the earlier context as input again.
  // Through the built-in provider (one key for every SHARED app) only this paywall's own responses.
  const context =
    fmt.name === 'responses'
      ? await d.relayed.earlierContext(paywall.id, call.externalUserId, req.body, viaBuiltin)
      : { known: 0, unknown: 0 };
  req.promptEstimate += context.known;
  const promptEstimate = req.promptEstimate + context.unknown;
  // docs/reference.md §20: the client's cap is kept, lowered only to the owner's maxCompletionTokens (and
  // below, to what the balance affords); with none, the model's maximum output bounds the hold.
  const modelMax = maxOutputOf(price);
  const maxCap =
    req.clientMaxTokens === null
      ? modelMax.tokens
      : Math.min(req.clientMaxTokens, price.maxCompletionTokens ?? req.clientMaxTokens);
  // Extended thinking toward Anthropic needs a cap above its smallest budget: one the balance cannot
  // afford gets the top-up reply, never a request Anthropic refuses. That is the client's own `thinking`,
  // or a reasoning effort translated into thinking for a model that reasons (which the translation drops,
  // and names, where the client's or the owner's cap leaves no room for it).
  const nativeThinks = routed[0].kind === 'ANTHROPIC' && thinkingBudget(req.body) !== null;
  const thinks = nativeThinks || (translatedThinks && maxCap > MIN_THINKING_BUDGET);
  // The app capped this model's answers at or below thinking's smallest budget: no cap could both keep
  // the owner's limit and be accepted by Anthropic, so the request is refused before anything is held.
  if (nativeThinks && maxCap <= MIN_THINKING_BUDGET && maxCap < (req.clientMaxTokens ?? Infinity))
    throw invalid(
      `thinking: this app caps ${req.model}'s answers at ${maxCap} tokens; extended thinking needs max_tokens above its smallest budget of ${MIN_THINKING_BUDGET} tokens. Send the request without thinking.`,
      'thinking',
    );
  const minCap = thinks
    ? Math.min(maxCap, Math.max(MIN_COMPLETION_TOKENS, MIN_THINKING_BUDGET + 1))
    : MIN_COMPLETION_TOKENS;
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
  // Images and audio (docs/reference.md §22): their units or token bound (a 400 when the model has no
  // price for them, before anything is held).
  const mediaScaled = media ? mediaHoldScaled(price, markup, media) : 0n;
  const now = d.clock.now();
  const holdInput: ReserveInput = {
    chargeId,
    paywallId: paywall.id,
    externalUserId: call.externalUserId,
    requireConnected: paywall.mode === 'SHARED',
    fixedScaled:
      price.requestPico * PPM + markup * BigInt(promptEstimate) * inputHoldPico(price) + mediaScaled,
    perTokenScaled: markup * outputHoldPico(price, req.body) * BigInt(req.n),
    maxCap,
    minCap,
    model: req.model,
    stream: req.stream,
    metadata: { promptEstimate, choices: req.n },
    events: startEvents,
    day: utcDay(now),
    requestLimit: paywall.dailyRequestLimit,
    spendLimitRaw: paywall.dailySpendLimitRaw,
    modelRequestLimit: price.dailyRequestLimit,
    rateLimit: d.limits.RATE_LIMIT_PER_MINUTE ?? null,
    rateWindow: windowOf(now),
    at: now,
    maxDebtRaw: d.limits.MAX_UNCOLLECTED_PER_USER,
    userKeyId: call.userKeyId ?? null,
  };
  if (call.rate) call.rate.counted = true;
  const held = await placeHold(d, {
    paywall,
    externalUserId: call.externalUserId,
    trigger,
    input: holdInput,
    now,
  });
  if (held.kind === 'blocked') {
    const neededRaw =
      (holdInput.fixedScaled + BigInt(minCap) * holdInput.perTokenScaled + SCALE_PER_RAW - 1n) /
      SCALE_PER_RAW;
    return answerBlocked(d, {
      fmt,
      call,
      req,
      hold: held.hold,
      reason: held.reason,
      requestId: chargeId,
      trigger,
      neededRaw,
      now,
      price,
      sink,
    });
  }

  // The cap sent upstream: the hold's cap, in the client's own field, or, for a client that sent none,
  // in the format's field (chat: max_completion_tokens unless the provider takes max_tokens): the model's
  // maximum output (the owner's, the catalogue's or 4,096), lowered to what the balance affords. So the
  // provider never answers past what was held.
  const cap = held.hold.cap;
  const answerHeaders: Record<string, string> = {};
  // (Embeddings complete nothing: no cap to name.)
  if (req.n > 0 && cap !== req.clientMaxTokens) answerHeaders['x-paywall-cap'] = String(cap);

  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const flight: Flight = {
    paywall,
    fmt,
    req,
    externalUserId: call.externalUserId,
    userKeyId: call.userKeyId ?? null,
    price,
    route,
    upstream: route[0],
    provider,
    chargeId,
    trigger,
    hold: held.hold,
    promptEstimate,
    reasons,
    answerHeaders,
    via: call.via ?? [],
    clientHeaders: call.clientHeaders ?? {},
    controller: new AbortController(),
    reason: null,
    settled: false,
    done,
    finish,
  };
  d.flights.set(chargeId, flight);
  // The whole request is bounded (idle limits are undici's: UPSTREAM_TIMEOUT_MS), so the sweeper
  // (UPSTREAM_MAX_DURATION_MS + 5 min) never meets a live hold.
  const deadline = setTimeout(() => abortFlight(flight, 'deadline'), d.limits.UPSTREAM_MAX_DURATION_MS);
  // Relayed audio whose client leaves mid-way is charged for what was relayed: the rest is read to
  // know how much that was (forward.ts relayMedia); before any byte was relayed it is simply aborted.
  const relaysBytes = mediaAnswer === 'bytes';
  const onClientGone = () => {
    if (relaysBytes && flight.relayedBytes) flight.clientGone = true;
    else abortFlight(flight, 'client');
  };
  call.signal?.addEventListener('abort', onClientGone);
  try {
    if (mediaAnswer) return await d.forward.relayMedia(flight, call.mediaSink);
    return req.stream ? await d.forward.stream(flight, sink!) : await d.forward.json(flight);
  } finally {
    clearTimeout(deadline);
    call.signal?.removeEventListener('abort', onClientGone);
    d.flights.delete(chargeId);
    call.answeredBy?.(flight.upstream.name);
    finish();
  }
}
