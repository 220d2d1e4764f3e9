import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { StripeWebhookIngestService } from './stripe-webhook-ingest.service.js';

/**
 * Incoming Stripe events (Stripe webhook ingest; our own outgoing webhooks are modules/webhooks):
 * `POST /v1/stripe/webhooks/wallet` (the platform's endpoint: wallet top-ups) and
 * `POST /v1/stripe/webhooks/:paywallId` (a DEFAULT paywall's). Mounted before any JSON parser: the
 * signature is checked on the exact bytes Stripe sent. Thin: the ingest service verifies, dedupes and
 * credits.
 */
export function createStripeWebhookRouter(ingest: StripeWebhookIngestService): Router {
  const r = Router();
  const raw = express.raw({ type: () => true, limit: '1mb' });
  const answer =
    (run: (req: Request) => Promise<void>) => async (req: Request, res: Response, next: NextFunction) => {
      try {
        await run(req);
        res.json({ received: true });
      } catch (err) {
        next(err);
      }
    };
  r.post(
    '/v1/stripe/webhooks/wallet',
    raw,
    answer((req) => ingest.receiveWallet(req.body, req.header('stripe-signature') ?? undefined)),
  );
  r.post(
    '/v1/stripe/webhooks/:paywallId',
    raw,
    answer((req) =>
      ingest.receive(String(req.params.paywallId), req.body, req.header('stripe-signature') ?? undefined),
    ),
  );
  return r;
}
