/**
 * `npm run admin` while the service runs on the embedded database. PGlite allows one process per DATA_DIR,
 * so the CLI cannot open it then; instead the service listens on a Unix socket inside DATA_DIR
 * (`admin.sock`, mode 0600: only who may read the database files may use it) and runs the CLI's command
 * on its own connection. One request per connection: a JSON line `{"args": [...]}`; the answer is JSON
 * lines `{"out": line}` / `{"err": line}`, then `{"exit": status}`.
 */
import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Database } from './db/database.js';
import { parseCommand, runCommand } from './admin-commands.js';
import type { Logger } from './shared/logger.js';

export const ADMIN_SOCKET = 'admin.sock';
const socketPath = (dataDir: string) => join(resolve(dataDir), ADMIN_SOCKET);

/** The service side. Resolves to a stop function; a socket that cannot be made is logged, not fatal. */
export async function serveAdmin(dataDir: string, db: Database, log: Logger): Promise<() => Promise<void>> {
  const path = socketPath(dataDir);
  // We hold the DATA_DIR lock: a socket file left here is a dead process's.
  if (existsSync(path)) unlinkSync(path);
  const server: Server = createServer((conn) => {
    const lines = createInterface({ input: conn });
    lines.once('line', (line) => {
      lines.close();
      const send = (o: object) => conn.write(`${JSON.stringify(o)}\n`);
      void (async () => {
        let args: unknown;
        try {
          args = (JSON.parse(line) as { args?: unknown }).args;
        } catch {
          args = null;
        }
        if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
          send({ err: 'error: bad admin request' });
          return conn.end(`${JSON.stringify({ exit: 2 })}\n`);
        }
        const command = parseCommand(args);
        if ('usage' in command) {
          send(command.exitCode === 0 ? { out: command.usage } : { err: command.usage });
          return conn.end(`${JSON.stringify({ exit: command.exitCode })}\n`);
        }
        log.info({ args }, 'admin command');
        const status = await runCommand(
          command,
          db,
          (out) => send({ out }),
          (err) => send({ err }),
        );
        conn.end(`${JSON.stringify({ exit: status })}\n`);
      })();
    });
    conn.on('error', () => undefined);
  });
  try {
    await new Promise<void>((ok, fail) => {
      server.once('error', fail);
      server.listen(path, () => ok());
    });
    chmodSync(path, 0o600);
  } catch (err) {
    log.warn({ err, path }, 'admin socket not available: npm run admin needs the service stopped');
    return async () => undefined;
  }
  return () =>
    new Promise<void>((done) => {
      server.close(() => done());
      try {
        unlinkSync(path);
      } catch {
        // Already gone (the server removes its socket file when it closes).
      }
    });
}

/**
 * The CLI side: the exit status of the command the running service ran, or null when no service
 * answers on the socket (then the caller reports the lock as before).
 */
export function askRunningService(
  dataDir: string,
  args: string[],
  out: (line: string) => void,
  err: (line: string) => void,
): Promise<number | null> {
  return new Promise((done) => {
    const conn = createConnection(socketPath(dataDir));
    let status: number | null = null;
    conn.on('error', () => done(null));
    conn.on('connect', () => {
      conn.write(`${JSON.stringify({ args })}\n`);
      const lines = createInterface({ input: conn });
      lines.on('line', (line) => {
        const m = JSON.parse(line) as { out?: string; err?: string; exit?: number };
        if (m.out !== undefined) out(m.out);
        if (m.err !== undefined) err(m.err);
        if (m.exit !== undefined) status = m.exit;
      });
      lines.on('close', () => done(status));
    });
  });
}
