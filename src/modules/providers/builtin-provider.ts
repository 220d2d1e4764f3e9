import type { Config } from '../../config.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';

/*
 * The platform's built-in provider (docs/reference.md §8): the operator's `BUILTIN_PROVIDER_BASE_URL` /
 * `_API_KEY` serve a SHARED paywall that has no provider of its own. Its URL is set by the operator, not
 * by a paywall owner, so it is not subject to the rules for provider URLs; one pool serves every paywall.
 */

/** markup 1 in millionths: the built-in provider never sells below its cost. */
const MIN_BUILTIN_MARKUP_PPM = 1_000_000n;

/** The paywall-independent part of the built-in rule: configured, SHARED, (optionally) markup ≥ 1. */
export function builtinApplies(
  config: Pick<Config, 'BUILTIN_PROVIDER'>,
  paywall: Pick<PaywallInfo, 'mode' | 'markupPpm'>,
  checkMarkup: boolean,
): boolean {
  return (
    config.BUILTIN_PROVIDER !== null &&
    paywall.mode === 'SHARED' &&
    (!checkMarkup || paywall.markupPpm >= MIN_BUILTIN_MARKUP_PPM)
  );
}
