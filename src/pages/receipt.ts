import { formatDecimal, MARKUP_DECIMALS, parseDecimal, PRICE_DECIMALS, usdcText } from '../shared/money.js';
import { html } from './html.js';
import { dateText } from './components.js';
import type { ActivityReceipt } from '../modules/wallet/wallet.service.js';

/** "1,920": token counts with thousands separators. */
export const tokensText = (n: number): string => n.toLocaleString('en-US');

/**
 * A per-token price (an exact USDC decimal string) per million tokens, for reading: the decimal point
 * moves 6 places (exact, no arithmetic on the price), shown with at least 2 decimals ("0.75", "15.00").
 */
export function perMillionText(unitPrice: string): string {
  // A price per token has at most 18 fraction digits (cost x markup); per 1M tokens, 12.
  const perMillion = formatDecimal(
    parseDecimal(unitPrice, PRICE_DECIMALS + MARKUP_DECIMALS) ?? 0n,
    PRICE_DECIMALS,
  );
  const [whole, frac = ''] = perMillion.split('.');
  return `${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${frac.padEnd(2, '0')}`;
}

const isZero = (decimal: string): boolean => /^0(\.0*)?$/.test(decimal);

/**
 * The itemised receipt of one usage charge on the wallet page (docs/reference.md §13): a native
 * <details> (no script) whose summary sits under the charge's row. Every figure comes from receiptOf,
 * as the charge kept it: the model, tokens per bucket at the end-user price per token (and per 1M
 * tokens, for reading), the units besides tokens in words ("3 images 1024x1024 high"), each line's
 * amount, the request price, and the total; when part of the total could not be taken from the balance,
 * what was paid and what is still owed.
 */
export function ReceiptDetails({ receipt: r }: { receipt: ActivityReceipt }) {
  const tokens = r.lines.reduce((sum, l) => sum + l.tokens, 0);
  const owedRaw = r.uncollectedRaw - r.recoveredRaw;
  // Units first ("3 images 1024x1024 high"), then the tokens when there are some (or nothing else).
  const summary = [
    ...r.units.map((u) => u.label),
    ...(tokens > 0 || r.units.length === 0 ? [`${tokensText(tokens)} tokens`] : []),
  ].join(' · ');
  // docs/reference.md §5.7: an app's own provider reported more than the hold allowed; the app bears the
  // rest, never the wallet. The wallet paid what the hold took.
  const coveredRaw = r.totalRaw - r.paidRaw - r.uncollectedRaw;
  const appCovered = r.uncollectedRaw === 0n && coveredRaw > 0n;
  return html`<details class="receipt">
    <summary>Receipt <span class="receipt-sum">· ${summary}</span></summary>
    <div class="receipt-body">
      <dl class="receipt-meta">
        <div>
          <dt>Model</dt>
          <dd class="r-model">${r.model}</dd>
        </div>
        <div>
          <dt>Reference</dt>
          <dd class="r-ref"><code>${r.chargeId}</code></dd>
        </div>
      </dl>
      <table class="receipt-lines">
        <caption class="sr-only">
          Itemised charge for ${r.model}, in USDC
        </caption>
        <thead>
          <tr>
            <th scope="col">Item</th>
            <th scope="col" class="num">Tokens</th>
            <th scope="col" class="num">Price per token</th>
            <th scope="col" class="num">Amount</th>
          </tr>
        </thead>
        <tbody>
          ${r.lines.map(
            (l) =>
              html`<tr key=${l.bucket} data-bucket=${l.bucket}>
                <th scope="row" class="r-label">${l.label}</th>
                <td class="num r-tokens">${tokensText(l.tokens)}</td>
                <td class="num r-unit">
                  <span class="r-unit-exact">${l.unitPrice}</span>
                  <span class="r-per-m">${perMillionText(l.unitPrice)} per 1M</span>
                </td>
                <td class="num r-amt">${l.amount}</td>
              </tr>`,
          )}
          ${r.units.map(
            (u) =>
              html`<tr key=${u.kind} data-bucket=${u.kind}>
                <th scope="row" class="r-label r-units">${u.label}</th>
                <td class="num r-tokens r-none"></td>
                <td class="num r-unit r-none"></td>
                <td class="num r-amt">${u.amount}</td>
              </tr>`,
          )}
          ${
            !isZero(r.requestPrice) &&
            html`<tr data-bucket="request">
              <th scope="row" class="r-label">Per request</th>
              <td class="num r-tokens r-none"></td>
              <td class="num r-unit r-none"></td>
              <td class="num r-amt">${r.requestPrice}</td>
            </tr>`
          }
        </tbody>
        <tfoot>
          <tr class="r-total">
            <th scope="row" colspan="3">Total</th>
            <td class="num" data-testid="receipt-total">${usdcText(r.totalRaw)}</td>
          </tr>
          ${
            r.uncollectedRaw > 0n &&
            html`<tr class="r-paid">
                <th scope="row" colspan="3">Paid from your balance</th>
                <td class="num" data-testid="receipt-paid">${usdcText(r.paidRaw)}</td>
              </tr>
              ${
                r.recoveredRaw > 0n &&
                html`<tr class="r-paid">
                  <th scope="row" colspan="3">Paid later</th>
                  <td class="num" data-testid="receipt-recovered">${usdcText(r.recoveredRaw)}</td>
                </tr>`
              }
              <tr class="r-owed">
                <th scope="row" colspan="3">Still owed</th>
                <td class="num" data-testid="receipt-owed">${usdcText(owedRaw)}</td>
              </tr>`
          }
          ${
            appCovered &&
            html`<tr class="r-paid">
                <th scope="row" colspan="3">Paid from your balance</th>
                <td class="num" data-testid="receipt-paid">${usdcText(r.paidRaw)}</td>
              </tr>
              <tr class="r-covered">
                <th scope="row" colspan="3">Covered by the app</th>
                <td class="num" data-testid="receipt-covered">${usdcText(coveredRaw)}</td>
              </tr>`
          }
          ${r.refunds.length > 0 && RefundRows({ receipt: r })}
        </tfoot>
      </table>
      <p class="receipt-note">
        Prices in USDC, as they were when the request was charged. The total is the sum of the lines, rounded
        up to the next 0.000001
        USDC.${
          r.uncollectedRaw > 0n &&
          (owedRaw > 0n
            ? ' Your balance could not pay all of it; what is still owed is paid from it once it has funds again.'
            : ' Your balance could not pay all of it at the time; the rest was paid later.')
        }${
          appCovered &&
          " The app's provider reported more than this request's hold allowed for; the app covers the rest, never your balance."
        }
      </p>
    </div>
  </details>`;
}

/**
 * The refunds of a charge under its receipt's total (docs/reference.md §16 "Refunds"): one row per refund
 * (date and reason) with the amount given back, then what the user paid in the end.
 */
function RefundRows({ receipt: r }: { receipt: ActivityReceipt }) {
  const refundedRaw = r.refunds.reduce((sum, f) => sum + f.amountRaw, 0n);
  const netRaw = r.paidRaw + r.recoveredRaw - refundedRaw;
  return html`${r.refunds.map(
      (f) =>
        html`<tr key=${f.id} class="r-refund" data-testid="receipt-refund">
          <th scope="row" colspan="3">
            ${`Refunded ${dateText(f.createdAt)}`}${
              f.reason && html` · <span class="r-refund-reason">${f.reason}</span>`
            }
          </th>
          <td class="num">${usdcText(-f.amountRaw)}</td>
        </tr>`,
    )}
    <tr class="r-net">
      <th scope="row" colspan="3">Net paid</th>
      <td class="num" data-testid="receipt-net">${usdcText(netRaw)}</td>
    </tr>`;
}
