/** Jest in ESM mode with ts-jest (ESM-only MikroORM: see the README, Development): run through `npm test`. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, isolatedModules: true, diagnostics: false }] },
  testMatch: ['<rootDir>/test/**/*.test.ts', '<rootDir>/src/**/*.test.ts'],
  // The fault-injection suite runs apart: `npm run test:faults` (jest.faults.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/faults/'],
  setupFiles: ['reflect-metadata'],
  testTimeout: 60000,
};
