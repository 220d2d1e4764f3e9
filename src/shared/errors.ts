/** Every failure a service reports. Transports map codes to HTTP status / GraphQL extensions exhaustively. */
export type ErrorCode =
  | 'invalid_request'
  | 'invalid_amount'
  | 'missing_user'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'model_not_found'
  | 'unsupported_in_mode'
  | 'idempotency_in_flight'
  | 'idempotency_mismatch'
  | 'request_too_large'
  | 'rate_limited'
  | 'upstream_error'
  | 'provider_not_connected'
  | 'conflict'
  /** The database cannot be reached, or did not answer in time (restart, failover, freeze): retry later. */
  | 'unavailable'
  | 'internal';

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param: string | null = null,
    /** Public code (OpenAI `error.code`) when it differs from the internal one. */
    readonly publicCode?: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const invalid = (message: string, param: string | null = null, publicCode?: string) =>
  new DomainError('invalid_request', message, param, publicCode);
export const notFound = (what: string) => new DomainError('not_found', `${what} not found`);

/** Seconds a client is told to wait (Retry-After) after a 503 `database_unavailable`. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;

/** The one error every transport answers a database outage with (503, `database_unavailable`). */
export const databaseUnavailable = (cause?: unknown): DomainError => {
  const e = new DomainError(
    'unavailable',
    'The database is temporarily unavailable; retry shortly.',
    null,
    'database_unavailable',
  );
  if (cause !== undefined) (e as { cause?: unknown }).cause = cause;
  return e;
};
