import { DomainError } from './errors.js';

interface Waiter {
  tenant: string;
  go: () => void;
}

/**
 * Bounds how many expensive operations run at once: at most `total` in the process and at most
 * `perTenant` of any one tenant. More wait in FIFO order, skipping a tenant that is at its own limit, so
 * one tenant's queue never holds back another's turn. A tenant with `maxQueuedPerTenant` already waiting
 * is refused (`rate_limited`) instead of queueing without end.
 */
export class ConcurrencyGate {
  private running = 0;
  private readonly byTenant = new Map<string, number>();
  private readonly queue: Waiter[] = [];
  private readonly queuedByTenant = new Map<string, number>();

  constructor(
    private readonly total: number,
    private readonly perTenant: number,
    private readonly maxQueuedPerTenant = 100,
  ) {}

  async run<T>(tenant: string, fn: () => Promise<T>): Promise<T> {
    if (!this.canStart(tenant)) {
      const queued = this.queuedByTenant.get(tenant) ?? 0;
      if (queued >= this.maxQueuedPerTenant)
        throw new DomainError(
          'rate_limited',
          `too many expensive reads of this account at once (${queued} waiting); retry when they finish`,
          null,
          'too_many_heavy_reads',
        );
      this.queuedByTenant.set(tenant, queued + 1);
      await new Promise<void>((go) => this.queue.push({ tenant, go }));
    } else this.take(tenant);
    try {
      return await fn();
    } finally {
      this.release(tenant);
    }
  }

  /** Operations running now (tests and diagnostics). */
  get active(): number {
    return this.running;
  }

  private canStart(tenant: string): boolean {
    return this.running < this.total && (this.byTenant.get(tenant) ?? 0) < this.perTenant;
  }

  private take(tenant: string): void {
    this.running++;
    this.byTenant.set(tenant, (this.byTenant.get(tenant) ?? 0) + 1);
  }

  private release(tenant: string): void {
    this.running--;
    const n = (this.byTenant.get(tenant) ?? 1) - 1;
    if (n === 0) this.byTenant.delete(tenant);
    else this.byTenant.set(tenant, n);
    // Start every waiter that may start now, oldest first.
    for (let i = 0; i < this.queue.length && this.running < this.total;) {
      const w = this.queue[i];
      if (!this.canStart(w.tenant)) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      const q = (this.queuedByTenant.get(w.tenant) ?? 1) - 1;
      if (q === 0) this.queuedByTenant.delete(w.tenant);
      else this.queuedByTenant.set(w.tenant, q);
      this.take(w.tenant);
      w.go();
    }
  }
}
