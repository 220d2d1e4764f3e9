import type { ReserveResult } from '../src/modules/ledger/holds.js';
import { holdOutcome } from '../src/modules/proxy/ledger-batch.js';

/** What the hold statement decided, as the metered call reads it (src/modules/proxy/ledger-batch.ts). */
const row = (over: Partial<ReserveResult>): ReserveResult => ({
  limit: null,
  ratePosition: null,
  userId: 'u1',
  walletUserId: 'u1',
  connected: true,
  freeRaw: 1_000_000n,
  cap: 100,
  holdRaw: 5_000n,
  held: true,
  indebted: false,
  accountId: 'a1',
  debtRaw: 0n,
  ...over,
});

describe('holdOutcome', () => {
  it('a placed hold is held', () => {
    const r = row({});
    expect(holdOutcome(r)).toEqual({ kind: 'held', hold: r });
  });

  it('a user who is not connected is blocked with not_connected, whatever else the row says', () => {
    const r = row({ connected: false, held: false, limit: 'dailyRequestLimit' });
    expect(holdOutcome(r)).toEqual({ kind: 'blocked', reason: 'not_connected', hold: r });
  });

  it('a hold refused by a daily limit is blocked with rate_limited', () => {
    const r = row({ held: false, limit: 'dailySpendLimit', holdRaw: 0n });
    expect(holdOutcome(r)).toEqual({ kind: 'blocked', reason: 'rate_limited', hold: r });
  });

  it('a hold the balance cannot afford is blocked with insufficient_balance', () => {
    const r = row({ held: false, freeRaw: 3n, holdRaw: 0n, cap: 0 });
    expect(holdOutcome(r)).toEqual({ kind: 'blocked', reason: 'insufficient_balance', hold: r });
  });
});
