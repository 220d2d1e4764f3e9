/**
 * The public errors as data: one closed map that every transport's mapper reads (REST's OpenAI error
 * body, GraphQL's `extensions`, the hosted pages). docs/reference.md "Error codes" explains it, and
 * test/error-codes.test.ts holds the README's and the reference's tables to it.
 *
 * Two levels:
 * - an error **kind** (`DomainError.code`) says how every transport answers: the HTTP status and OpenAI
 *   `type`, GraphQL's `extensions.code`, and the status and title of a hosted page (`page: null`: the pages
 *   do not answer that kind themselves, it becomes their logged 500 page);
 * - a public **code** (`error.code` in REST, `extensions.errorCode` in GraphQL) belongs to exactly one kind
 *   and answers as its kind does; `page` overrides the page status where a page says more (410 for an
 *   expired link).
 */

/** How each kind of failure is answered, per transport. */
export const ERROR_KINDS = {
  invalid_request: {
    status: 400,
    type: 'invalid_request_error',
    graphql: 'BAD_USER_INPUT',
    page: { status: 400, title: 'That did not work' },
  },
  invalid_amount: {
    status: 400,
    type: 'invalid_request_error',
    graphql: 'BAD_USER_INPUT',
    page: { status: 400, title: 'That did not work' },
  },
  missing_user: {
    status: 400,
    type: 'invalid_request_error',
    graphql: 'BAD_USER_INPUT',
    page: { status: 400, title: 'That did not work' },
  },
  unsupported_in_mode: {
    status: 400,
    type: 'invalid_request_error',
    graphql: 'BAD_USER_INPUT',
    page: { status: 400, title: 'That did not work' },
  },
  request_too_large: { status: 413, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT', page: null },
  unauthenticated: { status: 401, type: 'authentication_error', graphql: 'UNAUTHENTICATED', page: null },
  forbidden: {
    status: 403,
    type: 'permission_error',
    graphql: 'FORBIDDEN',
    page: { status: 403, title: 'Not allowed' },
  },
  /**
   * The end user cannot pay for the request (not connected, or the free balance is short): the embeddings
   * API's 402 with `paywall: {reason, url}` (docs/reference.md §14). Chat answers these with a reply instead.
   */
  payment_required: { status: 402, type: 'payment_required', graphql: 'PAYMENT_REQUIRED', page: null },
  not_found: {
    status: 404,
    type: 'not_found_error',
    graphql: 'NOT_FOUND',
    page: { status: 404, title: 'Link not valid' },
  },
  model_not_found: { status: 404, type: 'not_found_error', graphql: 'NOT_FOUND', page: null },
  idempotency_in_flight: { status: 409, type: 'idempotency_error', graphql: 'CONFLICT', page: null },
  conflict: {
    status: 409,
    type: 'invalid_request_error',
    graphql: 'CONFLICT',
    page: { status: 409, title: 'Already decided' },
  },
  idempotency_mismatch: { status: 422, type: 'idempotency_error', graphql: 'UNPROCESSABLE', page: null },
  rate_limited: {
    status: 429,
    type: 'rate_limit_error',
    graphql: 'RATE_LIMITED',
    page: { status: 429, title: 'Too many attempts' },
  },
  upstream_error: {
    status: 502,
    type: 'api_error',
    graphql: 'UPSTREAM_ERROR',
    page: { status: 502, title: 'Try again' },
  },
  provider_not_connected: { status: 503, type: 'api_error', graphql: 'FAILED_PRECONDITION', page: null },
  /** The database cannot be reached, or did not answer in time (restart, failover, freeze): retry later. */
  unavailable: {
    status: 503,
    type: 'api_error',
    graphql: 'SERVICE_UNAVAILABLE',
    page: { status: 503, title: 'Try again in a moment' },
  },
  internal: { status: 500, type: 'api_error', graphql: 'INTERNAL_SERVER_ERROR', page: null },
} as const satisfies Record<
  string,
  { status: number; type: string; graphql: string; page: { status: number; title: string } | null }
>;

/** Every kind of failure a service reports (`DomainError.code`). */
export type ErrorKind = keyof typeof ERROR_KINDS;

/** A public code's entry: its kind, and the page status where a page answers it differently. */
interface CodeEntry {
  /** The kind, or kinds where the same code is raised by several (each answers as its kind does). */
  kind: ErrorKind | readonly ErrorKind[];
  page?: { status: number; title: string };
}

/**
 * Every public error code (`error.code` / `extensions.errorCode`), with its kind. Closed: a code not
 * listed here does not compile where a DomainError is built. The codes answered before any route runs
 * (`invalid_http`, `headers_too_large`, `request_timeout`) are not domain errors and are listed in
 * {@link PARSER_ERROR_CODES}.
 */
export const ERROR_CODES = {
  // 400 — the request is wrong
  invalid_request: { kind: 'invalid_request' },
  invalid_json: { kind: 'invalid_request' },
  invalid_body: { kind: 'invalid_request' },
  unsupported_charset: { kind: 'invalid_request' },
  unsupported_encoding: { kind: 'invalid_request' },
  invalid_path: { kind: 'invalid_request' },
  missing_user: { kind: 'missing_user' },
  user_mismatch: { kind: 'invalid_request' },
  invalid_amount: { kind: ['invalid_amount', 'invalid_request'] },
  unsupported_in_mode: { kind: 'unsupported_in_mode' },
  invalid_idempotency_key: { kind: 'invalid_request' },
  missing_required_parameter: { kind: 'invalid_request' },
  invalid_type: { kind: 'invalid_request' },
  invalid_value: { kind: 'invalid_request' },
  previous_response_not_found: { kind: 'invalid_request' },
  empty_array: { kind: 'invalid_request' },
  unsupported_parameter: { kind: 'invalid_request' },
  proxy_loop: { kind: 'invalid_request' },
  invalid_webhook_url: { kind: 'invalid_request' },
  too_many_subscriptions: { kind: ['invalid_request', 'rate_limited'] },
  invalid_signature: { kind: 'invalid_request' },
  invalid_base_url: { kind: 'invalid_request' },
  forbidden_base_url: { kind: 'invalid_request' },
  invalid_provider_key: { kind: 'invalid_request' },
  invalid_price: { kind: 'invalid_request' },
  too_many_models: { kind: 'invalid_request' },
  too_many_providers: { kind: 'invalid_request' },
  markup_below_cost: { kind: 'invalid_request' },
  invalid_stripe_key: { kind: 'invalid_request' },
  insufficient_earnings: { kind: 'invalid_amount' },
  refund_exceeds_charge: { kind: 'invalid_amount' },
  charge_already_refunded: { kind: 'invalid_request' },
  charge_not_refundable: { kind: 'invalid_request' },
  paywall_limit_reached: { kind: 'invalid_request' },
  invalid_email: { kind: 'invalid_request' },
  code_invalid: { kind: 'invalid_request' },
  code_expired: { kind: 'invalid_request' },
  code_used: { kind: 'invalid_request' },
  code_locked: { kind: 'invalid_request' },
  code_missing: { kind: 'invalid_request' },
  connect_link_expired: { kind: 'invalid_request', page: { status: 410, title: 'Link expired' } },
  request_too_large: { kind: 'request_too_large' },
  // 401, 403
  missing_api_key: { kind: 'unauthenticated' },
  invalid_api_key: { kind: 'unauthenticated' },
  unauthenticated: { kind: 'unauthenticated' },
  forbidden: { kind: 'forbidden' },
  user_key_user_mismatch: { kind: 'forbidden' },
  user_key_not_allowed: { kind: 'unauthenticated' },
  test_funds_disabled: { kind: 'forbidden' },
  // 402 (embeddings)
  not_connected: { kind: 'payment_required' },
  insufficient_balance: { kind: 'payment_required' },
  allowance_exceeded: { kind: 'payment_required' },
  key_limit_exceeded: { kind: 'payment_required' },
  // 404, 410
  not_found: { kind: 'not_found' },
  model_not_found: { kind: 'model_not_found' },
  unknown_route: { kind: 'not_found' },
  connect_link_not_found: { kind: 'not_found' },
  connection_not_found: { kind: 'not_found' },
  // 409, 422
  idempotency_in_flight: { kind: 'idempotency_in_flight' },
  conflict: { kind: 'conflict' },
  stripe_not_connected: { kind: 'conflict', page: { status: 409, title: 'Card top-ups not available' } },
  withdrawal_not_pending: { kind: 'conflict' },
  already_connected: { kind: 'conflict', page: { status: 409, title: 'Connected to another wallet' } },
  connect_request_approved: { kind: 'conflict' },
  connect_request_declined: { kind: 'conflict' },
  idempotency_key_reused: { kind: 'idempotency_mismatch' },
  // 429
  rate_limit_exceeded: { kind: 'rate_limited' },
  rate_limited: { kind: 'rate_limited' },
  daily_limit_exceeded: { kind: 'rate_limited' },
  too_many_codes: { kind: 'rate_limited' },
  stripe_rate_limited: { kind: 'rate_limited' },
  too_many_heavy_reads: { kind: 'rate_limited' },
  too_many_subscriptions_per_connection: { kind: 'rate_limited' },
  too_many_subscriptions_per_tenant: { kind: 'rate_limited' },
  // 5xx
  internal: { kind: 'internal' },
  upstream_error: { kind: 'upstream_error' },
  stripe_error: { kind: 'upstream_error' },
  mail_failed: { kind: 'upstream_error' },
  provider_not_connected: { kind: 'provider_not_connected' },
  database_unavailable: { kind: 'unavailable' },
  shutdown: { kind: 'unavailable' },
} as const satisfies Record<string, CodeEntry>;

/** A public error code. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The kinds a public code belongs to. */
export type KindsOf<C extends ErrorCode> = (typeof ERROR_CODES)[C]['kind'] extends readonly (infer X)[]
  ? X
  : (typeof ERROR_CODES)[C]['kind'];

/**
 * The public codes of one kind (a DomainError's public code must belong to its kind). Where the kind is
 * not known when compiling (a subclass, a kind read back from storage), any public code.
 */
export type CodeOf<K extends ErrorKind> = [ErrorKind] extends [K]
  ? ErrorCode
  : { [C in ErrorCode]: [K] extends [KindsOf<C>] ? C : never }[ErrorCode];

/** The kinds of a public code, as a list. */
export const kindsOf = (code: ErrorCode): readonly ErrorKind[] => {
  const k = (ERROR_CODES[code] as CodeEntry).kind;
  return typeof k === 'string' ? [k] : k;
};

declare const provider: unique symbol;
/**
 * An error code a model provider chose, relayed as it is with the provider's refusal: the one public code
 * that is not this service's, so it is outside the map (see {@link providerCode}).
 */
export type ProviderCode = string & { readonly [provider]: true };
/** Marks a provider's own error code for relaying. */
export const providerCode = (code: string): ProviderCode => code as ProviderCode;

/** Refusals Node's HTTP parser makes before any route runs; answered in the same OpenAI error body. */
export const PARSER_ERROR_CODES = {
  invalid_http: { status: 400, reason: 'Bad Request', message: 'The request is not valid HTTP/1.1.' },
  request_timeout: {
    status: 408,
    reason: 'Request Timeout',
    message: 'The request was not received in time.',
  },
  headers_too_large: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    message: 'The request headers exceed 16 KiB.',
  },
} as const;

/** Where a reader finds every code explained. */
export const ERROR_CODES_DOC = 'docs/reference.md#error-codes';

/** The status and title of the hosted page that answers a kind (with its public code), or null. */
export function pageAnswerOf(
  kind: ErrorKind,
  publicCode: ErrorCode | ProviderCode | undefined,
): { status: number; title: string } | null {
  const override =
    publicCode && Object.hasOwn(ERROR_CODES, publicCode)
      ? (ERROR_CODES[publicCode as ErrorCode] as CodeEntry).page
      : undefined;
  return override ?? ERROR_KINDS[kind].page;
}
