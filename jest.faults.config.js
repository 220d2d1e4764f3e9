import base from './jest.config.js';

/** `npm run test:faults`: the fault-injection suite (test/faults), on private PostgreSQL clusters it starts. */
export default {
  ...base,
  testMatch: ['<rootDir>/test/faults/**/*.fault.test.ts'],
  testTimeout: 180000,
};
