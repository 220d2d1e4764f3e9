/** The fake Stripe lives in src/dev/ so that `npm run fake-stripe` can run it locally too. */
export * from '../../src/dev/fake-stripe.js';
