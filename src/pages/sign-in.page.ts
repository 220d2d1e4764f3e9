import { html } from './html.js';
import { Layout } from './layout.js';
import { Alert, Card, CsrfField, Field } from './components.js';
import type { PageContext } from './security.js';

/** Step 1: the address to send a code to. */
export function EmailStep(props: {
  page: PageContext;
  next: string | null;
  email?: string;
  error?: string | null;
  /** The app whose (pending) connect link brought the person here: said before they sign in. */
  forApp?: string | null;
}) {
  return html`<${Layout} title="Sign in" page=${props.page} narrow=${true}>
    <h1>Sign in to your wallet</h1>
    <p class="lead">
      One wallet pays for the AI apps you connect. We e-mail you a 6-digit code: no password needed.
    </p>
    ${
      props.forApp &&
      html`<${Alert} kind="info"
        >${`${props.forApp} asks to connect to your wallet. Sign in to see what it asks for: nothing is connected until you approve.`}<//
      >`
    }
    ${props.error && html`<${Alert} kind="error">${props.error}<//>`}
    <${Card}>
      <form method="post" action="/wallet/sign-in">
        <${CsrfField} page=${props.page} />
        ${props.next && html`<input type="hidden" name="next" value=${props.next} />`}
        <${Field}
          id="email"
          name="email"
          label="Email"
          type="email"
          autocomplete="email"
          value=${props.email}
          hint="We send a sign-in code to this address."
          autofocus=${true}
          maxlength=${254}
        />
        <button type="submit">Send code</button>
      </form>
    <//>
  <//>`;
}

/** Step 2: the code from the e-mail. */
export function CodeStep(props: {
  page: PageContext;
  next: string | null;
  email: string;
  error?: string | null;
  sent?: boolean;
}) {
  return html`<${Layout} title="Enter your code" page=${props.page} narrow=${true}>
    <h1>Check your e-mail</h1>
    ${
      props.sent &&
      html`<p class="lead" data-testid="sent">
        If this address can sign in, we sent a 6-digit code to <strong>${props.email}</strong>. It works once,
        for 10 minutes, and only in this browser.
      </p>`
    }
    ${props.error && html`<${Alert} kind="error">${props.error}<//>`}
    <${Card}>
      <form method="post" action="/wallet/sign-in/code">
        <${CsrfField} page=${props.page} />
        <input type="hidden" name="email" value=${props.email} />
        ${props.next && html`<input type="hidden" name="next" value=${props.next} />`}
        <${Field}
          id="code"
          name="code"
          label="Code"
          autocomplete="one-time-code"
          inputmode="numeric"
          pattern="[0-9 ]*"
          maxlength=${8}
          className="code"
          autofocus=${true}
          hint=${`Sent to ${props.email}`}
        />
        <button type="submit">Sign in</button>
      </form>
    <//>
    <p class="muted">
      No e-mail after a few minutes? Check your spam folder, or${' '}
      <a href=${props.next ? `/wallet/sign-in?next=${encodeURIComponent(props.next)}` : '/wallet/sign-in'}
        >request a new code</a
      >.
    </p>
  <//>`;
}
