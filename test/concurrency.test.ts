import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, userAccount, userTransfers } from './helpers/ledger.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { chargesOf, client, createProxyPaywall, deposit, MODEL, money } from './helpers/proxy-setup.js';

/**
 * Money under concurrency. On PostgreSQL the requests really race (a pool of connections); on the
 * embedded PGlite they are serialised, and the same answers must come out.
 */
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const count = async (sql: string, params: unknown[]) =>
  Number((await t.db.query<{ n: string }>(sql, params))[0].n);

describe('no double spend', () => {
  it('50 concurrent charges of 0.03 against 1.00: exactly 33 succeed, 0.01 remains, ledger = balance', async () => {
    const pw = await t.createPaywall();
    const dep = await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'racer', amount: '1.00' },
    });
    expect(dep.body).toEqual({ balance: '1000000', balanceFormatted: '1.000000' });

    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        t.rest('POST', '/v1/user/charge', {
          token: pw.apiKey,
          body: { user: 'racer', amount: '0.03', metadata: { run: i } },
        }),
      ),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const ok = answers.filter((a) => a.body.success === true);
    const refused = answers.filter((a) => a.body.success === false);
    expect(ok).toHaveLength(33);
    expect(refused).toHaveLength(17);
    for (const r of refused) {
      expect(r.body.message).toMatch(/^Insufficient balance: 0\.01 USDC available, 0\.03 USDC requested/);
      expect(r.body.url).toBe(`${t.url}/topup/${pw.id}?user=racer`);
    }

    const bal = await t.rest('GET', '/v1/user/balance?user=racer', { token: pw.apiKey });
    expect(bal.body).toEqual({ balance: '10000', balanceFormatted: '0.010000' });
    const racer = (await userAccount(t.db, pw.id, 'racer'))!;
    const entries = await userTransfers(t.db, racer.id);
    expect({
      balance: racer.balance,
      ledger: entries.reduce((sum, e) => sum + BigInt(e.amount), 0n).toString(),
      entries: entries.length,
    }).toEqual({ balance: '10000', ledger: '10000', entries: 34 });
    await expectLedgerProven(t.db);
    const ev = (type: string) =>
      count(`select count(*)::text as n from event where paywall_id = $1 and type = $2`, [pw.id, type]);
    expect(await ev('paywall.balance.charge.created')).toBe(33);
    expect(await ev('paywall.balance.charge.completed')).toBe(33);
    expect(await ev('paywall.balance.charge.failed')).toBe(17);
    expect(await ev('paywall.balance.depleted')).toBe(17);
    const charges = await t.db.query<any>(
      `select status, count(*)::int as n from charge where paywall_id = $1 group by status order by status`,
      [pw.id],
    );
    expect(charges).toEqual([
      { status: 'completed', n: 33 },
      { status: 'failed', n: 17 },
    ]);
  });

  it('concurrent charges over GraphQL and REST together never overdraw either', async () => {
    const pw = await t.createPaywall();
    await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'mix', amount: '0.1' },
    });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        i % 2
          ? t.rest('POST', '/v1/user/charge', { token: pw.apiKey, body: { user: 'mix', amount: '0.01' } })
          : t
              .gql(pw.apiKey, `mutation { charge(input: {user: "mix", amount: "0.01"}) { success } }`)
              .then((r) => ({ status: r.status, body: r.data.charge })),
      ),
    );
    expect(answers.filter((a) => a.body.success === true)).toHaveLength(10);
    expect((await userAccount(t.db, pw.id, 'mix'))!.balance).toBe('0');
    await expectLedgerProven(t.db);
  });
});

describe('one Idempotency-Key, many concurrent requests', () => {
  it('20 concurrent deposits with one key apply once; every answer is the replay (200) or 409', async () => {
    const pw = await t.createPaywall();
    const send = (amount = '2.5') =>
      t.rest('POST', '/v1/user/balance/deposit', {
        token: pw.apiKey,
        body: { user: 'idem', amount, metadata: { signup: 'abc' } },
        headers: { 'Idempotency-Key': 'signup-abc' },
      });
    const answers = await Promise.all(Array.from({ length: 20 }, () => send()));
    const first = answers.find((a) => a.status === 200 && a.headers.get('idempotent-replayed') === null);
    expect(first?.body).toEqual({ balance: '2500000', balanceFormatted: '2.500000' });
    for (const a of answers) {
      expect([200, 409]).toContain(a.status);
      if (a.status === 200) expect(a.body).toEqual(first!.body);
      else
        expect(a.body.error).toMatchObject({
          type: 'idempotency_error',
          code: 'idempotency_in_flight',
          param: 'Idempotency-Key',
        });
    }
    expect(
      answers.filter((a) => a.status === 200 && a.headers.get('idempotent-replayed') === null),
    ).toHaveLength(1);
    const replayed = answers.filter((a) => a.headers.get('idempotent-replayed') === 'true');
    expect(replayed.every((a) => a.status === 200)).toBe(true);

    expect(
      await count(
        `select count(*)::text as n from transfer x join end_user u on u.id = x.end_user_id
          where u.paywall_id = $1 and u.external_id = 'idem'`,
        [pw.id],
      ),
    ).toBe(1);
    expect(
      await count(`select count(*)::text as n from event where paywall_id = $1 and type = $2`, [
        pw.id,
        'paywall.balance.deposit.created',
      ]),
    ).toBe(1);

    const later = await send();
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBe('true');
    expect(later.body).toEqual(first!.body);

    const other = await send('3');
    expect(other.status).toBe(422);
    expect(other.body.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_reused' });
    const bal = await t.rest('GET', '/v1/user/balance', {
      token: pw.apiKey,
      headers: { 'X-Paywall-User': 'idem' },
    });
    expect(bal.body.balance).toBe('2500000');
    await expectLedgerProven(t.db);
  });

  it('10 concurrent charges with one key take the money once', async () => {
    const pw = await t.createPaywall();
    await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'c', amount: '1' } });
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.rest('POST', '/v1/user/charge', {
          token: pw.apiKey,
          body: { user: 'c', amount: '0.4' },
          headers: { 'Idempotency-Key': 'run-7' },
        }),
      ),
    );
    for (const a of answers) {
      expect([200, 409]).toContain(a.status);
      if (a.status === 200)
        expect(a.body).toEqual({
          success: true,
          message: 'Charged 0.4 USDC.',
          chargeId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        });
    }
    // Every replay names the one charge.
    expect(new Set(answers.filter((a) => a.status === 200).map((a) => a.body.chargeId)).size).toBe(1);
    expect((await userAccount(t.db, pw.id, 'c'))!.balance).toBe('600000');
    await expectLedgerProven(t.db);
    expect(await count(`select count(*)::text as n from charge where paywall_id = $1`, [pw.id])).toBe(1);
  });
});

describe('one hot end user (DEFAULT mode): many chats at once on one balance', () => {
  const usdc = (raw: bigint) => `${raw / 1_000_000n}.${(raw % 1_000_000n).toString().padStart(6, '0')}`;

  it('100 concurrent chats whose holds exactly exhaust the balance: exactly 10 held and charged, never overspent, counters exact', async () => {
    const fake = await FakeUpstream.start();
    try {
      const pw = await createProxyPaywall(t, fake);
      const ask = (user: string) =>
        client(t, pw, user)
          .chat.completions.create({
            model: MODEL,
            max_tokens: 20,
            messages: [{ role: 'user', content: 'hi' }],
          })
          .then((r: any) => (r.paywall ? 'blocked' : 'ok'));
      // The hold (at its full cap of 20 tokens) and the cost of one such request, measured on another user.
      await deposit(t, pw, 'probe', '1');
      expect(await ask('probe')).toBe('ok');
      const [probe] = await chargesOf(t, pw, 'probe');
      const hold = BigInt(probe.hold);
      const cost = BigInt(probe.amount);
      expect(probe.max_completion_tokens).toBe(20);
      expect(cost < hold).toBe(true);
      await deposit(t, pw, 'hot', usdc(10n * hold));
      // Every hold is decided before the first settlement gives anything back.
      fake.behavior = { delayMs: 1500 };
      const results = await Promise.all(Array.from({ length: 100 }, () => ask('hot')));
      fake.behavior = {};
      expect(results.filter((r) => r === 'ok')).toHaveLength(10);
      const left = 10n * hold - 10n * cost;
      expect(await money(t, pw, 'hot')).toEqual({ balance: left, held: 0n, ledgerSum: left });
      const charges = await chargesOf(t, pw, 'hot');
      const completed = charges.filter((c) => c.status === 'completed');
      expect(completed).toHaveLength(10);
      for (const c of completed) expect(c).toMatchObject({ hold: hold.toString(), amount: cost.toString() });
      expect(charges.filter((c) => c.status === 'held')).toHaveLength(0);
      const [counter] = await t.db.query<any>(
        `select x.requests, x.spend_raw::text as spend, x.model_requests
           from usage_counter x join end_user u on u.id = x.end_user_id
          where u.paywall_id = $1 and u.external_id = 'hot'`,
        [pw.id],
      );
      expect(counter).toMatchObject({ requests: 10, spend: (10n * cost).toString() });
      expect(counter.model_requests[MODEL] ?? JSON.parse(counter.model_requests)[MODEL]).toBe(10);
      await expectLedgerProven(t.db);
    } finally {
      await fake.close();
    }
  });
});
