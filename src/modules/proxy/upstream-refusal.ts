import { DomainError, providerCode } from '../../shared/errors.js';
import type { ChatJson } from './flight.js';
import { upstreamError } from './upstream-client.js';
import { isObject } from './wire-format.js';

/** OpenAI's error `type` for a provider status, when the provider's answer has no error body of its own. */
export const UPSTREAM_ERROR_TYPES: Record<number, string> = {
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
};

/**
 * The answer to a provider's error status (its hold is voided by the caller): a 4xx is passed through
 * (with OpenAI's error body when the provider sent none, and its Retry-After); 5xx, and anything else
 * that is not a 2xx (a 3xx: redirects are never followed, nor handed to the client), throw a 502.
 */
export function refusalAnswer(
  status: number,
  text: string,
  retryAfter: string | null,
  /** The wire format's own error shape (WireFormat.refusalBody), when it is not OpenAI's. */
  shape?: (status: number, body: unknown) => Record<string, any>,
): ChatJson {
  if (!passedThrough(status)) throw upstreamError(`the provider answered HTTP ${status}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (shape) body = shape(status, body);
  // A provider 4xx without OpenAI's error body gets one, typed by its status as ours are.
  else if (!isObject(body) || !isObject(body.error))
    body = {
      error: {
        message: `The model provider refused the request (HTTP ${status}).`,
        type: UPSTREAM_ERROR_TYPES[status] ?? 'invalid_request_error',
        param: null,
        code: 'upstream_error',
      },
    };
  // One that has it, but not whole (OpenAI-compatible servers often leave out `param` and `code`, or send
  // a numeric code): the four fields every error body has here, the provider's values kept where they fit.
  else body = { ...body, error: wholeError(body.error, status) };
  // The provider's own back-off (a 429 or 503 says when to retry): SDKs wait for it.
  return {
    status,
    body: body as Record<string, any>,
    headers: retryAfter === null ? {} : { 'retry-after': retryAfter },
  };
}

/** A provider's OpenAI-shaped error with `message`, `type`, `param` and `code` (strings or null) all present. */
function wholeError(err: Record<string, unknown>, status: number): Record<string, unknown> {
  const text = (v: unknown): string | null =>
    typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null;
  return {
    ...err,
    message: text(err.message) ?? `The model provider refused the request (HTTP ${status}).`,
    type: text(err.type) ?? UPSTREAM_ERROR_TYPES[status] ?? 'invalid_request_error',
    param: text(err.param),
    code: text(err.code),
  };
}

/** A provider status the client gets as it is (a 4xx). */
export const passedThrough = (status: number): boolean => status >= 400 && status < 500;

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
