/**
 * A tiny browser stand-in for HTTP-level page tests: a cookie jar, no redirects followed (tests look at
 * them), forms posted as application/x-www-form-urlencoded, and the CSRF token read from the last page.
 */
export interface PageResponse {
  status: number;
  html: string;
  headers: Headers;
  location: string | null;
}

export class PageClient {
  readonly cookies = new Map<string, string>();
  /** The `csrf` hidden field of the last HTML page fetched. */
  csrf: string | null = null;

  constructor(
    private readonly base: string,
    /** Sent as X-Forwarded-For (the app trusts its proxy): lets tests stand for different clients. */
    private readonly ip?: string,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.cookies.size) h.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (this.ip) h['x-forwarded-for'] = this.ip;
    return h;
  }

  private async take(res: Response): Promise<PageResponse> {
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '';
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const html = await res.text();
    const m = /name="csrf" value="([^"]*)"/.exec(html);
    if (m) this.csrf = m[1];
    return { status: res.status, html, headers: res.headers, location: res.headers.get('location') };
  }

  async get(path: string): Promise<PageResponse> {
    return this.take(await fetch(this.base + path, { headers: this.headers(), redirect: 'manual' }));
  }

  /** Posts a form; `csrf` defaults to the last page's token (pass null to send none). */
  async post(
    path: string,
    form: Record<string, string>,
    csrf: string | null | undefined = this.csrf,
  ): Promise<PageResponse> {
    const body = new URLSearchParams(form);
    if (csrf !== null && csrf !== undefined) body.set('csrf', csrf);
    return this.take(
      await fetch(this.base + path, {
        method: 'POST',
        headers: this.headers({ 'content-type': 'application/x-www-form-urlencoded' }),
        body: body.toString(),
        redirect: 'manual',
      }),
    );
  }
}
