import { createServer, type Server } from 'node:net';
import { DataDirLockedError } from '../db/data-dir-lock.js';

/**
 * A start-up failure the operator can act on (DATA_DIR locked by another process, port in use): one
 * line on stderr naming what is wrong, exit status 1, at once. Anything else is rethrown unchanged.
 */
export function exitOnStartupFailure(err: unknown): never {
  if (err instanceof DataDirLockedError || err instanceof PortInUseError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  throw err;
}

export class PortInUseError extends Error {
  constructor(
    readonly port: number,
    readonly host: string,
  ) {
    super(
      `port ${port} is already in use (HOST ${host}): another process is listening there. Stop it, or set PORT to a free port.`,
    );
    this.name = 'PortInUseError';
  }
}

/**
 * server.listen as a promise that fails with PortInUseError on EADDRINUSE. While it binds, the server's
 * other 'error' listeners (the WebSocket server re-emits the server's errors, and graphql-ws answers
 * them with a log line and by closing its sockets) are set aside: a failed bind is the caller's to report.
 */
export function listen(server: Server, port: number, host: string): Promise<void> {
  const others = server.listeners('error') as ((...a: unknown[]) => void)[];
  server.removeAllListeners('error');
  const restore = () => {
    for (const l of others) server.on('error', l);
  };
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      restore();
      reject(err.code === 'EADDRINUSE' ? new PortInUseError(port, host) : err);
    };
    const onListening = () => {
      server.off('error', onError);
      restore();
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

/**
 * Binds PORT/HOST for a moment and lets it go: a port already taken is found before the database is
 * opened, migrated or given a first owner. (The real bind can still lose a race; listen() reports that.)
 */
export async function probePort(port: number, host: string): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listen(probe, port, host);
  await new Promise((r) => probe.close(r));
}
