import { isDatabaseUnavailable } from '../../db/db-errors.js';

/**
 * Group commit: concurrent callers' operations run as ONE statement (one commit) instead of one each.
 * A batch starts as soon as none is running (after the current I/O phase), so an idle service adds no
 * noticeable latency; under load, the operations that arrive while a batch runs form the next one. At most
 * `perKey` items (1 by default) of one key per batch; the others wait a turn.
 *
 * A deadlock or serialization failure retries the batch; any other failure reruns its items one by
 * one, so one bad item fails alone. When the database is unavailable the batch and everything queued
 * behind it fail at once (503), rather than each waiting out the database timeouts in turn.
 */
export class GroupCommit<I, R> {
  private queue: { item: I; key: string; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  private running = 0;
  /** Statements run and items they carried (the average batch size shows how much commits are shared). */
  readonly stats = { batches: 0, items: 0, ms: 0 };

  constructor(
    private readonly run: (items: I[]) => Promise<R[]>,
    private readonly keyOf: (item: I) => string,
    private readonly opts: { maxBatch?: number; concurrency?: number; perKey?: number } = {},
  ) {}

  private scheduled = false;

  /** Queues an operation for the next batch. */
  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, key: this.keyOf(item), resolve, reject });
      this.schedule();
    });
  }

  /**
   * Starts the next batch after the current I/O phase (setImmediate), so requests whose bytes already
   * arrived join it. This matters most for the embedded database, whose statements run synchronously
   * on this thread: without the yield every batch would hold one request.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.kick();
    });
  }

  private kick(): void {
    while (this.queue.length > 0 && this.running < (this.opts.concurrency ?? 1)) {
      const max = this.opts.maxBatch ?? 100;
      const batch: typeof this.queue = [];
      const rest: typeof this.queue = [];
      const perKey = this.opts.perKey ?? 1;
      const keys = new Map<string, number>();
      for (const q of this.queue) {
        const n = keys.get(q.key) ?? 0;
        if (batch.length < max && n < perKey) {
          keys.set(q.key, n + 1);
          batch.push(q);
        } else rest.push(q);
      }
      this.queue = rest;
      this.running++;
      void this.flush(batch).finally(() => {
        this.running--;
        this.schedule();
      });
    }
  }

  private async flush(batch: typeof this.queue): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        this.stats.batches++;
        this.stats.items += batch.length;
        const t0 = performance.now();
        const results = await this.run(batch.map((b) => b.item));
        this.stats.ms += performance.now() - t0;
        batch.forEach((b, i) => b.resolve(results[i]));
        return;
      } catch (e) {
        if (isRetryable(e) && attempt < 5) continue;
        // The database is down: the batch fails as a whole, and so does what queued behind it (each
        // item alone, or each later batch, would only wait out the timeouts again, one after another).
        if (isDatabaseUnavailable(e)) {
          const waiting = this.queue;
          this.queue = [];
          for (const b of [...batch, ...waiting]) b.reject(e);
          return;
        }
        if (batch.length === 1) {
          batch[0].reject(e);
          return;
        }
        break;
      }
    }
    // The batch failed as a whole: run its items alone, so only the faulty one fails.
    await Promise.all(batch.map((b) => this.flush([b])));
  }
}

/** deadlock_detected, serialization_failure: the statement rolled back entirely; run it again. */
function isRetryable(e: unknown): boolean {
  const code = (e as { code?: string })?.code ?? (e as { cause?: { code?: string } })?.cause?.code;
  return code === '40P01' || code === '40001';
}
