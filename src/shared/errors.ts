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
