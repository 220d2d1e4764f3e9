import type { Services } from '../../services.js';

/** Chat completions: authorize → hold → forward → meter → settle. */
export class ProxyService {
  constructor(private readonly s: Services) {}
}
