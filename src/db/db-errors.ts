import { DomainError, databaseUnavailable } from '../shared/errors.js';

/**
 * SQLSTATEs that mean "the database is not there right now", not "this statement is wrong":
 * class 08 (connection exception), 57P01 admin_shutdown ("terminating connection due to administrator
 * command", e.g. a restart), 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up, shutting down,
 * in recovery), 57014 query_canceled (statement_timeout: the only cancel this service issues),
 * 53300 too_many_connections, 25P03 idle_in_transaction_session_timeout.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '57014', '53300', '25P03']);

/** Socket-level failures (node:net / dns) while reaching or talking to the server. */
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ECONNABORTED',
]);

/** What node-postgres and pg-pool say when a connection died, never came, or a timeout fired. */
const UNAVAILABLE_MESSAGES = [
  /^Connection terminated/i, // "… unexpectedly", "… due to connection timeout"
  /^timeout exceeded when trying to connect/i, // pg-pool acquire timeout (connectionTimeoutMillis)
  /^Query read timeout/i, // pg client-side query_timeout
  /is not queryable/i, // a client that already lost its connection
  /^Connection closed/i,
  /terminating connection/i,
  /the database system is (starting up|shutting down|in recovery)/i,
];

/**
 * True when `err` (a pg / pg-pool / node error, or MikroORM's wrapper of one, which copies `code` and
 * `message`) says the database is unreachable, restarting, or did not answer in time.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  if (err instanceof DomainError) return err.code === 'unavailable';
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string') {
    if (e.code.startsWith('08') && e.code.length === 5) return true;
    if (UNAVAILABLE_SQLSTATES.has(e.code) || UNAVAILABLE_ERRNOS.has(e.code)) return true;
  }
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.some((re) => re.test(e.message as string)))
    return true;
  // A dual-stack connect that failed on every address is an AggregateError of ECONNREFUSEDs.
  if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}

/** The error to throw for `err`: the 503 DomainError when the database is unavailable, else `err` itself. */
export function unavailableOr(err: unknown): unknown {
  if (err instanceof DomainError || !isDatabaseUnavailable(err)) return err;
  return databaseUnavailable(err);
}
