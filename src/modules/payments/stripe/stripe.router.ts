import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { Services } from '../../../services.js';

/**
 * `POST /v1/stripe/webhooks/wallet` (the platform's endpoint: wallet top-ups, CONTRACT §8) and
 * `POST /v1/stripe/webhooks/:paywallId` (CONTRACT §9). Mounted before any JSON parser: the signature is
 * checked on the exact bytes Stripe sent. Thin: the service verifies, dedupes and credits.
 */
export function createStripeWebhookRouter(s: Services): Router {
  const r = Router();
  r.post(
    '/v1/stripe/webhooks/wallet',
    express.raw({ type: () => true, limit: '1mb' }),
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        await s.stripe.receiveWalletWebhook(req.body, req.header('stripe-signature') ?? undefined);
        res.json({ received: true });
      } catch (err) {
        next(err);
      }
    },
  );
  r.post(
    '/v1/stripe/webhooks/:paywallId',
    express.raw({ type: () => true, limit: '1mb' }),
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        await s.stripe.receiveWebhook(
          String(req.params.paywallId),
          req.body,
          req.header('stripe-signature') ?? undefined,
        );
        res.json({ received: true });
      } catch (err) {
        next(err);
      }
    },
  );
  return r;
}
