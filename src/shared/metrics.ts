import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One registry per process (tests build several apps; each gets its own). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpRequests: new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by route, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency by route, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    ledgerEntries: new Counter({
      name: 'ledger_entries_total',
      help: 'Ledger entries written, by kind',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    ledgerAmountRaw: new Counter({
      name: 'ledger_amount_raw_total',
      help: 'Absolute raw units (1e-6 USDC) moved through the ledger, by kind',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    /** Requests of the metered routes answered by the fast path (the others went through Express). */
    meteredFastPath: new Counter({
      name: 'metered_fast_path_requests_total',
      help: 'Metered requests (chat, Responses) answered ahead of Express, on plain node:http',
      registers: [registry],
    }),
    /** Lag-tolerant reads (src/db/read-replica.ts) with a replica configured: where each was served. */
    replicaReads: new Counter({
      name: 'db_replica_reads_total',
      help: 'Lag-tolerant reads with a read replica configured, by where they were served (replica, or primary_fallback when the replica failed)',
      labelNames: ['served_by'] as const,
      registers: [registry],
    }),
    /** docs/reference.md §5.7: answers whose provider reported more usage than the request could produce. */
    providerUsageClamped: new Counter({
      name: 'provider_usage_clamped_total',
      help: 'Answers whose provider reported more usage than the request could produce (clamped to the bound before charging)',
      registers: [registry],
    }),
    chargesFailed: new Counter({
      name: 'charges_failed_total',
      help: 'Charges refused, by reason',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
