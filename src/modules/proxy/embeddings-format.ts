import { ERROR_KINDS, type ErrorCode } from '../../shared/error-codes.js';
import { invalid } from '../../shared/errors.js';
import type { BlockedReply } from './blocked-reply.js';
import { checkBodyAndModel } from './chat-request.js';
import { inputTokens } from '../../shared/usage-buckets.js';
import { chargedFields } from './sse-relay.js';
import { countText } from './token-counter.js';
import { isObject, tokenCount, type MeteredRequest, type WireFormat } from './wire-format.js';

/**
 * OpenAI's embeddings API (`POST /v1/embeddings`), docs/reference.md §14: the money rules of chat with no
 * completion. The hold is `request + markup x (input estimate x prompt)` (no per-token completion part:
 * `n` 0, cap 0, and no cap is sent upstream), the charge is settled from `usage.prompt_tokens`, and a user
 * who cannot pay gets a 402 (over a daily limit a 429) in OpenAI's error shape plus the `paywall` field,
 * since an embeddings client has no message to show a link in. Never streamed.
 */

const isTokenId = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Validates `input` (a string, an array of strings, an array of token ids, or an array of token-id
 * arrays; nothing empty) and counts its tokens: text with the tokenizer, token ids one each.
 */
export function countEmbeddingInput(input: unknown): number {
  if (input === undefined || input === null)
    throw invalid("missing required parameter: 'input'", 'input', 'missing_required_parameter');
  if (typeof input === 'string') {
    if (input === '') throw invalid("'input' cannot be an empty string", 'input', 'invalid_value');
    return countText(input);
  }
  if (!Array.isArray(input))
    throw invalid(
      "'input' must be a string, an array of strings, an array of token ids or an array of token-id arrays",
      'input',
      'invalid_type',
    );
  if (input.length === 0) throw invalid("'input' must contain at least 1 item", 'input', 'empty_array');
  const first = input[0];
  let n = 0;
  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (typeof first === 'string') {
      if (typeof item !== 'string')
        throw invalid(`'${at}' must be a string, like the other items`, at, 'invalid_type');
      if (item === '') throw invalid(`'${at}' cannot be an empty string`, at, 'invalid_value');
      n += countText(item);
    } else if (isTokenId(first)) {
      if (!isTokenId(item)) throw invalid(`'${at}' must be a token id (an integer >= 0)`, at, 'invalid_type');
      n += 1;
    } else if (Array.isArray(first)) {
      if (!Array.isArray(item))
        throw invalid(`'${at}' must be an array of token ids, like the other items`, at, 'invalid_type');
      if (item.length === 0) throw invalid(`'${at}' must contain at least 1 token id`, at, 'empty_array');
      const bad = item.findIndex((t) => !isTokenId(t));
      if (bad >= 0)
        throw invalid(
          `'${at}[${bad}]' must be a token id (an integer >= 0)`,
          `${at}[${bad}]`,
          'invalid_type',
        );
      n += item.length;
    } else throw invalid(`'${at}' must be a string, a token id or an array of token ids`, at, 'invalid_type');
  });
  return n;
}

const never = (): never => {
  throw new Error('an embeddings request is never streamed');
};

/** The public error a payment-blocked embeddings request answers (402, or 429 over a daily limit). */
const blockedError = (r: BlockedReply): { kind: 'payment_required' | 'rate_limited'; code: ErrorCode } =>
  r.paywall.reason === 'rate_limited'
    ? { kind: 'rate_limited', code: 'daily_limit_exceeded' }
    : { kind: 'payment_required', code: r.paywall.reason };

export const embeddingsFormat: WireFormat = {
  name: 'embeddings',
  upstreamPath: '/embeddings',

  parse(input) {
    const { body, model } = checkBodyAndModel(input);
    return {
      model,
      stream: false,
      n: 0,
      clientMaxTokens: 0,
      promptEstimate: countEmbeddingInput(body.input),
      body,
    } satisfies MeteredRequest;
  },

  // The client's body as it is (`encoding_format`, `dimensions` …), without the end user's id: an
  // embedding has no completion, so no cap goes along.
  upstreamBody(req, _cap, up) {
    const body: Record<string, unknown> = { ...req.body, model: up.model };
    delete body.user;
    return JSON.stringify(body);
  },

  // Input only: `usage.prompt_tokens` (OpenAI's embeddings usage has no completion side).
  jsonUsage: (json) =>
    isObject(json.usage) ? { input: tokenCount(json.usage.prompt_tokens) ?? undefined, output: 0 } : null,

  malformed: (json) =>
    json.error != null
      ? 'the answer was an error, not a list of embeddings'
      : Array.isArray(json.data)
        ? null
        : 'the answer was not a list of embeddings (no `data` array)',

  // An empty list embedded nothing: relayed, and charged nothing.
  jsonFinished: (json) => Array.isArray(json.data) && json.data.length > 0,

  countJson: () => 0,

  addCost(json, usage, charged) {
    const input = inputTokens(usage);
    json.usage = {
      ...(isObject(json.usage) ? json.usage : { prompt_tokens: input, total_tokens: input }),
      ...chargedFields({ ...charged, balance: null }),
    };
  },

  relay: never,
  streamEnd: never,
  streamError: never,
  blockedStream: never,

  blockedJson(reply) {
    const { kind, code } = blockedError(reply);
    return {
      error: { message: reply.text, type: ERROR_KINDS[kind].type, param: null, code },
      paywall: reply.paywall,
    };
  },

  // Retrying cannot help before the user pays or the day ends: OpenAI's SDKs obey `x-should-retry`.
  blockedHttp: (reply) => ({
    status: ERROR_KINDS[blockedError(reply).kind].status,
    headers: { 'x-should-retry': 'false' },
  }),
};
