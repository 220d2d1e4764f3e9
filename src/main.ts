/** Entry point: load config → open database → migrate → createApp → listen. */
import 'reflect-metadata';
import { loadConfig } from './config.js';
import { Database } from './db/database.js';
import { createApp } from './app.js';
import { createLogger } from './shared/logger.js';
import { exitOnStartupFailure, listen, probePort } from './shared/fatal.js';
import { StartupSignals } from './shared/startup-signals.js';

const config = loadConfig();
const log = createLogger(config.LOG_LEVEL);
// SIGTERM during the start-up: stop after the current step, exit 0 (src/shared/startup-signals.ts).
const signals = new StartupSignals(log);

// A port in use: one line naming it, exit 1, before anything is opened.
await probePort(config.PORT, config.HOST).catch(exitOnStartupFailure);
await signals.stopIfRequested();
// An embedded DATA_DIR another process holds: one line naming the directory and its pid, exit 1.
const db = await Database.openForService(config, log).catch(exitOnStartupFailure);
log.info(
  {
    database: db.kind === 'postgres' ? 'postgresql' : `embedded PGlite at ${config.DATA_DIR}`,
    // DATABASE_READ_URL in use (never the URL itself: it may carry a password).
    readReplica: db.hasReplica,
  },
  'database opened',
);
await signals.stopIfRequested(() => db.close());
const applied = await db.migrate(config);
if (applied.length) log.info({ migrations: applied }, 'migrations applied');
await signals.stopIfRequested(() => db.close());

const app = await createApp({ config, db, log });
const boot = await app.services.owners.bootstrap(config.BOOTSTRAP_OWNER_TOKEN);
if (boot.createdToken) {
  // Printed once, on stdout, so a newcomer can start using the API (docs/reference.md §1 "First owner").
  console.log(`\nOwner token (shown once, keep it): ${boot.createdToken}\n`);
}
await app.start();
try {
  await listen(app.server, config.PORT, config.HOST);
} catch (err) {
  // Port in use: one line naming it and exit 1 at once, after closing the database (bounded).
  await Promise.race([
    app
      .stop(0)
      .then(() => db.close())
      .catch(() => undefined),
    new Promise((r) => setTimeout(r, 3000).unref()),
  ]);
  exitOnStartupFailure(err);
}
log.info({ url: `http://${config.HOST}:${config.PORT}`, graphql: '/graphql', rest: '/v1' }, 'listening');
// The embedded database is this process's alone: `npm run admin` reaches it through this socket.

/** What a shutdown may take beyond SHUTDOWN_GRACE_MS (settling cut streams, closing the database). */
const SHUTDOWN_MARGIN_MS = 10_000;
let shuttingDown = false;
const shutdown = async (signal: string) => {
  if (shuttingDown) return;
  shuttingDown = true;
  log.info({ signal }, 'shutting down');
  // A shutdown that cannot finish (a stuck connection or database close) must not leave the process
  // running for ever: after the grace period and a margin, say which step hung and exit 1.
  let step = 'closing connections';
  setTimeout(() => {
    log.error({ step, afterMs: config.SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS }, 'shutdown did not finish');
    process.exit(1);
  }, config.SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS).unref();
  try {
    await app.stop(config.SHUTDOWN_GRACE_MS);
    step = 'closing the database';
    await db.close();
    log.info('stopped');
    process.exit(0);
  } catch (err) {
    log.error({ err }, 'shutdown failed');
    process.exit(1);
  }
};
signals.handOver((signal) => void shutdown(signal));
