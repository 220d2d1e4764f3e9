import type { Services } from '../../services.js';

/** Deposits and manual charges: single conditional statements with their ledger entry and events. */
export class LedgerService {
  constructor(private readonly s: Services) {}
}
