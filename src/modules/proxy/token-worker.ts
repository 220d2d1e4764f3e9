import { countTokens } from 'gpt-tokenizer';

/*
 * The tokenizer's work, in one self-contained module: the event loop runs it for small texts
 * (token-counter.ts), the worker pool (prompt-tokenizer.ts) for large ones, with this file as the
 * worker's entry. It imports nothing of this project, so a worker can load it from the TypeScript
 * sources too (Node strips the types), and it uses only erasable TypeScript for that reason.
 */

// User text may contain strings like "<|endoftext|>": count them as plain text instead of throwing.
const PLAIN = { disallowedSpecial: new Set<string>() };

/**
 * The longest piece handed to the tokenizer at once. BPE merges cost about the square of a piece's
 * length, and the tokenizer's pre-splitting keeps a run without a space (CJK text, base64, random
 * letters) or a run of spaces whole: 1 MB of CJK text was one piece and took minutes. Runs longer than
 * this are counted in slices of this length: each slice costs at most a few milliseconds, so counting
 * is linear in the text, and a cut adds at most one token (a token never spans two slices).
 */
export const MAX_PIECE_CHARS = 128;
const LONG_RUN = new RegExp(`\\S{${MAX_PIECE_CHARS + 1},}|\\s{${MAX_PIECE_CHARS + 1},}`, 'g');

/** A slice end that does not split a surrogate pair (a cut pair would count as two replacement characters). */
function sliceEnd(text: string, start: number, end: number): number {
  if (end >= text.length) return text.length;
  const c = text.charCodeAt(end - 1);
  return c >= 0xd800 && c <= 0xdbff && end - 1 > start ? end - 1 : end;
}

/** Tokens of one text (o200k_base), long runs counted slice by slice (see MAX_PIECE_CHARS). */
export function countBounded(text: string): number {
  if (!text) return 0;
  if (text.length <= MAX_PIECE_CHARS) return countTokens(text, PLAIN);
  let n = 0;
  let at = 0;
  for (const m of text.matchAll(LONG_RUN)) {
    if (m.index > at) n += countTokens(text.slice(at, m.index), PLAIN);
    const runEnd = m.index + m[0].length;
    for (let i = m.index; i < runEnd;) {
      const end = sliceEnd(text, i, Math.min(i + MAX_PIECE_CHARS, runEnd));
      n += countTokens(text.slice(i, end), PLAIN);
      i = end;
    }
    at = runEnd;
  }
  if (at < text.length) n += countTokens(text.slice(at), PLAIN);
  return n;
}

/** The worker's task: the tokens of every text. */
export default function countAll(texts: string[]): number {
  let n = 0;
  for (const t of texts) n += countBounded(t);
  return n;
}
