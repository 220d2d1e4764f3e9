/** The fake Stripe lives in src/dev/ so that `npm run fake-stripe` can run it locally too. */
export * from '../../src/dev/fake-stripe.js';
export * from '../../src/dev/fake-stripe-objects.js';
export * from '../../src/dev/fake-stripe-events.js';
