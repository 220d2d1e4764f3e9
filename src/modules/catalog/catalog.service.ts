import type { Services } from '../../services.js';

/** Models a paywall sells and their prices (cached in memory, invalidated by NOTIFY). */
export class CatalogService {
  constructor(private readonly s: Services) {}
}
