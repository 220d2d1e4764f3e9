/**
 * `npm run admin -- <command>`: the operator's tools, against the same database as the service.
 *
 *   withdrawals list [--status PENDING|PAID|FAILED|CANCELED|all]   the payout queue (default PENDING)
 *   withdrawals mark-paid <id>                                     the payout was made
 *   withdrawals mark-failed <id> [--reason "…"]                    it failed: funds return to earnings
 *   ledger verify                                                  the ledger proof (exit 1 when broken),
 *                                                                  and uncollected usage per paywall
 *   db stats                                                       each table: rows, total and index size
 *
 * Output is JSON lines (one per withdrawal), amounts as USDC decimal strings.
 */
import 'reflect-metadata';
import { loadConfig } from './config.js';
import { Database } from './db/database.js';
import { tableStats } from './db/table-stats.js';
import { WITHDRAWAL_STATUSES, type WithdrawalStatus } from './modules/accounts/account.entity.js';
import { proveLedger, uncollectedByPaywall } from './modules/accounts/accounts.js';
import { EarningsService, type WithdrawalRow } from './modules/ledger/earnings.service.js';
import { DomainError } from './shared/errors.js';
import { formatUsdc } from './shared/money.js';
import { exitOnStartupFailure } from './shared/fatal.js';

const USAGE = `usage: npm run admin -- withdrawals list [--status PENDING|PAID|FAILED|CANCELED|all]
       npm run admin -- withdrawals mark-paid <id>
       npm run admin -- withdrawals mark-failed <id> [--reason "text"]
       npm run admin -- ledger verify
       npm run admin -- db stats`;

const args = process.argv.slice(2);
const option = (name: string): string | null => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? (args[i + 1] ?? null) : null;
};
const show = (w: WithdrawalRow) =>
  console.log(
    JSON.stringify({
      id: w.id,
      paywallId: w.paywallId,
      amount: formatUsdc(w.amountRaw),
      destination: w.destination,
      status: w.status,
      failureReason: w.failureReason,
      createdAt: w.createdAt.toISOString(),
      updatedAt: w.updatedAt.toISOString(),
    }),
  );

type Command =
  | { kind: 'withdrawals-list'; status: WithdrawalStatus | null }
  | { kind: 'mark-paid'; id: string }
  | { kind: 'mark-failed'; id: string; reason: string | null }
  | { kind: 'ledger-verify' }
  | { kind: 'db-stats' };

/** The command line, read before anything is opened: help and usage errors need no database (and no lock). */
function parseCommand(): Command | { usage: string; exitCode: number } {
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

const command = parseCommand();
if ('usage' in command) {
  (command.exitCode === 0 ? console.log : console.error)(command.usage);
  process.exit(command.exitCode);
}

const config = loadConfig();
// On an embedded DATA_DIR the service holds, the admin tools exit 1 at once (stop the service first).
const db = await Database.open({ url: config.DATABASE_URL, dataDir: config.DATA_DIR }).catch(
  exitOnStartupFailure,
);
try {
  await db.migrate(config);
  const earnings = new EarningsService(db);
  if (command.kind === 'withdrawals-list') {
    for (const w of await earnings.list(command.status, 1000)) show(w);
  } else if (command.kind === 'mark-paid') {
    show(await earnings.markPaid(command.id));
  } else if (command.kind === 'mark-failed') {
    show(await earnings.markFailed(command.id, command.reason));
  } else if (command.kind === 'ledger-verify') {
    const proof = await proveLedger(db);
    console.log(
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
    if (!proof.ok) process.exitCode = 1;
  } else {
    // One line per table, largest first; rows are pg_class estimates for big tables (rowsExact false).
    for (const t of await tableStats(db))
      console.log(
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
} catch (err) {
  console.error(err instanceof DomainError ? `error: ${err.message}` : err);
  process.exitCode = 1;
} finally {
  await db.close();
}
