import base from './jest.config.js';

/**
 * `npm run test:embedded` (the second pass of `npm test` without DATABASE_URL): the files that exercise what differs
 * on the embedded PGlite — start-up and the data-directory lock, migrations, vacuuming, crash recovery,
 * a database that goes away — and the money paths end to end (holds and settlements of every wire
 * format, manual charges, the shared wallet, Stripe credits, concurrency; refunds, spending limits, low-balance
 * alerts, auto top-up and retention; the ledger's rules, each case alone and in one batch; untrusted apps side by side on one wallet; images and audio). The whole suite runs on
 * PostgreSQL first; `npm test` without DATABASE_URL runs this pass after it; `TEST_DATABASE=embedded npm test` runs every file on PGlite.
 */
const EMBEDDED = [
  'startup',
  'migrations',
  'migration-webhook-secrets',
  'db-maintenance',
  'db-unavailable',
  'webhook-crash',
  'concurrency',
  'ledger',
  'ledger-lean',
  'untrusted-apps',
  'user-routes',
  'proxy',
  'embeddings',
  'messages',
  'cross-format',
  'shared-wallet',
  'stripe',
  'refunds',
  'allowance',
  'user-keys',
  'low-balance',
  'auto-topup',
  'retention',
  'media',
];

export default {
  ...base,
  testMatch: EMBEDDED.map((name) => `<rootDir>/test/${name}.test.ts`),
};
