import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { isDatabaseUnavailable } from '../db/db-errors.js';
import { DomainError, databaseUnavailable, type ErrorCode } from '../shared/errors.js';

/** GraphQL `extensions.code` for each domain error code (exhaustive). */
export function graphqlCode(code: ErrorCode): string {
  switch (code) {
    case 'invalid_request':
    case 'invalid_amount':
    case 'missing_user':
    case 'unsupported_in_mode':
    case 'request_too_large':
      return 'BAD_USER_INPUT';
    case 'unauthenticated':
      return 'UNAUTHENTICATED';
    case 'forbidden':
      return 'FORBIDDEN';
    case 'not_found':
    case 'model_not_found':
      return 'NOT_FOUND';
    case 'idempotency_in_flight':
    case 'conflict':
      return 'CONFLICT';
    case 'idempotency_mismatch':
      return 'UNPROCESSABLE';
    case 'rate_limited':
      return 'RATE_LIMITED';
    case 'upstream_error':
      return 'UPSTREAM_ERROR';
    case 'provider_not_connected':
      return 'FAILED_PRECONDITION';
    case 'unavailable':
      return 'SERVICE_UNAVAILABLE';
    case 'internal':
      return 'INTERNAL_SERVER_ERROR';
  }
}

/** Apollo `formatError`: domain errors keep their message and code; anything unknown is masked. */
export function formatGraphQLError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  let original = error instanceof GraphQLError ? error.originalError : error;
  // A database error that escaped the Database wrapper (e.g. from a forked EntityManager) is still a 503.
  if (original && !(original instanceof DomainError) && isDatabaseUnavailable(original))
    original = databaseUnavailable(original);
  if (original instanceof DomainError) {
    return {
      message: original.message,
      path: formatted.path,
      locations: formatted.locations,
      extensions: {
        code: graphqlCode(original.code),
        errorCode: original.publicCode ?? original.code,
        param: original.param,
      },
    };
  }
  // Errors of the GraphQL layer itself (syntax, validation, variable coercion) are safe to show.
  if (!original || original instanceof GraphQLError) return formatted;
  return {
    message: 'Internal server error',
    path: formatted.path,
    extensions: { code: 'INTERNAL_SERVER_ERROR' },
  };
}
