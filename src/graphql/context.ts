import DataLoader from 'dataloader';
import type { Logger } from 'pino';
import type { Auth } from '../modules/paywalls/paywall-info.js';
import type { Services } from '../services.js';
import { DomainError } from '../shared/errors.js';

/** Per-request DataLoaders, created on first use so each module owns its own. */
export class Loaders {
  private readonly map = new Map<string, unknown>();
  get<T>(name: string, make: () => T): T {
    let l = this.map.get(name) as T | undefined;
    if (!l) {
      l = make();
      this.map.set(name, l);
    }
    return l;
  }

  /** A loader whose keys are plain objects (a page: owner, first, after), told apart by their JSON. */
  keyed<K, V>(name: string, batch: (keys: readonly K[]) => Promise<V[]>): DataLoader<K, V, string> {
    return this.get(
      name,
      () => new DataLoader<K, V, string>(batch, { cacheKeyFn: (k) => JSON.stringify(k) }),
    );
  }
}

/** What every resolver sees. Built per HTTP request (or graphql-ws operation) and for each REST call. */
export interface AppContext {
  requestId: string;
  auth: Auth | null;
  /** Where the call came from, for event triggers and idempotency scope. */
  transport: 'graphql' | 'rest';
  services: Services;
  loaders: Loaders;
  log: Logger;
  /** Set by a resolver when an idempotent answer was replayed (REST adds `Idempotent-Replayed: true`). */
  replayed?: boolean;
}

export function requireAuth(ctx: AppContext): Auth {
  if (!ctx.auth) throw new DomainError('unauthenticated', 'a valid API key or owner token is required');
  return ctx.auth;
}

export function requireOwner(ctx: AppContext): string {
  const auth = requireAuth(ctx);
  if (auth.kind !== 'owner') throw new DomainError('forbidden', 'this operation needs an owner token');
  return auth.ownerId;
}

/** Resolves a bearer token to an owner or a paywall key (null when absent or unknown). */
export async function authenticate(
  services: Services,
  header: string | undefined | null,
): Promise<Auth | null> {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) return null;
  const token = m[1];
  const paywall = await services.paywalls.authenticateKey(token);
  if (paywall) return { kind: 'apiKey', paywall };
  const ownerId = await services.owners.authenticate(token);
  return ownerId ? { kind: 'owner', ownerId } : null;
}
