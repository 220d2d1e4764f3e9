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

/** A whole document, doctype included. */
export const renderDocument = (node: ReturnType<typeof html>): string =>
  '<!doctype html>' + render(node as VNode<any>);
