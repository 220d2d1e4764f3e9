import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { Services } from '../services.js';
import { DomainError } from '../shared/errors.js';
import { checkExternalId } from '../modules/users/user.service.js';
import { pageAnswerOf } from '../shared/error-codes.js';
import {
  challengeOf,
  clearChallengeCookie,
  csrfOk,
  clearSessionCookie,
  knownBrowserOf,
  pageContext,
  pageHeaders,
  safeNext,
  setChallengeCookie,
  setKnownBrowserCookie,
  setSessionCookie,
} from './security.js';
import { PAGES_CSS } from './styles.js';
import { MessagePage } from './message.page.js';
import { PAGE_PATHS, mountPageFallbacks, sendPage as send } from './page-fallbacks.js';
import { usdcText } from './components.js';
import { CodeStep, EmailStep } from './sign-in.page.js';
import { ConsentPage } from './connect.page.js';
import { DisconnectConfirmPage, WalletPage, noticeFor } from './wallet.page.js';
import { DefaultTopupPage, WalletTopupPage, type TopupOptions } from './topup.page.js';
import { WALLET_TOPUP_AMOUNTS } from '../modules/payments/stripe/stripe-amounts.js';
import { TopupRateLimited } from '../modules/payments/stripe/topup-limits.js';
import { parseAllowance } from '../modules/wallet/allowance.js';
import { perPeriod } from './allowance.js';
import { AUTO_TOPUP_FIELDS } from '../modules/payments/auto-topup/auto-topup-settings.js';

/** The page that answers a service's refusal (status and title), from the one error map; null: a 500. */
const answerOf = (err: DomainError) => pageAnswerOf(err.code, err.publicCode);
const statusOf = (err: DomainError): number => answerOf(err)?.status ?? 500;

/**
 * Hosted pages (docs/reference.md §8): wallet sign-in, consent for connect links, the wallet, top-ups, and the
 * DEFAULT-mode top-up page. Server-rendered, no JavaScript; every POST carries a CSRF token. Routes
 * parse, call one service, render — the rules live in src/modules/wallet/.
 */
export function createPagesRouter(s: Services): Router {
  const r = Router();
  const topup = (): TopupOptions => ({
    testFunds: s.config.WALLET_TEST_FUNDS,
    cards: s.stripeCheckout.walletCardsEnabled() ? WALLET_TOPUP_AMOUNTS : null,
  });

  r.get('/assets/pages.css', (_req, res) => {
    res.type('text/css').set('Cache-Control', 'public, max-age=3600').send(PAGES_CSS);
  });

  const pages = Router();
  // Only the pages' own paths get their headers, form parsing and session lookup: other routes mounted
  // after this router (the dashboard, 404s) keep their own CSP and never receive a CSRF cookie.
  pages.use(PAGE_PATHS, pageHeaders, express.urlencoded({ extended: false, limit: '16kb' }), pageContext(s));

  /** Wraps a handler: a DomainError becomes a 4xx page; anything else a logged 500 page. */
  const h =
    (fn: (req: Request, res: Response) => Promise<unknown> | unknown) =>
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        await fn(req, res);
      } catch (err) {
        if (!(err instanceof DomainError)) return next(err);
        const answer = answerOf(err);
        if (!answer) return next(err);
        if (err instanceof TopupRateLimited) res.set('Retry-After', String(err.retryAfterSeconds));
        // The DEFAULT top-up page belongs to an app, not to the hosted wallet: no wallet header there.
        const topupPage = req.path.startsWith('/topup/');
        // A link approved before is not a failure: the app is connected. Said calmly, with the way on.
        const done = err.publicCode === 'connect_request_approved';
        // Either way the request was decided: a signed-in wallet user is shown the way to the wallet.
        const decided = done || err.publicCode === 'connect_request_declined';
        send(
          res,
          answer.status,
          MessagePage({
            page: req.page,
            title: answer.title,
            message: err.message,
            kind: done ? 'info' : 'error',
            wallet: !topupPage,
            link: topupPage
              ? backToTopup(req)
              : decided && req.page?.session
                ? { href: '/wallet', text: 'Go to your wallet' }
                : null,
          }),
        );
      }
    };
  /** POST handlers: a missing or wrong CSRF token is a 403 page and nothing runs. */
  const post =
    (fn: (req: Request, res: Response) => Promise<unknown> | unknown) =>
    (req: Request, res: Response, next: NextFunction) => {
      if (!csrfOk(s, req))
        return send(
          res,
          403,
          MessagePage({
            page: req.page,
            title: 'Form expired',
            message:
              'This form was not accepted: it expired or was not sent from this site. Go back, reload the page and try again.',
          }),
        );
      return h(fn)(req, res, next);
    };
  const signInRedirect = (req: Request, res: Response) =>
    res.redirect(303, `/wallet/sign-in?next=${encodeURIComponent(req.originalUrl)}`);
  const clientIp = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';
  /** The link back to the DEFAULT top-up page a refusal came from (its user), when known. */
  const backToTopup = (req: Request): { href: string; text: string } | null => {
    const user = body(req, 'user') ?? (typeof req.query.user === 'string' ? req.query.user : undefined);
    const id = req.params.paywallId;
    if (typeof id !== 'string' || !user) return null;
    return {
      href: `/topup/${encodeURIComponent(id)}?user=${encodeURIComponent(user)}`,
      text: 'Back to the top-up page',
    };
  };
  const body = (req: Request, key: string): string | undefined => {
    const v = (req.body as Record<string, unknown> | undefined)?.[key];
    return typeof v === 'string' ? v : undefined;
  };
  /** The "Top up automatically" fields of a top-up form (docs/reference.md §16). */
  const autoTopupForm = (req: Request): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const k of Object.values(AUTO_TOPUP_FIELDS)) {
      const v = body(req, k);
      if (v !== undefined) out[k] = v;
    }
    return out;
  };

  // Sign-in ------------------------------------------------------------------------------------------
  /**
   * The app of a pending connect link in `next` (`/connect/{paywallId}?request=…`), so the sign-in page says
   * who asks; null for any other `next`, or a link that is not pending (its own page says why after sign-in).
   */
  const connectingApp = async (next: string | null): Promise<string | null> => {
    const m = next ? /^\/connect\/([0-9a-fA-F-]{36})\?(.*)$/.exec(next) : null;
    if (!m) return null;
    const request = new URLSearchParams(m[2]).get('request') ?? '';
    try {
      return (await s.authorizations.pendingRequest(m[1], request)).paywallName;
    } catch (err) {
      if (err instanceof DomainError) return null;
      throw err;
    }
  };
  pages.get(
    '/wallet/sign-in',
    h(async (req, res) => {
      const next = safeNext(req.query.next);
      if (req.page.session) return res.redirect(303, next ?? '/wallet');
      send(res, 200, EmailStep({ page: req.page, next, forApp: await connectingApp(next) }));
    }),
  );
  pages.post(
    '/wallet/sign-in',
    post(async (req, res) => {
      const next = safeNext(body(req, 'next'));
      try {
        // One answer whether or not a limit held the code back: it reveals nothing about the address.
        const { email, challenge } = await s.signIn.sendCode(
          body(req, 'email'),
          clientIp(req),
          challengeOf(req),
          knownBrowserOf(req),
        );
        setChallengeCookie(s, res, challenge);
        send(res, 200, CodeStep({ page: req.page, next, email, sent: true }));
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        send(
          res,
          statusOf(err),
          EmailStep({
            page: req.page,
            next,
            email: body(req, 'email'),
            error: err.message,
            forApp: await connectingApp(next),
          }),
        );
      }
    }),
  );
  pages.post(
    '/wallet/sign-in/code',
    post(async (req, res) => {
      const next = safeNext(body(req, 'next'));
      const email = body(req, 'email') ?? '';
      try {
        const { token, knownBrowser } = await s.signIn.verifyCode(
          email,
          body(req, 'code'),
          challengeOf(req),
          knownBrowserOf(req),
        );
        setSessionCookie(s, res, token);
        setKnownBrowserCookie(s, res, knownBrowser);
        clearChallengeCookie(s, res);
        res.redirect(303, next ?? '/wallet');
      } catch (err) {
        if (!(err instanceof DomainError) || err.param !== 'code') throw err;
        send(res, statusOf(err), CodeStep({ page: req.page, next, email, error: err.message }));
      }
    }),
  );
  pages.post(
    '/wallet/sign-out',
    post(async (req, res) => {
      if (req.page.session) await s.signIn.signOut(req.page.session.id);
      clearSessionCookie(s, res);
      res.redirect(303, '/wallet/sign-in');
    }),
  );

  // Consent ------------------------------------------------------------------------------------------
  pages.get(
    '/connect/:paywallId',
    h(async (req, res) => {
      // The link is checked first: an expired or foreign link says so before asking anyone to sign in.
      const request = await s.authorizations.pendingRequest(
        String(req.params.paywallId),
        String(req.query.request ?? ''),
      );
      if (!req.page.session) return signInRedirect(req, res);
      send(
        res,
        200,
        ConsentPage({ page: req.page, request, maxChargeRaw: s.config.SHARED_MAX_MANUAL_CHARGE }),
      );
    }),
  );
  pages.post(
    '/connect/:paywallId/approve',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      const paywallId = String(req.params.paywallId);
      // The optional spending limit (docs/reference.md §16): a bad one shows the consent page again.
      let allowance: ReturnType<typeof parseAllowance>;
      try {
        allowance = parseAllowance(body(req, 'allowance'), body(req, 'allowancePeriod'));
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        const request = await s.authorizations.pendingRequest(paywallId, body(req, 'request') ?? '');
        return send(
          res,
          400,
          ConsentPage({
            page: req.page,
            request,
            maxChargeRaw: s.config.SHARED_MAX_MANUAL_CHARGE,
            error: {
              message: err.message,
              allowance: body(req, 'allowance') ?? '',
              period: body(req, 'allowancePeriod') ?? '',
            },
          }),
        );
      }
      const out = await s.authorizations.approve(
        req.page.session.user,
        paywallId,
        body(req, 'request'),
        allowance,
      );
      const limit = allowance
        ? ` It may spend at most ${usdcText(allowance.amountRaw)} ${perPeriod(allowance.period)}.`
        : '';
      send(
        res,
        200,
        MessagePage({
          page: req.page,
          kind: 'ok',
          title: `${out.paywallName} is connected`,
          message: `${out.paywallName} can now charge your wallet for the AI usage you make in it, and make single charges of up to ${usdcText(s.config.SHARED_MAX_MANUAL_CHARGE)}.${limit} You can disconnect it at any time from your wallet.`,
          link: { href: '/wallet', text: 'Go to your wallet' },
        }),
      );
    }),
  );
  pages.post(
    '/connect/:paywallId/decline',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      const out = await s.authorizations.decline(
        req.page.session.user,
        String(req.params.paywallId),
        body(req, 'request'),
      );
      send(
        res,
        200,
        MessagePage({
          page: req.page,
          kind: 'info',
          title: 'Request declined',
          message: `${out.paywallName} was not connected and cannot charge your wallet.`,
          link: { href: '/wallet', text: 'Go to your wallet' },
        }),
      );
    }),
  );

  // Wallet -------------------------------------------------------------------------------------------
  pages.get(
    '/wallet',
    h(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      const wallet = await s.wallet.overview(req.page.session.user);
      const notice = noticeFor(req.query.done);
      const autoTopup = s.stripeCheckout.walletCardsEnabled()
        ? await s.autoTopup.walletState(req.page.session.user.id)
        : undefined;
      const keys = await s.userKeys.ofWallet(req.page.session.user.id);
      send(res, 200, WalletPage({ page: req.page, wallet, topup: topup(), notice, autoTopup, keys }));
    }),
  );
  pages.post(
    '/wallet/keys/:keyId/revoke',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      await s.userKeys.revokeForWallet(req.page.session.user.id, String(req.params.keyId));
      res.redirect(303, '/wallet?done=key_revoked');
    }),
  );
  pages.post(
    '/wallet/connections/:connectionId/disconnect',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      const walletUserId = req.page.session.user.id;
      const connectionId = String(req.params.connectionId);
      // The wallet page's button and the confirmation page's both send confirm=yes and revoke; a POST
      // without it is answered with the confirmation page.
      if (body(req, 'confirm') !== 'yes') {
        const c = await s.authorizations.connectionOf(walletUserId, connectionId);
        if (!c.active) return res.redirect(303, '/wallet?done=disconnected');
        return send(
          res,
          200,
          DisconnectConfirmPage({ page: req.page, connectionId: c.connectionId, paywallName: c.paywallName }),
        );
      }
      await s.authorizations.revokeConnection(walletUserId, connectionId);
      res.redirect(303, '/wallet?done=disconnected');
    }),
  );
  pages.post(
    '/wallet/connections/:connectionId/allowance',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      const user = req.page.session.user;
      const connectionId = String(req.params.connectionId);
      try {
        const allowance = parseAllowance(body(req, 'allowance'), body(req, 'allowancePeriod'));
        await s.authorizations.setConnectionAllowance(user.id, connectionId, allowance);
        res.redirect(303, '/wallet?done=limit');
      } catch (err) {
        if (!(err instanceof DomainError) || (err.param !== 'allowance' && err.param !== 'allowancePeriod'))
          throw err;
        const wallet = await s.wallet.overview(user);
        send(
          res,
          400,
          WalletPage({
            page: req.page,
            wallet,
            topup: topup(),
            keys: await s.userKeys.ofWallet(user.id),
            limitError: {
              connectionId,
              message: err.message,
              allowance: body(req, 'allowance') ?? '',
              period: body(req, 'allowancePeriod') ?? '',
            },
          }),
        );
      }
    }),
  );
  pages.post(
    '/wallet/alert',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      const value = body(req, 'lowBalanceAlert') ?? '';
      try {
        const set = await s.wallet.setLowBalanceAlert(req.page.session.user, value);
        res.redirect(303, `/wallet?done=${set === null ? 'alert_off' : 'alert_saved'}`);
      } catch (err) {
        if (!(err instanceof DomainError) || err.param !== 'lowBalanceAlert') throw err;
        const wallet = await s.wallet.overview(req.page.session.user);
        send(
          res,
          400,
          WalletPage({
            page: req.page,
            wallet,
            topup: topup(),
            keys: await s.userKeys.ofWallet(req.page.session.user.id),
            alertError: { message: err.message, value: value.slice(0, 20) },
          }),
        );
      }
    }),
  );
  pages.get(
    '/wallet/topup',
    h(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      // Opened from an app's top-up link (`?paywall=…`: its "balance too low" reply or its Top up button):
      // say which app sent the person and what the balance is, naming only an app this wallet is connected
      // to (a crafted link names nothing).
      const wanted = typeof req.query.paywall === 'string' ? req.query.paywall.toLowerCase() : null;
      const overview = wanted ? await s.wallet.overview(req.page.session.user) : null;
      const app = overview?.apps.find((a) => a.paywallId === wanted);
      send(
        res,
        200,
        WalletTopupPage({
          page: req.page,
          topup: topup(),
          lowFor: app && overview ? { app: app.paywallName, balanceRaw: overview.balanceRaw } : null,
        }),
      );
    }),
  );
  pages.post(
    '/wallet/topup',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      try {
        await s.wallet.addTestFunds(req.page.session.user, body(req, 'amount'), body(req, 'formToken'));
        res.redirect(303, '/wallet?done=funds');
      } catch (err) {
        if (!(err instanceof DomainError) || err.param !== 'amount') throw err;
        send(
          res,
          400,
          WalletTopupPage({
            page: req.page,
            topup: topup(),
            amountError: err.message,
            amount: body(req, 'amount'),
          }),
        );
      }
    }),
  );
  pages.post(
    '/wallet/topup/checkout',
    post(async (req, res) => {
      if (!req.page.session) return res.redirect(303, '/wallet/sign-in?next=%2Fwallet%2Ftopup');
      const auto = autoTopupForm(req);
      try {
        res.redirect(303, await s.wallet.startCheckout(req.page.session.user, body(req, 'amount'), auto));
      } catch (err) {
        if (
          !(err instanceof DomainError) ||
          !err.param ||
          !['amount', ...Object.values(AUTO_TOPUP_FIELDS)].includes(err.param)
        )
          throw err;
        send(
          res,
          400,
          WalletTopupPage({
            page: req.page,
            topup: topup(),
            error: err.message,
            errorField: err.param,
            autoTopup: auto,
          }),
        );
      }
    }),
  );
  pages.post(
    '/wallet/autotopup/off',
    post(async (req, res) => {
      if (!req.page.session) return signInRedirect(req, res);
      await s.autoTopup.turnOff({ kind: 'wallet', walletUserId: req.page.session.user.id });
      res.redirect(303, '/wallet?done=autotopup_off');
    }),
  );

  // DEFAULT mode -------------------------------------------------------------------------------------
  pages.get(
    '/topup/:paywallId',
    h(async (req, res) => {
      s.stripeCheckout.topupPageView(clientIp(req));
      const p = await s.paywalls.publicInfo(String(req.params.paywallId));
      if (!p)
        return send(
          res,
          404,
          MessagePage({
            title: 'Link not found',
            message: 'This top-up link is not valid (any more).',
            wallet: false,
          }),
        );
      // A SHARED app's users pay into their hosted wallet, not into this app.
      if (p.mode === 'SHARED') return res.redirect(303, '/wallet/topup');
      const user = typeof req.query.user === 'string' ? req.query.user : null;
      const amounts = await s.stripeCheckout.topupAmounts(p.id);
      const state = req.query.checkout;
      send(
        res,
        200,
        DefaultTopupPage({
          name: p.name,
          paywallId: p.id,
          page: req.page,
          user,
          amounts,
          notice: state === 'success' || state === 'canceled' || state === 'autotopup_off' ? state : null,
        }),
      );
    }),
  );
  pages.post(
    '/topup/:paywallId/checkout',
    post(async (req, res) => {
      s.stripeCheckout.topupPageView(clientIp(req));
      const auto = autoTopupForm(req);
      const paywallId = String(req.params.paywallId);
      try {
        res.redirect(
          303,
          await s.stripeCheckout.startCheckout(
            paywallId,
            body(req, 'user'),
            body(req, 'amount'),
            clientIp(req),
            auto,
          ),
        );
      } catch (err) {
        // A bad auto top-up field: the page again, with the message and what was typed.
        if (
          !(err instanceof DomainError) ||
          !Object.values<string>(AUTO_TOPUP_FIELDS).includes(err.param ?? '')
        )
          throw err;
        const p = await s.paywalls.publicInfo(paywallId);
        if (!p) throw err;
        send(
          res,
          400,
          DefaultTopupPage({
            name: p.name,
            paywallId: p.id,
            page: req.page,
            user: body(req, 'user') ?? null,
            amounts: await s.stripeCheckout.topupAmounts(p.id),
            error: err.message,
            errorField: err.param,
            autoTopup: auto,
          }),
        );
      }
    }),
  );
  // Turning auto top-up off only ever stops payments: the public page offers it to whoever has the link.
  pages.post(
    '/topup/:paywallId/autotopup/off',
    post(async (req, res) => {
      s.stripeCheckout.topupPageView(clientIp(req));
      const paywallId = String(req.params.paywallId);
      const user = checkExternalId(body(req, 'user'));
      const p = await s.paywalls.publicInfo(paywallId);
      if (!p || p.mode !== 'DEFAULT')
        throw new DomainError('not_found', 'This top-up link is not valid (any more).', null, 'not_found');
      await s.autoTopup.turnOff({ kind: 'end_user', paywallId: p.id, externalId: user });
      res.redirect(303, `/topup/${p.id}?user=${encodeURIComponent(user)}&checkout=autotopup_off`);
    }),
  );

  mountPageFallbacks(pages);

  r.use(pages);
  return r;
}
