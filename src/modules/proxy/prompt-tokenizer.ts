import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import countAll from './token-worker.js';

/**
 * Prompt texts up to this many UTF-8 bytes in all are counted on the event loop: that is every ordinary
 * chat prompt, and a worker hop would cost it more than the count (docs/performance.md). The worst such
 * text (random letters, CJK) takes a few milliseconds.
 */
export const INLINE_MAX_BYTES = 2048;
/**
 * A larger count gets this long, waiting in the queue included, before its estimate falls back to the
 * byte bound: at most this much CPU per request, whatever the text.
 */
export const COUNT_DEADLINE_MS = 2000;
/** Counts waiting for a worker at most; one more is estimated at its byte bound at once. */
export const MAX_QUEUED_COUNTS = 32;

/** UTF-8 bytes of the texts. */
export const utf8Bytes = (texts: string[]): number => texts.reduce((n, t) => n + Buffer.byteLength(t), 0);

/**
 * The worker's entry: the compiled module next to this one, or its TypeScript source when the service
 * runs from the sources (tests), which Node loads by stripping the types.
 */
function workerFile(): string {
  const js = fileURLToPath(new URL('./token-worker.js', import.meta.url));
  return existsSync(js) ? js : fileURLToPath(new URL('./token-worker.ts', import.meta.url));
}

/**
 * Counts a request's prompt tokens with bounded CPU on the event loop (docs/proxy.md "The prompt
 * estimate"): small prompts here, larger ones in a pool of worker threads (piscina) at a lower
 * priority than the event loop. A count that does not finish within COUNT_DEADLINE_MS, or finds the
 * queue full, is the texts' UTF-8 byte count instead: a byte-level BPE token is at least one byte, so
 * no prompt has more tokens than bytes (test/token-bound.test.ts checks it for the tokenizer used).
 */
export class PromptTokenizer {
  private pool: Piscina<string[], number> | null = null;
  /** Counts that ended at the byte bound (deadline or full queue), for the log and tests. */
  boundedCounts = 0;

  /** `threads`: workers at most (default: the cores but one, 1 to 4); `deadlineMs`: COUNT_DEADLINE_MS. */
  constructor(private readonly opts: { threads?: number; deadlineMs?: number } = {}) {}

  async count(texts: string[]): Promise<number> {
    const bytes = utf8Bytes(texts);
    if (bytes <= INLINE_MAX_BYTES) return countAll(texts);
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.opts.deadlineMs ?? COUNT_DEADLINE_MS);
    try {
      return await this.workers().run(texts, { signal: deadline.signal });
    } catch {
      // Timed out, queue full, or the worker failed: the upper bound (never fewer tokens than counted).
      this.boundedCounts++;
      return bytes;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The pool, started at the first large count (most processes, and tests, never need one). */
  private workers(): Piscina<string[], number> {
    this.pool ??= new Piscina<string[], number>({
      filename: workerFile(),
      minThreads: 1,
      // One core stays the event loop's.
      maxThreads: this.opts.threads ?? Math.max(1, Math.min(4, availableParallelism() - 1)),
      maxQueue: MAX_QUEUED_COUNTS,
      // The scheduler favours the event loop (health checks, small requests) over a long count.
      niceIncrement: 10,
      idleTimeout: 60_000,
    });
    return this.pool;
  }

  /** Stops the workers (at shutdown). */
  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    await pool?.destroy();
  }
}
