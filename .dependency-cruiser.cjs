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
 *  3. Nothing outside src/modules/proxy/ reaches into the proxy's internals. Its public entry is
 *     proxy.service.ts (the ProxyService and the call/answer types its callers pass). Besides it:
 *     - the composition root and registries may name its GraphQL resolver (src/graphql/resolvers.ts →
 *       proxy.resolver.ts) and its entities (src/db/entities.ts → *.entity.ts);
 *     - rest-compat/, the proxy's HTTP transport, may also use the wire vocabulary it speaks: flight.ts
 *       (MediaSink), media-format.ts, audio-probe.ts (MAX_AUDIO_BYTES), messages-format.ts (the Anthropic
 *       error shape), upstream-client.ts (the Via loop guard) and anthropic-client.ts (the headers relayed).
 *     The provider concept (vocabulary, records, keys, routes, health) lives in src/modules/providers/,
 *     which depends on neither proxy/ nor the transports; paywalls/ depends on neither proxy/ nor providers/.
 *  4. events/ imports no other module (every module records events; live subscriptions are live-events/).
 *  5. The money modules are layered, lowest first: accounts/ (the books: account and transfer entities,
 *     platform accounts, money entering from the world, receipts) ◄── wallet/ (hosted wallet users,
 *     sign-in, authorizations, allowances) ◄── users/ (end users, their connection to a wallet user) ◄──
 *     ledger/ (charges, holds, refunds, earnings). A module imports only those below it.
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
    {
      name: 'proxy-internals',
      severity: 'error',
      comment:
        'Outside src/modules/proxy/, only its public entry proxy.service.ts (rule 3 above); move a shared concept to the module that owns it (provider things: src/modules/providers/).',
      from: {
        path: '^(src|rest-compat)/',
        pathNot: '^(src/modules/proxy/|rest-compat/|src/graphql/resolvers\\.ts$|src/db/entities\\.ts$)',
      },
      to: { path: '^src/modules/proxy/', pathNot: '^src/modules/proxy/proxy\\.service\\.ts$' },
    },
    {
      name: 'proxy-internals-from-registries',
      severity: 'error',
      comment:
        'The GraphQL resolver list and the entity list name the proxy resolver and entities, nothing else of the proxy.',
      from: { path: '^src/(graphql/resolvers|db/entities)\\.ts$' },
      to: {
        path: '^src/modules/proxy/',
        pathNot: '^src/modules/proxy/(proxy\\.service|proxy\\.resolver|[^/]+\\.entity)\\.ts$',
      },
    },
    {
      name: 'proxy-internals-from-transport',
      severity: 'error',
      comment:
        "rest-compat/ is the proxy's HTTP transport: the public entry plus the wire vocabulary it speaks (rule 3 above lists it).",
      from: { path: '^rest-compat/' },
      to: {
        path: '^src/modules/proxy/',
        pathNot:
          '^src/modules/proxy/(proxy\\.service|flight|media-format|audio-probe|messages-format|upstream-client|anthropic-client)\\.ts$',
      },
    },
    {
      name: 'paywalls-depends-on-neither-proxy-nor-providers',
      severity: 'error',
      comment:
        'One way: providers/ and proxy/ use paywalls/, never the reverse (a paywall rule that needs a provider answer takes it as a port).',
      from: { path: '^src/modules/paywalls/' },
      to: { path: '^src/modules/(proxy|providers)/' },
    },
    {
      name: 'providers-depends-not-on-proxy',
      severity: 'error',
      comment:
        'One way: the proxy uses providers/ (routes, health, the ProviderClient contract), never the reverse.',
      from: { path: '^src/modules/providers/' },
      to: { path: '^src/modules/proxy/' },
    },
    {
      name: 'events-depends-on-no-module',
      severity: 'error',
      comment:
        'One way: every module records its events in its own transaction (paywalls/ too), so events/ (the catalogue, the payloads, the recording) imports no other module. Live subscriptions, which authorize their caller through paywalls/, are live-events/.',
      from: { path: '^src/modules/events/' },
      to: { path: '^src/modules/', pathNot: '^src/modules/events/' },
    },
    // The money modules, lowest first: accounts/ ◄── wallet/ ◄── users/ ◄── ledger/ (docs/architecture.md
    // "Layers of the money modules"). Each rule forbids one reverse direction.
    {
      name: 'accounts-is-the-bottom',
      severity: 'error',
      comment:
        'accounts/ holds the books every money module writes (the account and transfer entities, the platform accounts, money entering from the world, the receipt of a charge); it knows none of the modules that post to it.',
      from: { path: '^src/modules/accounts/' },
      to: { path: '^src/modules/(ledger|users|wallet|payments|proxy)/' },
    },
    {
      name: 'wallet-depends-not-on-users',
      severity: 'error',
      comment:
        "One way: users/ uses the hosted wallet (it revokes an end user's authorizations, shows a connection's allowance), never the reverse. A wallet user is not an end user; the connection between the two is users/connection.entity.ts.",
      from: { path: '^src/modules/wallet/' },
      to: { path: '^src/modules/users/' },
    },
    {
      name: 'wallet-depends-not-on-ledger',
      severity: 'error',
      comment:
        "One way: the ledger's holds and charges read a wallet connection's allowance (wallet/allowance.ts), never the reverse. What the wallet needs of the books (its account, crediting test funds, a charge's receipt) is in accounts/.",
      from: { path: '^src/modules/wallet/' },
      to: { path: '^src/modules/ledger/' },
    },
    {
      name: 'users-depends-not-on-ledger',
      severity: 'error',
      comment:
        'One way: the ledger charges, refunds and lists end users (it ensures them and names them in its records), never the reverse. What an end user needs of the books (its account, the trial credit) is in accounts/.',
      from: { path: '^src/modules/users/' },
      to: { path: '^src/modules/ledger/' },
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
