import type { Services } from '../../services.js';

/** End users (created on first sight per paywall), trial credits, connections, top-up links. */
export class UserService {
  constructor(private readonly s: Services) {}
}
