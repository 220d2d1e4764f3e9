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
 * Output is JSON lines (one per withdrawal), amounts as USDC decimal strings. The embedded database allows one
 * process per DATA_DIR: while the service holds it, the CLI exits 1 with the lock's message (stop the service,
 * or run it on PostgreSQL, where nothing is locked).
 */
import 'reflect-metadata';
import { loadConfig } from './config.js';
import { Database } from './db/database.js';
import { parseCommand, runCommand } from './admin-commands.js';
import { exitOnStartupFailure } from './shared/fatal.js';

const args = process.argv.slice(2);
const command = parseCommand(args);
if ('usage' in command) {
  (command.exitCode === 0 ? console.log : console.error)(command.usage);
  process.exit(command.exitCode);
}

const config = loadConfig();
// An embedded DATA_DIR another process holds: one line naming the directory and its pid, exit 1.
const db = await Database.open({ url: config.DATABASE_URL, dataDir: config.DATA_DIR }).catch(
  exitOnStartupFailure,
);
try {
  await db.migrate(config);
  process.exitCode = await runCommand(command, db, console.log, console.error);
} finally {
  await db.close();
}
