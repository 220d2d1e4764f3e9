/**
 * Single-flight loads per key for the request path's in-memory caches (catalogue, providers): concurrent
 * misses for one key share one read, and a read that raced with an invalidation is read again rather
 * than handed to `accept` — so a cache never stores what may be the rows from before a change.
 */
export class KeyedLoader<R, V> {
  private readonly loading = new Map<string, Promise<V>>();
  /** Bumped by every invalidation. */
  private readonly generation = new Map<string, number>();
  /** Bumped by {@link invalidateAll}. */
  private epoch = 0;

  constructor(
    /** Reads the current rows of a key from the database. */
    private readonly read: (key: string) => Promise<R>,
    /** Turns fresh rows into the value (and caches it); called only for a read no change overtook. */
    private readonly accept: (key: string, rows: R) => V,
  ) {}

  load(key: string): Promise<V> {
    const pending = this.loading.get(key);
    if (pending) return pending;
    const p = this.readFresh(key).finally(() => {
      if (this.loading.get(key) === p) this.loading.delete(key);
    });
    this.loading.set(key, p);
    return p;
  }

  /** A change was committed: reads under way for `key` are read again, the next `load` reads anew. */
  invalidate(key: string): void {
    this.generation.set(key, (this.generation.get(key) ?? 0) + 1);
    this.loading.delete(key);
  }

  /** Every key may have changed (e.g. invalidations were missed while LISTEN was down). */
  invalidateAll(): void {
    this.epoch++;
    this.loading.clear();
  }

  private async readFresh(key: string): Promise<V> {
    for (;;) {
      const gen = this.generation.get(key) ?? 0;
      const epoch = this.epoch;
      const rows = await this.read(key);
      if ((this.generation.get(key) ?? 0) === gen && this.epoch === epoch) return this.accept(key, rows);
    }
  }
}
