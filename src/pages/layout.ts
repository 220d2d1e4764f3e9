import { html, type Children } from './html.js';
import type { PageContext } from './security.js';

export interface LayoutProps {
  title: string;
  /** The signed-in wallet user and CSRF token, for the header's sign-out button. */
  page?: PageContext | null;
  narrow?: boolean;
  /** False for pages of a DEFAULT-mode app (no wallet there): plain brand, no wallet e-mail or footer. */
  wallet?: boolean;
  children?: Children;
}

/** The brand mark as the tab icon (a data: URL, allowed by the pages' img-src; no /favicon.ico request). */
const ICON =
  'data:image/svg+xml,' +
  encodeURIComponent(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="8" fill="#1d4ed8"/>' +
      '<text x="16" y="22" font-family="system-ui,sans-serif" font-size="17" font-weight="700" fill="#fff" text-anchor="middle">P</text></svg>',
  );

/** The frame of every hosted page: header with the brand (and sign-out when signed in), one `<main>`. */
export function Layout({ title, page, narrow, wallet = true, children }: LayoutProps) {
  const session = page?.session ?? null;
  return html`<html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <meta name="robots" content="noindex" />
      <title>${title} · Paywall Proxy</title>
      <link rel="stylesheet" href="/assets/pages.css" />
      <link rel="icon" href=${ICON} />
    </head>
    <body>
      <a class="skip" href="#content">Skip to content</a>
      <header class="top">
        <div class=${narrow ? 'in narrow' : 'in'}>
          ${
            wallet
              ? html`<a class="brand" href=${session ? '/wallet' : '/wallet/sign-in'}
                  ><span class="mark" aria-hidden="true">P</span><span>Paywall Proxy Wallet</span></a
                >`
              : html`<span class="brand"
                  ><span class="mark" aria-hidden="true">P</span><span>Paywall Proxy</span></span
                >`
          }
          ${
            // A DEFAULT app's page is about that app's own account, not the wallet: no wallet e-mail there.
            wallet &&
            session &&
            html`<div class="who">
              <span>${session.user.email}</span>
              <form method="post" action="/wallet/sign-out">
                <${CsrfField} page=${page} />
                <button type="submit" class="link">Sign out</button>
              </form>
            </div>`
          }
        </div>
      </header>
      <main id="content" class=${narrow ? 'narrow' : undefined}>${children}</main>
      ${
        wallet &&
        html`<footer class=${narrow ? 'foot narrow' : 'foot'}>
          Your wallet pays for AI usage in the apps you connect. You can disconnect an app at any time.
        </footer>`
      }
    </body>
  </html>`;
}

/** The hidden CSRF field every POST form carries. */
export function CsrfField({ page }: { page?: PageContext | null }) {
  return html`<input type="hidden" name="csrf" value=${page?.csrf ?? ''} />`;
}
