import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import type { Database } from '../../db/database.js';
import { recordEvents, type EventTrigger } from '../events/event.service.js';
import { buildEvent } from '../events/event-payloads.js';
import type { Clock } from '../../shared/clock.js';
import { setAllowance, type AllowancePeriod } from './allowance.js';
import { writeOffOwed } from '../accounts/debt-write-off.js';

/** What the consent page shows about a pending connect request. */
export interface ConsentRequest {
  requestId: string;
  paywallId: string;
  paywallName: string;
  paywallDescription: string | null;
  externalUserId: string;
  expiresAt: Date;
}

export interface ApproveResult {
  connectionId: string;
  paywallName: string;
}

const linkNotFound = () =>
  new DomainError(
    'not_found',
    'This connect link is not valid. Ask the app for a new one.',
    'request',
    'connect_link_not_found',
  );

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const connectionNotFound = () =>
  new DomainError(
    'not_found',
    'This connection was not found in your wallet.',
    'connection',
    'connection_not_found',
  );

/** The trigger of something a signed-in wallet user did on a hosted page. */
export const pageTrigger = (walletUserId: string): EventTrigger => ({
  source: 'page',
  actorType: 'end_user',
  actorId: walletUserId,
});

/** What spending authorizations need: the database only. */
export interface AuthorizationServiceDeps {
  db: Database;
  /** The time an allowance's period starts from (docs/reference.md §16); default the system's. */
  clock?: Clock;
}

/** A spending limit as the forms give it (wallet/allowance.parseAllowance); null: no limit. */
export type AllowanceInput = { amountRaw: bigint; period: AllowancePeriod } | null;

/**
 * A wallet that connects starts its low-balance watch for the app (docs/ledger.md "Low-balance alerts")
 * at its balance now: below the app's threshold, it is marked "already alerted" (it crossed nothing, so its
 * next charge records no `paywall.balance.low`; money lifting it arms it); at or above it, armed. Nothing
 * is written when the app has no threshold and the wallet carries no flag of it.
 */
const WATCH_FROM_NOW_SQL = `
update ledger_account a
   set low_alerted_paywalls = case
         when p.low_balance_threshold_raw is not null and a.balance_raw - a.held_raw < p.low_balance_threshold_raw
           then array_append(array_remove(a.low_alerted_paywalls, p.id::text), p.id::text)
         else array_remove(a.low_alerted_paywalls, p.id::text) end
  from paywall p
 where a.id = $1::uuid and p.id = $2::uuid
   and (p.low_balance_threshold_raw is not null or p.id::text = any(a.low_alerted_paywalls))`;

/**
 * Consent between a SHARED paywall's end user and a wallet user (docs/reference.md §8): approve or decline a
 * connect request, revoke a connection. Every decision locks the rows it changes (the request, then
 * the end user, then the connection — the same order everywhere), so concurrent clicks record one event.
 */
export class AuthorizationService {
  constructor(private readonly deps: AuthorizationServiceDeps) {}

  /**
   * A pending, unexpired connect request of THAT paywall. Unknown ids, ids of another paywall and
   * archived paywalls are all "not valid" (404: a link never reveals another paywall's requests);
   * an expired or already-decided request says so.
   */
  async pendingRequest(paywallId: string, requestId: string): Promise<ConsentRequest> {
    return this.load(this.deps.db, paywallId, requestId, false);
  }

  private async load(
    sql: Sql,
    paywallId: string,
    requestId: unknown,
    lock: boolean,
  ): Promise<ConsentRequest & any> {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
    if (typeof requestId !== 'string' || !uuid.test(requestId) || !uuid.test(paywallId)) throw linkNotFound();
    const rows = await sql.query(
      `select cr.id, cr.paywall_id, cr.end_user_id, cr.status, cr.wallet_user_id, cr.expires_at,
              cr.expires_at <= now() as expired, p.name, p.description, p.owner_id, p.mode,
              p.archived_at, eu.external_id
         from connect_request cr
         join paywall p on p.id = cr.paywall_id
         join end_user eu on eu.id = cr.end_user_id
        where cr.id = $1 ${lock ? 'for update of cr' : ''}`,
      [requestId],
    );
    const r = rows[0];
    if (!r || r.paywall_id !== paywallId.toLowerCase() || r.archived_at || r.mode !== 'SHARED')
      throw linkNotFound();
    if (r.status !== 'pending')
      throw new DomainError(
        'conflict',
        r.status === 'approved'
          ? `This request was already approved: ${r.name} is connected to a wallet. You can close this page.`
          : `This request was already declined. To connect, ask ${r.name} for a new link.`,
        'request',
        r.status === 'approved' ? 'connect_request_approved' : 'connect_request_declined',
      );
    if (r.expired)
      throw new DomainError(
        'invalid_request',
        `This connect link has expired (links are valid for 24 hours). Ask ${r.name} for a new one.`,
        'request',
        'connect_link_expired',
      );
    return {
      requestId: r.id,
      paywallId: r.paywall_id,
      paywallName: r.name,
      paywallDescription: r.description ?? null,
      externalUserId: r.external_id,
      expiresAt: new Date(r.expires_at),
      endUserId: r.end_user_id,
      ownerUserId: r.owner_id,
    };
  }

  /**
   * Approve: request → approved, the connection (reused when this wallet already holds one for the end
   * user), the end user spends the wallet's account, `paywall.authorization.completed` — one transaction.
   */
  async approve(
    walletUser: { id: string; accountId: string },
    paywallId: string,
    requestId: unknown,
    allowance: AllowanceInput = null,
  ): Promise<ApproveResult> {
    return this.deps.db.transaction(async (tx) => {
      const req = await this.load(tx, paywallId, requestId, true);
      const [eu] = await tx.query(`select id, wallet_user_id from end_user where id = $1 for update`, [
        req.endUserId,
      ]);
      const open = await tx.query(
        `select id, wallet_user_id from wallet_connection where end_user_id = $1 and revoked_at is null for update`,
        [req.endUserId],
      );
      if (open.length && open[0].wallet_user_id !== walletUser.id)
        throw new DomainError(
          'conflict',
          `This ${req.paywallName} account is already connected to another wallet. It must be disconnected there first.`,
          'request',
          'already_connected',
        );
      let connectionId: string = open[0]?.id;
      if (!connectionId) {
        connectionId = randomUUID();
        await tx.query(
          `insert into wallet_connection (id, paywall_id, end_user_id, wallet_user_id, created_at)
           values ($1, $2, $3, $4, now())`,
          [connectionId, req.paywallId, eu.id, walletUser.id],
        );
      }
      await tx.query(
        `update end_user set wallet_user_id = $2, account_id = $3, connected_at = coalesce(connected_at, now())
          where id = $1`,
        [eu.id, walletUser.id, walletUser.accountId],
      );
      await tx.query(WATCH_FROM_NOW_SQL, [walletUser.accountId, req.paywallId]);
      await tx.query(
        `update connect_request set status = 'approved', wallet_user_id = $2, decided_at = now() where id = $1`,
        [req.requestId, walletUser.id],
      );
      // The consent page's spending limit (docs/reference.md §16); empty: none.
      await setAllowance(tx, connectionId, allowance, this.now());
      await recordEvents(tx, [
        buildEvent('paywall.authorization.completed', this.ctx(req, walletUser.id), {
          externalUserId: req.externalUserId,
          walletUserId: walletUser.id,
          connectionId,
        }),
      ]);
      return { connectionId, paywallName: req.paywallName };
    });
  }

  /** Decline: request → declined and `paywall.authorization.declined`; the end user stays unconnected. */
  async decline(
    walletUser: { id: string },
    paywallId: string,
    requestId: unknown,
  ): Promise<{ paywallName: string }> {
    return this.deps.db.transaction(async (tx) => {
      const req = await this.load(tx, paywallId, requestId, true);
      await tx.query(
        `update connect_request set status = 'declined', wallet_user_id = $2, decided_at = now() where id = $1`,
        [req.requestId, walletUser.id],
      );
      await recordEvents(tx, [
        buildEvent('paywall.authorization.declined', this.ctx(req, walletUser.id), {
          externalUserId: req.externalUserId,
          walletUserId: walletUser.id,
          requestId: req.requestId,
          reason: 'user_declined',
        }),
      ]);
      return { paywallName: req.paywallName };
    });
  }

  /**
   * A connection of this wallet user, for the Disconnect confirmation: the app's name and whether it is
   * still active. Anyone else's connection (or an unknown id) is the same 404 as in `revokeConnection`.
   */
  async connectionOf(
    walletUserId: string,
    connectionId: unknown,
  ): Promise<{ connectionId: string; paywallName: string; active: boolean }> {
    if (typeof connectionId !== 'string' || !UUID.test(connectionId)) throw connectionNotFound();
    const [c] = await this.deps.db.query(
      `select c.id, c.revoked_at, p.name from wallet_connection c join paywall p on p.id = c.paywall_id
        where c.id = $1 and c.wallet_user_id = $2`,
      [connectionId, walletUserId],
    );
    if (!c) throw connectionNotFound();
    return { connectionId: c.id, paywallName: c.name, active: !c.revoked_at };
  }

  /**
   * "Save limit" on the wallet page: sets (null: removes) the spending limit of one of the wallet user's
   * active connections. Anyone else's connection, a revoked one or an unknown id is the same 404.
   */
  async setConnectionAllowance(
    walletUserId: string,
    connectionId: unknown,
    allowance: AllowanceInput,
  ): Promise<{ paywallName: string }> {
    if (typeof connectionId !== 'string' || !UUID.test(connectionId)) throw connectionNotFound();
    return this.deps.db.transaction(async (tx) => {
      const [c] = await tx.query(
        `select c.id, p.name from wallet_connection c join paywall p on p.id = c.paywall_id
          where c.id = $1 and c.wallet_user_id = $2 and c.revoked_at is null`,
        [connectionId, walletUserId],
      );
      if (!c) throw connectionNotFound();
      await setAllowance(tx, c.id, allowance, this.now());
      return { paywallName: c.name as string };
    });
  }

  private now(): Date {
    return this.deps.clock ? this.deps.clock.now() : new Date();
  }

  /**
   * Revoke from the wallet page: only the wallet user who owns the connection may (anyone else gets
   * the same 404 as for an unknown id). Revoking an already revoked connection is a no-op.
   */
  async revokeConnection(
    walletUserId: string,
    connectionId: unknown,
  ): Promise<{ revoked: boolean; paywallName: string }> {
    const notFound = connectionNotFound();
    if (typeof connectionId !== 'string' || !UUID.test(connectionId)) throw notFound;
    return this.deps.db.transaction(async (tx) => {
      const [c] = await tx.query(
        `select c.end_user_id, p.name from wallet_connection c join paywall p on p.id = c.paywall_id
          where c.id = $1 and c.wallet_user_id = $2`,
        [connectionId, walletUserId],
      );
      if (!c) throw notFound;
      const revoked = await this.revokeEndUser(tx, c.end_user_id, pageTrigger(walletUserId), connectionId);
      return { revoked, paywallName: c.name as string };
    });
  }

  /**
   * Revoke through the API (`GET /v1/user/disconnect`): true when a connection was revoked, false
   * when the end user was not connected (or does not exist).
   */
  async revokeByExternalId(paywallId: string, externalId: string, trigger: EventTrigger): Promise<boolean> {
    return this.deps.db.transaction(async (tx) => {
      const [eu] = await tx.query(`select id from end_user where paywall_id = $1 and external_id = $2`, [
        paywallId,
        externalId,
      ]);
      return eu ? this.revokeEndUser(tx, eu.id, trigger, null) : false;
    });
  }

  /**
   * Locks the end user, then its open connection (the order `approve` uses), clears what it spends
   * and records `paywall.authorization.revoked`. `onlyConnection`: revoke only if that is the open one.
   */
  private async revokeEndUser(
    tx: Sql,
    endUserId: string,
    trigger: EventTrigger,
    onlyConnection: string | null,
  ): Promise<boolean> {
    const [eu] = await tx.query(
      `select eu.id, eu.external_id, eu.wallet_user_id, eu.account_id, eu.paywall_id, p.owner_id
         from end_user eu join paywall p on p.id = eu.paywall_id where eu.id = $1 for update of eu`,
      [endUserId],
    );
    // The wallet's account before the connection (the order of the debt collector, collectDebt).
    if (eu?.account_id)
      await tx.query(`select id from ledger_account where id = $1 for no key update`, [eu.account_id]);
    const open = await tx.query(
      `select id, wallet_user_id from wallet_connection where end_user_id = $1 and revoked_at is null for update`,
      [endUserId],
    );
    if (onlyConnection && open[0]?.id !== onlyConnection) return false;
    const walletUserId: string | null = open[0]?.wallet_user_id ?? eu.wallet_user_id ?? null;
    if (!open.length && !eu.wallet_user_id) return false;
    if (open.length)
      await tx.query(`update wallet_connection set revoked_at = now() where id = $1`, [open[0].id]);
    // docs/reference.md §5.7: a wallet never repays an app after the user disconnected it; what the app's
    // charges still owe leaves the wallet's debt, so it cannot block the wallet's other apps either.
    if (eu.account_id) await writeOffOwed(tx, eu.account_id, { endUserId });
    await tx.query(
      `update end_user set wallet_user_id = null, account_id = null, connected_at = null where id = $1`,
      [endUserId],
    );
    await recordEvents(tx, [
      buildEvent(
        'paywall.authorization.revoked',
        {
          paywall: { id: eu.paywall_id, ownerId: eu.owner_id },
          trigger,
          subject: { type: 'end_user', id: eu.id, externalId: eu.external_id },
        },
        { externalUserId: eu.external_id, walletUserId: walletUserId as string },
      ),
    ]);
    return true;
  }

  private ctx(req: ConsentRequest & { endUserId: string; ownerUserId: string }, walletUserId: string) {
    return {
      paywall: { id: req.paywallId, ownerId: req.ownerUserId },
      trigger: pageTrigger(walletUserId),
      subject: { type: 'end_user' as const, id: req.endUserId, externalId: req.externalUserId },
    };
  }
}
