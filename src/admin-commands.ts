/**
 * The operator's commands of `npm run admin` (src/admin.ts): the parsing of its arguments apart from the
 * database, so `--help` and a wrong command answer without opening (or locking) it. Output is JSON lines (one per withdrawal), amounts as USDC decimal strings.
 */
import type { Database } from './db/database.js';
import { tableStats } from './db/table-stats.js';
import { WITHDRAWAL_STATUSES, type WithdrawalStatus } from './modules/accounts/account.entity.js';
import { proveLedger, uncollectedByPaywall } from './modules/accounts/accounts.js';
import { EarningsService, type WithdrawalRow } from './modules/ledger/earnings.service.js';
import { DomainError } from './shared/errors.js';
import { formatUsdc } from './shared/money.js';

export const USAGE = `usage: npm run admin -- withdrawals list [--status PENDING|PAID|FAILED|CANCELED|all]
       npm run admin -- withdrawals mark-paid <id>
       npm run admin -- withdrawals mark-failed <id> [--reason "text"]
       npm run admin -- ledger verify
       npm run admin -- db stats`;

export type Command =
  | { kind: 'withdrawals-list'; status: WithdrawalStatus | null }
  | { kind: 'mark-paid'; id: string }
  | { kind: 'mark-failed'; id: string; reason: string | null }
  | { kind: 'ledger-verify' }
  | { kind: 'db-stats' };

/** The command line, read before anything is opened: help and usage errors need no database (and no lock). */
export function parseCommand(args: string[]): Command | { usage: string; exitCode: number } {
  const option = (name: string): string | null => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? (args[i + 1] ?? null) : null;
  };
  if (args.length === 0 || args.includes('--help') || args.includes('-h') || args[0] === 'help')
    return { usage: USAGE, exitCode: args.length === 0 ? 2 : 0 };
  const [group, cmd, id] = args;
  if (group === 'withdrawals' && cmd === 'list') {
    const status = (option('status') ?? 'PENDING').toUpperCase();
    if (status === 'ALL') return { kind: 'withdrawals-list', status: null };
    if (!WITHDRAWAL_STATUSES.includes(status as WithdrawalStatus))
      return { usage: `error: unknown status ${status}\n${USAGE}`, exitCode: 2 };
    return { kind: 'withdrawals-list', status: status as WithdrawalStatus };
  }
  if (group === 'withdrawals' && cmd === 'mark-paid' && id) return { kind: 'mark-paid', id };
  if (group === 'withdrawals' && cmd === 'mark-failed' && id)
    return { kind: 'mark-failed', id, reason: option('reason') };
  if (group === 'ledger' && cmd === 'verify') return { kind: 'ledger-verify' };
  if (group === 'db' && cmd === 'stats') return { kind: 'db-stats' };
  return { usage: USAGE, exitCode: 2 };
}

const withdrawalLine = (w: WithdrawalRow) =>
  JSON.stringify({
    id: w.id,
    paywallId: w.paywallId,
    amount: formatUsdc(w.amountRaw),
    destination: w.destination,
    status: w.status,
    failureReason: w.failureReason,
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  });

/** Runs one command: `out` and `err` get its lines; the answer is the exit status. */
export async function runCommand(
  command: Command,
  db: Database,
  out: (line: string) => void,
  err: (line: string) => void,
): Promise<number> {
  try {
    const earnings = new EarningsService(db);
    if (command.kind === 'withdrawals-list') {
      for (const w of await earnings.list(command.status, 1000)) out(withdrawalLine(w));
    } else if (command.kind === 'mark-paid') {
      out(withdrawalLine(await earnings.markPaid(command.id)));
    } else if (command.kind === 'mark-failed') {
      out(withdrawalLine(await earnings.markFailed(command.id, command.reason)));
    } else if (command.kind === 'ledger-verify') {
      const proof = await proveLedger(db);
      out(
        JSON.stringify({
          ok: proof.ok,
          total: proof.totalRaw.toString(),
          unbalancedAccounts: proof.unbalancedAccounts,
          misheldAccounts: proof.misheldAccounts,
          misdebtedAccounts: proof.misdebtedAccounts,
          sharedDebtCharges: proof.sharedDebtCharges,
          builtinUnpaidCharges: proof.builtinUnpaidCharges,
          // Usage that holds and free balances could not pay, per paywall (USDC): recorded, repaid, still owed.
          uncollected: (await uncollectedByPaywall(db)).map((u) => ({
            paywallId: u.paywallId,
            uncollected: formatUsdc(BigInt(u.uncollected)),
            recovered: formatUsdc(BigInt(u.recovered)),
            outstanding: formatUsdc(BigInt(u.outstanding)),
          })),
        }),
      );
      if (!proof.ok) return 1;
    } else {
      // One line per table, largest first; rows are pg_class estimates for big tables (rowsExact false).
      for (const t of await tableStats(db))
        out(
          JSON.stringify({
            table: t.table,
            rows: t.rows,
            rowsExact: t.rowsExact,
            total: t.total,
            indexes: t.indexes,
            totalBytes: t.totalBytes,
            indexBytes: t.indexBytes,
          }),
        );
    }
    return 0;
  } catch (e) {
    if (e instanceof DomainError) err(`error: ${e.message}`);
    else err(e instanceof Error ? (e.stack ?? e.message) : String(e));
    return 1;
  }
}
