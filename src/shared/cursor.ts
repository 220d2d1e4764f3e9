import { DomainError } from './errors.js';

/**
 * Opaque pagination cursors, in one place. Two shapes: `<kind>:<timestamp text>|<id>` for lists ordered
 * by (created_at, id) — the timestamp travels as PostgreSQL text so microseconds survive — and
 * `<kind>:<seq>` for append-only tables ordered by their sequence. Both base64url.
 */
export function encodeCursor(kind: string, ts: string, id: string): string {
  return Buffer.from(`${kind}:${ts}|${id}`).toString('base64url');
}

export function decodeCursor(cursor: string, kind: string): { ts: string; id: string } {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const m = new RegExp(`^${kind}:([0-9 :.+\\-T]{10,40})\\|([0-9a-f-]{36})$`).exec(text);
  if (!m || Number.isNaN(Date.parse(m[1].replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00'))))
    throw badCursor();
  return { ts: m[1], id: m[2] };
}

export function encodeSeqCursor(kind: string, seq: string): string {
  return Buffer.from(`${kind}:${seq}`).toString('base64url');
}

export function decodeSeqCursor(cursor: string, kind: string): string {
  const m = new RegExp(`^${kind}:(\\d{1,18})$`).exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw badCursor();
  return m[1];
}

const badCursor = () => new DomainError('invalid_request', 'after is not a valid cursor', 'after');

/**
 * Pages of many owners' lists in one statement (the DataLoader batches of GraphQL's nested lists): the
 * requested pages as the rows `k` of an `unnest … with ordinality`, a LATERAL per row reading `limit
 * k.lim` (one more than the page: whether another follows), and the rows split back per request by
 * `k.idx`. Lists ordered by (created_at, id) use {@link pageKeys}/{@link pageParams}, append-only ones
 * ordered by seq {@link seqPageKeys}/{@link seqPageParams}; the owner's column is named by the caller.
 */
export interface PageRequest {
  first: number;
  after: string | null;
}

/** `k(<owner>, after_ts, after_id, lim, idx)` over `$1`–`$4` ({@link pageParams}). */
export const pageKeys = (owner: string) =>
  `unnest($1::uuid[], $2::timestamptz[], $3::uuid[], $4::int[]) with ordinality as k(${owner}, after_ts, after_id, lim, idx)`;

export function pageParams(
  owners: readonly string[],
  pages: readonly PageRequest[],
  kind: string,
): unknown[] {
  const after = pages.map((p) => (p.after ? decodeCursor(p.after, kind) : null));
  return [
    owners,
    after.map((a) => a?.ts ?? null),
    after.map((a) => a?.id ?? null),
    pages.map((p) => p.first + 1),
  ];
}

/** `k(<owner>, after_seq, lim, idx)` over `$1`–`$3` ({@link seqPageParams}). */
export const seqPageKeys = (owner: string) =>
  `unnest($1::uuid[], $2::bigint[], $3::int[]) with ordinality as k(${owner}, after_seq, lim, idx)`;

export function seqPageParams(
  owners: readonly string[],
  pages: readonly PageRequest[],
  kind: string,
): unknown[] {
  return [
    owners,
    pages.map((p) => (p.after ? decodeSeqCursor(p.after, kind) : null)),
    pages.map((p) => p.first + 1),
  ];
}

/** The rows of each requested page (by `idx`, in the statement's order), at most `first`, and whether more follow. */
export function splitPages<R extends { idx: unknown }, T>(
  rows: readonly R[],
  pages: readonly PageRequest[],
  map: (row: R) => T,
): { rows: T[]; hasNextPage: boolean }[] {
  return pages.map((p, i) => {
    const mine = rows.filter((r) => Number(r.idx) === i + 1);
    return { hasNextPage: mine.length > p.first, rows: mine.slice(0, p.first).map(map) };
  });
}
