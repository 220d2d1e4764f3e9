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

/** JavaScript's `\s` (the tokenizer's pre-split uses it), by char code: a scan here is far cheaper than a regex. */
function isSpace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

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
  // Text from `counted` on is not counted yet; the current run of spaces or of other characters starts at `run`.
  let counted = 0;
  let run = 0;
  let space = isSpace(text.charCodeAt(0));
  for (let i = 1; i <= text.length; i++) {
    const next = i < text.length ? isSpace(text.charCodeAt(i)) : !space;
    if (next === space) continue;
    if (i - run > MAX_PIECE_CHARS) {
      if (run > counted) n += countTokens(text.slice(counted, run), PLAIN);
      for (let at = run; at < i;) {
        const end = sliceEnd(text, at, Math.min(at + MAX_PIECE_CHARS, i));
        n += countTokens(text.slice(at, end), PLAIN);
        at = end;
      }
      counted = i;
    }
    run = i;
    space = next;
  }
  if (counted < text.length) n += countTokens(counted === 0 ? text : text.slice(counted), PLAIN);
  return n;
}

/** The worker's task: the tokens of every text. */
export default function countAll(texts: string[]): number {
  let n = 0;
  for (const t of texts) n += countBounded(t);
  return n;
}
