import {
  closeSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * One process per embedded database directory. PGlite keeps the whole database of a DATA_DIR in one
 * process's memory and writes it back on its own schedule: a second process on the same directory
 * does not fail, it silently overwrites the first one's writes (acknowledged deposits gone after a
 * restart, with a ledger that still balances). So every process that opens a DATA_DIR (the service,
 * `npm run worker`, `npm run admin`, the migration CLI) first takes this lock, and one that cannot
 * exits at once.
 *
 * The lock is a file created atomically (O_CREAT|O_EXCL) holding the owner's pid. A lock whose pid is
 * no longer alive was left by a process that died (SIGKILL, power loss): it is taken over. The file is
 * removed when the database is closed, and on process exit.
 */
export const LOCK_FILE = 'paywall-proxy.lock';

export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(
      `DATA_DIR ${dir} is in use by another process (pid ${pid}): the embedded database allows one process at a time. Stop that process, or use DATABASE_URL (PostgreSQL) to run several.`,
    );
    this.name = 'DataDirLockedError';
  }
}

/** Locks held by this process: path → release. */
const held = new Map<string, () => void>();
let exitHook = false;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readPid(path: string): number | null {
  try {
    const n = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

/**
 * Takes the lock of `dir` (created if missing) for this process; returns its release. Throws
 * DataDirLockedError when a live process holds it (this one included, through another open database).
 */
export function lockDataDir(dir: string): () => void {
  const abs = resolve(dir);
  mkdirSync(abs, { recursive: true });
  const path = join(abs, LOCK_FILE);
  if (held.has(path)) throw new DataDirLockedError(abs, process.pid);
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o644);
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      const release = () => {
        if (!held.delete(path)) return;
        // Only our own file: never remove a lock another process has taken over since.
        if (readPid(path) === process.pid) {
          try {
            unlinkSync(path);
          } catch {
            // already gone
          }
        }
      };
      held.set(path, release);
      if (!exitHook) {
        exitHook = true;
        process.on('exit', () => {
          for (const r of [...held.values()]) r();
        });
      }
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = readPid(path);
    // Our own pid in a file we do not hold: a previous process that had the same pid (a restarted
    // container's pid 1) left it. An empty or unreadable file: a process that died while writing it.
    if (pid !== null && pid !== process.pid && alive(pid)) throw new DataDirLockedError(abs, pid);
    // Stale: claim it by moving it aside (atomic, so of several processes taking it over at once one
    // wins), check that what was moved is the stale lock, and try to create ours again.
    const claim = `${path}.${process.pid}`;
    try {
      renameSync(path, claim);
    } catch {
      continue; // another process moved it first
    }
    const moved = readPid(claim);
    if (moved !== null && moved !== pid && moved !== process.pid && alive(moved)) {
      // Between our read and the move, another process took it over: give its lock back.
      try {
        linkSync(claim, path);
      } catch {
        // someone created a new one meanwhile; ours goes away either way
      }
      unlinkSync(claim);
      throw new DataDirLockedError(abs, moved);
    }
    unlinkSync(claim);
  }
  throw new Error(`could not lock DATA_DIR ${abs} (${path} keeps changing)`);
}
