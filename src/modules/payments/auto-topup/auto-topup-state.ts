import type { Database } from '../../../db/database.js';
import type { Clock } from '../../../shared/clock.js';
import { recordEvents, type EventTrigger } from '../../events/event.service.js';
import { buildEvent } from '../../events/event-payloads.js';
import {
  CHANGED_CHANNEL,
  eventTargets,
  ROW_COLUMNS,
  scopeParams,
  scopeWhere,
  type AutoTopupScope,
  type RowOf,
} from './auto-topup-rows.js';
import { utcMonthStart, type AutoTopupSettings } from './auto-topup-settings.js';

/** What the pages and GraphQL show of one auto top-up. */
export interface AutoTopupState {
  enabled: boolean;
  /** Null until a Checkout that saved the card was paid. */
  settings: AutoTopupSettings | null;
  /** What this UTC month's payments took or hold (succeeded and in flight), in cents. */
  spentThisMonthCents: number;
  failuresInRow: number;
  /** `failures` (turned off after three failures in a row), `user`, or null. */
  disabledReason: string | null;
  /** A payment is in flight (created, its outcome not known yet). */
  pending: boolean;
}

/** What the user sees of auto top-up (wallet page, GraphQL) and turning it off. */
export class AutoTopupStates {
  constructor(private readonly d: { db: Database; clock: Clock }) {}

  /** The user turns auto top-up off (wallet page, hosted top-up page). Records the event when it was on. */
  async turnOff(scope: AutoTopupScope): Promise<void> {
    await this.d.db.transaction(async (tx) => {
      const [row] = await tx.query<RowOf & { failures_in_row: number }>(
        `update auto_topup set enabled = false, disabled_reason = 'user', updated_at = now()
          where id = (select id from auto_topup where ${scopeWhere(scope)}) and enabled
         returning ${ROW_COLUMNS}, failures_in_row`,
        scopeParams(scope),
      );
      if (!row) return;
      if (row.account_id) await tx.query('select pg_notify($1, $2)', [CHANGED_CHANNEL, row.account_id]);
      const trigger: EventTrigger =
        scope.kind === 'wallet'
          ? { source: 'page', actorType: 'end_user', actorId: scope.walletUserId }
          : {
              source: 'page',
              actorType: 'end_user',
              actorId: row.end_user_id ?? row.external_id ?? 'unknown',
            };
      const events = (await eventTargets(tx, row)).map((t) =>
        buildEvent(
          'paywall.balance.autotopup.disabled',
          { ...t.ctx, trigger },
          {
            walletUserId: t.walletUserId,
            externalUserId: t.externalId,
            reason: 'user',
            failuresInRow: row.failures_in_row,
            lastFailureCode: null,
          },
        ),
      );
      if (events.length) await recordEvents(tx, events);
    });
  }

  /** The wallet's auto top-up (null when it was never set up). */
  async walletState(walletUserId: string): Promise<AutoTopupState | null> {
    return (await this.states(`a.wallet_user_id = any($1::uuid[])`, [walletUserId]))[0] ?? null;
  }

  /** The auto top-up of DEFAULT end users, by end-user id, in the order asked (null when none). */
  async endUserStates(endUserIds: readonly string[]): Promise<(AutoTopupState | null)[]> {
    const rows = await this.states(`a.end_user_id = any($1::uuid[])`, [...endUserIds]);
    const by = new Map(rows.map((r) => [r.key, r]));
    return endUserIds.map((id) => by.get(id) ?? null);
  }

  private async states(where: string, ids: string[]): Promise<(AutoTopupState & { key: string })[]> {
    const rows = await this.d.db.query<any>(
      `select coalesce(a.end_user_id, a.wallet_user_id) as key, a.enabled, a.threshold_raw::text, a.amount_cents::text,
              a.monthly_cap_cents::text, a.failures_in_row, a.disabled_reason, a.pending_attempt_id,
              coalesce((select sum(x.amount_cents) from auto_topup_attempt x
                         where x.auto_topup_id = a.id and x.status <> 'failed' and x.created_at >= $2::timestamptz), 0)::text as spent
         from auto_topup a where ${where}`,
      [ids, utcMonthStart(this.d.clock.now()).toISOString()],
    );
    return rows.map((r) => ({
      key: r.key,
      enabled: r.enabled,
      settings:
        r.threshold_raw === null
          ? null
          : {
              thresholdRaw: BigInt(r.threshold_raw),
              amountCents: Number(r.amount_cents),
              monthlyCapCents: Number(r.monthly_cap_cents),
            },
      spentThisMonthCents: Number(r.spent),
      failuresInRow: r.failures_in_row,
      disabledReason: r.disabled_reason,
      pending: r.pending_attempt_id !== null,
    }));
  }
}
