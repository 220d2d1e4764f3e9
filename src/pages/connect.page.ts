import { html } from './html.js';
import { Layout } from './layout.js';
import { Alert, Card, CsrfField, usdcText } from './components.js';
import { AllowanceFields } from './allowance.js';
import type { PageContext } from './security.js';
import type { ConsentRequest } from '../modules/wallet/authorization.service.js';

/**
 * The consent page: names the app, says exactly what it may and may not do, Approve / Decline.
 * `maxChargeRaw` is the operator's cap on one manual charge (SHARED_MAX_MANUAL_CHARGE). The Approve form
 * carries the optional spending limit (docs/reference.md §16); its box is `display: contents`, so Approve
 * and Decline (a form of its own) sit side by side.
 */
export function ConsentPage(props: {
  page: PageContext;
  request: ConsentRequest;
  maxChargeRaw: bigint;
  /** A refused spending limit: the message and what was typed. */
  error?: { message: string; allowance: string; period: string } | null;
}) {
  const r = props.request;
  const action = `/connect/${r.paywallId}`;
  return html`<${Layout} title=${`Connect ${r.paywallName}`} page=${props.page} narrow=${true}>
    <h1>Connect <span class="app-name">${r.paywallName}</span> to your wallet?</h1>
    <p class="lead">
      Signed in as ${props.page.session?.user.email}. The app asks to use your wallet for your account${' '}
      <strong>${r.externalUserId}</strong>.
    </p>
    <${Card} title="About this app">
      ${
        r.paywallDescription
          ? html`<p class="desc">${r.paywallDescription}</p>`
          : html`<p class="muted">${r.paywallName} has not added a description.</p>`
      }
    <//>
    <${Card} title="If you approve, the app can">
      <ul class="perms">
        <li>Charge your wallet for the AI usage you make in ${r.paywallName}, at its published prices.</li>
        <li>
          Make single charges of up to <strong>${usdcText(props.maxChargeRaw)}</strong> each, for other things
          it sells.
        </li>
        <li>See your wallet's balance, so it can tell you when to top up.</li>
      </ul>
      <h3 class="perms-head">It can never</h3>
      <ul class="perms never">
        <li>Withdraw your funds or move them anywhere but its own charges.</li>
        <li>See your e-mail address, which other apps you use, or what you do in them.</li>
      </ul>
      <p class="muted">You can disconnect it at any time from your wallet page.</p>
    <//>
    <${Card} title="Spending limit (optional)">
      <p class="muted" id="allowance-hint">
        The most ${r.paywallName} may spend from your wallet in each period (UTC days, weeks from Monday,
        calendar months, or in total). Leave it empty for no limit. You can change it at any time on your
        wallet page.
      </p>
      ${props.error && html`<${Alert} kind="error">${props.error.message}<//>`}
      <div class="consent-forms">
        <form method="post" class="contents" action=${`${action}/approve`}>
          <${CsrfField} page=${props.page} />
          <input type="hidden" name="request" value=${r.requestId} />
          <${AllowanceFields}
            idPrefix="consent"
            amount=${props.error?.allowance}
            period=${props.error?.period}
            hintId="allowance-hint"
          />
          <button type="submit">Approve</button>
        </form>
        <form method="post" action=${`${action}/decline`}>
          <${CsrfField} page=${props.page} />
          <input type="hidden" name="request" value=${r.requestId} />
          <button type="submit" class="secondary">Decline</button>
        </form>
      </div>
    <//>
  <//>`;
}
