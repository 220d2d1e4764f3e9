/**
 * True when `s` holds an unpaired UTF-16 surrogate: such text cannot be stored as UTF-8 (PostgreSQL turns
 * it into U+FFFD or refuses it), so inputs that contain one are refused.
 */
export const hasLoneSurrogate = (s: string): boolean =>
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/** True when PostgreSQL cannot store `s` as text or jsonb: a NUL character or an unpaired surrogate. */
export const isUnstorableText = (s: string): boolean => s.includes('\u0000') || hasLoneSurrogate(s);

/**
 * The path (`['input', 'metadata', 'note']`) of the first string, or object key, in `value` that
 * PostgreSQL cannot store; null when there is none. Iterative, so deeply nested JSON cannot overflow it.
 */
export function findUnstorableText(value: unknown): string[] | null {
  const stack: Array<{ v: unknown; path: string[] }> = [{ v: value, path: [] }];
  while (stack.length) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      if (isUnstorableText(v)) return path;
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => stack.push({ v: item, path: [...path, String(i)] }));
    } else if (v && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        if (isUnstorableText(k)) return [...path, k];
        stack.push({ v: item, path: [...path, k] });
      }
    }
  }
  return null;
}
