import type { CodeOf, ErrorCode, ErrorKind, ProviderCode } from './error-codes.js';

export type { ErrorCode, ErrorKind } from './error-codes.js';
export { providerCode } from './error-codes.js';

/**
 * Every failure a service reports: a kind (`code`, how each transport answers) and, where the public
 * code differs from the kind, that code. Both come from the closed map in `error-codes.ts`, so an unknown
 * kind, an unknown public code, or a public code of another kind does not compile.
 */
// K only checks the constructor's arguments; the fields are typed broadly, so every DomainError is one type.
export class DomainError<K extends ErrorKind = ErrorKind> extends Error {
  readonly code: ErrorKind;
  /** Public code (OpenAI `error.code`, GraphQL `extensions.errorCode`) when it differs from the kind. */
  readonly publicCode?: ErrorCode | ProviderCode;

  constructor(
    code: K,
    message: string,
    readonly param: string | null = null,
    publicCode?: CodeOf<K> | ProviderCode,
  ) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.publicCode = publicCode;
  }
}

export const invalid = (
  message: string,
  param: string | null = null,
  publicCode?: CodeOf<'invalid_request'>,
) => new DomainError('invalid_request', message, param, publicCode);
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
