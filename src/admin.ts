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
import { WITHDRAWAL_STATUSES, type WithdrawalStatus } from './modules/ledger/account.entity.js';
import { proveLedger, uncollectedByPaywall } from './modules/ledger/accounts.js';
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

const config = loadConfig();
// On an embedded DATA_DIR the service holds, the admin tools exit 1 at once (stop the service first).
const db = await Database.open({ url: config.DATABASE_URL, dataDir: config.DATA_DIR }).catch(
  exitOnStartupFailure,
);
try {
  await db.migrate(config);
  const earnings = new EarningsService(db);
  const [group, cmd, id] = args;
  if (group === 'withdrawals' && cmd === 'list') {
    const status = (option('status') ?? 'PENDING').toUpperCase();
    if (status !== 'ALL' && !WITHDRAWAL_STATUSES.includes(status as WithdrawalStatus))
      throw new DomainError('invalid_request', `unknown status ${status}`);
    for (const w of await earnings.list(status === 'ALL' ? null : (status as WithdrawalStatus), 1000))
      show(w);
  } else if (group === 'withdrawals' && cmd === 'mark-paid' && id) {
    show(await earnings.markPaid(id));
  } else if (group === 'withdrawals' && cmd === 'mark-failed' && id) {
    show(await earnings.markFailed(id, option('reason')));
  } else if (group === 'ledger' && cmd === 'verify') {
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
  } else if (group === 'db' && cmd === 'stats') {
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
  } else {
    console.error(USAGE);
    process.exitCode = 2;
  }
} catch (err) {
  console.error(err instanceof DomainError ? `error: ${err.message}` : err);
  process.exitCode = 1;
} finally {
  await db.close();
}
