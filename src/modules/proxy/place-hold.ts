import type { Database } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import type { EventTrigger } from '../events/event.service.js';
import { collectDebt, debtOwedElsewhere } from '../ledger/debt-collection.js';
import type { ReserveInput } from '../ledger/holds.js';
import { RateLimitError, rateState } from '../limits/rate-limit.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { holdOutcome, type HoldOutcome, type LedgerBatch } from './ledger-batch.js';

/** Creates an end user on first sight (UserService.ensureUser). */
export type EnsureUser = (
  db: Database,
  paywall: PaywallInfo,
  externalUserId: string,
  trigger: EventTrigger,
) => Promise<unknown>;

export interface PlaceHoldDeps {
  db: Database;
  ledger: LedgerBatch;
  ensureUser: EnsureUser;
  /** RATE_LIMIT_PER_MINUTE (counted by the hold's own statement) and PLATFORM_FEE_BPS (debt repayment). */
  limits: { RATE_LIMIT_PER_MINUTE?: number | null; PLATFORM_FEE_BPS: number };
}

/**
 * The hold step of a metered call: one statement against an existing end user (a first-time user is
 * created, then the hold is placed again). Over the API rate limit it throws a 429. An account that owes
 * uncollected usage repays it from what is free besides this hold; if the debt refused the hold, it is
 * decided again once repaid. Answers `held` or `blocked`.
 */
export async function placeHold(
  d: PlaceHoldDeps,
  o: { paywall: PaywallInfo; externalUserId: string; trigger: EventTrigger; input: ReserveInput; now: Date },
): Promise<HoldOutcome> {
  const { paywall, externalUserId, trigger, input: holdInput, now } = o;
  const userKey = `${paywall.id}\n${externalUserId}`;
  const reserve = (input = holdInput) => d.ledger.hold(userKey, input);
  let hold = await reserve();
  if (!hold) {
    await d.ensureUser(d.db, paywall, externalUserId, trigger);
    hold = await reserve();
    if (!hold) throw new DomainError('internal', 'end user could not be created');
  }
  const rateLimit = d.limits.RATE_LIMIT_PER_MINUTE;
  if (rateLimit && hold.ratePosition !== null && hold.ratePosition > rateLimit)
    throw new RateLimitError(rateState(rateLimit, hold.ratePosition, now));
  // The account owes uncollected usage: what is free besides this request's hold repays it (a deposit
  // since). Above MAX_UNCOLLECTED_PER_USER the request was refused: once repaid it is decided again
  // (not counted twice by the rate limit).
  const freeBesides = hold.held ? hold.freeRaw - hold.holdRaw : hold.freeRaw;
  if (hold.debtRaw > 0n && hold.accountId && hold.connected && freeBesides > 0n) {
    const repaid = await collectDebt(d.db, hold.accountId, d.limits.PLATFORM_FEE_BPS);
    if (repaid > 0n && hold.indebted) hold = (await reserve({ ...holdInput, rateLimit: null })) ?? hold;
  }
  // A SHARED wallet's debt is owed to the apps whose built-in answers left it, and only each of them
  // collects it: what other apps are owed (an allowance full, say) does not refuse this app's requests.
  if (hold.indebted && paywall.mode === 'SHARED' && hold.accountId) {
    const elsewhere = await debtOwedElsewhere(d.db, hold.accountId, paywall.id);
    if (elsewhere > 0n) {
      const maxDebtRaw = (holdInput.maxDebtRaw ?? 0n) + elsewhere;
      hold = (await reserve({ ...holdInput, rateLimit: null, maxDebtRaw })) ?? hold;
    }
  }
  return holdOutcome(hold);
}
