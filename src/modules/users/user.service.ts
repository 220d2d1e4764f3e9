import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import { usdcDecimal } from '../../shared/money.js';
import { decodeCursor, encodeCursor, pageKeys, pageParams, splitPages } from '../../shared/cursor.js';
import { hasLoneSurrogate } from '../../shared/text.js';
import type { Config } from '../../config.js';
import type { Database } from '../../db/database.js';
import type { Metrics } from '../../shared/metrics.js';
import type { AuthorizationService } from '../wallet/authorization.service.js';
import { recordEvents, type EventTrigger, type NewEvent } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { Auth, PaywallInfo } from '../paywalls/paywall-info.js';
import { WORLD_CREDIT_PARAMS, worldCreditCtes, worldCreditParams } from '../accounts/credit-from-world.js';
import { allowanceColumns } from '../wallet/allowance.js';

export const MAX_EXTERNAL_ID_LENGTH = 256;

/** An end user as the services see it (money in raw units). */
export interface EndUserRow {
  id: string;
  paywallId: string;
  externalId: string;
  /** The account it spends (own in DEFAULT; the wallet's in SHARED once connected; else null). */
  accountId: string | null;
  /** Settled balance of that account (0 without one). */
  balanceRaw: bigint;
  /** Reserved by open holds on that account; free balance = balanceRaw − heldRaw. */
  heldRaw: bigint;
  /** SHARED mode: the hosted-wallet user this end user is connected to. */
  walletUserId: string | null;
  connectedAt: Date | null;
  createdAt: Date;
}

export interface EnsuredUser extends EndUserRow {
  /** True when this call created the user (and granted trial credits, if any). */
  created: boolean;
  /** DEFAULT: always; SHARED: connected to a wallet user. */
  connected: boolean;
}

export interface ConnectResult {
  connected: boolean;
  connectedUser: { paywallKeyId: string; userId: string; externalUserId: string; createdAt: Date } | null;
  message: string;
  url: string | null;
}

/** A SHARED-mode authorization (approved connection), as the paywall's owner sees it. */
export interface ConnectionRow {
  id: string;
  endUserId: string;
  externalUserId: string;
  walletUserId: string;
  status: 'ACTIVE' | 'REVOKED';
  createdAt: Date;
  revokedAt: Date | null;
  cursor: string;
  /** The allowance's columns (docs/reference.md §16; wallet/allowance.allowanceOf reads them). */
  allowance?: {
    allowance_raw: string | null;
    allowance_period: string | null;
    allowance_spent_raw: string;
    allowance_period_start: string | null;
  };
}

export interface DisconnectResult {
  success: boolean;
  message: string;
}

/** Columns of `end_user e left join ledger_account a on a.id = e.account_id` (see USER_FROM). */
const USER_COLUMNS = `e.id, e.paywall_id, e.external_id, e.account_id, coalesce(a.balance_raw, 0)::text as balance_raw,
  coalesce(a.held_raw, 0)::text as held_raw, e.wallet_user_id, e.connected_at, e.created_at`;
const USER_FROM = `end_user e left join ledger_account a on a.id = e.account_id`;

export const toUserRow = (r: any): EndUserRow => ({
  id: r.id,
  paywallId: r.paywall_id,
  externalId: r.external_id,
  accountId: r.account_id ?? null,
  balanceRaw: BigInt(r.balance_raw),
  heldRaw: BigInt(r.held_raw),
  walletUserId: r.wallet_user_id ?? null,
  connectedAt: r.connected_at ? new Date(r.connected_at) : null,
  createdAt: new Date(r.created_at),
});

/** The event trigger of a caller: an API key (REST or GraphQL) or an owner. */
export function triggerOf(auth: Auth, transport: 'graphql' | 'rest' = 'rest'): EventTrigger {
  return auth.kind === 'owner'
    ? { source: 'graphql', actorType: 'owner', actorId: auth.ownerId }
    : { source: transport === 'rest' ? 'api' : 'graphql', actorType: 'api_key', actorId: auth.paywall.id };
}

/** `connected` per mode: DEFAULT has no end-user authorization, SHARED needs a wallet user. */
export const isConnected = (paywall: PaywallInfo, u: { walletUserId: string | null }): boolean =>
  paywall.mode === 'DEFAULT' || u.walletUserId !== null;

/** The id events carry as `walletUserId`: the end user itself in DEFAULT mode, the wallet user in SHARED. */
export const walletUserIdOf = (paywall: PaywallInfo, u: { id: string; walletUserId: string | null }) =>
  paywall.mode === 'DEFAULT' ? u.id : u.walletUserId;

/** The identifier when {@link checkExternalId} accepts it, else null (for input that is not a request's). */
export function validExternalId(externalId: unknown): string | null {
  try {
    return checkExternalId(externalId);
  } catch {
    return null;
  }
}

/** Validates an end-user identifier given to a service (REST already checked it in `userOf`). */
export function checkExternalId(externalId: unknown): string {
  if (typeof externalId !== 'string' || externalId.trim() === '')
    throw new DomainError('missing_user', 'No end user given.', 'user', 'missing_user');
  // Lone surrogates are refused too: stored as UTF-8 they would become U+FFFD, and "a\ud800" and
  // "a\ufffd" would then name one end user.
  if (
    externalId.length > MAX_EXTERNAL_ID_LENGTH ||
    // eslint-disable-next-line no-control-regex -- control characters are exactly what we refuse
    /[\u0000-\u001f\u007f]/.test(externalId) ||
    hasLoneSurrogate(externalId)
  )
    throw new DomainError(
      'invalid_request',
      `user must be at most ${MAX_EXTERNAL_ID_LENGTH} printable characters of well-formed text`,
      'user',
    );
  return externalId;
}

const withParam = (base: string, params: Record<string, string>): string => {
  const u = new URL(base);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
};

/**
 * What the end-user service needs. Stripe is reached through a port (a function the composition root
 * wires in), so users do not depend on the Stripe module, which itself credits end users.
 */
export interface UserServiceDeps {
  db: Database;
  /** The lag-tolerant reads (the user and connection lists): the replica in a GraphQL query. */
  reads: Sql;
  config: Pick<Config, 'PUBLIC_BASE_URL'>;
  metrics: Pick<Metrics, 'ledgerEntries' | 'ledgerAmountRaw'>;
  /** Revokes an end user's spending authorizations (SHARED mode) when the user is deleted. */
  authorizations: { revokeByExternalId: AuthorizationService['revokeByExternalId'] };
  /** The Stripe top-up amounts a paywall offers (null when it takes no card payments). */
  stripe: { topupAmounts: TopupAmounts };
}

/** Port to the Stripe module: the top-up amounts a paywall offers by card, or null. */
export type TopupAmounts = (paywallId: string, sql: Sql) => Promise<readonly string[] | null>;

/**
 * The parameter of ensureUser's statement holding the paywall's low-balance threshold (after the world
 * credit's): a DEFAULT account opened below it starts "already alerted" for the paywall (docs/ledger.md
 * "Low-balance alerts"): it crossed nothing, so its first charge records no `paywall.balance.low`; money
 * lifting it to the threshold arms it, as for any account.
 */
const LOW_PARAM = 6 + WORLD_CREDIT_PARAMS;

/** End users (created on first sight per paywall), trial credits, connections, top-up links. */
export class UserService {
  constructor(private readonly deps: UserServiceDeps) {}

  /**
   * Gets or creates the end user. Creation and the trial grant (balance, `trial` ledger entry,
   * `paywall.balance.trial.granted`) are ONE statement, so they commit together whether `sql` is the
   * pool (autocommit) or an open transaction. Concurrent first sightings converge on one row: the
   * unique (paywall_id, external_id) makes the loser's insert a no-op and it reads the winner's row.
   */
  async ensureUser(
    sql: Sql,
    paywall: PaywallInfo,
    externalId: string,
    trigger: EventTrigger,
  ): Promise<EnsuredUser> {
    const found = await this.select(sql, paywall.id, externalId);
    if (found) return { ...found, created: false, connected: isConnected(paywall, found) };

    const id = randomUUID();
    const ledgerId = randomUUID();
    // Trial credits are a DEFAULT-mode feature (docs/reference.md §8): a SHARED user spends a wallet.
    const trial = paywall.mode === 'DEFAULT' && paywall.trialCreditsRaw > 0n ? paywall.trialCreditsRaw : 0n;
    const events: NewEvent[] =
      trial > 0n
        ? [
            buildEvent(
              'paywall.balance.trial.granted',
              { paywall, trigger, subject: { type: 'end_user', id, externalId } },
              { walletUserId: id, credits: usdcDecimal(trial), activityId: ledgerId },
            ),
          ]
        : [];
    // DEFAULT: the user's own account (same id as the user) is created with it and funded from world by
    // the trial grant. SHARED: no account until a wallet user approves (it then spends the wallet's).
    // The foreign key end_user → account is checked at the end of the statement, when both rows exist.
    const rows = await sql.query(
      `with u as (
         insert into end_user (id, paywall_id, external_id, account_id, created_at)
         values ($1::uuid, $2::uuid, $3::varchar, case when $5::boolean then $1::uuid end, now())
         on conflict (paywall_id, external_id) do nothing
         returning id, paywall_id, external_id, account_id, wallet_user_id, connected_at, created_at
       ), uc as (
         insert into usage_counter (end_user_id) select id from u
       ), a as (
         insert into ledger_account (id, kind, paywall_id, balance_raw, low_alerted_paywalls, created_at)
         select u.id, 'user', u.paywall_id, $4::bigint,
                case when $${LOW_PARAM}::bigint is not null and $4::bigint < $${LOW_PARAM}::bigint
                     then array[u.paywall_id::text] else '{}'::text[] end, now()
           from u where $5::boolean
         returning id, balance_raw, held_raw
       ), ${worldCreditCtes('a', 6)}
       select u.*, coalesce(a.balance_raw, 0)::text as balance_raw, coalesce(a.held_raw, 0)::text as held_raw
         from u left join a on true`,
      [
        id,
        paywall.id,
        externalId,
        trial.toString(),
        paywall.mode === 'DEFAULT',
        ...worldCreditParams({
          kind: 'trial',
          transferId: ledgerId,
          amountRaw: trial,
          paywallId: paywall.id,
          endUserId: id,
          events,
        }),
        paywall.lowBalanceThresholdRaw?.toString() ?? null,
      ],
    );
    if (rows.length === 1) {
      if (trial > 0n) {
        this.deps.metrics.ledgerEntries.inc({ kind: 'trial' });
        this.deps.metrics.ledgerAmountRaw.inc({ kind: 'trial' }, Number(trial));
      }
      const u = toUserRow(rows[0]);
      return { ...u, created: true, connected: isConnected(paywall, u) };
    }
    // Lost a race with a concurrent first sighting: the row exists now.
    const again = await this.select(sql, paywall.id, externalId);
    if (!again) throw new Error('end user vanished after a conflicting insert');
    return { ...again, created: false, connected: isConnected(paywall, again) };
  }

  private async select(sql: Sql, paywallId: string, externalId: string): Promise<EndUserRow | null> {
    const rows = await sql.query(
      `select ${USER_COLUMNS} from ${USER_FROM} where e.paywall_id = $1 and e.external_id = $2`,
      [paywallId, externalId],
      'end_user_by_external_id',
    );
    return rows.length ? toUserRow(rows[0]) : null;
  }

  /**
   * A balance read (REST `GET /v1/user/balance`) is a first sight when being seen carries money: with
   * trial credits (DEFAULT mode) an unknown user is created and granted them, so the read shows what they
   * can spend. Otherwise reading creates nothing (an unknown user reads "0").
   */
  async sightOnRead(paywall: PaywallInfo, externalId: string, trigger: EventTrigger): Promise<void> {
    if (paywall.mode !== 'DEFAULT' || paywall.trialCreditsRaw <= 0n) return;
    await this.ensureUser(this.deps.db, paywall, externalId, trigger);
  }

  /** The end user, or null. Never creates one. */
  async findUser(paywallId: string, externalId: string): Promise<EndUserRow | null> {
    return this.select(this.deps.db, paywallId, externalId);
  }

  /** Users by id (DataLoader batch function); missing ids give null. */
  async byIds(ids: readonly string[]): Promise<(EndUserRow | null)[]> {
    const rows = await this.deps.db.query(
      `select ${USER_COLUMNS} from ${USER_FROM} where e.id = any($1::uuid[])`,
      [ids as string[]],
    );
    const map = new Map(rows.map((r) => [r.id as string, toUserRow(r)]));
    return ids.map((id) => map.get(id) ?? null);
  }

  /**
   * A page of the paywall's users, newest first. `after` is the opaque cursor of the last row seen;
   * the timestamp travels as PostgreSQL text so microseconds survive the round trip.
   */
  async list(
    paywallId: string,
    first: number,
    after: string | null,
  ): Promise<{ rows: (EndUserRow & { cursor: string })[]; hasNextPage: boolean }> {
    let cur: { ts: string; id: string } | null = null;
    if (after) cur = decodeCursor(after, 'u');
    const rows = await this.deps.reads.query(
      `select ${USER_COLUMNS}, e.created_at::text as created_text from ${USER_FROM}
        where e.paywall_id = $1 and ($2::timestamptz is null or (e.created_at, e.id) < ($2::timestamptz, $3::uuid))
        order by e.created_at desc, e.id desc limit $4`,
      [paywallId, cur?.ts ?? null, cur?.id ?? null, first + 1],
    );
    const page = rows.slice(0, first).map((r) => ({
      ...toUserRow(r),
      cursor: encodeCursor('u', r.created_text, r.id),
    }));
    return { rows: page, hasNextPage: rows.length > first };
  }

  /** The paywall's wallet connections (active and revoked), newest first. */
  async connections(
    paywallId: string,
    first: number,
    after: string | null,
  ): Promise<{ rows: ConnectionRow[]; hasNextPage: boolean }> {
    return (await this.connectionPages([{ paywallId, first, after }]))[0];
  }

  /**
   * Connection pages of many paywalls in one statement (DataLoader batch: `paywalls { connections }` reads
   * once, not once per paywall).
   */
  async connectionPages(
    keys: readonly { paywallId: string; first: number; after: string | null }[],
  ): Promise<{ rows: ConnectionRow[]; hasNextPage: boolean }[]> {
    const rows = await this.deps.reads.query<any>(
      `select k.idx, c.*
         from ${pageKeys('paywall_id')}
         cross join lateral (
           select c.id, c.end_user_id, e.external_id, c.wallet_user_id, c.created_at, c.revoked_at,
                  c.created_at::text as created_text, ${allowanceColumns('c')}
             from wallet_connection c join end_user e on e.id = c.end_user_id
            where c.paywall_id = k.paywall_id
              and (k.after_ts is null or (c.created_at, c.id) < (k.after_ts, k.after_id))
            order by c.created_at desc, c.id desc limit k.lim
         ) c
        order by k.idx, c.created_at desc, c.id desc`,
      pageParams(
        keys.map((k) => k.paywallId),
        keys,
        'wc',
      ),
    );
    return splitPages(rows, keys, (r) => ({
      id: r.id,
      endUserId: r.end_user_id,
      externalUserId: r.external_id,
      walletUserId: r.wallet_user_id,
      status: r.revoked_at ? 'REVOKED' : 'ACTIVE',
      createdAt: new Date(r.created_at),
      revokedAt: r.revoked_at ? new Date(r.revoked_at) : null,
      cursor: encodeCursor('wc', r.created_text, r.id),
      allowance: {
        allowance_raw: r.allowance_raw,
        allowance_period: r.allowance_period,
        allowance_spent_raw: r.allowance_spent_raw,
        allowance_period_start: r.allowance_period_start,
      },
    }));
  }

  /**
   * URL of the top-up page for a user (no side effects; see `topupLink`). SHARED: the hosted wallet's
   * top-up. DEFAULT: the hosted page when Stripe is connected (it offers the Pay buttons; docs/reference.md §9),
   * else the paywall's own `topupUrl` when set, else the hosted page (which says whom to ask).
   */
  async topupUrl(paywall: PaywallInfo, externalId: string, sql: Sql = this.deps.db): Promise<string> {
    if (paywall.mode === 'SHARED')
      return withParam(`${this.deps.config.PUBLIC_BASE_URL}/wallet/topup`, {
        paywall: paywall.id,
        user: externalId,
      });
    const hosted = withParam(`${this.deps.config.PUBLIC_BASE_URL}/topup/${paywall.id}`, { user: externalId });
    if (!paywall.topupUrl || (await this.deps.stripe.topupAmounts(paywall.id, sql))) return hosted;
    return withParam(paywall.topupUrl, { user: externalId });
  }

  /** The `paywall.balance.topup.link.created` event for a link handed out. */
  topupLinkEvent(
    paywall: PaywallInfo,
    user: { id: string; externalId: string; walletUserId: string | null },
    url: string,
    trigger: EventTrigger,
  ): NewEvent {
    return buildEvent(
      'paywall.balance.topup.link.created',
      { paywall, trigger, subject: { type: 'end_user', id: user.id, externalId: user.externalId } },
      { walletUserId: walletUserIdOf(paywall, user), redirectUrl: url, checkoutSessionId: null },
    );
  }

  /**
   * A connect link (SHARED). One pending request per end user: while one is pending and unexpired it is
   * handed out again (its 24 hours start anew), so repeated connect calls and blocked chats do not pile
   * up rows. Each hand-out still reports `paywall.authorization.requested` (every link handed out is
   * announced, see docs/reference.md §7), with the same `requestId`, so subscribers can dedupe on it.
   * Record `event` in the same transaction as `sql`. The consent page decides exactly the stored
   * request; the link carries only its id.
   */
  async connectRequest(
    sql: Sql,
    paywall: PaywallInfo,
    user: { id: string; externalId: string },
    trigger: EventTrigger,
  ): Promise<{ url: string; requestId: string; event: NewEvent }> {
    // Reuse-or-create must be serialised per end user: outside a transaction, open one for it.
    if (sql === this.deps.db)
      return this.deps.db.transaction((tx) => this.connectRequest(tx, paywall, user, trigger));
    await sql.query(`select pg_advisory_xact_lock(hashtextextended('connect_request:' || $1::text, 0))`, [
      user.id,
    ]);
    const [reused] = await sql.query(
      `update connect_request set expires_at = now() + interval '24 hours'
        where id = (select id from connect_request
                     where end_user_id = $1::uuid and paywall_id = $2::uuid and status = 'pending'
                       and expires_at > now()
                     order by created_at desc limit 1)
        returning id`,
      [user.id, paywall.id],
    );
    const linkOf = (requestId: string) =>
      withParam(`${this.deps.config.PUBLIC_BASE_URL}/connect/${paywall.id}`, { request: requestId });
    const requestId: string = reused ? reused.id : randomUUID();
    if (!reused)
      await sql.query(
        `insert into connect_request (id, paywall_id, end_user_id, status, expires_at, created_at)
         values ($1::uuid, $2::uuid, $3::uuid, 'pending', now() + interval '24 hours', now())`,
        [requestId, paywall.id, user.id],
      );
    const url = linkOf(requestId);
    return {
      url,
      requestId,
      event: buildEvent(
        'paywall.authorization.requested',
        { paywall, trigger, subject: { type: 'end_user', id: user.id, externalId: user.externalId } },
        { externalUserId: user.externalId, walletUserId: null, requestId, approvalUrl: url, mode: 'shared' },
      ),
    };
  }

  /** The hosted wallet page (docs/reference.md §16: where an app's spending limit is changed). */
  walletUrl(): string {
    return `${this.deps.config.PUBLIC_BASE_URL}/wallet`;
  }

  /**
   * A top-up link for the user: DEFAULT mode uses the paywall's `topupUrl` (with `user=`) or the hosted
   * page; SHARED mode the hosted wallet's top-up. Records `paywall.balance.topup.link.created`.
   */
  async topupLink(paywall: PaywallInfo, externalId: string, trigger: EventTrigger): Promise<string> {
    checkExternalId(externalId);
    const user = await this.ensureUser(this.deps.db, paywall, externalId, trigger);
    const url = await this.topupUrl(paywall, externalId);
    await recordEvents(this.deps.db, [this.topupLinkEvent(paywall, user, url, trigger)]);
    return url;
  }

  /**
   * A SHARED-mode connect link: the end user's pending request, or a new one, with its
   * `paywall.authorization.requested` event.
   */
  async connectLink(paywall: PaywallInfo, externalId: string, trigger: EventTrigger): Promise<string> {
    checkExternalId(externalId);
    const user = await this.ensureUser(this.deps.db, paywall, externalId, trigger);
    return this.deps.db.transaction(async (tx) => {
      const { url, event } = await this.connectRequest(tx, paywall, user, trigger);
      await recordEvents(tx, [event]);
      return url;
    });
  }

  /**
   * Connection check (docs/reference.md §4). DEFAULT: every identified user is connected. SHARED: a connected
   * user is described; otherwise the answer carries a connect link (and its event).
   */
  async connect(paywall: PaywallInfo, externalId: string, trigger: EventTrigger): Promise<ConnectResult> {
    checkExternalId(externalId);
    const user = await this.ensureUser(this.deps.db, paywall, externalId, trigger);
    if (paywall.mode === 'DEFAULT')
      return {
        connected: true,
        connectedUser: {
          paywallKeyId: paywall.id,
          userId: user.id,
          externalUserId: externalId,
          createdAt: user.createdAt,
        },
        message: 'DEFAULT mode: every identified user is connected; no authorization is needed.',
        url: null,
      };
    if (user.walletUserId)
      return {
        connected: true,
        connectedUser: {
          paywallKeyId: paywall.id,
          userId: user.walletUserId,
          externalUserId: externalId,
          createdAt: user.connectedAt ?? user.createdAt,
        },
        message: 'The user is connected to this paywall.',
        url: null,
      };
    const url = await this.connectLink(paywall, externalId, trigger);
    return {
      connected: false,
      connectedUser: null,
      message: `The user is not connected. Send them to ${url} to authorize this paywall.`,
      url,
    };
  }

  /**
   * Revokes a SHARED-mode authorization. DEFAULT mode has none: nothing changes, `success: false`.
   * SHARED: `success: true` means the user is not connected afterwards, whether or not they were.
   */
  async disconnect(
    paywall: PaywallInfo,
    externalId: string,
    trigger: EventTrigger,
  ): Promise<DisconnectResult> {
    checkExternalId(externalId);
    if (paywall.mode === 'DEFAULT')
      return {
        success: false,
        message:
          'DEFAULT mode has no end-user authorization to revoke; every identified user is connected. Nothing was changed.',
      };
    // The hosted wallet's authorization service owns revocation (row locks: one event per revoke).
    const revoked = await this.deps.authorizations.revokeByExternalId(paywall.id, externalId, trigger);
    return revoked
      ? { success: true, message: 'The user was disconnected; their authorization is revoked.' }
      : { success: true, message: 'The user was not connected; nothing to revoke.' };
  }
}
