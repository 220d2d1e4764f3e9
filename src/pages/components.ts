import { usdcText } from '../shared/money.js';
import { html, type Children } from './html.js';

export { CsrfField } from './layout.js';

export function Card({
  title,
  children,
  labelledBy,
}: {
  title?: string;
  children?: Children;
  labelledBy?: string;
}) {
  const id = labelledBy ?? (title ? `h-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}` : undefined);
  return html`<section class="card" aria-labelledby=${title ? id : undefined}>
    ${title && html`<h2 id=${id}>${title}</h2>`} ${children}
  </section>`;
}

export type AlertKind = 'error' | 'ok' | 'info';

/** A message box; errors are announced to screen readers. */
export function Alert({ kind, children }: { kind: AlertKind; children?: Children }) {
  return html`<div class=${`alert ${kind}`} role=${kind === 'error' ? 'alert' : 'status'}>${children}</div>`;
}

/** A labelled input: the label's `for` names the input's id. */
export function Field(props: {
  id: string;
  name: string;
  label: string;
  type?: string;
  value?: string;
  hint?: string;
  autocomplete?: string;
  inputmode?: string;
  pattern?: string;
  maxlength?: number;
  className?: string;
  autofocus?: boolean;
  required?: boolean;
  /** The id of the message that refused this field's value: the input is then marked invalid and names it. */
  errorId?: string;
}) {
  const hintId = props.hint ? `${props.id}-hint` : undefined;
  const describedBy = [props.errorId, hintId].filter(Boolean).join(' ') || undefined;
  return html`<div class="field">
    <label for=${props.id}>${props.label}</label>
    <input
      id=${props.id}
      name=${props.name}
      type=${props.type ?? 'text'}
      value=${props.value}
      autocomplete=${props.autocomplete}
      inputmode=${props.inputmode}
      pattern=${props.pattern}
      maxlength=${props.maxlength}
      class=${props.className}
      autofocus=${props.autofocus}
      required=${props.required ?? true}
      aria-invalid=${props.errorId ? 'true' : undefined}
      aria-describedby=${describedBy}
    />
    ${props.hint && html`<span class="hint" id=${hintId}>${props.hint}</span>`}
  </div>`;
}

/** Money shown to people: the one formatter lives in src/shared/money.ts (pages and e-mails alike). */
export { usdcText };

export const dateText = (d: Date): string =>
  d.toLocaleString('en-GB', {
    day: 'numeric',
    month: 'short',
    year: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    timeZone: 'UTC',
  }) + ' UTC';

export const dayText = (d: Date): string =>
  d.toLocaleDateString('en-GB', { day: 'numeric', month: 'short', year: 'numeric', timeZone: 'UTC' });
