import { invalid } from '../../shared/errors.js';
import { BUILTIN_PROVIDER, DEFAULT_PROVIDER } from './provider-client.js';

/** A provider name: lower-case letters, digits, `_` and `-`, 1 to 40 characters. */
const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,39}$/;

/** docs/reference.md §15 "Providers": omitted means `default`; `builtin` is the platform's. */
export function checkProviderName(input: unknown, field = 'name', allowBuiltin = false): string {
  if (input === undefined || input === null) return DEFAULT_PROVIDER;
  if (typeof input !== 'string' || !PROVIDER_NAME.test(input))
    throw invalid(
      `${field} must be 1 to 40 lower-case letters, digits, _ or - (starting with a letter or digit)`,
      field,
      'invalid_value',
    );
  if (input === BUILTIN_PROVIDER && !allowBuiltin)
    throw invalid(
      '"builtin" names the platform\'s built-in provider; choose another name',
      field,
      'invalid_value',
    );
  return input;
}
