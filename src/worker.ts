/**
 * `npm run worker`: the webhook delivery worker alone, for deployments that run it apart from the API
 * (set WEBHOOK_WORKER=false on the API instances then; running both is also safe, just more consumers).
 * Any number of these can run against one PostgreSQL: deliveries are claimed with SKIP LOCKED and leases.
 */
import 'reflect-metadata';
import { loadConfig } from './config.js';
import { Database } from './db/database.js';
import { DeliveryWorker } from './modules/webhooks/delivery-worker.js';
import { createLogger } from './shared/logger.js';
import { loadSecretBox } from './shared/crypto.js';
import { exitOnStartupFailure } from './shared/fatal.js';
import { StartupSignals } from './shared/startup-signals.js';

const config = loadConfig();
const log = createLogger(config.LOG_LEVEL).child({ component: 'webhook-worker' });
// SIGTERM during the start-up: stop after the current step, exit 0 (src/shared/startup-signals.ts).
const signals = new StartupSignals(log);

// The embedded database is one process's: on a DATA_DIR the API (or another worker) holds, this exits 1
// at once naming the directory and the holder's pid. Run the worker apart only with DATABASE_URL.
const db = await Database.openForService(config, log).catch(exitOnStartupFailure);
await signals.stopIfRequested(() => db.close());
// Idempotent: normally the API has migrated already, but the worker must not run against an older schema.
const applied = await db.migrate(config);
if (applied.length) log.info({ migrations: applied }, 'migrations applied');
await signals.stopIfRequested(() => db.close());

const worker = new DeliveryWorker({
  db,
  log,
  maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
  backoffBaseMs: config.WEBHOOK_BACKOFF_BASE_MS,
  timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  pollMs: config.WEBHOOK_POLL_MS,
  allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
  // The same key as the API instances (ENCRYPTION_KEY): the signing secrets are stored encrypted.
  secretBox: loadSecretBox(config).box,
});
await worker.start();
// Nothing else holds this process open: the API has its HTTP server, the worker only its LISTEN socket
// and timers that are unref'd. When PostgreSQL restarts, that socket dies and the event loop would
// empty, so the process ended (status 0) instead of reconnecting. This timer keeps it running until a
// signal stops it.
const keepAlive = setInterval(() => {}, 60_000);
log.info(
  { pollMs: config.WEBHOOK_POLL_MS, maxAttempts: config.WEBHOOK_MAX_ATTEMPTS },
  'webhook worker started',
);

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'webhook worker stopping');
  clearInterval(keepAlive);
  try {
    // Deliveries in flight get the grace period; any still running then return to the queue via their lease.
    await worker.stop(config.SHUTDOWN_GRACE_MS);
    await db.close();
    log.info('webhook worker stopped');
    process.exit(0);
  } catch (err) {
    log.error({ err }, 'webhook worker shutdown failed');
    process.exit(1);
  }
};
signals.handOver((signal) => void shutdown(signal));
