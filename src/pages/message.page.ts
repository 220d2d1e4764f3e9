import { html } from './html.js';
import { Layout } from './layout.js';
import { Alert } from './components.js';
import type { PageContext } from './security.js';

/** A page that only says something: errors (4xx), confirmations. */
export function MessagePage(props: {
  page?: PageContext | null;
  title: string;
  message: string;
  kind?: 'error' | 'ok' | 'info';
  link?: { href: string; text: string } | null;
  wallet?: boolean;
}) {
  return html`<${Layout}
    title=${props.title}
    page=${props.page}
    narrow=${true}
    wallet=${props.wallet ?? true}
  >
    <h1>${props.title}</h1>
    <${Alert} kind=${props.kind ?? 'error'}>${props.message}<//>
    ${props.link && html`<p><a href=${props.link.href}>${props.link.text}</a></p>`}
  <//>`;
}
