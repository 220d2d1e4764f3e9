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
