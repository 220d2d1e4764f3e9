import type { DomainError, ErrorKind } from '../src/shared/errors.js';
import { anthropicError } from '../src/modules/proxy/messages-format.js';

/**
 * The Messages routes' error bodies (docs/reference.md §15 "Messages errors"): Anthropic's shape,
 * `{"type":"error","error":{"type","message"}}`. errors.ts answers them with the status and headers every
 * other REST route gives the same DomainError (`Retry-After`, the `x-ratelimit-*` headers). Anthropic's
 * SDKs raise their error classes from the status, and read the type from the body.
 */

/** Anthropic's error `type` of each kind of domain error (closed: a new kind does not compile without one). */
export const ANTHROPIC_ERROR_TYPES = {
  invalid_request: 'invalid_request_error',
  invalid_amount: 'invalid_request_error',
  missing_user: 'invalid_request_error',
  unsupported_in_mode: 'invalid_request_error',
  request_too_large: 'request_too_large',
  unauthenticated: 'authentication_error',
  forbidden: 'permission_error',
  payment_required: 'billing_error',
  not_found: 'not_found_error',
  model_not_found: 'not_found_error',
  idempotency_in_flight: 'invalid_request_error',
  conflict: 'invalid_request_error',
  idempotency_mismatch: 'invalid_request_error',
  rate_limited: 'rate_limit_error',
  upstream_error: 'api_error',
  provider_not_connected: 'api_error',
  unavailable: 'overloaded_error',
  internal: 'api_error',
} as const satisfies Record<ErrorKind, string>;

/** The Messages routes: POST /v1/messages, /v1/messages/count_tokens and their /v1/u/{user}/… forms. */
const MESSAGES_URL = /^\/v1(?:\/u\/[^/?]*)?\/messages(?:\/count_tokens)?\/?(?:\?|$)/;

/** True for a request URL (path and query) of a Messages route: its errors are Anthropic's shape. */
export const isMessagesUrl = (url: string): boolean => MESSAGES_URL.test(url);

/** Anthropic's error body for a domain error. */
export const anthropicErrorOf = (e: DomainError): AnthropicError =>
  anthropicError(ANTHROPIC_ERROR_TYPES[e.code], e.message);

export type AnthropicError = ReturnType<typeof anthropicError>;
