import { assertPublicHost, UrlGuardError } from '../../shared/url-guard.js';
import { invalid } from '../../shared/errors.js';
import {
  CAP_PARAMETERS,
  DEFAULT_CAP_PARAMETER,
  PROVIDER_KINDS,
  type CapParameter,
  type ProviderKind,
} from './provider-client.js';

// The checks a provider's fields pass when it is connected, before anything is stored or encrypted.

const MAX_BASE_URL_LENGTH = 2048;
const MAX_API_KEY_LENGTH = 4096;

/**
 * An absolute http(s) URL with no credentials, query or fragment; returned as origin + path without a
 * trailing slash (`https://api.openai.com/v1/` → `https://api.openai.com/v1`), so the proxy appends
 * `/chat/completions`.
 */
export function normalizeBaseUrl(input: unknown): string {
  const fail = (why: string) => invalid(`baseUrl ${why}`, 'baseUrl', 'invalid_base_url');
  if (typeof input !== 'string' || input.trim() === '') throw fail('is required');
  const raw = input.trim();
  if (raw.length > MAX_BASE_URL_LENGTH) throw fail(`must be at most ${MAX_BASE_URL_LENGTH} characters`);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw fail('must be an absolute http(s) URL, e.g. https://api.openai.com/v1');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw fail('must use http or https');
  if (u.username || u.password) throw fail('must not contain credentials; pass the key as apiKey');
  if (!u.hostname) throw fail('must name a host');
  if (raw.includes('?') || raw.includes('#')) throw fail('must not have a query or fragment');
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
}

/**
 * docs/reference.md §1 "Provider targets": a provider's host must resolve to public addresses only (checked here
 * at connect time, and again by the pool's guarded connector for every connection).
 */
export async function checkPublicBaseUrl(baseUrl: string): Promise<void> {
  try {
    await assertPublicHost(new URL(baseUrl), 'baseUrl');
  } catch (e) {
    if (!(e instanceof UrlGuardError)) throw e;
    throw invalid(
      `${e.message}. Provider base URLs must be public; for a self-hosted model on a private network ` +
        '(Ollama, vLLM) start the service with PROVIDER_ALLOW_PRIVATE_NETWORKS=true.',
      'baseUrl',
      'forbidden_base_url',
    );
  }
}

export function checkKind(input: unknown): ProviderKind {
  if (input === undefined || input === null) return 'OPENAI';
  if (typeof input !== 'string' || !(PROVIDER_KINDS as readonly string[]).includes(input))
    throw invalid(`kind must be one of ${PROVIDER_KINDS.join(', ')}`, 'kind', 'invalid_value');
  return input as ProviderKind;
}

/** A provider key is sent as a header value: printable ASCII without spaces, 1 to 4096 characters. */
export function checkApiKey(input: unknown): string {
  const key = typeof input === 'string' ? input.trim() : '';
  if (!key || key.length > MAX_API_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key))
    // The message never echoes the value: it is a secret.
    throw invalid(
      `apiKey must be 1 to ${MAX_API_KEY_LENGTH} printable ASCII characters without spaces`,
      'apiKey',
      'invalid_provider_key',
    );
  return key;
}

/** docs/reference.md §13 "Cap sent upstream": one of CAP_PARAMETERS; omitted means MAX_COMPLETION_TOKENS. */
export function checkCapParameter(input: unknown): CapParameter {
  if (input === undefined || input === null) return DEFAULT_CAP_PARAMETER;
  if (typeof input !== 'string' || !(CAP_PARAMETERS as readonly string[]).includes(input))
    throw invalid(
      `capParameter must be one of ${CAP_PARAMETERS.join(', ')}`,
      'capParameter',
      'invalid_value',
    );
  return input as CapParameter;
}
