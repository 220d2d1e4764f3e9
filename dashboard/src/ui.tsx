import {
  Fragment,
  useCallback,
  useEffect,
  useId,
  useRef,
  useState,
  type CSSProperties,
  type HTMLAttributes,
  type ReactNode,
} from 'react';
import { dateTime, usdc } from './format';
import { graphql } from './gql';
import type { PageCursorFragment } from './gql/graphql';

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

/** The browser tab's title names the view, so tabs, history and screen readers can tell views apart. */
export function useDocumentTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Paywall Proxy Dashboard`;
  }, [title]);
}

export function PageHeader(props: { title: string; subtitle?: ReactNode; actions?: ReactNode }) {
  useDocumentTitle(props.title);
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
  // The hint is the input's description: a screen reader reads it with the label.
  const hintId = props.hint ? `${id}-hint` : undefined;
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
          aria-describedby={hintId}
        />
      )}
      {props.hint && (
        <small className="hint" id={hintId}>
          {props.hint}
        </small>
      )}
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
  hint?: ReactNode;
}) {
  return (
    <Field label={props.label} className={props.className} hint={props.hint}>
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

/** One column of a DataTable: its header and what each row shows in it. */
export interface Column<T> {
  /** The header; none: an empty header cell (a column of row actions). */
  head?: ReactNode;
  /** Right-aligned figures: class "num" on the header and on the cells. */
  num?: boolean;
  /** Class of the cells (after "num"). */
  className?: string;
  style?: CSSProperties;
  title?: (row: T) => string;
  cell: (row: T) => ReactNode;
}

/**
 * A table in its scrolling wrapper, with the states around it: `<Loading />` while `loading`, `empty`
 * (when given) for no rows. Rows are clickable (class "clickable", "selected") when `onRowClick` is given;
 * `children` go below the table, inside the wrapper.
 */
export function DataTable<T>(props: {
  rows: readonly T[];
  columns: Column<T>[];
  rowKey: (row: T) => string;
  label?: string;
  loading?: boolean;
  empty?: ReactNode;
  onRowClick?: (row: T) => void;
  selected?: (row: T) => boolean;
  children?: ReactNode;
}) {
  const { columns, onRowClick } = props;
  const scroll = useScrollHint();
  if (props.loading) return <Loading />;
  if (props.empty !== undefined && props.rows.length === 0) return <Empty>{props.empty}</Empty>;
  return (
    <div className="table-scroll" data-more={scroll.more || undefined}>
      {scroll.more && (
        <span className="scroll-hint" aria-hidden="true">
          scroll →
        </span>
      )}
      <div className="table-wrap" ref={scroll.ref} tabIndex={scroll.overflows ? 0 : undefined}>
        <table aria-label={props.label}>
          <thead>
            <tr>
              {columns.map((c, i) => (
                <th key={i} className={c.num ? 'num' : undefined}>
                  {c.head}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {props.rows.map((row) => (
              <tr
                key={props.rowKey(row)}
                className={onRowClick ? `clickable ${props.selected?.(row) ? 'selected' : ''}` : undefined}
                onClick={onRowClick && (() => onRowClick(row))}
              >
                {columns.map((c, i) => (
                  <td
                    key={i}
                    className={[c.num && 'num', c.className].filter(Boolean).join(' ') || undefined}
                    style={c.style}
                    title={c.title?.(row)}
                  >
                    {c.cell(row)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
        {props.children}
      </div>
    </div>
  );
}

/**
 * Whether a horizontally scrolling box is wider than it shows (`overflows`) and has more to the right
 * (`more`): a table cut on a narrow screen says so ("scroll →" and an edge shadow) until scrolled to its end.
 */
function useScrollHint(): { ref: (el: HTMLDivElement | null) => void; overflows: boolean; more: boolean } {
  const [state, setState] = useState({ overflows: false, more: false });
  const cleanup = useRef<() => void>(undefined);
  const ref = useCallback((el: HTMLDivElement | null) => {
    cleanup.current?.();
    cleanup.current = undefined;
    if (!el) return;
    const measure = () => {
      const overflows = el.scrollWidth > el.clientWidth + 1;
      const more = overflows && el.scrollLeft + el.clientWidth < el.scrollWidth - 1;
      setState((s) => (s.overflows === overflows && s.more === more ? s : { overflows, more }));
    };
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    if (el.firstElementChild) observer.observe(el.firstElementChild);
    el.addEventListener('scroll', measure, { passive: true });
    measure();
    cleanup.current = () => {
      observer.disconnect();
      el.removeEventListener('scroll', measure);
    };
  }, []);
  return { ref, ...state };
}

/** A column of USDC amounts. */
export const moneyColumn = <T,>(
  head: string,
  value: (row: T) => string | null | undefined,
  opts: { signed?: boolean } = {},
): Column<T> => ({ head, num: true, cell: (row) => <Money value={value(row)} signed={opts.signed} /> });

/** A column of timestamps. */
export const timeColumn = <T,>(
  head: string,
  value: (row: T) => string | null | undefined,
  opts: { dateOnly?: boolean } = {},
): Column<T> => ({ head, cell: (row) => <Time value={value(row)} dateOnly={opts.dateOnly} /> });

/** Where a page of a connection ends: what the Pager needs of a `pageInfo`. */
graphql(`
  fragment PageCursor on PageInfo {
    hasNextPage
    endCursor
  }
`);
export type PageInfo = PageCursorFragment;

/** Cursor paging of a connection: the stack of `after` cursors walked so far. */
export interface Pages {
  after: string | null;
  first: boolean;
  back(): void;
  forward(cursor: string | null): void;
  reset(): void;
}

export function usePages(): Pages {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  return {
    after: cursors[cursors.length - 1],
    first: cursors.length <= 1,
    back: () => setCursors(cursors.slice(0, -1)),
    forward: (cursor) => setCursors([...cursors, cursor]),
    reset: () => setCursors([null]),
  };
}

/** Back and forward buttons of a paged list; nothing when there is a single page. */
export function Pager(props: {
  pages: Pages;
  pageInfo: PageInfo | null | undefined;
  labels?: readonly [back: string, forward: string];
}) {
  const { pages, pageInfo } = props;
  const [back, forward] = props.labels ?? ['Newer', 'Older'];
  if (pages.first && !pageInfo?.hasNextPage) return null;
  return (
    <div className="row" style={{ marginTop: 10 }}>
      <Button className="btn-sm" disabled={pages.first} onClick={pages.back}>
        {back}
      </Button>
      <Button
        className="btn-sm"
        disabled={!pageInfo?.hasNextPage}
        onClick={() => pages.forward(pageInfo!.endCursor)}
      >
        {forward}
      </Button>
    </div>
  );
}

/** A headline figure: label, value, an optional line below; `card` makes it a card of its own. */
export function Stat(props: {
  label: ReactNode;
  children: ReactNode;
  sub?: ReactNode;
  card?: boolean;
  title?: string;
  testId?: string;
}) {
  return (
    <div className={props.card ? 'card stat' : 'stat'}>
      <span className="label">{props.label}</span>
      <span className="value" title={props.title} data-testid={props.testId}>
        {props.children}
      </span>
      {props.sub !== undefined && <span className="sub">{props.sub}</span>}
    </div>
  );
}

/** A definition list of label and value pairs; the third item is the value cell's attributes. */
export function KeyValues(props: {
  items: readonly (readonly [label: string, value: ReactNode, dd?: HTMLAttributes<HTMLElement>])[];
  style?: CSSProperties;
}) {
  return (
    <dl className="kv" style={props.style}>
      {props.items.map(([label, value, dd]) => (
        <Fragment key={label}>
          <dt>{label}</dt>
          <dd {...dd}>{value}</dd>
        </Fragment>
      ))}
    </dl>
  );
}

/** A small button that opens and closes a row's details (aria-expanded). */
export function ToggleButton(props: {
  open: boolean;
  onToggle: () => void;
  labels: readonly [closed: string, open: string];
}) {
  return (
    <Button
      className="btn-sm"
      variant="ghost"
      aria-expanded={props.open}
      onClick={(e) => {
        // Its own action: inside a clickable table row, the row must not take the click too.
        e.stopPropagation();
        props.onToggle();
      }}
    >
      {props.open ? props.labels[1] : props.labels[0]}
    </Button>
  );
}

/** The state of a form of text inputs: its values, and `set(name)`, an onChange for one of them. */
export function useForm<F extends Record<string, string>>(initial: F | (() => F), onEdit?: () => void) {
  const [values, setValues] = useState<F>(initial);
  const set = (name: keyof F) => (v: string) => {
    setValues((prev) => ({ ...prev, [name]: v }));
    onEdit?.();
  };
  return { values, setValues, set };
}

/** One input of a FormFields layout: Field's props, or a Select when it has options. */
export interface FieldSpec<K extends string> {
  name: K;
  label: string;
  hint?: ReactNode;
  type?: string;
  placeholder?: string;
  required?: boolean;
  autoFocus?: boolean;
  inputMode?: 'decimal' | 'numeric' | 'text';
  options?: { value: string; label: string }[];
}

/**
 * The labelled inputs of a form, bound to `values` and `set` (see useForm). A layout item is one input on
 * a line of its own, or an array: inputs side by side in a row. `false` items are left out (conditional).
 */
export function FormFields<K extends string>(props: {
  values: Record<K, string>;
  set: (name: K) => (v: string) => void;
  layout: readonly (FieldSpec<K> | false | readonly (FieldSpec<K> | false)[])[];
}) {
  const input = ({ name, options, ...field }: FieldSpec<K>) =>
    options ? (
      <Select
        key={name}
        label={field.label}
        hint={field.hint}
        value={props.values[name]}
        onChange={props.set(name)}
        options={options}
      />
    ) : (
      <Field key={name} {...field} value={props.values[name]} onChange={props.set(name)} />
    );
  return (
    <>
      {props.layout.map((item, i) =>
        Array.isArray(item) ? (
          // Inputs line up even when one label wraps to two lines (not with hints: they sit below).
          <div className={item.some((f) => f && f.hint) ? 'row' : 'row row-end'} key={i}>
            {item.map((f) => f && input(f))}
          </div>
        ) : (
          item && input(item as FieldSpec<K>)
        ),
      )}
    </>
  );
}
