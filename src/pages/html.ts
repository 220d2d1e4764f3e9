import { h, type ComponentChildren, type VNode } from 'preact';
import htm from 'htm';
import { render } from 'preact-render-to-string';

/**
 * Tagged-template HTML for the hosted pages: `html\`<p>${text}</p>\`` builds Preact elements, and every
 * interpolated value is escaped when rendered. Pages never concatenate HTML strings.
 */
// htm's typings describe its CommonJS build; Node's ESM resolution loads htm.mjs, whose default export is htm.
export const html = (htm as unknown as (typeof htm)['default']).bind(h);

export type Children = ComponentChildren;
export type Node = VNode<any> | VNode<any>[] | string | null;

/**
 * Preact escapes `&`, `<` and `"` (all that HTML needs); this also escapes `>` in text and attribute
 * values, so user-supplied names read the same in every tool (`&lt;b&gt;`). Markup is not touched: in
 * rendered output `<` only ever opens a tag, and a tag ends at the first `>` outside quotes.
 */
function escapeGreaterThan(markup: string): string {
  let out = '';
  let inTag = false;
  let inQuote = false;
  for (const ch of markup) {
    if (!inTag) {
      if (ch === '<') inTag = true;
      out += ch === '>' ? '&gt;' : ch;
    } else if (inQuote) {
      if (ch === '"') inQuote = false;
      out += ch === '>' ? '&gt;' : ch;
    } else {
      if (ch === '"') inQuote = true;
      else if (ch === '>') inTag = false;
      out += ch;
    }
  }
  return out;
}

/** A whole document, doctype included. */
export const renderDocument = (node: ReturnType<typeof html>): string =>
  '<!doctype html>' + escapeGreaterThan(render(node as VNode<any>));
