import type { Sql } from '../../../db/database.js';
import type { EventTrigger } from '../../events/event.service.js';
import type { buildEvent } from '../../events/event-payloads.js';

/** Whose auto top-up: an end user of a DEFAULT paywall (by the app's user id) or a hosted wallet. */
export type AutoTopupScope =
  | { kind: 'end_user'; paywallId: string; externalId: string }
  | { kind: 'wallet'; walletUserId: string; email?: string };

/** Work to do once a transaction committed (an e-mail). */
export type AfterCommit = () => void;

/** The `auto_topup` columns every part reads ({@link ROW_COLUMNS}). */
export interface RowOf {
  id: string;
  paywall_id: string | null;
  external_id: string | null;
  end_user_id: string | null;
  wallet_user_id: string | null;
  account_id: string | null;
  stripe_customer_id: string;
}

/** NOTIFY channel of auto top-up changes (payload: the account id). */
export const CHANGED_CHANNEL = 'auto_topup_changed';
export const ROW_COLUMNS =
  'id, paywall_id, external_id, end_user_id, wallet_user_id, account_id, stripe_customer_id';
export const ROW_COLUMNS_A = ROW_COLUMNS.split(', ')
  .map((c) => `a.${c}`)
  .join(', ');

export const scopeWhere = (scope: AutoTopupScope) =>
  scope.kind === 'wallet' ? `wallet_user_id = $1::uuid` : `paywall_id = $1::uuid and external_id = $2`;
export const scopeParams = (scope: AutoTopupScope) =>
  scope.kind === 'wallet' ? [scope.walletUserId] : [scope.paywallId, scope.externalId];

export async function rowOf(sql: Sql, scope: AutoTopupScope): Promise<RowOf | undefined> {
  return (
    await sql.query<RowOf>(
      `select ${ROW_COLUMNS} from auto_topup where ${scopeWhere(scope)}`,
      scopeParams(scope),
    )
  )[0];
}

/**
 * Background work started by this process (payments being created, e-mails): waited for by
 * {@link idle} at shutdown and in tests.
 */
export class InFlight {
  private readonly promises = new Set<Promise<unknown>>();

  track(p: Promise<unknown>): void {
    this.promises.add(p);
    void p.finally(() => this.promises.delete(p));
  }

  async idle(): Promise<void> {
    while (this.promises.size) await Promise.allSettled([...this.promises]);
  }
}

const SYSTEM: EventTrigger = { source: 'system', actorType: 'system', actorId: 'auto_topup' };

/**
 * Where the events of one auto top-up go: its paywall (DEFAULT), or every paywall the wallet is
 * connected to (the latest connection names the end user), as wallet top-ups do.
 */
export async function eventTargets(
  sql: Sql,
  row: RowOf,
): Promise<{ ctx: Parameters<typeof buildEvent>[1]; walletUserId: string | null; externalId: string }[]> {
  if (row.wallet_user_id) {
    const conns = await sql.query<{
      paywall_id: string;
      owner_id: string;
      end_user_id: string;
      external_id: string;
    }>(
      `select distinct on (c.paywall_id) c.paywall_id, p.owner_id, eu.id as end_user_id, eu.external_id
         from wallet_connection c join paywall p on p.id = c.paywall_id join end_user eu on eu.id = c.end_user_id
        where c.wallet_user_id = $1 and c.revoked_at is null
        order by c.paywall_id, c.created_at desc`,
      [row.wallet_user_id],
    );
    return conns.map((c) => ({
      ctx: {
        paywall: { id: c.paywall_id, ownerId: c.owner_id },
        trigger: SYSTEM,
        subject: { type: 'end_user' as const, id: c.end_user_id, externalId: c.external_id },
        metadata: { source: 'auto_topup' },
      },
      walletUserId: row.wallet_user_id,
      externalId: c.external_id,
    }));
  }
  if (!row.paywall_id || !row.end_user_id) return [];
  const [p] = await sql.query<{ owner_id: string }>(`select owner_id from paywall where id = $1`, [
    row.paywall_id,
  ]);
  if (!p) return [];
  return [
    {
      ctx: {
        paywall: { id: row.paywall_id, ownerId: p.owner_id },
        trigger: SYSTEM,
        subject: { type: 'end_user', id: row.end_user_id, externalId: row.external_id },
        metadata: { source: 'auto_topup' },
      },
      // DEFAULT mode: the end user is its own wallet (as in every balance event).
      walletUserId: row.end_user_id,
      externalId: row.external_id ?? '',
    },
  ];
}
