import { html } from './html.js';
import { Layout } from './layout.js';
import { Card, CsrfField } from './components.js';
import type { PageContext } from './security.js';
import type { ConsentRequest } from '../modules/wallet/authorization.service.js';

/** The consent page: names the app, says what it may do, Approve / Decline. */
export function ConsentPage(props: { page: PageContext; request: ConsentRequest }) {
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
        <li>See whether your wallet can pay for a request. It never sees your e-mail or your other apps.</li>
        <li>You can disconnect it at any time from your wallet page.</li>
      </ul>
      <div class="actions">
        <form method="post" action=${`${action}/approve`}>
          <${CsrfField} page=${props.page} />
          <input type="hidden" name="request" value=${r.requestId} />
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
