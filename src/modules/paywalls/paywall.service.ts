import type { Database, Tx } from '../../db/database.js';
import { DomainError, invalid, notFound } from '../../shared/errors.js';
import { decodeCursor, encodeCursor } from '../../shared/cursor.js';
import { newId, newSecret, safeEqual, sha256Hex } from '../../shared/ids.js';
import { MARKUP_DECIMALS, formatDecimal, parseAmount, parseDecimal } from '../../shared/money.js';
import { recordEvents, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { Paywall, type WalletMode, WALLET_MODES } from './paywall.entity.js';
import type { Auth, PaywallInfo } from './paywall-info.js';

const API_KEY_PREFIX = 'pk_live_';
const CACHE_TTL_MS = 30_000;
/** NOTIFY channel of a paywall's changes (payload: its id): caches of its settings drop them. */
export const PAYWALL_CHANGED_CHANNEL = 'paywall_changed';
const CHANGED_CHANNEL = PAYWALL_CHANGED_CHANNEL;
const MAX_MARKUP_PPM = 1000n * 1_000_000n;
const MARKUP_ONE_PPM = 1_000_000n;

/** What the paywall rules need from other modules. */
export interface PaywallCollaborators {
  /** True while the built-in provider would serve the paywall (SHARED, no own provider, configured). */
  builtinNeedsMarkup(paywall: PaywallInfo): Promise<boolean>;
  /** Paywalls an owner may have at once, archived ones not counted (MAX_PAYWALLS_PER_OWNER). */
  maxPerOwner?: number;
}

/** `paywalls(first:)` when not given, and the most it may be. */
export const PAYWALLS_PAGE = { default: 50, max: 100 } as const;

export interface UpdatePaywallInput {
  dailyRequestLimit?: number | null;
  dailySpendLimit?: string | null;
  lowBalanceThreshold?: string | null;
  description?: string | null;
  name?: string | null;
  markup?: string | null;
  topupUrl?: string | null;
  trialCredits?: string | null;
  connectMessageTemplate?: string | null;
  topupMessageTemplate?: string | null;
}

export const toInfo = (p: Paywall): PaywallInfo => ({
  id: p.id,
  ownerId: p.owner as unknown as string,
  name: p.name,
  description: p.description ?? null,
  mode: p.mode,
  markupPpm: BigInt(p.markupPpm as any),
  topupUrl: p.topupUrl ?? null,
  trialCreditsRaw: BigInt(p.trialCreditsRaw as any),
  dailyRequestLimit: p.dailyRequestLimit ?? null,
  dailySpendLimitRaw: p.dailySpendLimitRaw == null ? null : BigInt(p.dailySpendLimitRaw as any),
  lowBalanceThresholdRaw: p.lowBalanceThresholdRaw == null ? null : BigInt(p.lowBalanceThresholdRaw as any),
  connectMessageTemplate: p.connectMessageTemplate ?? null,
  topupMessageTemplate: p.topupMessageTemplate ?? null,
  archivedAt: p.archivedAt ?? null,
  apiKeyLastFour: p.apiKeyLastFour,
  createdAt: p.createdAt,
  updatedAt: p.updatedAt,
});

/** A paywall description: at most 1000 characters; empty clears it. */
function checkDescription(description: unknown): string | null {
  if (description === undefined || description === null) return null;
  if (typeof description !== 'string' || description.length > 1000)
    throw invalid('description must be a string of at most 1000 characters', 'description');
  const trimmed = description.trim();
  return trimmed === '' ? null : trimmed;
}

export const formatMarkup = (ppm: bigint): string => formatDecimal(ppm, MARKUP_DECIMALS);

const actorOf = (auth: Auth): EventTrigger =>
  auth.kind === 'owner'
    ? { source: 'graphql', actorType: 'owner', actorId: auth.ownerId }
    : { source: 'api', actorType: 'api_key', actorId: auth.paywall.id };

/**
 * A new low-balance threshold (docs/reference.md §16 "Low balance") starts a new watch of the paywall's
 * users' accounts, as if each had been watched under it all along: an account at or above it is armed
 * (the paywall's "already alerted" flag cleared: its next charge below it is a crossing), an account
 * already below it is not (flag set: it crosses only after money lifted it back, which clears the flag as
 * for any threshold). Turned off: every flag of the paywall is cleared. Without this, a flag left by the
 * old threshold would hide a crossing of a lower new one, and a raised one would alert a user whose
 * balance never went from at or above it to below it.
 */
const REARM_LOW_BALANCE_SQL = `
update ledger_account a
   set low_alerted_paywalls = case
         when $2::bigint is not null and a.balance_raw - a.held_raw < $2::bigint
           then array_append(array_remove(a.low_alerted_paywalls, $1::text), $1::text)
         else array_remove(a.low_alerted_paywalls, $1::text) end
  from end_user e
 where e.paywall_id = $1::uuid and e.account_id = a.id
   and ($1::text = any(a.low_alerted_paywalls) or ($2::bigint is not null and a.balance_raw - a.held_raw < $2::bigint))`;

/**
 * Paywalls and their API keys. Keys are random (`pk_live_…`), stored as SHA-256 hashes, shown once.
 * The key → paywall lookup is cached in memory and invalidated at once on this instance and through
 * NOTIFY on the others, so a rotated key stops working immediately.
 */
export class PaywallService {
  private readonly byKeyHash = new Map<string, { info: PaywallInfo; expires: number }>();
  private readonly unlisten: (() => void)[] = [];

  constructor(
    private readonly db: Database,
    private readonly peers: PaywallCollaborators = { builtinNeedsMarkup: async () => false },
  ) {}

  /**
   * Listen for changes made by other instances. After a reconnect of the LISTEN connection every cached
   * key is dropped: a rotation or archive notified while it was down would otherwise go unnoticed here.
   */
  async start(): Promise<void> {
    this.unlisten.push(await this.db.listen(CHANGED_CHANNEL, (paywallId) => this.evict(paywallId)));
    this.unlisten.push(this.db.onReconnect(() => this.byKeyHash.clear()));
  }

  async stop(): Promise<void> {
    for (const off of this.unlisten.splice(0)) off();
    this.byKeyHash.clear();
  }

  private evict(paywallId: string): void {
    for (const [hash, entry] of this.byKeyHash) if (entry.info.id === paywallId) this.byKeyHash.delete(hash);
  }

  private async changed(tx: Tx, paywallId: string): Promise<void> {
    await tx.query(`select pg_notify($1, $2)`, [CHANGED_CHANNEL, paywallId]);
  }

  /** The paywall of an API key, or null (unknown, rotated or archived key). Hot path: a map lookup. */
  async authenticateKey(key: string): Promise<PaywallInfo | null> {
    if (!key.startsWith(API_KEY_PREFIX)) return null;
    const hash = sha256Hex(key);
    const hit = this.byKeyHash.get(hash);
    if (hit && hit.expires > Date.now()) return hit.info;
    const p = await this.db.withEm((em) => em.findOne(Paywall, { apiKeyHash: hash }));
    if (!p || !safeEqual(p.apiKeyHash, hash) || p.archivedAt) {
      this.byKeyHash.delete(hash);
      return null;
    }
    const info = toInfo(p);
    this.byKeyHash.set(hash, { info, expires: Date.now() + CACHE_TTL_MS });
    return info;
  }

  async create(
    ownerId: string,
    name: string,
    mode: WalletMode,
    description?: string | null,
  ): Promise<{ paywall: PaywallInfo; apiKey: string }> {
    const trimmed = (name ?? '').trim();
    if (!trimmed || trimmed.length > 200) throw invalid('name must be 1 to 200 characters', 'name');
    const about = checkDescription(description);
    if (!WALLET_MODES.includes(mode)) throw invalid('mode must be DEFAULT or SHARED', 'mode');
    const apiKey = newSecret(API_KEY_PREFIX);
    const max = this.peers.maxPerOwner ?? Infinity;
    const p = await this.db.transaction(async (tx) => {
      // The owner row is locked before counting, in a statement of its own (the count's statement then
      // sees every paywall committed before the lock was granted): concurrent creates of one owner cannot
      // pass the bound together.
      await tx.query(`select id from owner where id = $1 for update`, [ownerId]);
      const [count] = await tx.query<{ n: number }>(
        `select count(*)::int as n from paywall where owner_id = $1 and archived_at is null`,
        [ownerId],
      );
      if (count && count.n >= max)
        throw new DomainError(
          'invalid_request',
          `this owner already has ${count.n} paywalls, the most allowed (MAX_PAYWALLS_PER_OWNER is ${max}); archive one you no longer use first`,
          null,
          'paywall_limit_reached',
        );
      const entity = tx.em.create(Paywall, {
        id: newId(),
        owner: ownerId,
        name: trimmed,
        description: about,
        mode,
        apiKeyHash: sha256Hex(apiKey),
        apiKeyLastFour: apiKey.slice(-4),
        markupPpm: 1_000_000n,
        trialCreditsRaw: 0n,
        createdAt: new Date(),
        updatedAt: new Date(),
      } as any);
      await tx.em.flush();
      // Every paywall has one earnings account (SHARED: what the developer may withdraw; DEFAULT:
      // the usage charged to its users' app-scoped balances).
      await tx.query(
        `insert into ledger_account (id, kind, paywall_id, created_at) values (gen_random_uuid(), 'earnings', $1, now())`,
        [entity.id],
      );
      return entity;
    });
    return { paywall: toInfo(p), apiKey };
  }

  /**
   * The paywall a caller may act on. An API key acts on its own paywall (a different `paywallId` is
   * not found); an owner must name one of its paywalls. Others' paywalls are never revealed.
   */
  async resolve(
    auth: Auth,
    paywallId?: string | null,
    opts: { allowArchived?: boolean } = {},
  ): Promise<PaywallInfo> {
    if (auth.kind === 'apiKey') {
      if (paywallId && paywallId !== auth.paywall.id) throw notFound('paywall');
      return auth.paywall;
    }
    if (!paywallId) throw invalid('paywallId is required with an owner token', 'paywallId');
    const p = await this.get(auth.ownerId, paywallId);
    if (p.archivedAt && !opts.allowArchived) throw new DomainError('conflict', 'paywall is archived');
    return p;
  }

  async get(ownerId: string, paywallId: string): Promise<PaywallInfo> {
    if (!/^[0-9a-f-]{36}$/i.test(paywallId)) throw notFound('paywall');
    const p = await this.db.withEm((em) => em.findOne(Paywall, { id: paywallId, owner: ownerId }));
    if (!p) throw notFound('paywall');
    return toInfo(p);
  }

  /** A paywall by id, for callers that proved their right another way (a signed Stripe webhook). */
  async byId(paywallId: string): Promise<PaywallInfo | null> {
    if (!/^[0-9a-f-]{36}$/i.test(paywallId)) return null;
    const p = await this.db.withEm((em) => em.findOne(Paywall, { id: paywallId }));
    return p ? toInfo(p) : null;
  }

  /** What a hosted page may show about a paywall to anyone holding its link: name, description, mode. */
  async publicInfo(
    paywallId: string,
  ): Promise<{ id: string; name: string; description: string | null; mode: WalletMode } | null> {
    if (!/^[0-9a-f-]{36}$/i.test(paywallId)) return null;
    const p = await this.db.withEm((em) => em.findOne(Paywall, { id: paywallId, archivedAt: null }));
    return p ? { id: p.id, name: p.name, description: p.description ?? null, mode: p.mode } : null;
  }

  /**
   * A page of the owner's paywalls, oldest first. `after` is the opaque cursor of the last one seen
   * (PaywallType.cursor); `first` is 1 to {@link PAYWALLS_PAGE}.max.
   */
  async list(
    ownerId: string,
    includeArchived: boolean,
    first: number = PAYWALLS_PAGE.default,
    after: string | null = null,
  ): Promise<{ rows: (PaywallInfo & { cursor: string })[]; hasNextPage: boolean }> {
    if (!Number.isInteger(first) || first < 1 || first > PAYWALLS_PAGE.max)
      throw invalid(`first must be between 1 and ${PAYWALLS_PAGE.max}`, 'first');
    const cur = after ? decodeCursor(after, 'pw') : null;
    const page = await this.db.query<{ id: string; created_text: string }>(
      `select id, created_at::text as created_text from paywall
        where owner_id = $1 and ($2::boolean or archived_at is null)
          and ($3::timestamptz is null or (created_at, id) > ($3::timestamptz, $4::uuid))
        order by created_at, id limit $5`,
      [ownerId, includeArchived, cur?.ts ?? null, cur?.id ?? null, first + 1],
    );
    const ids = page.slice(0, first);
    const entities = ids.length
      ? await this.db.withEm((em) => em.find(Paywall, { id: { $in: ids.map((r) => r.id) } }))
      : [];
    const byId = new Map(entities.map((p) => [p.id, p]));
    return {
      hasNextPage: page.length > first,
      rows: ids.flatMap((r) => {
        const p = byId.get(r.id);
        return p ? [{ ...toInfo(p), cursor: encodeCursor('pw', r.created_text, r.id) }] : [];
      }),
    };
  }

  async update(
    auth: Auth,
    paywallId: string | null | undefined,
    input: UpdatePaywallInput,
  ): Promise<PaywallInfo> {
    const current = await this.resolve(auth, paywallId);
    const changes: Partial<Record<keyof Paywall, unknown>> = {};
    const changedFields: string[] = [];
    const set = (field: keyof Paywall, value: unknown, name: string, same: boolean) => {
      if (same) return;
      changes[field] = value;
      changedFields.push(name);
    };
    if (input.name != null) {
      const name = input.name.trim();
      if (!name || name.length > 200) throw invalid('name must be 1 to 200 characters', 'name');
      set('name', name, 'name', name === current.name);
    }
    if (input.description !== undefined) {
      const about = checkDescription(input.description);
      set('description', about, 'description', about === current.description);
    }
    if (input.markup != null) {
      const ppm = parseDecimal(input.markup, MARKUP_DECIMALS);
      if (ppm === null || ppm <= 0n || ppm > MAX_MARKUP_PPM)
        throw invalid(
          'markup must be a decimal string > 0 and ≤ 1000 with at most 6 fraction digits',
          'markup',
        );
      // docs/reference.md §8: the built-in provider is paid its cost out of each charge; below 1 it would sell at a loss.
      if (ppm < MARKUP_ONE_PPM && ppm !== current.markupPpm && (await this.peers.builtinNeedsMarkup(current)))
        throw invalid(
          'markup must be at least 1 while the built-in provider serves this SHARED paywall (a lower markup would sell below cost); connect your own provider to set a lower markup',
          'markup',
          'markup_below_cost',
        );
      set('markupPpm', ppm, 'markup', ppm === current.markupPpm);
    }
    if (input.topupUrl !== undefined) {
      if (input.topupUrl !== null && current.mode !== 'DEFAULT')
        throw new DomainError(
          'unsupported_in_mode',
          'a top-up URL is set only in DEFAULT mode; SHARED mode uses hosted top-ups',
          'topupUrl',
          'unsupported_in_mode',
        );
      if (input.topupUrl !== null && !isHttpUrl(input.topupUrl))
        throw invalid('topupUrl must be an http(s) URL', 'topupUrl');
      set('topupUrl', input.topupUrl, 'topupUrl', input.topupUrl === current.topupUrl);
    }
    if (input.trialCredits != null) {
      const raw = input.trialCredits === '0' ? 0n : parseAmount(input.trialCredits);
      if (raw === null)
        throw invalid('trialCredits must be "0" or a positive USDC decimal string', 'trialCredits');
      if (raw > 0n && current.mode === 'SHARED')
        throw new DomainError(
          'unsupported_in_mode',
          'trial credits are a DEFAULT-mode feature; SHARED-mode users spend their hosted wallet',
          'trialCredits',
          'unsupported_in_mode',
        );
      set('trialCreditsRaw', raw, 'trialCredits', raw === current.trialCreditsRaw);
    }
    if (input.dailyRequestLimit !== undefined) {
      const limit = input.dailyRequestLimit;
      if (limit !== null && (!Number.isInteger(limit) || limit < 0 || limit > 1_000_000_000))
        throw invalid(
          'dailyRequestLimit must be an integer from 0 to 1000000000, or null for none',
          'dailyRequestLimit',
        );
      set('dailyRequestLimit', limit, 'dailyRequestLimit', limit === current.dailyRequestLimit);
    }
    if (input.dailySpendLimit !== undefined) {
      const raw =
        input.dailySpendLimit === null
          ? null
          : input.dailySpendLimit === '0'
            ? 0n
            : parseAmount(input.dailySpendLimit);
      if (raw === undefined || (input.dailySpendLimit !== null && raw === null))
        throw invalid(
          'dailySpendLimit must be "0" or a positive USDC decimal string, or null for none',
          'dailySpendLimit',
        );
      set('dailySpendLimitRaw', raw, 'dailySpendLimit', raw === current.dailySpendLimitRaw);
    }
    if (input.lowBalanceThreshold !== undefined) {
      // docs/reference.md §16 "Low balance": USDC > 0, or null to turn it off.
      const raw = input.lowBalanceThreshold === null ? null : parseAmount(input.lowBalanceThreshold);
      if (input.lowBalanceThreshold !== null && raw === null)
        throw invalid(
          'lowBalanceThreshold must be a positive USDC decimal string, or null for none',
          'lowBalanceThreshold',
        );
      set('lowBalanceThresholdRaw', raw, 'lowBalanceThreshold', raw === current.lowBalanceThresholdRaw);
    }
    for (const [field, value] of [
      ['connectMessageTemplate', input.connectMessageTemplate],
      ['topupMessageTemplate', input.topupMessageTemplate],
    ] as const) {
      if (value === undefined) continue;
      if (value !== null && (value.length > 2000 || !value.includes('{url}')))
        throw invalid(`${field} must contain {url} and be at most 2000 characters`, field);
      set(field, value, field, value === current[field]);
    }
    if (changedFields.length === 0) return current;

    const updated = await this.db.transaction(async (tx) => {
      const p = await tx.em.findOneOrFail(Paywall, { id: current.id });
      Object.assign(p, changes, { updatedAt: new Date() });
      await recordEvents(tx, [
        buildEvent(
          'paywall.updated',
          { paywall: current, trigger: actorOf(auth), subject: { type: 'paywall', id: p.id } },
          { changedFields, summarySections: summarySections(changedFields) },
        ),
      ]);
      if (changedFields.includes('lowBalanceThreshold'))
        await tx.query(REARM_LOW_BALANCE_SQL, [
          p.id,
          (changes.lowBalanceThresholdRaw as bigint | null)?.toString() ?? null,
        ]);
      await this.changed(tx, p.id);
      return p;
    });
    this.evict(current.id);
    return toInfo(updated);
  }

  async rotateSecret(
    auth: Auth,
    paywallId?: string | null,
  ): Promise<{ paywall: PaywallInfo; apiKey: string }> {
    const current = await this.resolve(auth, paywallId);
    const apiKey = newSecret(API_KEY_PREFIX);
    const trigger = actorOf(auth);
    const updated = await this.db.transaction(async (tx) => {
      const p = await tx.em.findOneOrFail(Paywall, { id: current.id });
      p.apiKeyHash = sha256Hex(apiKey);
      p.apiKeyLastFour = apiKey.slice(-4);
      p.updatedAt = new Date();
      await recordEvents(tx, [
        buildEvent(
          'paywall.secret.rotated',
          { paywall: current, trigger, subject: { type: 'paywall', id: p.id } },
          { secretLastFour: p.apiKeyLastFour, actorId: trigger.actorId, actorType: trigger.actorType },
        ),
      ]);
      await this.changed(tx, p.id);
      return p;
    });
    this.evict(current.id);
    return { paywall: toInfo(updated), apiKey };
  }

  async archive(
    auth: Auth,
    paywallId: string | null | undefined,
    reason?: string | null,
  ): Promise<PaywallInfo> {
    const current = await this.resolve(auth, paywallId, { allowArchived: true });
    if (current.archivedAt) return current;
    const why = (reason ?? 'archived by owner').slice(0, 500);
    const updated = await this.db.transaction(async (tx) => {
      const p = await tx.em.findOneOrFail(Paywall, { id: current.id });
      p.archivedAt = new Date();
      p.updatedAt = new Date();
      await recordEvents(tx, [
        buildEvent(
          'paywall.archived',
          { paywall: current, trigger: actorOf(auth), subject: { type: 'paywall', id: p.id } },
          { reason: why },
        ),
      ]);
      await this.changed(tx, p.id);
      return p;
    });
    this.evict(current.id);
    return toInfo(updated);
  }
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === 'https:' || u.protocol === 'http:';
  } catch {
    return false;
  }
}

/** Groups changed fields into the sections of a settings page, for `summarySections` in paywall.updated. */
function summarySections(fields: string[]): string[] {
  const section = (f: string) =>
    f === 'name' ? 'general' : f === 'markup' ? 'pricing' : f.endsWith('Template') ? 'messages' : 'billing';
  return [...new Set(fields.map(section))];
}
