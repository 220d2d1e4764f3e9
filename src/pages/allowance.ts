import { html } from './html.js';
import { dateText, usdcText } from './components.js';
import { ALLOWANCE_PERIODS, type AllowanceState } from '../modules/wallet/allowance.js';
import { formatDecimal, RAW_DECIMALS } from '../shared/money.js';

const PERIOD_LABELS: Record<string, string> = {
  day: 'Per day',
  week: 'Per week (from Monday)',
  month: 'Per month',
  total: 'In total',
};

/** "per day", "in total": after an amount. */
export const perPeriod = (period: string): string => (period === 'total' ? 'in total' : `per ${period}`);

/**
 * The two fields of an app's spending limit (docs/reference.md §16): `allowance` (USDC, empty = no limit)
 * and `allowancePeriod`. `idPrefix` keeps ids unique when a page has one form per app.
 */
export function AllowanceFields(props: {
  idPrefix: string;
  amount?: string;
  period?: string;
  hintId?: string;
}) {
  const a = `${props.idPrefix}-allowance`;
  const p = `${props.idPrefix}-period`;
  return html`<div class="allowance-fields">
    <div class="field">
      <label for=${a}>Spending limit</label>
      <span class="input-unit">
        <input
          id=${a}
          name="allowance"
          type="text"
          inputmode="decimal"
          autocomplete="off"
          placeholder="No limit"
          value=${props.amount ?? ''}
          maxlength=${20}
          aria-describedby=${props.hintId}
        />
        <span class="unit" aria-hidden="true">USDC</span>
      </span>
    </div>
    <div class="field">
      <label for=${p}>Period</label>
      <select id=${p} name="allowancePeriod">
        ${ALLOWANCE_PERIODS.map(
          (x) =>
            html`<option value=${x} selected=${(props.period ?? 'month') === x}>${PERIOD_LABELS[x]}</option>`,
        )}
      </select>
    </div>
  </div>`;
}

/** "0.01 USDC per day · 0.008 USDC spent · resets 28 Nov 2026, 00:00 UTC", or "No spending limit". */
export function AllowanceSummary(props: { allowance: AllowanceState | null; id?: string }) {
  const a = props.allowance;
  if (!a) return html`<span class="muted" id=${props.id}>No spending limit</span>`;
  const reached = a.spentRaw >= a.amountRaw;
  return html`<span class="allowance-summary" id=${props.id}>
    Limit <strong>${usdcText(a.amountRaw)}</strong> ${perPeriod(a.period)} ·${' '}
    <span class=${reached ? 'reached' : ''}>${usdcText(a.spentRaw)} spent</span>
    ${a.resetsAt ? html` · resets ${dateText(a.resetsAt)}` : ''}
  </span>`;
}

/** The form value of a stored amount ("0.01"). */
export const amountValue = (raw: bigint): string => formatDecimal(raw, RAW_DECIMALS);
