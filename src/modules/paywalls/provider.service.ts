import type { Services } from '../../services.js';

/** The model provider of a paywall: base URL + key encrypted at rest. */
export class ProviderService {
  constructor(private readonly s: Services) {}
}
