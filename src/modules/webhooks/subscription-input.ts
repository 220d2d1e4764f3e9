import { invalid } from '../../shared/errors.js';
import { UrlGuardError, validateWebhookUrl } from '../../shared/url-guard.js';
import { validateEventPatterns } from '../events/event-catalog.js';

// The input rules of a webhook subscription (the spec's "Webhook endpoints" and "Limits"); each failure
// names its field.

export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 512;
export const MAX_CUSTOM_HEADERS = 10;
export const MAX_HEADER_NAME_LENGTH = 256;
export const MAX_HEADER_VALUE_LENGTH = 1024;

/**
 * Header names a subscription may not set: the ones that frame the HTTP message (a wrong value breaks the
 * request or smuggles another one), the ones that describe the signed body, and our own identity. Every
 * `X-Service-*` name is ours as well (checked by prefix): a receiver must be able to trust those, and so are
 * the three Standard Webhooks headers (docs/reference.md §17).
 * `Authorization` is allowed on purpose: receivers commonly gate their endpoint with a static token.
 */
const RESERVED_HEADERS = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'host',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'user-agent',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);
const RESERVED_HEADER_PREFIXES = ['x-service-', 'proxy-'];
/** RFC 9110 `token`. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII, space and tab: what every HTTP stack sends unchanged (no CR/LF, no control bytes). */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
/** A pre-shared secret: visible ASCII without whitespace, so it survives copy-paste and env files intact. */
const PRESHARED_SECRET = /^[\x21-\x7e]{16,256}$/;

export interface CreateSubscriptionInput {
  paywallId?: string | null;
  url: unknown;
  events: unknown;
  description?: unknown;
  customHeaders?: unknown;
  secret?: unknown;
}

export function checkEvents(events: unknown): string[] {
  const problem = validateEventPatterns(events);
  if (problem) throw invalid(problem, 'events');
  return [...new Set(events as string[])];
}

/** Optional; trimmed, then cut to 512 characters (code points, so no emoji is split in half). */
export function checkDescription(description: unknown): string | null {
  if (description == null) return null;
  if (typeof description !== 'string') throw invalid('description must be a string', 'description');
  if (description.includes('\u0000'))
    throw invalid('description must not contain NUL characters', 'description');
  const trimmed = Array.from(description.trim()).slice(0, MAX_DESCRIPTION_LENGTH).join('').trim();
  return trimmed === '' ? null : trimmed;
}

export function checkCustomHeaders(headers: unknown): Record<string, string> {
  if (headers == null) return {};
  if (typeof headers !== 'object' || Array.isArray(headers))
    throw invalid('customHeaders must be an object of header names to string values', 'customHeaders');
  const entries = Object.entries(headers as Record<string, unknown>);
  if (entries.length > MAX_CUSTOM_HEADERS)
    throw invalid(`customHeaders may hold at most ${MAX_CUSTOM_HEADERS} entries`, 'customHeaders');
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name) || name.length > MAX_HEADER_NAME_LENGTH)
      throw invalid(`customHeaders: "${name}" is not a valid HTTP header name`, 'customHeaders');
    if (RESERVED_HEADERS.has(lower) || RESERVED_HEADER_PREFIXES.some((p) => lower.startsWith(p)))
      throw invalid(`customHeaders: ${name} is set by the service and cannot be overridden`, 'customHeaders');
    if (seen.has(lower)) throw invalid(`customHeaders: ${name} is given twice`, 'customHeaders');
    seen.add(lower);
    if (typeof value !== 'string')
      throw invalid(`customHeaders: the value of ${name} must be a string`, 'customHeaders');
    if (value.length > MAX_HEADER_VALUE_LENGTH || !HEADER_VALUE.test(value))
      throw invalid(
        `customHeaders: the value of ${name} must be at most ${MAX_HEADER_VALUE_LENGTH} printable ASCII characters (no line breaks)`,
        'customHeaders',
      );
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

export function checkSecret(secret: unknown): string {
  if (typeof secret !== 'string' || !PRESHARED_SECRET.test(secret))
    throw invalid('secret must be 16 to 256 printable characters without whitespace', 'secret');
  return secret;
}

/** The receiver's URL, parsed and checked by the URL guard (private networks only when allowed). */
export async function checkUrl(url: unknown, allowPrivate: boolean): Promise<string> {
  if (typeof url !== 'string' || url.trim() === '') throw invalid('url is required', 'url');
  if (url.length > MAX_URL_LENGTH) throw invalid(`url must be at most ${MAX_URL_LENGTH} characters`, 'url');
  try {
    // Store the parsed form: what the guard checked is exactly what the worker will connect to.
    const parsed = await validateWebhookUrl(url.trim(), { allowPrivate });
    return parsed.href;
  } catch (e) {
    if (e instanceof UrlGuardError)
      throw invalid(`${e.message}.${privateHint(e, url)}`, 'url', 'invalid_webhook_url');
    throw e;
  }
}

/**
 * What lifts a refusal that WEBHOOK_ALLOW_PRIVATE_NETWORKS would lift (an http: URL, a local or private
 * target): a developer's local receiver is the usual case. Never for a host that did not resolve: that
 * is a DNS failure, not a private network.
 */
function privateHint(e: UrlGuardError, url: string): string {
  const lifted =
    e.reason === 'forbidden_address' ||
    e.reason === 'forbidden_host' ||
    (e.reason === 'unsupported_scheme' && /^http:/i.test(url.trim()));
  return lifted
    ? ' For a receiver on this machine or a private network (e.g. http://localhost:3000/hooks in development), start the service with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true.'
    : '';
}
