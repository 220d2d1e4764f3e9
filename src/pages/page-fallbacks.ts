import type { NextFunction, Request, Response, Router } from 'express';
import { isDatabaseUnavailable } from '../db/db-errors.js';
import { logInternalError } from '../shared/route-label.js';
import { renderDocument, type html } from './html.js';
import { MessagePage } from './message.page.js';

/** The paths the hosted pages own (their headers, forms, 404 and error pages). */
export const PAGE_PATHS = ['/wallet', '/connect', '/topup'];

/** A DEFAULT app's top-up page belongs to the app, not to the hosted wallet: no wallet header or links. */
const isAppTopup = (req: Request): boolean => req.originalUrl.startsWith('/topup/');

/** Answers with a whole HTML page. */
export const sendPage = (res: Response, status: number, view: ReturnType<typeof html>) =>
  res.status(status).type('html').send(renderDocument(view));

/**
 * What the hosted pages answer when no page route did: a form's address opened with GET, an unknown
 * address, a failure no handler turned into a page. Mounted after every page route.
 */
export function mountPageFallbacks(pages: Router): void {
  // The addresses forms post to, opened with GET (the back button, a reload after the answer, a shared
  // address bar): the page the form was on, never a 404 and never the action itself.
  for (const [path, to] of [
    ['/wallet/sign-in/code', '/wallet/sign-in'],
    ['/wallet/sign-out', '/wallet'],
    ['/wallet/alert', '/wallet'],
    ['/wallet/autotopup/off', '/wallet'],
    ['/wallet/topup/checkout', '/wallet/topup'],
    ['/wallet/keys/:keyId/revoke', '/wallet'],
    ['/wallet/connections/:connectionId/disconnect', '/wallet'],
    ['/wallet/connections/:connectionId/allowance', '/wallet'],
    ['/connect/:paywallId/approve', '/wallet'],
    ['/connect/:paywallId/decline', '/wallet'],
  ] as const)
    pages.get(path, (_req: Request, res: Response) => res.redirect(303, to));

  // Any other address under the pages' paths: a page that says so, not the framework's "Cannot GET".
  pages.use(PAGE_PATHS, (req: Request, res: Response) =>
    sendPage(
      res,
      404,
      MessagePage({
        page: req.page,
        title: 'Page not found',
        message: 'There is no page at this address. Check the link you followed, or open your wallet.',
        wallet: !isAppTopup(req),
        link: isAppTopup(req) ? null : { href: '/wallet', text: 'Go to your wallet' },
      }),
    ),
  );
  // A failure no handler turned into a page (a form too large, the database away, a bug): still a page,
  // never the API's JSON error or a stack; the reference is the request id the log carries.
  pages.use(PAGE_PATHS, (err: any, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const wallet = !isAppTopup(req);
    const page = (status: number, title: string, message: string) =>
      sendPage(res, status, MessagePage({ page: req.page, title, message, wallet }));
    if (err?.type === 'entity.too.large')
      return page(
        413,
        'Form too large',
        'The form sent more than this page accepts. Go back, shorten what you typed and try again.',
      );
    if (
      (err?.expose === true && err.status >= 400 && err.status < 500) ||
      (err instanceof URIError && (err as any).status === 400)
    )
      return page(
        400,
        'Request not understood',
        'This address or form could not be read. Go back, reload the page and try again.',
      );
    if (isDatabaseUnavailable(err)) {
      req.log.warn({ err }, 'database unavailable');
      res.set('Retry-After', '30');
      return page(
        503,
        'Temporarily unavailable',
        'The wallet cannot be reached right now. Please try again in a minute.',
      );
    }
    logInternalError(req, err, 'unhandled error');
    return page(
      500,
      'Something went wrong',
      `This page could not be shown because of an error on our side. Please try again; if it keeps happening, quote the reference ${String(req.id)}.`,
    );
  });
}
