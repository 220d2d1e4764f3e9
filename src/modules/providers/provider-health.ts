/**
 * How a paywall's providers have been answering lately (docs/reference.md §15 "Provider health"): the
 * requests and failures of the last {@link HEALTH_WINDOW_MINUTES} minutes and the last failure, per
 * provider, as this instance saw them. In memory: it costs the request path a Map lookup and two
 * increments, and it is an operator's signal, not a ledger (each instance reports what it forwarded).
 */
export const HEALTH_WINDOW_MINUTES = 5;
const MINUTE_MS = 60_000;
/** Beyond this many tracked providers the least recently used is forgotten. */
const MAX_TRACKED = 10_000;

export interface ProviderHealthSnapshot {
  /** Requests forwarded to it in the window (fallback attempts included). */
  requests: number;
  /** Of those, the ones it failed: unreachable, timed out before answering, 429, 5xx, 401 or 403. */
  errors: number;
  /** errors / requests, 0 when there were none. */
  errorRate: number;
  lastError: string | null;
  lastErrorAt: Date | null;
}

interface Track {
  /** Per minute (epoch minute → counts), at most the window's minutes. */
  minutes: Map<number, { requests: number; errors: number }>;
  lastError: string | null;
  lastErrorAt: Date | null;
}

export class ProviderHealth {
  private readonly tracks = new Map<string, Track>();

  constructor(private readonly now: () => number = Date.now) {}

  /** One attempt on a provider: `error` null when it answered (any status it is not blamed for). */
  record(paywallId: string, provider: string, error: string | null): void {
    const key = `${paywallId}\n${provider}`;
    let t = this.tracks.get(key);
    if (!t) {
      if (this.tracks.size >= MAX_TRACKED) this.tracks.delete(this.tracks.keys().next().value!);
      t = { minutes: new Map(), lastError: null, lastErrorAt: null };
      this.tracks.set(key, t);
    }
    const at = this.now();
    const minute = Math.floor(at / MINUTE_MS);
    let m = t.minutes.get(minute);
    if (!m) {
      m = { requests: 0, errors: 0 };
      t.minutes.set(minute, m);
      for (const old of t.minutes.keys()) if (old <= minute - HEALTH_WINDOW_MINUTES) t.minutes.delete(old);
    }
    m.requests++;
    if (error !== null) {
      m.errors++;
      t.lastError = error;
      t.lastErrorAt = new Date(at);
    }
  }

  /**
   * An attempt already recorded as answered turned out to be the provider's fault (it reported usage
   * the request could not produce): counted as an error of this minute, not as another request.
   */
  fault(paywallId: string, provider: string, error: string): void {
    const t = this.tracks.get(`${paywallId}\n${provider}`);
    if (!t) return this.record(paywallId, provider, error);
    const at = this.now();
    const minute = Math.floor(at / MINUTE_MS);
    const m = t.minutes.get(minute);
    if (!m) return this.record(paywallId, provider, error);
    m.errors = Math.min(m.errors + 1, m.requests);
    t.lastError = error;
    t.lastErrorAt = new Date(at);
  }

  snapshot(paywallId: string, provider: string): ProviderHealthSnapshot {
    const t = this.tracks.get(`${paywallId}\n${provider}`);
    let requests = 0;
    let errors = 0;
    const since = Math.floor(this.now() / MINUTE_MS) - HEALTH_WINDOW_MINUTES;
    if (t)
      for (const [minute, m] of t.minutes)
        if (minute > since) {
          requests += m.requests;
          errors += m.errors;
        }
    return {
      requests,
      errors,
      errorRate: requests === 0 ? 0 : errors / requests,
      lastError: t?.lastError ?? null,
      lastErrorAt: t?.lastErrorAt ?? null,
    };
  }
}
