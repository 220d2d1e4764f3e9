import base from './jest.config.js';

/** `npm run test:faults`: the fault-injection suite (test/faults), on private PostgreSQL clusters it starts. */
export default {
  ...base,
  testMatch: ['<rootDir>/test/faults/**/*.fault.test.ts'],
  // The base config ignores test/faults (the ordinary suite must not run them); this one must not.
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 180000,
};
