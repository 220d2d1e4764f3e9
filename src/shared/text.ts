/**
 * True when `s` holds an unpaired UTF-16 surrogate: such text cannot be stored as UTF-8 (PostgreSQL turns
 * it into U+FFFD or refuses it), so inputs that contain one are refused.
 */
export const hasLoneSurrogate = (s: string): boolean =>
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
