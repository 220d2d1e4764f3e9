import { startTestApp, type TestApp } from './helpers/app.js';

let t: TestApp;
let pw: { id: string; apiKey: string };

const FIELDS = 'key userId requests revenue providerCost margin promptTokens completionTokens';
const USAGE = `query($id: ID, $from: String!, $to: String!, $g: UsageGroupBy!, $limit: Int) {
  paywall(id: $id) { usage(from: $from, to: $to, groupBy: $g, limit: $limit) { from to groupBy totals { ${FIELDS} } buckets { ${FIELDS} } } }
}`;
const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

async function usage(
  token: string,
  from: string,
  to: string,
  g: string,
  extra: Record<string, unknown> = {},
) {
  const r = await t.gql(token, USAGE, { from, to, g, ...extra });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.paywall.usage;
}

/** A charge settled `daysAgo` days before now (UTC noon of that day, so the day is unambiguous). */
async function charge(
  user: string,
  daysAgo: number,
  amountRaw: number,
  model: string | null,
  pt = 0,
  ct = 0,
  status = 'completed',
) {
  await t.db.query(
    `insert into charge (id, paywall_id, user_id, kind, status, amount_raw, model, prompt_tokens, completion_tokens, created_at, settled_at)
     select gen_random_uuid(), $1, u.id, $2, $3, $4, $5, $6, $7, at, at
       from end_user u, (select date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - $8::int * interval '1 day' + interval '1 minute' as at) a
      where u.paywall_id = $1 and u.external_id = $9`,
    [
      pw.id,
      model ? 'usage' : 'manual',
      status,
      amountRaw,
      model,
      model ? pt : null,
      model ? ct : null,
      daysAgo,
      user,
    ],
  );
}

beforeAll(async () => {
  t = await startTestApp();
  pw = await t.createPaywall('DEFAULT', 'Usage');
  await t.gql(
    pw.apiKey,
    `mutation { setModelPricing(input: {modelId: "m1", prompt: "0.000002", completion: "0.000005"}) { id } }`,
  );
  await t.db.query(
    `insert into end_user (id, paywall_id, external_id) values (gen_random_uuid(), $1, 'ann'), (gen_random_uuid(), $1, 'bob')`,
    [pw.id],
  );
  await charge('ann', 10, 1_000_000, 'm1', 100, 50); // cost 100×2 + 50×5 = 450 raw
  await charge('ann', 3, 2_000_000, null); // manual
  await charge('bob', 3, 500_000, 'm1', 1000, 0); // cost 2000
  await charge('bob', 3, 9_999_999, 'm1', 10, 10, 'released'); // not counted
  await charge('bob', 0, 250_000, 'm1', 10, 10); // today: cost 70
}, 60_000);
afterAll(async () => {
  await t?.close();
});

describe('Paywall.usage', () => {
  it('by day: every day of the range, revenue, provider cost and margin, past days rolled up', async () => {
    const u = await usage(pw.apiKey, day(-12), day(0), 'DAY');
    expect(u.buckets).toHaveLength(13);
    expect(u.totals).toMatchObject({
      requests: 4,
      revenue: '3.750000',
      providerCost: '0.002520',
      margin: '3.747480',
      promptTokens: 1110,
      completionTokens: 60,
    });
    const byKey = Object.fromEntries(u.buckets.map((b: any) => [b.key, b]));
    expect(byKey[day(-10)]).toMatchObject({ requests: 1, revenue: '1.000000', providerCost: '0.000450' });
    expect(byKey[day(-3)]).toMatchObject({ requests: 2, revenue: '2.500000', providerCost: '0.002000' });
    expect(byKey[day(0)]).toMatchObject({ requests: 1, revenue: '0.250000', providerCost: '0.000070' });
    expect(byKey[day(-5)]).toMatchObject({ requests: 0, revenue: '0.000000' });
    const [rolled] = await t.db.query(
      `select rolled_through::text as d from usage_rollup where paywall_id = $1`,
      [pw.id],
    );
    expect([day(-1), day(-2)]).toContain(rolled.d); // day(-2) in the first 10 minutes of a UTC day
  });

  it('a day rolled up and today read raw add up the same after more charges arrive today', async () => {
    await charge('ann', 0, 100_000, 'm1', 1, 1);
    const u = await usage(pw.apiKey, day(-3), day(0), 'DAY');
    expect(u.totals).toMatchObject({ requests: 4, revenue: '2.850000' });
  });

  it('by model and by user (top users by revenue), ranges that cut the roll-ups', async () => {
    const m = await usage(pw.apiKey, day(-12), day(0), 'MODEL');
    expect(m.buckets.map((b: any) => [b.key, b.requests, b.revenue])).toEqual([
      ['', 1, '2.000000'],
      ['m1', 4, '1.850000'],
    ]);
    const all = await usage(pw.apiKey, day(-12), day(0), 'USER');
    expect(all.buckets.map((b: any) => [b.key, b.requests, b.revenue, b.providerCost])).toEqual([
      ['ann', 3, '3.100000', '0.000457'],
      ['bob', 2, '0.750000', '0.002070'],
    ]);
    expect(all.totals.revenue).toBe('3.850000');
    // From the day of ann's manual charge: her first charge is left out (running totals subtracted).
    const cut = await usage(pw.apiKey, day(-3), day(-1), 'USER', { limit: 1 });
    expect(cut.buckets.map((b: any) => [b.key, b.requests, b.revenue])).toEqual([['ann', 1, '2.000000']]);
    expect(cut.totals).toMatchObject({ requests: 2, revenue: '2.500000' });
  });

  it('refuses bad ranges with a message naming the argument', async () => {
    const bad = await t.gql(pw.apiKey, USAGE, { from: day(0), to: day(-1), g: 'DAY' });
    expect(bad.errors?.[0].message).toMatch(/to must not be before from/);
    const notDate = await t.gql(pw.apiKey, USAGE, { from: '2026-02-30', to: day(0), g: 'DAY' });
    expect(notDate.errors?.[0].message).toMatch(/from must be a date/);
    const long = await t.gql(pw.apiKey, USAGE, { from: day(-400), to: day(0), g: 'DAY' });
    expect(long.errors?.[0].message).toBe('at most 400 days per query');
    expect(long.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'to' });
    const year = await t.gql(pw.apiKey, USAGE, { from: day(-399), to: day(0), g: 'DAY' });
    expect(year.errors).toBeUndefined();
    expect(year.data.paywall.usage.buckets).toHaveLength(400);
  });

  it("an API key reads only its own paywall's usage; the owner reads any of theirs", async () => {
    const other = await t.createPaywall('DEFAULT', 'Other');
    const r = await t.gql(other.apiKey, USAGE, { id: pw.id, from: day(-1), to: day(0), g: 'DAY' });
    expect(r.errors?.[0].extensions?.code).toBe('NOT_FOUND');
    const owner = await t.gql(t.ownerToken, USAGE, { id: pw.id, from: day(-12), to: day(0), g: 'DAY' });
    expect(owner.data.paywall.usage.totals.requests).toBe(5);
  });

  it('SHARED on the built-in provider: provider cost is what the ledger paid the provider, not 0 (margin is not all revenue)', async () => {
    const shared = await t.createPaywall('SHARED', 'Shared usage');
    await t.db.query(
      `insert into end_user (id, paywall_id, external_id) values (gen_random_uuid(), $1, 'wu')`,
      [shared.id],
    );
    // One charge 3 days ago (rolled up) and one today (read raw); the built-in provider got 0.3 of each, the
    // model has no price of the paywall's own (its cost prices are the operator's).
    for (const daysAgo of [3, 0]) {
      const [c] = await t.db.query<{ id: string }>(
        `insert into charge (id, paywall_id, user_id, kind, status, amount_raw, model, prompt_tokens, completion_tokens, created_at, settled_at)
         select gen_random_uuid(), $1, u.id, 'usage', 'completed', 1000000, 'builtin-model', 100, 50, at, at
           from end_user u, (select date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' - $2::int * interval '1 day' + interval '1 minute' as at) a
          where u.paywall_id = $1 returning id`,
        [shared.id, daysAgo],
      );
      await t.db.query(
        `insert into transfer (id, kind, debit_account_id, credit_account_id, amount_raw, paywall_id, charge_id)
         select gen_random_uuid(), 'provider_cost', a.id, '00000000-0000-4000-8000-000000000002', 300000, $1, $2
           from ledger_account a where a.kind = 'earnings' and a.paywall_id = $1`,
        [shared.id, c.id],
      );
    }
    const u = await usage(shared.apiKey, day(-5), day(0), 'DAY');
    expect(u.totals).toMatchObject({
      requests: 2,
      revenue: '2.000000',
      providerCost: '0.600000',
      margin: '1.400000',
    });
    const byKey = Object.fromEntries(u.buckets.map((b: any) => [b.key, b]));
    expect(byKey[day(-3)]).toMatchObject({
      revenue: '1.000000',
      providerCost: '0.300000',
      margin: '0.700000',
    });
    expect(byKey[day(0)]).toMatchObject({
      revenue: '1.000000',
      providerCost: '0.300000',
      margin: '0.700000',
    });
    const m = await usage(shared.apiKey, day(-5), day(0), 'MODEL');
    expect(m.buckets.map((b: any) => [b.key, b.providerCost, b.margin])).toEqual([
      ['builtin-model', '0.600000', '1.400000'],
    ]);
    const users = await usage(shared.apiKey, day(-5), day(0), 'USER');
    expect(users.buckets.map((b: any) => [b.key, b.providerCost])).toEqual([['wu', '0.600000']]);
    const cut = await usage(shared.apiKey, day(-2), day(0), 'USER');
    expect(cut.buckets.map((b: any) => [b.key, b.providerCost])).toEqual([['wu', '0.300000']]);
  });

  it("one owner's burst of usage reads runs 2 at a time; another owner's reads and balances are served meanwhile", async () => {
    const svc = t.app.services.usage;
    const original = svc.rollUp;
    let running = 0;
    let peak = 0;
    const started: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    // Every read that gets its turn parks here until the test lets them all go.
    svc.rollUp = async function (this: typeof svc, paywallId: string) {
      running++;
      peak = Math.max(peak, running);
      started.push(paywallId);
      try {
        await gate;
        return await original.call(this, paywallId);
      } finally {
        running--;
      }
    };
    const waitFor = async (what: () => boolean) => {
      for (let i = 0; i < 500 && !what(); i++) await new Promise((r) => setTimeout(r, 10));
      expect(what()).toBe(true);
    };
    try {
      const burst = Array.from({ length: 12 }, () =>
        t.gql(t.ownerToken, USAGE, { id: pw.id, from: day(-12), to: day(0), g: 'DAY' }),
      );
      await waitFor(() => running === 2);
      // Another owner: its usage read gets its own turn, its end users' balances answer at once.
      const other = await t.app.services.owners.create('another tenant');
      const theirs = await t.gql(
        other.createdToken,
        `mutation { createPaywall(input: {name: "B", mode: DEFAULT}) { apiKey paywall { id } } }`,
      );
      const b = theirs.data.createPaywall;
      const dep = await t.rest('POST', '/v1/user/balance/deposit', {
        token: b.apiKey,
        body: { user: 'carol', amount: '1.25' },
      });
      expect(dep.status).toBe(200);
      const theirUsage = t.gql(other.createdToken, USAGE, {
        id: b.paywall.id,
        from: day(-1),
        to: day(0),
        g: 'DAY',
      });
      await waitFor(() => started.includes(b.paywall.id));
      for (let i = 0; i < 5; i++) {
        const bal = await t.rest('GET', '/v1/user/balance?user=carol', { token: b.apiKey });
        expect(bal.status).toBe(200);
        expect(bal.body).toMatchObject({ balance: '1250000', balanceFormatted: '1.250000' });
      }
      expect(started.filter((id) => id === pw.id)).toHaveLength(2); // the other 10 still wait
      open();
      const answers = await Promise.all(burst);
      for (const r of answers) {
        expect(r.errors).toBeUndefined();
        expect(r.data.paywall.usage.totals.requests).toBe(5);
      }
      expect((await theirUsage).data.paywall.usage.totals.requests).toBe(0);
      expect(peak).toBe(3); // 2 of the first owner + 1 of the other, never more
      expect(started).toHaveLength(13);
    } finally {
      open();
      svc.rollUp = original;
    }
  });
});
