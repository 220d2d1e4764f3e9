/** Money from the API: "1.500000" (USDC, 6 decimals). Grouped thousands, all 6 decimals kept. */
export function usdc(value: string | null | undefined, decimals = 6): string {
  if (value == null) return '—';
  const neg = value.startsWith('-');
  const [int, frac = ''] = (neg ? value.slice(1) : value).split('.');
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  let f = frac.padEnd(6, '0').slice(0, decimals);
  if (decimals < 6 && frac.slice(decimals).replace(/0/g, '') !== '') {
    // Rounded for a headline figure (the title attribute keeps the exact amount).
    const n = Math.round(Number(`0.${frac}`) * 10 ** decimals);
    f = String(n).padStart(decimals, '0').slice(0, decimals);
  }
  return `${neg ? '−' : ''}${grouped}${decimals ? '.' + f : ''}`;
}

/**
 * A headline figure: a whole-dollar-ish amount rounded to cents ("1,251.03"), an amount under 1 with all 6
 * decimals ("0.000057"): a non-zero amount never reads "0.00". The exact amount goes underneath or in a title.
 */
export function usdcHeadline(value: string | null | undefined): string {
  if (value == null) return '—';
  const abs = value.replace(/^-/, '');
  if (/^0*(\.0*)?$/.test(abs)) return usdc(value, 2);
  return usdc(value, abs.split('.')[0].replace(/^0+/, '') === '' ? 6 : 2);
}

/**
 * An amount as typed ("5", "1.25", ".5") as the API states amounts: exactly 6 decimals ("5.000000").
 * Text only, no floating point; input the API would refuse is returned trimmed as it is.
 */
export function exactUsdc(input: string): string {
  const m = /^(\d*)(?:\.(\d{0,6}))?$/.exec(input.trim());
  if (!m || (m[1] === '' && !m[2])) return input.trim();
  const int = (m[1] || '0').replace(/^0+(?=\d)/, '');
  return `${int.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${(m[2] ?? '').padEnd(6, '0')}`;
}

/**
 * Y-axis ticks for money series: 0 and 4–6 "nice" steps (1, 2, 2.5 or 5 × 10ⁿ) covering the values, and a
 * formatter with just enough decimals that no two ticks read the same (0.00005 steps: "0.00005", "0.0001",
 * "0.00015", not "0.0001, 0.0001, 0"). Large values in k/M.
 */
export function moneyAxis(values: readonly number[]): { ticks: number[]; format: (v: number) => string } {
  const lo = Math.min(0, ...values);
  const hi = Math.max(0, ...values);
  const span = hi - lo || 1; // all zero: a flat but labelled axis
  const rough = span / 4;
  const pow = 10 ** Math.floor(Math.log10(rough));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * pow >= rough) ?? 10) * pow;
  const first = Math.floor(lo / step);
  const last = Math.ceil(hi / step);
  const ticks: number[] = [];
  for (let i = first; i <= Math.max(last, first + 1); i++) ticks.push(Number((i * step).toPrecision(12)));
  const big = Math.max(Math.abs(ticks[0]), Math.abs(ticks[ticks.length - 1]));
  const unit = big >= 1e6 ? 1e6 : big >= 1e4 ? 1e3 : 1;
  const suffix = unit === 1e6 ? 'M' : unit === 1e3 ? 'k' : '';
  // Decimals of the step in the chosen unit (2.5 × 10⁻⁵ needs one more than 10⁻⁵).
  const scaled = step / unit;
  let decimals = 0;
  while (decimals < 8 && Math.abs(Math.round(scaled * 10 ** decimals) - scaled * 10 ** decimals) > 1e-9)
    decimals++;
  const format = (v: number) => {
    if (v === 0) return '0';
    return `${(v / unit).toFixed(decimals)}${suffix}`;
  };
  return { ticks, format };
}

/** A USDC decimal as a JS number, for charts only (never for arithmetic on balances). */
export const toNumber = (value: string | null | undefined): number => (value ? Number(value) : 0);

export const integer = (n: number | null | undefined): string =>
  n == null ? '—' : new Intl.NumberFormat().format(n);

/** A timestamp in the viewer's time zone. */
export function dateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const sameYear = d.getFullYear() === new Date().getFullYear();
  return d.toLocaleString(undefined, {
    year: sameYear ? undefined : 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

export function time(iso: string): string {
  const d = new Date(iso);
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** UTC day YYYY-MM-DD, `offset` days from today. */
export function utcDay(offset = 0): string {
  return new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
}

export const shortDay = (day: string): string => {
  const d = new Date(`${day}T00:00:00Z`);
  return d.toLocaleDateString(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
};

export const newIdempotencyKey = (): string =>
  typeof crypto.randomUUID === 'function'
    ? crypto.randomUUID()
    : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
