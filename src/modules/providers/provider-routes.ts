import { Pool, type Dispatcher } from 'undici';
import { assertPublicHost, createGuardedConnector, UrlGuardError } from '../../shared/url-guard.js';
import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import { loadSecretBox, type SecretBox } from '../../shared/crypto.js';
import { DomainError, invalid } from '../../shared/errors.js';
import { recordEvents, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { KeyedLoader } from '../../shared/keyed-loader.js';
import { checkProviderName } from './provider-name.js';
import {
  CAP_PARAMETERS,
  DEFAULT_CAP_PARAMETER,
  PROVIDER_KINDS,
  BUILTIN_PROVIDER,
  DEFAULT_PROVIDER,
  type CapParameter,
  type ProviderKind,
} from './provider-client.js';

type ProviderRow = {
  name: string;
  kind: ProviderKind;
  base_url: string;
  api_key_ciphertext: string;
  cap_parameter: CapParameter;
};

export { BUILTIN_PROVIDER, DEFAULT_PROVIDER };
export const MAX_PROVIDERS_PER_PAYWALL = 20;

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

/** markup 1 in millionths: the built-in provider never sells below its cost. */
const MIN_BUILTIN_MARKUP_PPM = 1_000_000n;

/** What the API shows about a connected provider: never the key itself. */
export interface ProviderInfo {
  paywallId: string;
  name: string;
  kind: ProviderKind;
  /** The platform's built-in provider (no key of the paywall's). */
  builtin: boolean;
  baseUrl: string;
  apiKeyLastFour: string;
  capParameter: CapParameter;
  connectedAt: Date;
  updatedAt: Date;
}

export interface ConnectProviderInput {
  paywallId?: string | null;
  baseUrl: string;
  apiKey: string;
  /** Omitted or null: `default` (the provider replaced by a connect that names none). */
  name?: string | null;
  /** Omitted or null: OPENAI. */
  kind?: ProviderKind | null;
  /** Omitted or null: MAX_COMPLETION_TOKENS (a connect states the whole provider, this field included). */
  capParameter?: CapParameter | null;
}

/** What routes a model (docs/reference.md §15 "Routing"): a ModelPriceInfo will do. */
export interface ModelRoute {
  /** The provider's name; null = `default`, then the built-in provider. */
  provider: string | null;
  /** Provider names tried in order after it. */
  fallbacks: readonly string[];
}

const CHANGED_CHANNEL = 'provider_changed';
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
const MAX_BASE_URL_LENGTH = 2048;
const MAX_API_KEY_LENGTH = 4096;
const INTEGRATION_KEY = 'provider';

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

/** What the provider service needs (it reaches paywalls to check the caller may manage one). */
export interface ProviderServiceDeps {
  db: Database;
  config: Pick<
    Config,
    | 'BUILTIN_PROVIDER'
    | 'UPSTREAM_TIMEOUT_MS'
    | 'PROVIDER_ALLOW_PRIVATE_NETWORKS'
    | 'ENCRYPTION_KEY'
    | 'DATA_DIR'
  >;
  log: Logger;
  paywalls: Pick<PaywallService, 'resolve'>;
}

/**
 * The model provider of a paywall: any OpenAI-compatible base URL and its key, the key encrypted at rest
 * (AES-256-GCM, see shared/crypto.ts), never returned and never logged.
 *
 * The request path calls {@link getUpstream} on every chat request: a Map lookup after the first call.
 * Each paywall's upstream owns one keep-alive undici Pool. Connecting or disconnecting evicts the entry at
 * once on this instance and through NOTIFY `provider_changed` on the others; the entry is then reloaded
 * in the background and a pool whose configuration changed is retired (closed gracefully).
 *
 * Base URLs may be http or https and may point at loopback or private addresses: self-hosted models
 * (vLLM, Ollama, LM Studio) usually live there. The URL is chosen by an authenticated paywall owner.
 *
 * Built-in provider (docs/reference.md §8): the operator's `BUILTIN_PROVIDER_BASE_URL` / `_API_KEY` serve a
 * SHARED paywall that has no provider of its own (see {@link servedByBuiltin}). Its URL is set by the
 * operator, not by a paywall owner, so it is not subject to the rules for provider URLs; one pool
 * serves every paywall.
 */
export class ProviderService {
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
  private secretBox?: SecretBox;
  private unlisten?: () => void;
  private unReconnect?: () => void;
  private stopped = false;

  constructor(private readonly deps: ProviderServiceDeps) {}

  async start(): Promise<void> {
    this.box(); // fail at start, not on the first request, when the key file cannot be read or written
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

  private box(): SecretBox {
    if (!this.secretBox) {
      const loaded = loadSecretBox(this.deps.config);
      if (loaded.generated)
        this.deps.log.warn(
          { path: loaded.path },
          'ENCRYPTION_KEY is not set: generated a key file for provider keys. Production must set ENCRYPTION_KEY (the same on every instance).',
        );
      this.secretBox = loaded.box;
    }
    return this.secretBox;
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
      apiKey = this.box().decrypt(row.api_key_ciphertext, paywallId);
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
  private evict(paywallId: string): void {
    this.loader.invalidate(paywallId);
    const entry = this.cache.get(paywallId);
    if (!entry) return;
    entry.expires = 0;
    if (entry.providers.size > 0 && !this.stopped)
      this.loader
        .load(paywallId)
        .catch((err) => this.deps.log.warn({ err, paywallId }, 'provider reload failed'));
  }

  /**
   * Connects (or replaces) a named provider of a paywall (docs/reference.md §15 "Providers"); records
   * `paywall.integration.connected` naming it.
   */
  async connect(auth: Auth, input: ConnectProviderInput): Promise<PaywallInfo> {
    const paywall = await this.deps.paywalls.resolve(auth, input.paywallId);
    const name = checkProviderName(input.name);
    const kind = checkKind(input.kind);
    const baseUrl = normalizeBaseUrl(input.baseUrl);
    const apiKey = checkApiKey(input.apiKey);
    const capParameter = checkCapParameter(input.capParameter);
    if (!this.deps.config.PROVIDER_ALLOW_PRIVATE_NETWORKS) await checkPublicBaseUrl(baseUrl);
    // Bound to the paywall id: a ciphertext copied to another paywall's row does not decrypt there.
    const ciphertext = this.box().encrypt(apiKey, paywall.id);
    const lastFour = apiKey.length >= 12 ? apiKey.slice(-4) : '';
    const trigger = actorOf(auth);
    await this.deps.db.transaction(async (tx) => {
      // One statement: a new name is not inserted when the paywall already has the maximum.
      const rows = await tx.query<{ inserted: boolean }>(
        `insert into provider (paywall_id, name, kind, base_url, api_key_ciphertext, api_key_last_four, cap_parameter, created_at, updated_at)
         select $1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, now(), now()
          where (select count(*) from provider where paywall_id = $1::uuid) < $8::int
             or exists (select 1 from provider where paywall_id = $1::uuid and name = $2::text)
         on conflict (paywall_id, name) do update
           set kind = excluded.kind, base_url = excluded.base_url,
               api_key_ciphertext = excluded.api_key_ciphertext,
               api_key_last_four = excluded.api_key_last_four, cap_parameter = excluded.cap_parameter,
               updated_at = now()
         returning (xmax = 0) as inserted`,
        [paywall.id, name, kind, baseUrl, ciphertext, lastFour, capParameter, MAX_PROVIDERS_PER_PAYWALL],
      );
      if (rows.length === 0)
        throw invalid(
          `a paywall has at most ${MAX_PROVIDERS_PER_PAYWALL} providers; disconnect one first`,
          'name',
          'too_many_providers',
        );
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.connected',
          {
            paywall,
            trigger,
            subject: { type: 'paywall', id: paywall.id },
            metadata: { baseUrl, replaced: !rows[0].inserted },
          },
          { integrationKey: INTEGRATION_KEY, enabledBy: trigger.actorId, provider: name, kind },
        ),
      ]);
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
    });
    this.evict(paywall.id);
    this.deps.log.info(
      { paywallId: paywall.id, provider: name, kind, baseUrl, capParameter },
      'provider connected',
    );
    return paywall;
  }

  /**
   * Removes a named provider of a paywall (`default` when none is named); records
   * `paywall.integration.disconnected` naming it. Idempotent: with no such provider nothing changes and
   * no event is recorded. Allowed on an archived paywall, so an owner can always withdraw a key.
   */
  async disconnect(
    auth: Auth,
    paywallId?: string | null,
    providerName?: string | null,
  ): Promise<PaywallInfo> {
    const paywall = await this.deps.paywalls.resolve(auth, paywallId, { allowArchived: true });
    const name = checkProviderName(providerName);
    const trigger = actorOf(auth);
    const removed = await this.deps.db.transaction(async (tx) => {
      const rows = await tx.query<{ base_url: string; kind: ProviderKind }>(
        'delete from provider where paywall_id = $1 and name = $2 returning base_url, kind',
        [paywall.id, name],
      );
      if (rows.length === 0) return false;
      await recordEvents(tx, [
        buildEvent(
          'paywall.integration.disconnected',
          {
            paywall,
            trigger,
            subject: { type: 'paywall', id: paywall.id },
            metadata: { baseUrl: rows[0].base_url },
          },
          {
            integrationKey: INTEGRATION_KEY,
            disabledBy: trigger.actorId,
            provider: name,
            kind: rows[0].kind,
          },
        ),
      ]);
      await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, paywall.id]);
      return true;
    });
    if (removed) {
      this.evict(paywall.id);
      this.deps.log.info({ paywallId: paywall.id, provider: name }, 'provider disconnected');
    }
    return paywall;
  }

  /** The providers of several paywalls (in the order asked, each by name), for a DataLoader. */
  async infoMany(paywallIds: readonly string[]): Promise<ProviderInfo[][]> {
    const rows = await this.deps.db.query<{
      paywall_id: string;
      name: string;
      kind: ProviderKind;
      base_url: string;
      api_key_last_four: string;
      cap_parameter: CapParameter;
      created_at: string | Date;
      updated_at: string | Date;
    }>(
      `select paywall_id, name, kind, base_url, api_key_last_four, cap_parameter, created_at, updated_at
         from provider where paywall_id = any($1::uuid[]) order by paywall_id, name`,
      [paywallIds],
    );
    const byId = new Map<string, ProviderInfo[]>(paywallIds.map((id) => [id, []]));
    for (const r of rows)
      byId.get(r.paywall_id)?.push({
        paywallId: r.paywall_id,
        name: r.name,
        kind: r.kind,
        builtin: false,
        baseUrl: r.base_url,
        apiKeyLastFour: r.api_key_last_four,
        capParameter: r.cap_parameter,
        connectedAt: new Date(r.created_at),
        updatedAt: new Date(r.updated_at),
      });
    return paywallIds.map((id) => byId.get(id)!);
  }

  /** The built-in provider as a SHARED paywall's providers list shows it (no key of the paywall's), or null. */
  builtinInfo(paywall: PaywallRef): ProviderInfo | null {
    const b = this.deps.config.BUILTIN_PROVIDER;
    if (!b || !builtinApplies(this.deps.config, paywall, false)) return null;
    const since = new Date(0);
    return {
      paywallId: paywall.id,
      name: BUILTIN_PROVIDER,
      kind: 'OPENAI',
      builtin: true,
      baseUrl: b.baseUrl,
      apiKeyLastFour: '',
      capParameter: b.capParameter,
      connectedAt: since,
      updatedAt: since,
    };
  }
}

/** The paywall-independent part of the built-in rule: configured, SHARED, (optionally) markup ≥ 1. */
function builtinApplies(
  config: Pick<Config, 'BUILTIN_PROVIDER'>,
  paywall: PaywallRef,
  checkMarkup: boolean,
): boolean {
  return (
    config.BUILTIN_PROVIDER !== null &&
    paywall.mode === 'SHARED' &&
    (!checkMarkup || paywall.markupPpm >= MIN_BUILTIN_MARKUP_PPM)
  );
}

const actorOf = (auth: Auth): EventTrigger =>
  auth.kind === 'owner'
    ? { source: 'graphql', actorType: 'owner', actorId: auth.ownerId }
    : { source: 'api', actorType: 'api_key', actorId: auth.paywall.id };

/**
 * An absolute http(s) URL with no credentials, query or fragment; returned as origin + path without a
 * trailing slash (`https://api.openai.com/v1/` → `https://api.openai.com/v1`), so the proxy appends
 * `/chat/completions`.
 */
export function normalizeBaseUrl(input: unknown): string {
  const fail = (why: string) => invalid(`baseUrl ${why}`, 'baseUrl', 'invalid_base_url');
  if (typeof input !== 'string' || input.trim() === '') throw fail('is required');
  const raw = input.trim();
  if (raw.length > MAX_BASE_URL_LENGTH) throw fail(`must be at most ${MAX_BASE_URL_LENGTH} characters`);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw fail('must be an absolute http(s) URL, e.g. https://api.openai.com/v1');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw fail('must use http or https');
  if (u.username || u.password) throw fail('must not contain credentials; pass the key as apiKey');
  if (!u.hostname) throw fail('must name a host');
  if (raw.includes('?') || raw.includes('#')) throw fail('must not have a query or fragment');
  return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
}

/**
 * docs/reference.md §1 "Provider targets": a provider's host must resolve to public addresses only (checked here
 * at connect time, and again by the pool's guarded connector for every connection).
 */
async function checkPublicBaseUrl(baseUrl: string): Promise<void> {
  try {
    await assertPublicHost(new URL(baseUrl), 'baseUrl');
  } catch (e) {
    if (!(e instanceof UrlGuardError)) throw e;
    throw invalid(
      `${e.message}. Provider base URLs must be public; for a self-hosted model on a private network ` +
        '(Ollama, vLLM) start the service with PROVIDER_ALLOW_PRIVATE_NETWORKS=true.',
      'baseUrl',
      'forbidden_base_url',
    );
  }
}

function checkKind(input: unknown): ProviderKind {
  if (input === undefined || input === null) return 'OPENAI';
  if (typeof input !== 'string' || !(PROVIDER_KINDS as readonly string[]).includes(input))
    throw invalid(`kind must be one of ${PROVIDER_KINDS.join(', ')}`, 'kind', 'invalid_value');
  return input as ProviderKind;
}

/** A provider key is sent as a header value: printable ASCII without spaces, 1 to 4096 characters. */
function checkApiKey(input: unknown): string {
  const key = typeof input === 'string' ? input.trim() : '';
  if (!key || key.length > MAX_API_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key))
    // The message never echoes the value: it is a secret.
    throw invalid(
      `apiKey must be 1 to ${MAX_API_KEY_LENGTH} printable ASCII characters without spaces`,
      'apiKey',
      'invalid_provider_key',
    );
  return key;
}

/** docs/reference.md §13 "Cap sent upstream": one of CAP_PARAMETERS; omitted means MAX_COMPLETION_TOKENS. */
function checkCapParameter(input: unknown): CapParameter {
  if (input === undefined || input === null) return DEFAULT_CAP_PARAMETER;
  if (typeof input !== 'string' || !(CAP_PARAMETERS as readonly string[]).includes(input))
    throw invalid(
      `capParameter must be one of ${CAP_PARAMETERS.join(', ')}`,
      'capParameter',
      'invalid_value',
    );
  return input as CapParameter;
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
