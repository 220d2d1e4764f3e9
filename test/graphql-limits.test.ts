import { jest } from '@jest/globals';
import { getIntrospectionQuery } from 'graphql';
import { startTestApp, type TestApp } from './helpers/app.js';

let t: TestApp;
let key: string;
beforeAll(async () => {
  t = await startTestApp();
  key = (await t.createPaywall()).apiKey;
});
afterAll(async () => {
  await t.close();
});

/** The armor limits of POST /graphql: each one a 400 with a GraphQL error body, never a 500. */
describe('GraphQL query limits over HTTP', () => {
  const cases: Array<[string, string, RegExp]> = [
    [
      'tokens',
      `{ ${Array.from({ length: 2100 }, () => '__typename').join(' ')} paywall { id name } }`,
      /Document contains more th\w+ 2000 tokens/,
    ],
    [
      'depth',
      `{ paywall { ${'... on Paywall { '.repeat(12)} id ${'} '.repeat(12)} } }`,
      /Query depth limit of 10 exceeded/,
    ],
    [
      'aliases',
      `{ ${Array.from({ length: 16 }, (_, i) => `a${i}: paywall { id }`).join(' ')} }`,
      /Aliases limit of 15 exceeded/,
    ],
    [
      'directives',
      `{ ${Array.from({ length: 21 }, () => '__typename @include(if: true)').join(' ')} }`,
      /Directives limit of 20 exceeded/,
    ],
  ];

  it.each(cases)(
    'over the %s limit: 400 with the limit in errors[0].message',
    async (_name, query, message) => {
      for (const token of [key, null]) {
        const r = await t.gql(token, query);
        expect(r.status).toBe(400);
        expect(r.errors?.[0]?.message).toMatch(message);
        expect(r.data).toBeUndefined();
      }
    },
  );

  it('a query within the limits still works', async () => {
    const r = await t.gql(
      key,
      `{ ${Array.from({ length: 15 }, (_, i) => `a${i}: paywall { id }`).join(' ')} }`,
    );
    expect(r.status).toBe(200);
    expect(r.errors).toBeUndefined();
  });

  it('a full page (first: 100) of ledger entries with every field is within the cost limit', async () => {
    const pw = await t.createPaywall();
    await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'page', amount: '1' },
    });
    const r = await t.gql(
      pw.apiKey,
      `{ user(externalId: "page") { id externalId balance held ledgerEntries(first: 100) {
         edges { cursor node { id kind amount amountRaw balanceAfter chargeId metadata createdAt refundable refunded } }
         pageInfo { hasNextPage endCursor } } } }`,
    );
    // Before, graphql-armor's generic estimate refused it ("Query Cost limit of 5000 exceeded, found 7958").
    expect(r.errors).toBeUndefined();
    expect(r.data.user.ledgerEntries.edges.map((e: any) => e.node.amountRaw)).toEqual(['1000000']);
  });
});

describe('introspection', () => {
  const INTROSPECTION = getIntrospectionQuery();

  it('needs a credential: without one (or with an unknown one) it is a 401 UNAUTHENTICATED', async () => {
    for (const token of [null, 'not-a-key']) {
      for (const query of [INTROSPECTION, `{ __type(name: "Paywall") { name } }`]) {
        const r = await t.gql(token, query);
        expect(r.status).toBe(401);
        expect(r.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
        expect(r.errors?.[0]?.message).toMatch(/introspection needs an owner token or a paywall API key/);
        expect(r.data).toBeUndefined();
      }
    }
  });

  it('works with an API key or an owner token (the standard introspection query of GraphiQL and codegen)', async () => {
    for (const token of [key, t.ownerToken]) {
      const r = await t.gql(token, INTROSPECTION);
      expect(r.status).toBe(200);
      expect(r.errors).toBeUndefined();
      expect(r.data.__schema.queryType.name).toBe('Query');
      expect(r.data.__schema.subscriptionType.name).toBe('Subscription');
    }
  });

  it('__typename is not introspection: it needs no credential', async () => {
    const r = await t.gql(null, `{ __typename }`);
    expect(r.status).toBe(200);
    expect(r.data).toEqual({ __typename: 'Query' });
  });

  it('is depth-limited: deeper than the standard query is refused with a 400', async () => {
    const ofTypes = `${'ofType { '.repeat(20)} name ${'} '.repeat(20)}`;
    const deep = await t.gql(key, `{ __schema { types { ${ofTypes} } } }`);
    expect(deep.status).toBe(400);
    expect(deep.errors?.[0]?.message).toMatch(/Introspection depth limit of 15 exceeded/);
    expect(deep.data).toBeUndefined();
    // The same through __type (counted by the ordinary depth limit).
    const viaType = await t.gql(key, `{ __type(name: "Paywall") { ${ofTypes} } }`);
    expect(viaType.status).toBe(400);
    expect(viaType.errors?.map((e) => e.message)).toContainEqual(
      expect.stringMatching(/Query depth limit of 10 exceeded/),
    );
    // graphql-js's own rule refuses the cyclic fields → type → fields chains.
    const cyclic = await t.gql(
      key,
      `{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }`,
    );
    expect(cyclic.status).toBe(400);
    expect(cyclic.errors?.[0]?.message).toMatch(/Maximum introspection depth exceeded/);
  });
});

/**
 * The fan-out cost: a field under a list counts once per item the list may hold, and `usage` once per day.
 * `{ paywalls { usage(a long range) } }` would run one aggregate per paywall per request: refused before
 * anything reads the database.
 */
describe('query cost counts list fan-out', () => {
  const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
  const FANOUT = `query($from: String!, $to: String!) {
    paywalls { id name usage(from: $from, to: $to, groupBy: DAY) { totals { revenue } buckets { key revenue margin } } }
  }`;

  it('refuses paywalls × usage(DAY, a year) with COST_LIMIT_EXCEEDED before any resolver runs', async () => {
    const list = jest.spyOn(t.app.services.paywalls, 'list');
    const usage = jest.spyOn(t.app.services.usage, 'usage');
    const query = jest.spyOn(t.db, 'query');
    try {
      const r = await t.gql(t.ownerToken, FANOUT, { from: day(-364), to: day(0) });
      expect(r.status).toBe(400);
      expect(r.data).toBeUndefined();
      expect(r.errors).toHaveLength(1);
      // 1 + 50 paywalls × (id 1 + name 1 + usage 365 days + totals 2 + buckets (1 + 365 × 3)).
      expect(r.errors![0].extensions).toEqual({ code: 'COST_LIMIT_EXCEEDED', cost: 73_251, maxCost: 10_000 });
      expect(r.errors![0].message).toMatch(/^Query cost 73251 exceeds the limit of 10000: /);
      expect(list).not.toHaveBeenCalled();
      expect(usage).not.toHaveBeenCalled();
      expect(query).not.toHaveBeenCalled();
    } finally {
      list.mockRestore();
      usage.mockRestore();
      query.mockRestore();
    }
  });

  it('counts `first` (literal or variable), nested connections, fragments and the usage range', async () => {
    const cost = async (q: string, variables?: Record<string, unknown>) => {
      const r = await t.gql(t.ownerToken, q, variables);
      if (!r.errors) return 'ok';
      expect(r.errors[0].extensions.code).toBe('COST_LIMIT_EXCEEDED');
      return r.errors[0].extensions.cost;
    };
    // paywalls(first: 100) × connections(first: 100) × edges { node { id } }, edges counted once at the
    // connection: 1 + 100 × (1 + 100 × (edges 1 + node 1 + id 1)) = 30101.
    expect(
      await cost(
        `query($a: Int!, $b: Int!) { paywalls(first: $a) { connections(first: $b) { edges { node { id } } } } }`,
        { a: 100, b: 100 },
      ),
    ).toBe(30_101);
    expect(
      await cost(
        `query($n: Int!) { paywalls(first: $n) { ...P } } fragment P on Paywall { usage(from: "${day(-364)}", to: "${day(0)}", groupBy: MODEL, limit: 1000) { buckets { key } } }`,
        { n: 10 },
      ),
    ).toBe(1 + 10 * (365 + 1 + 1000 * 1));
    // Within the limit: it runs.
    const ok = await t.gql(t.ownerToken, FANOUT.replace('paywalls {', 'paywalls(first: 5) {'), {
      from: day(-29),
      to: day(0),
    });
    expect(ok.status).toBe(200);
    expect(ok.errors).toBeUndefined();
    expect(ok.data.paywalls[0].usage.buckets).toHaveLength(30);
  });
});
