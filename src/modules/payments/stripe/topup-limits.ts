import type { Config } from '../../../config.js';
import type { Clock } from '../../../shared/clock.js';
import { DomainError } from '../../../shared/errors.js';

/** A refusal of the top-up page or of a Checkout Session: 429, with how long to wait. */
export class TopupRateLimited extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super('rate_limited', message, null, 'rate_limit_exceeded');
  }
}

/** Past this many keys, windows that ended are dropped (keeps memory bounded under a flood of IPs). */
const PRUNE_AT = 10_000;

/** Fixed-window counters per key: at most `limit` hits per `windowMs`. */
class WindowCounter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly windowMs: number,
    readonly limit: number,
  ) {}

  /** Seconds until `key` has room again; 0 when it has room now. */
  wait(key: string, now: number): number {
    const w = this.windows.get(key);
    if (!w || now - w.start >= this.windowMs || w.count < this.limit) return 0;
    return Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000));
  }

  add(key: string, now: number): void {
    const w = this.windows.get(key);
    if (w && now - w.start < this.windowMs) {
      w.count += 1;
      return;
    }
    if (this.windows.size >= PRUNE_AT)
      for (const [k, v] of this.windows) if (now - v.start >= this.windowMs) this.windows.delete(k);
    this.windows.set(key, { start: now, count: 1 });
  }
}

/** Token buckets per key: `rate` tokens per second, at most `rate` saved up (a burst of one second). */
class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(readonly rate: number) {}

  private level(key: string, now: number): number {
    const b = this.buckets.get(key);
    if (!b) return this.rate;
    return Math.min(this.rate, b.tokens + (Math.max(0, now - b.at) / 1000) * this.rate);
  }

  /** Seconds until a token is there; 0 when one is there now. */
  wait(key: string, now: number): number {
    const level = this.level(key, now);
    return level >= 1 ? 0 : Math.max(1, Math.ceil((1 - level) / this.rate));
  }

  take(key: string, now: number): void {
    const level = this.level(key, now);
    if (this.buckets.size >= PRUNE_AT)
      for (const [k, v] of this.buckets) if (now - v.at > 1000) this.buckets.delete(k);
    this.buckets.set(key, { tokens: level - 1, at: now });
  }
}

const minutes = (seconds: number) => {
  const m = Math.ceil(seconds / 60);
  return seconds < 60 ? `${seconds} second${seconds === 1 ? '' : 's'}` : `${m} minute${m === 1 ? '' : 's'}`;
};

/**
 * The limits of the public DEFAULT top-up page and of Checkout Session creation (docs/stripe.md
 * "Limits"). Anyone with a link can open the page, so it is counted per client IP, and each "Pay" per
 * IP and per top-up link (paywall + end user); calls to Stripe's Checkout create go through a token
 * bucket per Stripe key and one for all keys, below Stripe's own rate limit. Counted in this process's
 * memory (per instance), on the service clock (a test moves it instead of sleeping). Checks first,
 * then counts: a refused attempt uses up nothing.
 */
export class TopupLimiter {
  private readonly pageViews: WindowCounter;
  private readonly checkoutsByIp: WindowCounter;
  private readonly checkoutsByLink: WindowCounter;
  private readonly perKey: TokenBuckets;
  private readonly total: TokenBuckets;

  constructor(
    config: Pick<
      Config,
      | 'TOPUP_IP_VIEWS_PER_MINUTE'
      | 'TOPUP_IP_CHECKOUTS_PER_HOUR'
      | 'TOPUP_USER_CHECKOUTS_PER_HOUR'
      | 'STRIPE_CHECKOUTS_PER_SECOND'
      | 'STRIPE_CHECKOUTS_PER_SECOND_ALL'
    >,
    private readonly clock: Clock,
  ) {
    this.pageViews = new WindowCounter(60_000, config.TOPUP_IP_VIEWS_PER_MINUTE);
    this.checkoutsByIp = new WindowCounter(3_600_000, config.TOPUP_IP_CHECKOUTS_PER_HOUR);
    this.checkoutsByLink = new WindowCounter(3_600_000, config.TOPUP_USER_CHECKOUTS_PER_HOUR);
    this.perKey = new TokenBuckets(config.STRIPE_CHECKOUTS_PER_SECOND);
    this.total = new TokenBuckets(config.STRIPE_CHECKOUTS_PER_SECOND_ALL);
  }

  private now(): number {
    return this.clock.now().getTime();
  }

  /** One view of the top-up page, or one "Pay" click, from `ip`. */
  pageView(ip: string): void {
    const now = this.now();
    const wait = this.pageViews.wait(ip, now);
    if (wait > 0)
      throw new TopupRateLimited(
        `Too many top-up pages were opened from your network. Wait ${minutes(wait)}, then reload the page.`,
        wait,
      );
    this.pageViews.add(ip, now);
  }

  /**
   * One Checkout Session from the hosted page, for `link` (paywall + end user), from `ip`, with the
   * Stripe key named `account`: all limits are checked before any is counted.
   */
  checkout(ip: string, link: string, account: string): void {
    const now = this.now();
    const byLink = this.checkoutsByLink.wait(link, now);
    if (byLink > 0)
      throw new TopupRateLimited(
        `Too many payments were started for this account in the last hour (at most ${this.checkoutsByLink.limit}). ` +
          `Nothing was charged. Finish or cancel an open payment, or wait ${minutes(byLink)}, then try again.`,
        byLink,
      );
    const byIp = this.checkoutsByIp.wait(ip, now);
    if (byIp > 0)
      throw new TopupRateLimited(
        `Too many payments were started from your network in the last hour (at most ${this.checkoutsByIp.limit}). ` +
          `Nothing was charged. Wait ${minutes(byIp)}, then try again.`,
        byIp,
      );
    this.stripeCall(account, () => {
      this.checkoutsByLink.add(link, now);
      this.checkoutsByIp.add(ip, now);
    });
  }

  /**
   * One Checkout Session create call to Stripe with the key named `account` (a paywall id, or `wallet`
   * for the platform's key); `alsoCount` runs when the call is allowed.
   */
  stripeCall(account: string, alsoCount?: () => void): void {
    const now = this.now();
    const wait = Math.max(this.perKey.wait(account, now), this.total.wait('*', now));
    if (wait > 0)
      throw new TopupRateLimited(
        `Card payments are busy right now, so no payment was started and nothing was charged. ` +
          `Wait ${minutes(wait)}, then try again.`,
        wait,
      );
    this.perKey.take(account, now);
    this.total.take('*', now);
    alsoCount?.();
  }
}
