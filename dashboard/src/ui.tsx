import { useEffect, useId, useState, type ReactNode } from 'react';
import { dateTime, usdc } from './format';

export function Card(props: {
  title?: ReactNode;
  actions?: ReactNode;
  children: ReactNode;
  className?: string;
}) {
  return (
    <section className={`card ${props.className ?? ''}`}>
      {(props.title || props.actions) && (
        <header className="card-head">
          {props.title && <h2>{props.title}</h2>}
          {props.actions && <div className="card-actions">{props.actions}</div>}
        </header>
      )}
      {props.children}
    </section>
  );
}

export function PageHeader(props: { title: string; subtitle?: ReactNode; actions?: ReactNode }) {
  return (
    <div className="page-head">
      <div>
        <h1>{props.title}</h1>
        {props.subtitle && <p className="muted">{props.subtitle}</p>}
      </div>
      {props.actions && <div className="page-actions">{props.actions}</div>}
    </div>
  );
}

type ButtonProps = React.ButtonHTMLAttributes<HTMLButtonElement> & {
  variant?: 'primary' | 'secondary' | 'danger' | 'ghost';
  busy?: boolean;
};
export function Button({ variant = 'secondary', busy, children, className, disabled, ...rest }: ButtonProps) {
  return (
    <button
      type="button"
      className={`btn btn-${variant} ${className ?? ''}`}
      disabled={disabled || busy}
      aria-busy={busy || undefined}
      {...rest}
    >
      {children}
    </button>
  );
}

/** A labelled input; the label is bound to the control (getByLabel works, screen readers too). */
export function Field(props: {
  label: string;
  hint?: ReactNode;
  children?: (id: string) => ReactNode;
  value?: string;
  onChange?: (v: string) => void;
  type?: string;
  placeholder?: string;
  required?: boolean;
  autoFocus?: boolean;
  inputMode?: 'decimal' | 'numeric' | 'text';
  className?: string;
}) {
  const id = useId();
  return (
    <div className={`field ${props.className ?? ''}`}>
      <label htmlFor={id}>{props.label}</label>
      {props.children ? (
        props.children(id)
      ) : (
        <input
          id={id}
          type={props.type ?? 'text'}
          value={props.value ?? ''}
          placeholder={props.placeholder}
          required={props.required}
          autoFocus={props.autoFocus}
          inputMode={props.inputMode}
          onChange={(e) => props.onChange?.(e.target.value)}
          autoComplete="off"
          spellCheck={false}
        />
      )}
      {props.hint && <small className="hint">{props.hint}</small>}
    </div>
  );
}

export function Money(props: {
  value: string | null | undefined;
  decimals?: number;
  unit?: boolean;
  signed?: boolean;
}) {
  const v = props.value;
  const neg = v?.startsWith('-');
  return (
    <span className={`num ${props.signed ? (neg ? 'neg' : 'pos') : ''}`} title={v ? `${v} USDC` : undefined}>
      {props.signed && v && !neg && v !== '0.000000' ? '+' : ''}
      {usdc(v, props.decimals ?? 6)}
      {props.unit && <span className="unit"> USDC</span>}
    </span>
  );
}

export const Time = ({ value, dateOnly }: { value: string | null | undefined; dateOnly?: boolean }) => (
  <time
    dateTime={value ?? undefined}
    className="num-time"
    title={dateOnly && value ? dateTime(value) : undefined}
  >
    {dateOnly && value
      ? new Date(value).toLocaleDateString(undefined, { dateStyle: 'medium' })
      : dateTime(value)}
  </time>
);

export function ErrorBanner({ message }: { message: string | null | undefined }) {
  if (!message) return null;
  return (
    <div className="banner banner-error" role="alert">
      {message}
    </div>
  );
}

export function Notice({
  children,
  tone = 'info',
}: {
  children: ReactNode;
  tone?: 'info' | 'success' | 'warn';
}) {
  return (
    <div className={`banner banner-${tone}`} role="status">
      {children}
    </div>
  );
}

export const Loading = ({ label = 'Loading…' }: { label?: string }) => (
  <div className="loading" role="status" aria-live="polite">
    <span className="spinner" aria-hidden="true" /> {label}
  </div>
);

export const Empty = ({ children }: { children: ReactNode }) => <div className="empty">{children}</div>;

export function Badge({
  children,
  tone = 'neutral',
}: {
  children: ReactNode;
  tone?: 'neutral' | 'good' | 'bad' | 'warn' | 'info';
}) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    if (!copied) return;
    const t = setTimeout(() => setCopied(false), 2000);
    return () => clearTimeout(t);
  }, [copied]);
  return (
    <Button
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
        } catch {
          // Clipboard refused (no permission, insecure origin): select the text for a manual copy.
          const el = document.querySelector<HTMLElement>('[data-secret]');
          if (el) window.getSelection()?.selectAllChildren(el);
        }
        setCopied(true);
      }}
    >
      {copied ? 'Copied' : label}
    </Button>
  );
}

/** A secret shown once (API key, webhook signing secret). */
export function SecretOnce(props: { title: string; secret: string; onDone: () => void }) {
  return (
    <div className="secret" role="region" aria-label={props.title}>
      <div className="secret-head">
        <strong>{props.title}</strong>
        <span className="muted">Shown only now: store it somewhere safe.</span>
      </div>
      <div className="secret-row">
        <code data-secret>{props.secret}</code>
        <CopyButton text={props.secret} />
        <Button variant="ghost" onClick={props.onDone}>
          Done
        </Button>
      </div>
    </div>
  );
}

export function Json({ value }: { value: unknown }) {
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}

export function Select(props: {
  label: string;
  value: string;
  onChange: (v: string) => void;
  options: { value: string; label: string }[];
  className?: string;
}) {
  return (
    <Field label={props.label} className={props.className}>
      {(id) => (
        <select id={id} value={props.value} onChange={(e) => props.onChange(e.target.value)}>
          {props.options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}
