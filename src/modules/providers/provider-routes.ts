import { Pool, type Dispatcher } from 'undici';
import { createGuardedConnector } from '../../shared/url-guard.js';
import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { SecretBox } from '../../shared/crypto.js';
import { DomainError } from '../../shared/errors.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { KeyedLoader } from '../../shared/keyed-loader.js';
import {
  BUILTIN_PROVIDER,
  DEFAULT_PROVIDER,
  type CapParameter,
  type ProviderKind,
} from './provider-client.js';
import { builtinApplies } from './builtin-provider.js';

type ProviderRow = {
  name: string;
  kind: ProviderKind;
  base_url: string;
  api_key_ciphertext: string;
  cap_parameter: CapParameter;
};

/** Where and how the proxy forwards a paywall's requests to one of its providers. */
export interface Upstream {
  /** The provider's name (`default`, `builtin`, or the one it was connected with). */
  name: string;
  kind: ProviderKind;
  /** Absolute http(s) URL without a trailing slash, e.g. `http://127.0.0.1:5555/v1`. */
  baseUrl: string;
  /** The provider key, decrypted. Never log it. */
  apiKey: string;
  /** Keep-alive undici Pool for the origin of `baseUrl`; follows no redirects. */
  dispatcher: Dispatcher;
  /** The chat cap field when the client sent none (docs/reference.md §13 "Cap sent upstream"). */
  capParameter: CapParameter;
}

/** What the provider and catalogue rules need to know of a paywall (a PaywallInfo will do). */
export type PaywallRef = Pick<PaywallInfo, 'id' | 'mode' | 'markupPpm'>;

/** What routes a model (docs/reference.md §15 "Routing"): a ModelPriceInfo will do. */
export interface ModelRoute {
  /** The provider's name; null = `default`, then the built-in provider. */
  provider: string | null;
  /** Provider names tried in order after it. */
  fallbacks: readonly string[];
}

export const CHANGED_CHANNEL = 'provider_changed';
/** Safety net only: changes evict at once (locally, and through NOTIFY on other instances). */
const POSITIVE_TTL_MS = 5 * 60_000;
/** "No provider" and "cannot decrypt" answers are re-checked soon, so a fix shows up quickly. */
const NEGATIVE_TTL_MS = 5_000;
/**
 * A replaced pool is closed this long after it stopped being handed out: a request that got the old
 * Upstream just before the change may still be between its hold and its dispatch. close() itself is
 * graceful (in-flight requests finish).
 */
const RETIRE_DELAY_MS = 10_000;
const STOP_CLOSE_TIMEOUT_MS = 5_000;

/** One provider as cached: what it was built from (a reload with the same keeps its pool), and the result. */
interface Built {
  fingerprint: string;
  /** The upstream, or why it cannot be used (its key cannot be decrypted). */
  upstream: Upstream | DomainError;
}

interface Entry {
  /** The paywall's providers by name; empty when it has none. */
  providers: Map<string, Built>;
  expires: number;
}

const fingerprintOf = (r: ProviderRow) =>
  `${r.kind}\n${r.base_url}\n${r.api_key_ciphertext}\n${r.cap_parameter}`;
const poolOf = (b: Built): Dispatcher | null =>
  b.upstream instanceof DomainError ? null : b.upstream.dispatcher;

/** What the routes need: the provider rows, the settings their pools follow, and the key box. */
export interface ProviderRoutesDeps {
  db: Database;
  config: Pick<Config, 'BUILTIN_PROVIDER' | 'UPSTREAM_TIMEOUT_MS' | 'PROVIDER_ALLOW_PRIVATE_NETWORKS'>;
  log: Logger;
  /** Decrypts a stored key bound to its paywall. */
  box: () => SecretBox;
}

/**
 * Where a paywall's requests go (docs/reference.md §15 "Routing", "Fallbacks"): each provider as an
 * Upstream with its decrypted key and its keep-alive undici Pool, cached per paywall.
 *
 * The request path calls {@link getUpstream} on every chat request: a Map lookup after the first call.
 * A change evicts the entry at once on this instance ({@link evict}) and through NOTIFY
 * `provider_changed` on the others; the entry is then reloaded in the background and a pool whose
 * configuration changed is retired (closed gracefully).
 *
 * Base URLs may be http or https and may point at loopback or private addresses: self-hosted models
 * (vLLM, Ollama, LM Studio) usually live there. The URL is chosen by an authenticated paywall owner.
 * The built-in provider (see builtin-provider.ts) is served from one pool for every paywall.
 */
export class ProviderRoutes {
  private readonly cache = new Map<string, Entry>();
  private readonly loader = new KeyedLoader<ProviderRow[], Entry>(
    (paywallId) =>
      this.deps.db.query<ProviderRow>(
        'select name, kind, base_url, api_key_ciphertext, cap_parameter from provider where paywall_id = $1',
        [paywallId],
        'provider_upstreams',
      ),
    (paywallId, rows) => this.remember(paywallId, rows),
  );
  private readonly retiring = new Map<Dispatcher, NodeJS.Timeout>();
  /** The built-in provider's upstream, built on first use. */
  private builtinUpstream?: Upstream;
  private unlisten?: () => void;
  private unReconnect?: () => void;
  private stopped = false;

  constructor(private readonly deps: ProviderRoutesDeps) {}

  async start(): Promise<void> {
    this.unlisten = await this.deps.db.listen(CHANGED_CHANNEL, (paywallId) => this.evict(paywallId));
    // Changes notified while the LISTEN connection was down were missed: every entry is read again on
    // its next use (a pool whose provider did not change is kept; see remember).
    this.unReconnect = this.deps.db.onReconnect(() => this.expireAll());
  }

  private expireAll(): void {
    this.loader.invalidateAll();
    for (const entry of this.cache.values()) entry.expires = 0;
  }

  /** Closes every pool; in-flight requests get a few seconds to finish, then are cut. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unlisten?.();
    this.unReconnect?.();
    const pools = new Set<Dispatcher>();
    for (const e of this.cache.values())
      for (const b of e.providers.values()) {
        const pool = poolOf(b);
        if (pool) pools.add(pool);
      }
    if (this.builtinUpstream) pools.add(this.builtinUpstream.dispatcher);
    this.builtinUpstream = undefined;
    for (const [pool, timer] of this.retiring) {
      clearTimeout(timer);
      pools.add(pool);
    }
    this.cache.clear();
    this.retiring.clear();
    await Promise.all([...pools].map(closeWithin));
  }

  /**
   * A paywall's provider by name: `default` is its own provider of that name, else the built-in provider
   * when it serves the paywall ({@link servedByBuiltin}); `builtin` is the built-in provider wherever it
   * applies. Null when there is none. Hot path: cached per paywall. Throws `provider_not_connected`
   * when its stored key cannot be decrypted (ENCRYPTION_KEY changed): a broken own `default` provider
   * does not fall back to the built-in one.
   */
  async getUpstream(paywall: PaywallRef, name: string = DEFAULT_PROVIDER): Promise<Upstream | null> {
    const entry = await this.entry(paywall.id);
    const own = entry.providers.get(name);
    if (own) {
      if (own.upstream instanceof DomainError) throw own.upstream;
      return own.upstream;
    }
    if (name !== DEFAULT_PROVIDER && name !== BUILTIN_PROVIDER) return null;
    return builtinApplies(this.deps.config, paywall, true) ? this.builtin() : null;
  }

  /**
   * The providers a model's request is tried on, in order (docs/reference.md §15 "Routing", "Fallbacks"):
   * its provider, then each fallback that is connected and usable (one that is not is skipped). Throws
   * `provider_not_connected` when the model's own provider is missing or unusable.
   */
  async route(paywall: PaywallRef, model: ModelRoute): Promise<Upstream[]> {
    const name = model.provider ?? DEFAULT_PROVIDER;
    const first = await this.getUpstream(paywall, name);
    if (!first)
      throw new DomainError(
        'provider_not_connected',
        name === DEFAULT_PROVIDER
          ? 'This paywall has no model provider connected.'
          : `This paywall has no model provider named "${name}" connected.`,
        null,
        'provider_not_connected',
      );
    if (model.fallbacks.length === 0) return [first];
    const route = [first];
    for (const fallback of model.fallbacks) {
      const up = await this.getUpstream(paywall, fallback).catch(() => null);
      if (up && !route.includes(up)) route.push(up);
    }
    return route;
  }

  /**
   * True when the built-in provider serves the paywall: SHARED mode, the built-in provider configured,
   * no provider of its own, and a markup of at least 1 (a paywall whose markup is below 1 — possible
   * only after disconnecting its own provider — is not served below cost: it sells nothing until it
   * raises the markup or connects a provider). The catalogue uses the same answer, so what is listed,
   * priced and forwarded always agree.
   */
  async servedByBuiltin(paywall: PaywallRef): Promise<boolean> {
    if (!builtinApplies(this.deps.config, paywall, true)) return false;
    return !(await this.entry(paywall.id)).providers.has(DEFAULT_PROVIDER);
  }

  /** The part of {@link servedByBuiltin} that needs no lookup (for a resolver that batches the rest). */
  builtinMayServe(paywall: PaywallRef): boolean {
    return builtinApplies(this.deps.config, paywall, true);
  }

  /** Whether updatePaywall must keep the markup at 1 or more (the built-in provider would serve). */
  async builtinNeedsMarkup(paywall: PaywallRef): Promise<boolean> {
    if (!builtinApplies(this.deps.config, paywall, false)) return false;
    return !(await this.entry(paywall.id)).providers.has(DEFAULT_PROVIDER);
  }

  private async entry(paywallId: string): Promise<Entry> {
    const hit = this.cache.get(paywallId);
    return hit && hit.expires > Date.now() ? hit : this.loader.load(paywallId);
  }

  private builtin(): Upstream {
    if (!this.builtinUpstream) {
      const { baseUrl, apiKey, capParameter } = this.deps.config.BUILTIN_PROVIDER!;
      this.builtinUpstream = {
        name: BUILTIN_PROVIDER,
        kind: 'OPENAI',
        baseUrl,
        apiKey,
        capParameter,
        dispatcher: this.pool(baseUrl, false),
      };
    }
    return this.builtinUpstream;
  }

  /**
   * A keep-alive pool to a provider's origin. A paywall's own provider connects through the URL guard
   * (the address the socket really connects to must be public, docs/reference.md §1) unless
   * PROVIDER_ALLOW_PRIVATE_NETWORKS; the operator's built-in provider is trusted as configured.
   */
  private pool(baseUrl: string, guarded = true): Dispatcher {
    const timeout = this.deps.config.UPSTREAM_TIMEOUT_MS;
    const connect =
      guarded && !this.deps.config.PROVIDER_ALLOW_PRIVATE_NETWORKS
        ? createGuardedConnector({ allowPrivate: false, timeoutMs: 10_000 })
        : { timeout: 10_000 };
    return new Pool(new URL(baseUrl).origin, {
      connections: 128,
      pipelining: 1,
      headersTimeout: timeout,
      bodyTimeout: timeout,
      connect,
      keepAliveTimeout: 30_000,
    });
  }

  private remember(paywallId: string, rows: ProviderRow[]): Entry {
    const current = this.cache.get(paywallId);
    const providers = new Map<string, Built>();
    const positive = rows.length > 0;
    for (const row of rows) {
      const fingerprint = fingerprintOf(row);
      const kept = current?.providers.get(row.name);
      // Same configuration, usable: keep its pool (an unusable one is tried again).
      providers.set(
        row.name,
        kept && kept.fingerprint === fingerprint && !(kept.upstream instanceof DomainError)
          ? kept
          : this.build(paywallId, row, fingerprint),
      );
    }
    const usable = [...providers.values()].every((b) => !(b.upstream instanceof DomainError));
    const entry: Entry = {
      providers,
      expires: Date.now() + (positive && usable ? POSITIVE_TTL_MS : NEGATIVE_TTL_MS),
    };
    if (this.stopped) {
      for (const [name, b] of providers) {
        const pool = poolOf(b);
        if (pool && current?.providers.get(name) !== b) void closeWithin(pool);
      }
      return entry;
    }
    // Whatever is cached now (maybe set by a concurrent load) and not kept: retire its pool.
    const previous = this.cache.get(paywallId);
    if (previous)
      for (const [name, b] of previous.providers) {
        const pool = poolOf(b);
        if (pool && providers.get(name) !== b) this.retire(pool);
      }
    this.cache.set(paywallId, entry);
    return entry;
  }

  private build(paywallId: string, row: ProviderRow, fingerprint: string): Built {
    let apiKey: string;
    try {
      apiKey = this.deps.box().decrypt(row.api_key_ciphertext, paywallId);
    } catch (e) {
      this.deps.log.error(
        { paywallId, provider: row.name, reason: (e as any)?.reason },
        'provider key cannot be decrypted: ENCRYPTION_KEY differs from the one it was stored with',
      );
      return {
        fingerprint,
        upstream: new DomainError(
          'provider_not_connected',
          'The provider key of this paywall cannot be decrypted on this server; connect the provider again.',
        ),
      };
    }
    return {
      fingerprint,
      upstream: {
        name: row.name,
        kind: row.kind,
        baseUrl: row.base_url,
        apiKey,
        dispatcher: this.pool(row.base_url),
        capParameter: row.cap_parameter,
      },
    };
  }

  private retire(pool: Dispatcher): void {
    if (this.retiring.has(pool)) return;
    const timer = setTimeout(() => {
      this.retiring.delete(pool);
      void closeWithin(pool);
    }, RETIRE_DELAY_MS);
    timer.unref();
    this.retiring.set(pool, timer);
  }

  /**
   * Forgets the cached upstream at once (the next request reads the database) and, when the paywall was
   * in use here, reloads it in the background so a replaced pool is retired without waiting for traffic.
   */
  evict(paywallId: string): void {
    this.loader.invalidate(paywallId);
    const entry = this.cache.get(paywallId);
    if (!entry) return;
    entry.expires = 0;
    if (entry.providers.size > 0 && !this.stopped)
      this.loader
        .load(paywallId)
        .catch((err) => this.deps.log.warn({ err, paywallId }, 'provider reload failed'));
  }
}

async function closeWithin(pool: Dispatcher): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      pool.close(),
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          pool.destroy().then(resolve, resolve);
        }, STOP_CLOSE_TIMEOUT_MS);
        timer.unref();
      }),
    ]);
  } catch {
    /* already closed or destroyed */
  } finally {
    clearTimeout(timer);
  }
}
