import type {
  ProviderClient,
  UpstreamOptions,
  UpstreamResponse,
  UpstreamTarget,
} from '../providers/provider-client.js';
import { postJson } from './upstream-client.js';

/**
 * The Anthropic provider kind (docs/reference.md §15 "Messages API"): Messages bodies go to
 * `${baseUrl}/messages` (and `/messages/count_tokens`) with the provider's key in `x-api-key`, the
 * client's `anthropic-version` (default {@link DEFAULT_ANTHROPIC_VERSION}) and, when the client sent it,
 * its `anthropic-beta`. No other client header goes along: never the client's own key.
 */

/** The `anthropic-version` sent when the client sent none (the one version Anthropic's API documents). */
export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/** The client headers an Anthropic provider gets (lower case), when the client sent them. */
export const ANTHROPIC_CLIENT_HEADERS = ['anthropic-version', 'anthropic-beta'] as const;

/** A header value a provider may get: printable ASCII, at most 1 KiB (else it is not passed on). */
const passable = (v: string | undefined): v is string =>
  v !== undefined && v.length > 0 && v.length <= 1024 && /^[\x20-\x7e]+$/.test(v);

/** The Anthropic request headers of a provider request: its key, the version, the beta flags. */
export function anthropicHeaders(
  apiKey: string,
  client: Record<string, string> = {},
): Record<string, string> {
  const version = client['anthropic-version'];
  const beta = client['anthropic-beta'];
  return {
    'x-api-key': apiKey,
    'anthropic-version': passable(version) ? version : DEFAULT_ANTHROPIC_VERSION,
    ...(passable(beta) ? { 'anthropic-beta': beta } : {}),
  };
}

export const anthropicClient: ProviderClient = {
  kind: 'ANTHROPIC',
  post: (
    up: UpstreamTarget,
    endpoint: string,
    payload: string,
    opts: UpstreamOptions,
  ): Promise<UpstreamResponse> =>
    postJson(up, endpoint, payload, opts, anthropicHeaders(up.apiKey, opts.clientHeaders)),
};
