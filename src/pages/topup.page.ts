import { randomBytes } from 'node:crypto';
import { html } from './html.js';
import { Layout } from './layout.js';
import { Alert, Card, CsrfField, Field } from './components.js';
import type { PageContext } from './security.js';
import { parseDecimal, usdcText } from '../shared/money.js';
import {
  AUTO_TOPUP_FIELDS,
  DEFAULT_CAP_MULTIPLE,
} from '../modules/payments/auto-topup/auto-topup-settings.js';

/** What paying `usd` (a USD decimal string, as offered) adds: "10.00 USDC" (1 USD = 1 USDC; usdcText). */
export const usdcForUsd = (usd: string): string => usdcText((parseDecimal(usd, 2) ?? 0n) * 10_000n);

/** What this server offers to fund a wallet. */
export interface TopupOptions {
  testFunds: boolean;
  /**
   * Card top-ups with the platform's Stripe (`STRIPE_SECRET_KEY` + `STRIPE_WEBHOOK_SECRET`): the USD
   * amounts offered as "Pay N USD" buttons; null when not configured.
   */
  cards: string[] | null;
}

/**
 * "Top up automatically" (docs/reference.md §16): a checkbox, the threshold (USDC), the amount added
 * (one of `amounts`, USD) and the monthly limit (USD, empty = 5 x the amount). Inside the form whose
 * "Pay N USD" buttons start the Checkout that saves the card.
 */
export function AutoTopupFields(props: {
  amounts: string[];
  idPrefix: string;
  values?: Record<string, string>;
  /** The field (its `name`) a refused value came from, and the id of the message that says why. */
  error?: { field: string; messageId: string } | null;
}) {
  const v = props.values ?? {};
  const id = (s: string) => `${props.idPrefix}-${s}`;
  const errorOf = (field: string) => (props.error?.field === field ? props.error.messageId : undefined);
  return html`<fieldset class="autotopup">
    <legend>Automatic top-up</legend>
    <label class="check" for=${id('on')}>
      <input
        type="checkbox"
        id=${id('on')}
        name=${AUTO_TOPUP_FIELDS.enabled}
        value="on"
        checked=${!!v[AUTO_TOPUP_FIELDS.enabled]}
      />
      Top up automatically
    </label>
    <div class="inline">
      <${Field}
        id=${id('threshold')}
        name=${AUTO_TOPUP_FIELDS.threshold}
        label="when my balance falls below"
        inputmode="decimal"
        value=${v[AUTO_TOPUP_FIELDS.threshold] ?? '1'}
        hint="USDC"
        maxlength=${20}
        required=${false}
        errorId=${errorOf(AUTO_TOPUP_FIELDS.threshold)}
      />
      <div class="field">
        <label for=${id('amount')}>add</label>
        <select
          id=${id('amount')}
          name=${AUTO_TOPUP_FIELDS.amount}
          aria-invalid=${errorOf(AUTO_TOPUP_FIELDS.amount) ? 'true' : undefined}
          aria-describedby=${[errorOf(AUTO_TOPUP_FIELDS.amount), id('amount-hint')].filter(Boolean).join(' ')}
        >
          ${props.amounts.map(
            (a) => html`<option value=${a} selected=${v[AUTO_TOPUP_FIELDS.amount] === a}>${a} USD</option>`,
          )}
        </select>
        <span class="hint" id=${id('amount-hint')}>charged to the card you pay with now</span>
      </div>
      <${Field}
        id=${id('cap')}
        name=${AUTO_TOPUP_FIELDS.monthlyCap}
        label="at most per month"
        inputmode="decimal"
        value=${v[AUTO_TOPUP_FIELDS.monthlyCap]}
        hint=${`USD; empty: ${DEFAULT_CAP_MULTIPLE} x the amount added`}
        maxlength=${20}
        required=${false}
        errorId=${errorOf(AUTO_TOPUP_FIELDS.monthlyCap)}
      />
    </div>
    <p class="muted">
      Ticked, the payment below saves your card with Stripe. Then, whenever a charge takes the balance below
      that amount, the card is charged the amount chosen, at most the monthly limit per calendar month (UTC).
      After 3 failed payments in a row it turns itself off.
    </p>
  </fieldset>`;
}

/** "Pay N USD" (one button per amount, in one form to `/wallet/topup/checkout`) and/or the test-funds form. */
export function TopupForm(props: {
  page: PageContext;
  topup: TopupOptions;
  compact?: boolean;
  amount?: string;
  /** Why the test-funds amount was refused: shown on that form, next to its field. */
  amountError?: string | null;
  /** The auto top-up fields as last posted (after a refusal). */
  autoTopup?: Record<string, string>;
  /** Which auto top-up field was refused, and the id of the message saying why. */
  autoTopupError?: { field: string; messageId: string } | null;
}) {
  const cards = props.topup.cards;
  const amountId = props.compact ? 'amount-inline' : 'amount';
  const pay =
    cards &&
    cards.length > 0 &&
    html`<p class="muted">
        Pay by card with Stripe, in US dollars: every 1 USD you pay adds ${usdcForUsd('1')} to your wallet
        balance.
      </p>
      <form method="post" action="/wallet/topup/checkout" class="pay">
        <${CsrfField} page=${props.page} />
        ${
          !props.compact &&
          html`<${AutoTopupFields}
            amounts=${cards}
            idPrefix="wallet-auto"
            values=${props.autoTopup}
            error=${props.autoTopupError}
          />`
        }
        <div class="inline pay-buttons">
          ${cards.map((amount) => html`<button type="submit" name="amount" value=${amount}>Pay ${amount} USD</button>`)}
        </div>
      </form>`;
  const testFunds =
    props.topup.testFunds &&
    html`<form method="post" action="/wallet/topup">
      <${CsrfField} page=${props.page} />
      <input type="hidden" name="formToken" value=${randomBytes(18).toString('base64url')} />
      ${props.amountError && html`<div id=${`${amountId}-error`}><${Alert} kind="error">${props.amountError}<//></div>`}
      <div class="inline">
        <${Field}
          id=${amountId}
          errorId=${props.amountError ? `${amountId}-error` : undefined}
          name="amount"
          label="Amount"
          inputmode="decimal"
          value=${props.amount}
          hint="USDC, up to 1000. Test funds: no payment is taken."
          maxlength=${20}
        />
        <button type="submit">Add test funds</button>
      </div>
    </form>`;
  if (pay || testFunds) return html`${pay}${testFunds}`;
  return html`<p class="muted">
    Card top-ups are not configured on this server, so the wallet cannot be topped up here yet.
  </p>`;
}

/** `GET /wallet/topup`: the wallet's top-up page. */
export function WalletTopupPage(props: {
  page: PageContext;
  topup: TopupOptions;
  error?: string | null;
  /** The auto top-up field (its name) `error` is about: marked invalid and described by the message. */
  errorField?: string | null;
  amount?: string;
  /** Why the test-funds amount was refused (shown on its form). */
  amountError?: string | null;
  autoTopup?: Record<string, string>;
  /** Opened from an app's top-up link (its "balance too low" reply, its Top up button): that app and the balance. */
  lowFor?: { app: string; balanceRaw: bigint } | null;
}) {
  return html`<${Layout} title="Top up your wallet" page=${props.page} narrow=${true}>
    <h1>Top up your wallet</h1>
    <p class="lead">
      Money you add here pays for every app connected to your wallet.${' '}
      <a href="/wallet">Back to your wallet</a>
    </p>
    ${
      props.lowFor &&
      html`<${Alert} kind="info"
        >${`${props.lowFor.app} sent you here to add funds. Your balance is ${usdcText(props.lowFor.balanceRaw)}.`}<//
      >`
    }
    ${props.error && html`<div id="topup-error"><${Alert} kind="error">${props.error}<//></div>`}
    <${Card}
      title=${props.topup.cards ? 'Choose an amount' : props.topup.testFunds ? 'Add test funds' : 'Top-up'}
    >
      <${TopupForm}
        page=${props.page}
        topup=${props.topup}
        amount=${props.amount}
        amountError=${props.amountError}
        autoTopup=${props.autoTopup}
        autoTopupError=${props.error && props.errorField ? { field: props.errorField, messageId: 'topup-error' } : null}
      />
    <//>
  <//>`;
}

/**
 * DEFAULT mode `GET /topup/:paywallId?user=…`. With Stripe connected (`amounts`): one form per amount,
 * each posting to `/topup/:paywallId/checkout`, which answers 303 to a Stripe Checkout Session. Each
 * says in plain words what it costs (USD, by card) and what it adds to whose balance on which app (USDC,
 * usdcText). Without Stripe: the app credits balances itself.
 */
export function DefaultTopupPage(props: {
  name: string;
  paywallId?: string;
  page?: PageContext;
  user?: string | null;
  amounts?: string[] | null;
  notice?: 'success' | 'canceled' | 'autotopup_off' | null;
  error?: string | null;
  /** The auto top-up field (its name) `error` is about: marked invalid and described by the message. */
  errorField?: string | null;
  /** The auto top-up fields as last posted (after a refusal). */
  autoTopup?: Record<string, string>;
}) {
  const stripe = props.amounts && props.amounts.length > 0 && props.page && props.user;
  const who = props.user;
  // One string: htm drops a line break (and the space with it) next to an interpolation.
  const balanceOf = who ? `${who}'s balance on ${props.name}` : `Your balance on ${props.name}`;
  return html`<${Layout}
    title=${`Top up your balance on ${props.name}`}
    page=${props.page}
    narrow=${true}
    wallet=${false}
  >
    <h1>Top up your balance on ${props.name}</h1>
    ${
      who &&
      html`<p class="lead">For the account <strong>${who}</strong> on <strong>${props.name}</strong>.</p>`
    }
    ${
      props.notice === 'success' &&
      html`<${Alert} kind="ok"
        >Thank you: your payment was received. ${balanceOf} is credited as soon as Stripe confirms it, usually
        within seconds.<//
      >`
    }
    ${props.notice === 'canceled' && html`<${Alert} kind="info">The payment was canceled; nothing was charged.<//>`}
    ${
      props.notice === 'autotopup_off' &&
      html`<${Alert} kind="info"
        >Automatic top-up is off for ${balanceOf}: the saved card is not charged any more.<//
      >`
    }
    ${props.error && html`<div id="topup-error"><${Alert} kind="error">${props.error}<//></div>`}
    ${
      stripe
        ? html`<${Card} title="Choose an amount">
            <p>
              You pay in US dollars (USD) by card, on Stripe's checkout page. Balances on${' '}
              <strong>${props.name}</strong> are kept in USDC: every 1 USD you pay adds ${usdcForUsd('1')}.
            </p>
            <form method="post" action=${`/topup/${props.paywallId}/checkout`}>
              <${CsrfField} page=${props.page!} />
              <input type="hidden" name="user" value=${who!} />
              <${AutoTopupFields}
                amounts=${props.amounts!}
                idPrefix="auto"
                values=${props.autoTopup}
                error=${props.error && props.errorField ? { field: props.errorField, messageId: 'topup-error' } : null}
              />
              <ul class="topup-options">
                ${props.amounts!.map(
                  (amount) =>
                    html`<li>
                      <button type="submit" name="amount" value=${amount}>Pay ${amount} USD</button>
                      <span>adds <strong>${usdcForUsd(amount)}</strong> to ${balanceOf}</span>
                    </li>`,
                )}
              </ul>
            </form>
            <p class="muted">
              Nothing is charged until you confirm on Stripe's page. The balance is credited once Stripe
              confirms the payment.
            </p>
            <form method="post" action=${`/topup/${props.paywallId}/autotopup/off`} class="autotopup-off">
              <${CsrfField} page=${props.page!} />
              <input type="hidden" name="user" value=${who!} />
              <button type="submit" class="link">Turn off automatic top-up</button>
            </form>
          <//>`
        : props.amounts && props.amounts.length > 0
          ? // Stripe is set up, but the link names no account (a hand-trimmed or generic link): nothing to credit.
            html`<${Alert} kind="error"
              >This top-up link does not say which account to top up. Open the top-up link ${props.name} gave
              you (in its "balance too low" reply or its Top up button) again.<//
            >`
          : html`<${Card}>
              <p>Your balance with <strong>${props.name}</strong> is too low for this request.</p>
              <p>
                ${props.name} credits balances itself and has not set up an online top-up page yet: please
                contact the app's developer to add credits.
              </p>
            <//>`
    }
  <//>`;
}
