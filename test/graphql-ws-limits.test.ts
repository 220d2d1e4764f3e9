import { startTestApp, type TestApp } from './helpers/app.js';
import { liveClient, LiveSubscription } from './helpers/live-client.js';

let t: TestApp;
let key: string;
beforeAll(async () => {
  t = await startTestApp();
  key = (await t.createPaywall()).apiKey;
});
afterAll(async () => {
  await t.close();
});

describe('graphql-ws carries subscriptions only, under the same limits as HTTP', () => {
  it('refuses a query or a mutation over the socket (they belong to POST /graphql)', async () => {
    const client = liveClient(t.url, key);
    try {
      const q = new LiveSubscription(client, {}, `query { paywall { id name } }`);
      expect((await q.untilError()).message).toMatch(/subscriptions only/);
      const m = new LiveSubscription(client, {}, `mutation { rotatePaywallSecret { apiKey } }`);
      expect((await m.untilError()).message).toMatch(/subscriptions only/);
    } finally {
      await client.dispose();
    }
    // The refused mutation did not run: the key still works and no rotation was recorded.
    expect((await t.gql(key, `{ paywall { id } }`)).status).toBe(200);
    const rotated = await t.db.query(`select 1 from event where type = 'paywall.secret.rotated'`);
    expect(rotated).toHaveLength(0);
  });

  it('applies the depth limit to subscriptions too', async () => {
    const client = liveClient(t.url, key);
    try {
      // Aliases and fragments cannot add depth to this flat type, so nest through an inline fragment chain.
      const deep = `subscription { paywallEvents { ${'... on PaywallEvent { '.repeat(12)} id ${'} '.repeat(12)} } }`;
      const s = new LiveSubscription(client, {}, deep);
      const err = await s.untilError();
      expect(err.message).toMatch(/Query depth limit of 10 exceeded/);
    } finally {
      await client.dispose();
    }
  });
});
