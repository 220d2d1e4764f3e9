import { Router, type Response } from 'express';
import type { Services } from '../services.js';

const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(res: Response, status: number, title: string, body: string): void {
  res
    .status(status)
    .type('html')
    .set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'")
    .set('X-Frame-Options', 'DENY')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
        `<title>${escape(title)}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}</style>` +
        `</head><body><h1>${escape(title)}</h1>${body}</body></html>`,
    );
}

/**
 * Hosted pages behind the links the API hands out (PUBLIC_BASE_URL/…): server-rendered and tiny. They
 * show only a paywall's name — never balances or ids of other users — since anyone may hold a link.
 * DEFAULT mode: top-ups are the developer's business (their `topupUrl` replaces this page when set).
 * SHARED mode: the hosted-wallet approval flow arrives with the shared-wallet issue; until then the
 * page says the request is recorded and pending.
 */
export function createPagesRouter(services: Services): Router {
  const r = Router();

  r.get('/topup/:paywallId', async (req, res) => {
    const p = await services.paywalls.publicInfo(String(req.params.paywallId));
    if (!p) return page(res, 404, 'Link not found', '<p>This top-up link is not valid (any more).</p>');
    page(
      res,
      200,
      `Top up your balance for ${p.name}`,
      `<p>Your balance with <strong>${escape(p.name)}</strong> is too low for this request.</p>` +
        `<p>${escape(p.name)} credits balances itself and has not set up an online top-up page yet: ` +
        `please contact the app's developer to add credits.</p>`,
    );
  });

  const shared = (kind: 'connect' | 'topup') => async (req: any, res: Response) => {
    const id = String(req.params.paywallId ?? req.query.paywall ?? '');
    const p = await services.paywalls.publicInfo(id);
    if (!p) return page(res, 404, 'Link not found', '<p>This link is not valid (any more).</p>');
    page(
      res,
      200,
      kind === 'connect' ? `Connect your wallet to ${p.name}` : `Top up your wallet`,
      kind === 'connect'
        ? `<p><strong>${escape(p.name)}</strong> asks to charge your shared wallet for what you use.</p>` +
            `<p>Your request is recorded. Wallet approval is not yet available on this server; ` +
            `until it is, ${escape(p.name)} cannot charge you and no payment is taken.</p>`
        : `<p>Shared-wallet top-ups are not yet available on this server. No payment is taken.</p>`,
    );
  };
  r.get('/connect/:paywallId', shared('connect'));
  r.get('/wallet/topup', shared('topup'));
  return r;
}
