import type { Database } from './database.js';

export interface TableStat {
  table: string;
  /** pg_class.reltuples, or an exact count where the table is small or never analysed. */
  rows: number;
  rowsExact: boolean;
  totalBytes: number;
  indexBytes: number;
  total: string;
  indexes: string;
}

/** `npm run admin -- db stats`: every table of the service, largest first (PostgreSQL and PGlite). */
export async function tableStats(db: Database): Promise<TableStat[]> {
  const rows = await db.query<{ t: string; est: number; total: string; idx: string; tp: string; ip: string }>(
    `select c.relname as t, c.reltuples::float8 as est,
            pg_total_relation_size(c.oid)::text as total, pg_indexes_size(c.oid)::text as idx,
            pg_size_pretty(pg_total_relation_size(c.oid)) as tp, pg_size_pretty(pg_indexes_size(c.oid)) as ip
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = current_schema() and c.relkind in ('r', 'p')
      order by pg_total_relation_size(c.oid) desc, c.relname`,
  );
  const out: TableStat[] = [];
  for (const r of rows) {
    // Estimates are good enough for big tables; small (or never analysed: -1) ones are counted.
    let rows = r.est;
    let exact = false;
    if (r.est < 100_000) {
      const [{ n }] = await db.query<{ n: number }>(
        `select count(*)::float8 as n from "${r.t.replaceAll('"', '""')}"`,
      );
      rows = n;
      exact = true;
    }
    out.push({
      table: r.t,
      rows: Math.round(rows),
      rowsExact: exact,
      totalBytes: Number(r.total),
      indexBytes: Number(r.idx),
      total: r.tp,
      indexes: r.ip,
    });
  }
  return out;
}
