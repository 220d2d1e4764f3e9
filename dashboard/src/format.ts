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
