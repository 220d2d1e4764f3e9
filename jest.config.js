/** Jest in ESM mode with ts-jest (see STACK.md): run through `npm test`. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, isolatedModules: true, diagnostics: false }] },
  testMatch: ['<rootDir>/test/**/*.test.ts', '<rootDir>/src/**/*.test.ts'],
  setupFiles: ['reflect-metadata'],
  testTimeout: 60000,
};
