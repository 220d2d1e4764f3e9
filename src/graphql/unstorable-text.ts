import type { MiddlewareFn } from 'type-graphql';
import { DomainError } from '../shared/errors.js';
import { findUnstorableText } from '../shared/text.js';

/**
 * Every argument of every field, checked once before any resolver runs: a string (or JSON object key)
 * with a NUL character or an unpaired surrogate cannot be stored by PostgreSQL and used to surface as a
 * 500 from whichever column it reached (issue 10, fuzz). It is a 400 naming the field: the argument, or
 * the field of an `input` object (`metadata`, `name`), as REST clients know them.
 */
export const rejectUnstorableText: MiddlewareFn = async ({ args }, next) => {
  if (args && Object.keys(args).length) {
    const path = findUnstorableText(args);
    if (path) {
      const param = (path[0] === 'input' && path.length > 1 ? path[1] : path[0]) ?? null;
      throw new DomainError(
        'invalid_request',
        `${param ?? 'a value'} must not contain NUL characters or unpaired UTF-16 surrogates`,
        param,
      );
    }
  }
  return next();
};
