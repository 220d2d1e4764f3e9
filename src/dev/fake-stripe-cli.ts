import { FakeStripe } from './fake-stripe.js';

/**
 * `npm run fake-stripe`: a fake Stripe on http://127.0.0.1:12111 (FAKE_STRIPE_PORT) for trying card
 * top-ups locally, without a Stripe account. Start the service with
 * `STRIPE_API_BASE=http://127.0.0.1:12111`; `connectStripe` with any `sk_test_…` key then creates its
 * webhook endpoint here, and "Pay" on the fake checkout page sends `checkout.session.completed`, signed,
 * to every endpoint of that key. With STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET set (the same values
 * as the service's) the platform's wallet endpoint is registered too. Development only.
 */
async function main(): Promise<void> {
  const port = Number(process.env.FAKE_STRIPE_PORT ?? 12111);
  const fake = await new FakeStripe().start(port);
  const base = (process.env.PUBLIC_BASE_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
  const platformKey = process.env.STRIPE_SECRET_KEY;
  const platformSecret = process.env.STRIPE_WEBHOOK_SECRET;
  if (platformKey && platformSecret)
    fake.endpoints.set('we_platform_wallet', {
      id: 'we_platform_wallet',
      url: `${base}/v1/stripe/webhooks/wallet`,
      enabled_events: [
        'checkout.session.completed',
        'checkout.session.async_payment_succeeded',
        'checkout.session.async_payment_failed',
        'payment_intent.succeeded',
        'payment_intent.payment_failed',
      ],
      secret: platformSecret,
      deleted: false,
      apiKey: platformKey,
    });
  fake.onDelivered = (session, sent) =>
    console.log(
      `paid ${session.id} (${session.amount_total / 100} ${session.currency}): ` +
        (sent.length
          ? sent.map(([id, status]) => `${fake.endpoints.get(id)?.url} → ${status}`).join(', ')
          : 'no webhook endpoint for this key'),
    );
  console.log(`Fake Stripe listening on ${fake.url}`);
  console.log(`Start the service with STRIPE_API_BASE=${fake.url}`);
  const stop = () => void fake.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
