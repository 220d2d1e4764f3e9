/**
 * The time the rules see (daily limits roll over at 00:00 UTC). One object per process, so a test can
 * move it (`services.clock.now = () => …`) instead of sleeping.
 */
export interface Clock {
  now(): Date;
}

export const systemClock = (): Clock => ({ now: () => new Date() });

/** The UTC day of an instant, as `YYYY-MM-DD`. */
export const utcDay = (at: Date): string => at.toISOString().slice(0, 10);

/** The start of the next UTC day after `at` (when a daily limit resets). */
export const nextUtcMidnight = (at: Date): Date =>
  new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
