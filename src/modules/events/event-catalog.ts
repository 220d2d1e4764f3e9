/** Every event type of the spec's catalogue. Webhook patterns and live subscriptions are checked against it. */
export const EVENT_TYPES = [
  'paywall.updated',
  'paywall.archived',
  'paywall.secret.rotated',
  'paywall.integration.connected',
  'paywall.integration.disconnected',
  'paywall.integration.stripe.webhook.rotated',
  'paywall.authorization.requested',
  'paywall.authorization.completed',
  'paywall.authorization.revoked',
  'paywall.authorization.declined',
  'paywall.balance.deposit.created',
  'paywall.balance.topup.link.created',
  'paywall.balance.trial.granted',
  'paywall.balance.charge.created',
  'paywall.balance.charge.completed',
  'paywall.balance.charge.failed',
  'paywall.balance.refund.created',
  'paywall.usage.charge.created',
  'paywall.usage.charge.deferred',
  'paywall.usage.charge.recovered',
  'paywall.usage.rate.limited',
  'paywall.balance.depleted',
  'paywall.request.blocked',
  'paywall.stripe.checkout.session.completed',
  'paywall.proxy.request.started',
  'paywall.proxy.request.completed',
  'paywall.proxy.request.failed',
  'paywall.proxy.request.canceled',
  'paywall.proxy.request.blocked',
  'paywall.balance.low',
  'paywall.allowance.reached',
  'paywall.balance.autotopup.succeeded',
  'paywall.balance.autotopup.failed',
  'paywall.balance.autotopup.disabled',
  'paywall.user_key.created',
  'paywall.user_key.revoked',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export const EVENT_VERSION = '1.0';

const KNOWN = new Set<string>(EVENT_TYPES);

/** Families that a `prefix.*` pattern may name: every proper dotted prefix of a catalogue name. */
const FAMILIES = new Set<string>(
  EVENT_TYPES.flatMap((t) => {
    const parts = t.split('.');
    return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join('.'));
  }),
);

/**
 * Validates subscription patterns (webhooks and live events): exact catalogue names, `prefix.*`
 * families of catalogue names, or the lone `*`. Returns an error message, or null when valid.
 */
export function validateEventPatterns(patterns: unknown): string | null {
  if (!Array.isArray(patterns) || patterns.length === 0)
    return 'events must be a non-empty array of event names';
  if (patterns.length > 100) return 'events may hold at most 100 names';
  for (const p of patterns) {
    if (typeof p !== 'string') return 'events must be strings';
    if (p === '*') {
      if (patterns.length > 1) return '"*" subscribes to everything and cannot be combined with other names';
      continue;
    }
    if (p.endsWith('.*')) {
      if (!FAMILIES.has(p.slice(0, -2))) return `unknown event family: ${p}`;
      continue;
    }
    if (!KNOWN.has(p)) return `unknown event name: ${p}`;
  }
  return null;
}

/** Same rule as the database function event_matches (migrations). */
export function eventMatches(patterns: readonly string[], type: string): boolean {
  return patterns.some(
    (p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))),
  );
}
