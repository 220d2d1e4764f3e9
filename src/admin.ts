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
 * Output is JSON lines (one per withdrawal), amounts as USDC decimal strings. On an embedded DATA_DIR the
 * running service holds, the command is run by that service through its admin socket (src/admin-socket.ts).
 */
import 'reflect-metadata';
import { loadConfig } from './config.js';
import { Database } from './db/database.js';
import { DataDirLockedError } from './db/data-dir-lock.js';
import { parseCommand, runCommand } from './admin-commands.js';
import { askRunningService } from './admin-socket.js';
import { exitOnStartupFailure } from './shared/fatal.js';

const args = process.argv.slice(2);
const command = parseCommand(args);
if ('usage' in command) {
  (command.exitCode === 0 ? console.log : console.error)(command.usage);
  process.exit(command.exitCode);
}

const config = loadConfig();
let db: Database;
try {
  db = await Database.open({ url: config.DATABASE_URL, dataDir: config.DATA_DIR });
} catch (err) {
  // The service holds this embedded DATA_DIR: it runs the command for us, on its own connection.
  if (err instanceof DataDirLockedError) {
    const status = await askRunningService(config.DATA_DIR, args, console.log, console.error);
    if (status !== null) process.exit(status);
  }
  exitOnStartupFailure(err);
}
try {
  await db.migrate(config);
  process.exitCode = await runCommand(command, db, console.log, console.error);
} finally {
  await db.close();
}
