import type { Database, Sql } from '../../db/database.js';
import type { Clock } from '../../shared/clock.js';
import { DomainError, invalid, notFound } from '../../shared/errors.js';
import { newBase62Secret, newId, safeEqual, sha256Hex } from '../../shared/ids.js';
import { KeyedLoader } from '../../shared/keyed-loader.js';
import { parseDecimal, MAX_AMOUNT_RAW, RAW_DECIMALS } from '../../shared/money.js';
import { recordEvents, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import { Paywall } from '../paywalls/paywall.entity.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { PAYWALL_CHANGED_CHANNEL, toInfo } from '../paywalls/paywall.service.js';
import {
  ALLOWANCE_PERIODS,
  allowanceOf,
  type AllowancePeriod,
  type AllowanceState,
} from '../wallet/allowance.js';

/** `uk_` + 40 base62 characters (≈ 238 bits). */
export const USER_KEY_PREFIX = 'uk_';
const KEY_LENGTH = 40;
const CACHE_TTL_MS = 30_000;
/** NOTIFY channel of a key's revocation (payload: the key's id). */
const CHANGED_CHANNEL = 'user_key_changed';
/** `lastUsedAt` is written at most this often per key (not a write per request). */
export const LAST_USED_INTERVAL_MS = 60_000;

/** What a request made with an end-user key acts as: its paywall and its end user. */
export interface UserKeyAuth {
  id: string;
  paywall: PaywallInfo;
  externalUserId: string;
}

/** An end-user key as the API shows it (never the key). */
export interface UserKeyRecord {
  id: string;
  paywallId: string;
  externalUserId: string;
  walletUserId: string | null;
  name: string;
  lastFour: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date | null;
  revokedAt: Date | null;
  /** The spending limit as of now (spent in the current period); null when none. */
  limit: AllowanceState | null;
}

export interface CreateUserKeyInput {
  externalUserId: string;
  name?: string | null;
  /** USDC decimal string; null/absent = no limit. */
  limit?: string | null;
  /** `day`, `week`, `month` or `total` (default `month` when a limit is given). */
  limitPeriod?: string | null;
  expiresAt?: Date | string | null;
}

/** Creates an end user on first sight (UserService.ensureUser). */
export type EnsureKeyUser = (
  sql: Sql,
  paywall: PaywallInfo,
  externalId: string,
  trigger: EventTrigger,
) => Promise<{ id: string; walletUserId: string | null }>;

export interface UserKeyDeps {
  db: Database;
  clock: Clock;
  ensureUser: EnsureKeyUser;
}

const KEY_COLUMNS = `k.id, k.paywall_id, k.name, k.last_four, k.created_at, k.last_used_at, k.expires_at, k.revoked_at,
  k.limit_raw::text as allowance_raw, k.limit_period as allowance_period, k.limit_spent_raw::text as allowance_spent_raw,
  k.limit_period_start::text as allowance_period_start, e.external_id, e.wallet_user_id, e.id as end_user_id`;

/**
 * End-user keys (docs/reference.md §19): a key names a paywall and one of its end users at once, so a tool
 * that takes one API key and a base URL (Claude Code, Codex, editors) spends that user's balance and
 * nobody else's. Keys are random (`uk_…`, base62), stored as SHA-256 hashes (the paywall key's helper,
 * shared/ids.ts), shown once. The key → paywall and user lookup is on every request's path: cached in
 * memory, dropped at once on this instance and through NOTIFY on the others when the key is revoked or
 * its paywall changes (as the paywall key's cache is).
 */
export class UserKeyService {
  private readonly byHash = new Map<string, CachedKey>();
  /** Single-flight reads; a read that raced with a revocation is read again, never cached (shared/keyed-loader.ts). */
  private readonly loader = new KeyedLoader<CachedKey | null, CachedKey | null>(
    (hash) => this.load(hash),
    (hash, entry) => {
      if (entry) this.byHash.set(hash, entry);
      else this.byHash.delete(hash);
      return entry;
    },
  );
  private readonly unlisten: (() => void)[] = [];

  constructor(private readonly d: UserKeyDeps) {}

  async start(): Promise<void> {
    this.unlisten.push(await this.d.db.listen(CHANGED_CHANNEL, (id) => this.evict((a) => a.id === id)));
    this.unlisten.push(
      await this.d.db.listen(PAYWALL_CHANGED_CHANNEL, (id) => this.evict((a) => a.paywall.id === id)),
    );
    this.unlisten.push(
      this.d.db.onReconnect(() => {
        this.byHash.clear();
        this.loader.invalidateAll();
      }),
    );
  }

  async stop(): Promise<void> {
    for (const off of this.unlisten.splice(0)) off();
    this.byHash.clear();
  }

  /**
   * Drops the matching keys; reads under way (of any key: the one revoked may be among them) are read
   * again. Revocations and paywall changes are rare, the reads they repeat cheap.
   */
  private evict(match: (a: UserKeyAuth) => boolean): void {
    for (const [hash, entry] of this.byHash) if (match(entry.auth)) this.byHash.delete(hash);
    this.loader.invalidateAll();
  }

  /** True for a string shaped like an end-user key (the paywall key has another prefix). */
  static isUserKey(key: string): boolean {
    return key.startsWith(USER_KEY_PREFIX);
  }

  /**
   * The paywall and end user of a key, or null (unknown, revoked, expired, or its paywall archived). Hot
   * path: a map lookup; `lastUsedAt` is written in the background at most once a minute per key.
   */
  async authenticate(key: string): Promise<UserKeyAuth | null> {
    if (!key.startsWith(USER_KEY_PREFIX)) return null;
    const hash = sha256Hex(key);
    const now = this.d.clock.now().getTime();
    let hit: CachedKey | null | undefined = this.byHash.get(hash);
    if (!hit || hit.until <= Date.now()) hit = await this.loader.load(hash);
    if (!hit) return null;
    if (hit.expiresAt && hit.expiresAt.getTime() <= now) return null;
    if (now - hit.usedAt >= LAST_USED_INTERVAL_MS) {
      hit.usedAt = now;
      this.touch(hit.auth.id, new Date(now));
    }
    return hit.auth;
  }

  /**
   * Why a key that {@link authenticate} refused no longer works, when it is a real key that was revoked or
   * has expired (the 401 says so: whoever holds the whole key may know that); null for anything else. Read
   * only on the refusal path.
   */
  async refusalOf(key: string): Promise<string | null> {
    if (!key.startsWith(USER_KEY_PREFIX)) return null;
    const hash = sha256Hex(key);
    const [k] = await this.d.db.query(
      `select key_hash, revoked_at, expires_at from user_key where key_hash = $1`,
      [hash],
      'user_key_refusal',
    );
    if (!k || !safeEqual(k.key_hash, hash)) return null;
    if (k.revoked_at) return `This user key was revoked on ${new Date(k.revoked_at).toISOString()}.`;
    if (k.expires_at && new Date(k.expires_at).getTime() <= this.d.clock.now().getTime())
      return `This user key expired on ${new Date(k.expires_at).toISOString()}.`;
    return null;
  }

  private async load(hash: string): Promise<CachedKey | null> {
    const [k] = await this.d.db.query(
      `select k.id, k.paywall_id, k.key_hash, k.expires_at, k.last_used_at, e.external_id
         from user_key k join end_user e on e.id = k.end_user_id
        where k.key_hash = $1 and k.revoked_at is null`,
      [hash],
      'user_key_by_hash',
    );
    if (!k || !safeEqual(k.key_hash, hash)) return null;
    const p = await this.d.db.withEm((em) => em.findOne(Paywall, { id: k.paywall_id }));
    if (!p || p.archivedAt) return null;
    return {
      auth: { id: k.id as string, paywall: toInfo(p), externalUserId: k.external_id as string },
      expiresAt: k.expires_at ? new Date(k.expires_at) : null,
      until: Date.now() + CACHE_TTL_MS,
      usedAt: k.last_used_at ? new Date(k.last_used_at).getTime() : 0,
    };
  }

  /** Records the key's use (one small update, not awaited; the database keeps the latest minute). */
  private touch(id: string, at: Date): void {
    this.d.db
      .query(
        `update user_key set last_used_at = $2
          where id = $1 and (last_used_at is null or last_used_at < $2::timestamptz - interval '1 minute')`,
        [id, at.toISOString()],
        'user_key_touch',
      )
      .catch(() => undefined);
  }

  /** Creates a key for an end user (created on first sight); the key is in the answer only. */
  async create(
    paywall: PaywallInfo,
    input: CreateUserKeyInput,
    trigger: EventTrigger,
  ): Promise<{ key: string; userKey: UserKeyRecord }> {
    const name = (input.name ?? '').trim() || 'default';
    if (name.length > 200) throw invalid('name must be at most 200 characters', 'name');
    const limit = parseLimit(input.limit, input.limitPeriod);
    const expiresAt = parseExpiry(input.expiresAt, this.d.clock.now());
    const key = newBase62Secret(USER_KEY_PREFIX, KEY_LENGTH);
    const id = newId();
    const lastFour = key.slice(-4);
    await this.d.db.transaction(async (tx) => {
      const user = await this.d.ensureUser(tx, paywall, input.externalUserId, trigger);
      await tx.query(
        `insert into user_key (id, paywall_id, end_user_id, name, key_hash, last_four, created_at, expires_at,
                               limit_raw, limit_period)
         values ($1, $2, $3, $4, $5, $6, now(), $7, $8, $9)`,
        [
          id,
          paywall.id,
          user.id,
          name,
          sha256Hex(key),
          lastFour,
          expiresAt?.toISOString() ?? null,
          limit?.amountRaw.toString() ?? null,
          limit?.period ?? null,
        ],
      );
      await recordEvents(tx, [
        buildEvent(
          'paywall.user_key.created',
          { paywall, trigger, subject: { type: 'end_user', id: user.id, externalId: input.externalUserId } },
          {
            id,
            externalUserId: input.externalUserId,
            walletUserId: paywall.mode === 'DEFAULT' ? user.id : user.walletUserId,
            name,
            lastFour,
          },
        ),
      ]);
    });
    return { key, userKey: (await this.get(paywall.id, id))! };
  }

  /** The paywall's keys (of one end user when given), newest first, revoked ones included. */
  async list(
    paywallId: string,
    externalUserId?: string | null,
    sql: Sql = this.d.db,
  ): Promise<UserKeyRecord[]> {
    return (await this.listMany([{ paywallId, externalUserId: externalUserId ?? null }], sql))[0];
  }

  /** `list` for many paywalls in one statement (DataLoader batch: `paywalls { userKeys }`). */
  async listMany(
    keys: readonly { paywallId: string; externalUserId: string | null }[],
    sql: Sql = this.d.db,
  ): Promise<UserKeyRecord[][]> {
    const rows = await sql.query(
      `select q.idx, x.*
         from unnest($1::uuid[], $2::text[]) with ordinality as q(paywall_id, external_id, idx)
         cross join lateral (
           select ${KEY_COLUMNS} from user_key k join end_user e on e.id = k.end_user_id
            where k.paywall_id = q.paywall_id and (q.external_id is null or e.external_id = q.external_id)
            order by k.created_at desc, k.id desc limit 1000
         ) x
        order by q.idx, x.created_at desc, x.id desc`,
      [keys.map((k) => k.paywallId), keys.map((k) => k.externalUserId)],
    );
    const now = this.d.clock.now();
    return keys.map((_, i) => rows.filter((r) => Number(r.idx) === i + 1).map((r) => toRecord(r, now)));
  }

  async get(paywallId: string, id: string, sql: Sql = this.d.db): Promise<UserKeyRecord | null> {
    if (!UUID.test(id)) return null;
    const [r] = await sql.query(
      `select ${KEY_COLUMNS} from user_key k join end_user e on e.id = k.end_user_id
        where k.paywall_id = $1 and k.id = $2`,
      [paywallId, id],
    );
    return r ? toRecord(r, this.d.clock.now()) : null;
  }

  /**
   * Revokes a key at once, on every instance (NOTIFY in the same transaction). Revoking a revoked key
   * answers it as it is and records nothing. Holds in flight settle normally.
   */
  async revoke(paywall: PaywallInfo, id: string, trigger: EventTrigger): Promise<UserKeyRecord> {
    const revoked = await this.d.db.transaction(async (tx) => {
      const [r] = await tx.query(
        `update user_key k set revoked_at = now() from end_user e
          where k.paywall_id = $1 and k.id = $2 and k.revoked_at is null and e.id = k.end_user_id
         returning k.id, k.name, k.last_four, e.id as end_user_id, e.external_id, e.wallet_user_id`,
        [paywall.id, UUID.test(id) ? id : null],
      );
      if (!r) return false;
      await recordEvents(tx, [
        buildEvent(
          'paywall.user_key.revoked',
          { paywall, trigger, subject: { type: 'end_user', id: r.end_user_id, externalId: r.external_id } },
          {
            id: r.id,
            externalUserId: r.external_id,
            walletUserId: paywall.mode === 'DEFAULT' ? r.end_user_id : (r.wallet_user_id ?? null),
            name: r.name,
            lastFour: r.last_four,
          },
        ),
      ]);
      await tx.query(`select pg_notify($1, $2)`, [CHANGED_CHANNEL, r.id]);
      return true;
    });
    if (revoked) this.evict((a) => a.id === id);
    const record = await this.get(paywall.id, id);
    if (!record) throw notFound('user key');
    return record;
  }

  /**
   * SHARED mode: the keys that can spend from a wallet (those of end users connected to it), with their
   * app, for the wallet page.
   */
  async ofWallet(walletUserId: string): Promise<(UserKeyRecord & { paywallName: string })[]> {
    const rows = await this.d.db.query(
      `select ${KEY_COLUMNS}, p.name as paywall_name
         from end_user e join user_key k on k.end_user_id = e.id join paywall p on p.id = k.paywall_id
        where e.wallet_user_id = $1 and k.revoked_at is null and p.archived_at is null
          and (k.expires_at is null or k.expires_at > now())
        order by p.name, k.created_at desc limit 200`,
      [walletUserId],
    );
    const now = this.d.clock.now();
    return rows.map((r) => ({ ...toRecord(r, now), paywallName: r.paywall_name as string }));
  }

  /**
   * Revokes a key from the wallet page: only a key of an end user connected to that wallet user (else
   * not found). The event is recorded as the wallet user's.
   */
  async revokeForWallet(walletUserId: string, id: string): Promise<void> {
    if (!UUID.test(id)) throw notFound('user key');
    const [r] = await this.d.db.query(
      `select k.paywall_id from user_key k join end_user e on e.id = k.end_user_id
        where k.id = $1 and e.wallet_user_id = $2`,
      [id, walletUserId],
    );
    if (!r) throw notFound('user key');
    const p = await this.d.db.withEm((em) => em.findOne(Paywall, { id: r.paywall_id }));
    if (!p) throw notFound('user key');
    await this.revoke(toInfo(p), id, { source: 'page', actorType: 'end_user', actorId: walletUserId });
  }
}

/** A key as the request path caches it. */
interface CachedKey {
  auth: UserKeyAuth;
  expiresAt: Date | null;
  /** Date.now() after which the entry is read again. */
  until: number;
  /** When its use was last recorded (ms). */
  usedAt: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function toRecord(r: Record<string, any>, now: Date): UserKeyRecord {
  return {
    id: r.id,
    paywallId: r.paywall_id,
    externalUserId: r.external_id,
    walletUserId: r.wallet_user_id ?? null,
    name: r.name,
    lastFour: r.last_four,
    createdAt: new Date(r.created_at),
    lastUsedAt: r.last_used_at ? new Date(r.last_used_at) : null,
    expiresAt: r.expires_at ? new Date(r.expires_at) : null,
    revokedAt: r.revoked_at ? new Date(r.revoked_at) : null,
    limit: allowanceOf(r as Parameters<typeof allowanceOf>[0], now),
  };
}

/** A key's limit: a USDC decimal ≥ 0 with a period (default `month`); none when no amount is given. */
function parseLimit(amount: unknown, period: unknown): { amountRaw: bigint; period: AllowancePeriod } | null {
  if (amount === undefined || amount === null) {
    if (period !== undefined && period !== null)
      throw invalid('limitPeriod needs a limit', 'limitPeriod', 'invalid_value');
    return null;
  }
  const raw = parseDecimal(amount, RAW_DECIMALS);
  if (raw === null || raw > MAX_AMOUNT_RAW)
    throw new DomainError(
      'invalid_amount',
      'limit must be a decimal string in USDC, like "5" or "0.25" (at most 6 decimals, at most 1000000000)',
      'limit',
      'invalid_amount',
    );
  const p = typeof period === 'string' ? period.toLowerCase() : period == null ? 'month' : '';
  if (!(ALLOWANCE_PERIODS as readonly string[]).includes(p))
    throw invalid('limitPeriod must be DAY, WEEK, MONTH or TOTAL', 'limitPeriod', 'invalid_value');
  return { amountRaw: raw, period: p as AllowancePeriod };
}

/** An expiry: an ISO date-time in the future, or none. */
function parseExpiry(v: unknown, now: Date): Date | null {
  if (v === undefined || v === null) return null;
  const d = v instanceof Date ? v : typeof v === 'string' ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime()))
    throw invalid('expiresAt must be an ISO 8601 date-time', 'expiresAt', 'invalid_value');
  if (d.getTime() <= now.getTime())
    throw invalid('expiresAt must be in the future', 'expiresAt', 'invalid_value');
  return d;
}
