/* global module */
/**
 * Import rules of the house (docs/architecture.md), checked by `npm run lint` (`npm run lint:imports`):
 *
 *  1. No import cycle among the files of src/ and rest-compat/ (type-only imports count too: a cycle of
 *     types is still two files that cannot be understood one without the other).
 *  2. No file under src/modules/ imports the composition root (src/services.ts), the app entry points
 *     (src/app.ts, main.ts, worker.ts, admin.ts) or a transport (rest-compat/, src/pages/, and the GraphQL
 *     server set-up: src/graphql/schema.ts, resolvers.ts, emit-schema.ts, live-connections.ts). Resolvers
 *     may use the GraphQL helpers (context, connection, scalars, errors).
 */
module.exports = {
  forbidden: [
    {
      name: 'no-import-cycle',
      severity: 'error',
      comment:
        'Dependencies point one way: break the cycle with a port (an interface the caller passes in) or an event.',
      from: { path: '^(src|rest-compat)/' },
      to: { circular: true },
    },
    {
      name: 'module-imports-composition-root',
      severity: 'error',
      comment:
        'A service is constructed with the collaborators it uses; only the composition root knows them all.',
      from: { path: '^src/modules/' },
      to: { path: '^src/services\\.ts$' },
    },
    {
      name: 'module-imports-app',
      severity: 'error',
      comment: 'Modules never reach up to the app entry points.',
      from: { path: '^src/modules/' },
      to: { path: '^src/(app|main|worker|admin)\\.ts$' },
    },
    {
      name: 'module-imports-transport',
      severity: 'error',
      comment: 'Transports call services, never the other way round.',
      from: { path: '^src/modules/' },
      to: {
        path: '^(rest-compat/|src/pages/|src/graphql/(schema|resolvers|emit-schema|live-connections)\\.ts$)',
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    // Type-only imports are dependencies too (rule 1).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
