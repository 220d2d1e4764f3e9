import type { NextFunction, Request, Response } from 'express';
import { parseCookie, stringifySetCookie } from 'cookie';
import type { Services } from '../services.js';
import {
  CHALLENGE_COOKIE,
  KNOWN_BROWSER_COOKIE,
  SESSION_COOKIE,
  SIGN_IN,
  type WalletSession,
} from '../modules/wallet/sign-in.service.js';
import { newToken } from '../modules/wallet/wallet-secrets.js';

/** The pre-sign-in CSRF cookie (signed double submit: the form carries an HMAC of its value). */
export const CSRF_COOKIE = 'pp_csrf';

/** What the page middleware attaches to each request. */
export interface PageContext {
  session: WalletSession | null;
  /** The CSRF token every form on this page carries (hidden field `csrf`). */
  csrf: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    page: PageContext;
  }
}

/**
 * Headers for every hosted page: no script at all (the CSP has no script-src), styles from this origin
 * only, never framed (clickjacking the Approve button), never cached (balances, CSRF tokens), and no
 * full URL in the Referer to other sites (connect links carry request ids).
 */
export function pageHeaders(_req: Request, res: Response, next: NextFunction): void {
  res.set({
    'Content-Security-Policy':
      "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'",
    'X-Frame-Options': 'DENY',
    'Cache-Control': 'no-store',
    'Referrer-Policy': 'same-origin',
    'X-Content-Type-Options': 'nosniff',
  });
  next();
}

const secure = (s: Services) => s.config.PUBLIC_BASE_URL.startsWith('https://');

const cookieOptions = (s: Services, maxAgeSeconds: number) => ({
  httpOnly: true,
  sameSite: 'lax' as const,
  secure: secure(s),
  path: '/',
  maxAge: maxAgeSeconds,
});

const serializeCookie = (
  name: string,
  value: string,
  opts: ReturnType<typeof cookieOptions> & { expires?: Date },
) => stringifySetCookie({ name, value, ...opts });

function appendCookie(res: Response, value: string): void {
  const prev = res.getHeader('Set-Cookie');
  const list = prev === undefined ? [] : Array.isArray(prev) ? prev : [String(prev)];
  res.setHeader('Set-Cookie', [...list, value]);
}

export function setSessionCookie(s: Services, res: Response, token: string): void {
  appendCookie(res, serializeCookie(SESSION_COOKIE, token, cookieOptions(s, SIGN_IN.sessionDays * 86400)));
}

/**
 * The sign-in challenge of this browser (codes are bound to it): HttpOnly, only sent to the sign-in
 * forms' own paths, and as long-lived as a code.
 */
const challengeCookieOptions = (s: Services, maxAgeSeconds: number) => ({
  ...cookieOptions(s, maxAgeSeconds),
  path: '/wallet/sign-in',
});

export function challengeOf(req: Request): string | undefined {
  return parseCookie(req.header('cookie') ?? '')[CHALLENGE_COOKIE];
}

export function setChallengeCookie(s: Services, res: Response, token: string): void {
  appendCookie(
    res,
    serializeCookie(CHALLENGE_COOKIE, token, challengeCookieOptions(s, SIGN_IN.codeTtlMinutes * 60)),
  );
}

/** The known-browser cookie (a browser that signed in before): only sent to the sign-in forms. */
export function knownBrowserOf(req: Request): string | undefined {
  return parseCookie(req.header('cookie') ?? '')[KNOWN_BROWSER_COOKIE];
}

export function setKnownBrowserCookie(s: Services, res: Response, token: string): void {
  appendCookie(
    res,
    serializeCookie(KNOWN_BROWSER_COOKIE, token, challengeCookieOptions(s, SIGN_IN.knownBrowserDays * 86400)),
  );
}

export function clearChallengeCookie(s: Services, res: Response): void {
  appendCookie(
    res,
    serializeCookie(CHALLENGE_COOKIE, '', { ...challengeCookieOptions(s, 0), expires: new Date(0) }),
  );
}

export function clearSessionCookie(s: Services, res: Response): void {
  appendCookie(res, serializeCookie(SESSION_COOKIE, '', { ...cookieOptions(s, 0), expires: new Date(0) }));
}

/**
 * Loads the session from its cookie and prepares the page's CSRF token: bound to the session when
 * signed in; otherwise bound to a random HttpOnly cookie set here (signed double submit), so a form
 * posted from another site — which can neither read that cookie nor compute its HMAC — is refused.
 */
export function pageContext(s: Services) {
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const cookies = parseCookie(req.header('cookie') ?? '');
      const session = await s.signIn.session(cookies[SESSION_COOKIE]);
      let anon = cookies[CSRF_COOKIE];
      if (!session && (!anon || !/^[\w-]{32,64}$/.test(anon))) {
        anon = newToken();
        appendCookie(res, serializeCookie(CSRF_COOKIE, anon, cookieOptions(s, 86400)));
        // This request's own POST (if any) cannot match a cookie it did not send.
        (req as any).freshCsrfCookie = true;
      }
      req.page = {
        session,
        csrf: s.walletSecrets.csrfToken(session ? `session:${session.id}` : `anon:${anon}`),
      };
      (req as any).csrfAnon = anon;
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** True when the POST carries the CSRF token of this session (or of this browser before sign-in). */
export function csrfOk(s: Services, req: Request): boolean {
  const token = (req.body as Record<string, unknown> | undefined)?.csrf;
  if (req.page.session) return s.walletSecrets.checkCsrf(`session:${req.page.session.id}`, token);
  if ((req as any).freshCsrfCookie) return false;
  return s.walletSecrets.checkCsrf(`anon:${(req as any).csrfAnon}`, token);
}

/**
 * A same-origin path to return to after sign-in, or null. Only our own pages qualify (`/connect/…`,
 * `/wallet…`): never an absolute URL, `//host`, a backslash trick or control characters.
 */
export function safeNext(next: unknown): string | null {
  if (typeof next !== 'string' || next.length > 1024) return null;
  // eslint-disable-next-line no-control-regex -- control characters are exactly what we refuse
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return null;
  if (!/^\/(connect\/[0-9a-fA-F-]{36}|wallet(\/topup)?)(\?[\w=&%.+-]*)?$/.test(next)) return null;
  return next;
}
