/**
 * DataLoader batching of a paywall's lists: `paywalls { userKeys connections withdrawals earningsHistory }`
 * reads each list in one statement for all the paywalls of the page, not one statement per paywall (an
 * owner's page of 50 paywalls was 200 statements for these four fields).
 */
import { startTestApp, type TestApp } from './helpers/app.js';

let t: TestApp;
/** Statements the service sent through Database.query while `counting` is set. */
let statements: string[] = [];
let counting = false;

beforeAll(async () => {
  t = await startTestApp();
  const query = t.db.query.bind(t.db);
  t.db.query = ((text: string, params?: unknown[], name?: string) => {
    if (counting) statements.push(text);
    return query(text, params, name);
  }) as typeof t.db.query;
});
afterAll(async () => {
  await t?.close();
});

const LISTS = `{
  paywalls(first: 20) {
    id
    userKeys { id externalUserId }
    connections(first: 5) { edges { node { id } } }
    withdrawals(first: 5) { edges { node { id } } }
    earningsHistory(first: 5) { edges { node { id kind amount } } }
  }
}`;

async function measured(): Promise<{ data: any; count: number }> {
  statements = [];
  counting = true;
  try {
    const r = await t.gql(t.ownerToken, LISTS);
    expect(r.errors).toBeUndefined();
    return { data: r.data, count: statements.length };
  } finally {
    counting = false;
  }
}

async function paywallWithKey(n: number) {
  const pw = await t.createPaywall('DEFAULT', `batch-${n}`);
  const k = await t.gql(
    pw.apiKey,
    `mutation($u: String!) { createUserKey(input: { externalUserId: $u }) { userKey { id } } }`,
    { u: `user-of-${n}` },
  );
  expect(k.errors).toBeUndefined();
  const d = await t.gql(
    pw.apiKey,
    `mutation($u: String!) { deposit(input: { user: $u, amount: "1" }) { balance } }`,
    {
      u: `user-of-${n}`,
    },
  );
  expect(d.errors).toBeUndefined();
  const c = await t.gql(
    pw.apiKey,
    `mutation($u: String!) { charge(input: { user: $u, amount: "0.25" }) { success } }`,
    {
      u: `user-of-${n}`,
    },
  );
  expect(c.data.charge.success).toBe(true);
  return pw;
}

describe('paywalls { … lists … } are batched (no N+1)', () => {
  it('issues as many statements for 8 paywalls as for 2, and gives each paywall its own items', async () => {
    const made = [await paywallWithKey(0), await paywallWithKey(1)];
    const two = await measured();
    for (let n = 2; n < 8; n++) made.push(await paywallWithKey(n));
    const eight = await measured();
    expect(eight.data.paywalls).toHaveLength(8);
    expect(eight.count).toBe(two.count);
    expect(eight.count).toBeLessThanOrEqual(8);

    // Each paywall's lists are its own, not a neighbour's (the batch splits rows by paywall correctly).
    for (const [n, pw] of made.entries()) {
      const p = eight.data.paywalls.find((x: any) => x.id === pw.id);
      expect(p.userKeys.map((k: any) => k.externalUserId)).toEqual([`user-of-${n}`]);
      expect(p.connections.edges).toEqual([]);
      expect(p.withdrawals.edges).toEqual([]);
      expect(p.earningsHistory.edges.map((e: any) => e.node.amount)).toEqual(['0.250000']);
    }
  });

  it('keeps each page’s own arguments within a batch; a bad cursor is BAD_USER_INPUT, never an internal error', async () => {
    const pw = await paywallWithKey(100);
    for (const u of ['a', 'b'])
      await t.gql(
        pw.apiKey,
        `mutation($u: String!) { createUserKey(input: { externalUserId: $u }) { key } }`,
        { u },
      );
    const r = await t.gql(
      t.ownerToken,
      `{ paywalls(first: 20) { id
          a: userKeys(externalUserId: "a") { externalUserId }
          all: userKeys { externalUserId }
          one: earningsHistory(first: 1) { edges { cursor } pageInfo { hasNextPage } } } }`,
    );
    expect(r.errors).toBeUndefined();
    const p = r.data.paywalls.find((x: any) => x.id === pw.id);
    expect(p.a).toEqual([{ externalUserId: 'a' }]);
    expect(p.all.map((k: any) => k.externalUserId)).toEqual(['b', 'a', 'user-of-100']);
    expect(p.one.pageInfo.hasNextPage).toBe(false);
    for (const field of ['connections', 'withdrawals', 'earningsHistory']) {
      const bad = await t.gql(
        t.ownerToken,
        `{ paywalls { ${field}(first: 1, after: "garbage") { pageInfo { hasNextPage } } } }`,
      );
      expect(bad.errors?.map((e: any) => [e.extensions.code, e.extensions.param])).toContainEqual([
        'BAD_USER_INPUT',
        'after',
      ]);
    }
  });
});
