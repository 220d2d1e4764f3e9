import { html } from './html.js';
import { Layout } from './layout.js';
import { Alert, Card, CsrfField, Field, dateText, dayText, usdcText } from './components.js';
import { usdcDecimal } from '../shared/money.js';
import type { PageContext } from './security.js';
import type { WalletOverview } from '../modules/wallet/wallet.service.js';
import { TopupForm, type TopupOptions } from './topup.page.js';
import { ReceiptDetails } from './receipt.js';
import { AllowanceFields, AllowanceSummary, amountValue } from './allowance.js';
import type { AutoTopupState } from '../modules/payments/auto-topup/auto-topup-state.js';
import { formatDecimal } from '../shared/money.js';

/**
 * Notices that report nothing done (a payment the user canceled): shown neutral, not as a success. The others
 * confirm what the user just did.
 */
const NEUTRAL_NOTICES = new Set(['card_canceled']);

/** A notice after a redirect and how it is shown. */
export interface Notice {
  text: string;
  kind: 'ok' | 'info';
}

/** The notice `?done=<key>` picks (the query never supplies text); null for an unknown key. */
export function noticeFor(key: unknown): Notice | null {
  if (typeof key !== 'string' || !Object.hasOwn(NOTICES, key)) return null;
  return { text: NOTICES[key], kind: NEUTRAL_NOTICES.has(key) ? 'info' : 'ok' };
}

/** Fixed notices after a redirect (`?done=…`): the query picks one, it never supplies text. */
export const NOTICES: Record<string, string> = {
  connected: 'The app is connected to your wallet.',
  disconnected: 'The app was disconnected. It can no longer charge your wallet.',
  funds: 'Test funds were added to your wallet.',
  card: 'Thank you: your payment was received. Your balance is credited as soon as Stripe confirms it.',
  card_canceled: 'The payment was canceled; nothing was charged.',
  signed_in: 'You are signed in.',
  alert_saved: 'Your low-balance alert was saved.',
  alert_off: 'The low-balance alert is off.',
  limit: 'The spending limit was saved.',
  autotopup_off: 'Automatic top-up is off: your saved card is not charged any more.',
  key_revoked: 'The key was revoked. It can no longer spend from your wallet.',
};

/** An end-user key that can spend from the wallet (docs/reference.md §19), as the wallet page lists it. */
export interface WalletKey {
  id: string;
  paywallName: string;
  name: string;
  lastFour: string;
  lastUsedAt: Date | null;
}

/** "Keys": the end-user keys that can spend from the wallet, each with a Revoke button. */
function KeysCard(props: { page: PageContext; keys: WalletKey[] }) {
  return html`<${Card} title="Keys">
    ${
      props.keys.length === 0
        ? html`<p class="muted">No keys can spend from your wallet.</p>`
        : html`<p class="muted">
              Keys your apps gave your tools (editors, agents). Each spends from this wallet.
            </p>
            <div class="table-wrap">
              <table class="keys">
                <thead>
                  <tr>
                    <th scope="col">App</th>
                    <th scope="col">Name</th>
                    <th scope="col">Key</th>
                    <th scope="col">Last used</th>
                    <th scope="col"><span class="sr-only">Revoke</span></th>
                  </tr>
                </thead>
                <tbody>
                  ${props.keys.map(
                    (k) =>
                      html`<tr key=${k.id} class="user-key">
                        <td class="app">${k.paywallName}</td>
                        <td class="name" id=${`key-${k.id}`}>${k.name}</td>
                        <td class="last4"><span class="m-label">Key: </span><code>…${k.lastFour}</code></td>
                        <td class="used">
                          <span class="m-label">Last used: </span
                          >${k.lastUsedAt ? dateText(k.lastUsedAt) : 'Never'}
                        </td>
                        <td class="act">
                          <form method="post" action=${`/wallet/keys/${k.id}/revoke`}>
                            <${CsrfField} page=${props.page} />
                            <button type="submit" class="danger" aria-describedby=${`key-${k.id}`}>
                              Revoke
                            </button>
                          </form>
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
    }
  <//>`;
}

const usd = (cents: number) => `${formatDecimal(BigInt(cents), 2)} USD`;

/** The wallet's auto top-up (docs/reference.md §16): what it does, what it used this month; "Turn off". */
export function AutoTopupCard(props: { page: PageContext; state: AutoTopupState | null }) {
  const st = props.state;
  const s = st?.settings;
  return html`<${Card} title="Automatic top-up">
    ${
      st?.enabled && s
        ? html`<p data-testid="autotopup-state">
              <strong>On.</strong> When your balance falls below ${usdcText(s.thresholdRaw)}, your saved card
              is charged ${usd(s.amountCents)}, at most ${usd(s.monthlyCapCents)} a month
              (${usd(st.spentThisMonthCents)} used this month).
            </p>
            <form method="post" action="/wallet/autotopup/off">
              <${CsrfField} page=${props.page} />
              <button type="submit" class="secondary">Turn off automatic top-up</button>
            </form>`
        : html`<p data-testid="autotopup-state">
            <strong>Off.</strong>${' '}
            ${
              st?.disabledReason === 'failures'
                ? `It was turned off after ${st.failuresInRow} failed card payments in a row. `
                : ''
            }To
            turn it on, tick "Top up automatically" when you <a href="/wallet/topup">top up by card</a>.
          </p>`
    }
  <//>`;
}

/** An alert threshold as typed in the form: "5", "2.5", "100" (usdcDecimal has no trailing zeros already). */
const alertValue = (raw: bigint | null): string => (raw === null ? '' : usdcDecimal(raw));

/**
 * The wallet's own low-balance alert (docs/reference.md §16 "Low balance"): one field, empty = off. A
 * refused value comes back with its message and what was typed.
 */
function LowBalanceAlertForm(props: {
  page: PageContext;
  lowAlertRaw: bigint | null;
  error?: string | null;
  value?: string;
}) {
  return html`<${Card} title="Low-balance alert">
    <p class="muted">
      ${
        props.lowAlertRaw === null
          ? 'Get an e-mail when a charge takes your balance below an amount you choose.'
          : `You get an e-mail when a charge takes your balance below ${usdcText(props.lowAlertRaw)}.`
      }
      ${' '}Once each time it falls below; leave the field empty to turn the alert off.
    </p>
    ${props.error && html`<${Alert} kind="error">${props.error}<//>`}
    <form method="post" action="/wallet/alert">
      <${CsrfField} page=${props.page} />
      <div class="inline">
        <${Field}
          id="lowBalanceAlert"
          name="lowBalanceAlert"
          label="Alert below"
          inputmode="decimal"
          value=${props.value ?? alertValue(props.lowAlertRaw)}
          hint="USDC. Empty: no alert."
          maxlength=${20}
          required=${false}
        />
        <button type="submit">Save alert</button>
      </div>
    </form>
  <//>`;
}

export function WalletPage(props: {
  page: PageContext;
  wallet: WalletOverview;
  topup: TopupOptions;
  notice?: Notice | null;
  /** A refused low-balance alert: its message and what was typed. */
  alertError?: { message: string; value: string } | null;
  /** A refused "Save limit": which app, the message and what was typed. */
  limitError?: { connectionId: string; message: string; allowance: string; period: string } | null;
  /** Shown when card top-ups are configured (undefined: not shown). */
  autoTopup?: AutoTopupState | null;
  /** The end-user keys that can spend from the wallet (undefined: not shown). */
  keys?: WalletKey[];
}) {
  const w = props.wallet;
  const err = props.limitError ?? null;
  return html`<${Layout} title="Your wallet" page=${props.page}>
    <h1>Your wallet</h1>
    <p class="lead">One balance for every app you connect.</p>
    ${props.notice && html`<${Alert} kind=${props.notice.kind}>${props.notice.text}<//>`}
    <${Card} title="Balance">
      <p class="balance" data-testid="balance">${usdcText(w.balanceRaw)}</p>
      ${w.heldRaw > 0n && html`<p class="muted">${usdcText(w.heldRaw)} reserved for requests in progress.</p>`}
      <div class="topup-inline"><${TopupForm} page=${props.page} topup=${props.topup} compact=${true} /></div>
    <//>
    <${LowBalanceAlertForm}
      page=${props.page}
      lowAlertRaw=${w.lowAlertRaw}
      error=${props.alertError?.message}
      value=${props.alertError?.value}
    />
    ${props.autoTopup !== undefined && html`<${AutoTopupCard} page=${props.page} state=${props.autoTopup} />`}
    <${Card} title="Connected apps">
      ${
        w.apps.length === 0
          ? html`<p class="muted">
              No apps are connected. When an app asks to use your wallet, you approve it here.
            </p>`
          : html`<ul class="apps">
              ${w.apps.map((a) => {
                const mine = err?.connectionId === a.connectionId ? err : null;
                return html`<li key=${a.connectionId} class="app">
                  <div class="app-head">
                    <div>
                      <span class="app-name" id=${`app-${a.connectionId}`}>${a.paywallName}</span><br /><span
                        class="muted"
                        >Connected since ${dayText(a.connectedAt)}</span
                      ><br /><${AllowanceSummary} allowance=${a.allowance} id=${`limit-${a.connectionId}`} />
                    </div>
                    <form method="post" action=${`/wallet/connections/${a.connectionId}/disconnect`}>
                      <${CsrfField} page=${props.page} />
                      <input type="hidden" name="confirm" value="yes" />
                      <button type="submit" class="danger" aria-describedby=${`app-${a.connectionId}`}>
                        Disconnect
                      </button>
                    </form>
                  </div>
                  ${mine && html`<${Alert} kind="error">${mine.message}<//>`}
                  <form
                    method="post"
                    class="allowance-form"
                    action=${`/wallet/connections/${a.connectionId}/allowance`}
                    aria-label=${`Spending limit for ${a.paywallName}`}
                  >
                    <${CsrfField} page=${props.page} />
                    <${AllowanceFields}
                      idPrefix=${`c-${a.connectionId}`}
                      amount=${mine ? mine.allowance : a.allowance ? amountValue(a.allowance.amountRaw) : ''}
                      period=${mine ? mine.period : (a.allowance?.period ?? 'month')}
                      hintId=${`limit-${a.connectionId}`}
                    />
                    <button type="submit" class="secondary" aria-describedby=${`app-${a.connectionId}`}>
                      Save limit
                    </button>
                  </form>
                </li>`;
              })}
            </ul>`
      }
    <//>
    ${props.keys !== undefined && html`<${KeysCard} page=${props.page} keys=${props.keys} />`}
    <${Card} title="Recent activity">
      ${
        w.activity.length === 0
          ? html`<p class="muted">No activity yet.</p>`
          : html`<div class="table-wrap">
              <table class="activity">
                <thead>
                  <tr>
                    <th scope="col">Date</th>
                    <th scope="col">App</th>
                    <th scope="col">Model or description</th>
                    <th scope="col" class="num">Amount</th>
                  </tr>
                </thead>
                <tbody>
                  ${w.activity.map(
                    (a) =>
                      html`<tr
                          key=${a.id}
                          class=${a.receipt ? 'entry has-receipt' : a.refund ? 'entry refund' : 'entry'}
                        >
                          <td class="date">${dateText(a.createdAt)}</td>
                          <td class="app">${a.app ?? '—'}</td>
                          <td class="item">
                            ${a.description}${
                              a.refund &&
                              html`<span class="refund-detail">
                                ${a.refund.reason && html` · <span class="refund-reason">${a.refund.reason}</span>`}
                                <span class="refund-ref"
                                  >${`for ${a.refund.chargeWhat} of ${dateText(a.refund.chargeAt)}`}</span
                                >
                              </span>`
                            }
                          </td>
                          <td class=${a.amountRaw > 0n ? 'num in-amt' : 'num'}>
                            ${a.amountRaw > 0n ? '+' : ''}${usdcText(a.amountRaw)}
                          </td>
                        </tr>
                        ${
                          a.receipt &&
                          html`<tr key=${`${a.id}-receipt`} class="receipt-row">
                            <td colspan="4"><${ReceiptDetails} receipt=${a.receipt} /></td>
                          </tr>`
                        }`,
                  )}
                </tbody>
              </table>
            </div>`
      }
    <//>
  <//>`;
}

/**
 * "Disconnect <app>?": the wallet page's Disconnect revokes at once (docs/reference.md §8: "Disconnect" next to
 * the app revokes); a Disconnect POST without `confirm=yes` (a wallet page served before this rule, a
 * hand-made request) lands here and revokes nothing. A plain form (no script): Disconnect posts the confirmation,
 * Cancel goes back to the wallet.
 */
export function DisconnectConfirmPage(props: {
  page: PageContext;
  connectionId: string;
  paywallName: string;
}) {
  return html`<${Layout} title=${`Disconnect ${props.paywallName}?`} page=${props.page} narrow=${true}>
    <h1>Disconnect <span class="app-name">${props.paywallName}</span>?</h1>
    <${Card}>
      <p>
        It will no longer be able to charge your wallet. Requests it has already started are settled normally;
        to use it with your wallet again, you approve it again.
      </p>
      <div class="actions">
        <form method="post" action=${`/wallet/connections/${props.connectionId}/disconnect`}>
          <${CsrfField} page=${props.page} />
          <input type="hidden" name="confirm" value="yes" />
          <button type="submit" class="danger-solid">Disconnect</button>
        </form>
        <a class="button secondary" href="/wallet">Cancel</a>
      </div>
    <//>
  <//>`;
}
