import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { isDatabaseUnavailable } from '../db/db-errors.js';
import { DomainError, databaseUnavailable, type ErrorKind } from '../shared/errors.js';
import { ERROR_KINDS } from '../shared/error-codes.js';

/** GraphQL `extensions.code` of each kind of domain error (from the one map, so exhaustive). */
export function graphqlCode(code: ErrorKind): string {
  return ERROR_KINDS[code].graphql;
}

/** The `extensions` a domain error carries over GraphQL: its code, its public code and the field. */
export function graphqlExtensions(e: DomainError): { code: string; errorCode: string; param: string | null } {
  return { code: graphqlCode(e.code), errorCode: e.publicCode ?? e.code, param: e.param };
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
      extensions: graphqlExtensions(original),
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
