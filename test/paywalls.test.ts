import { startTestApp, type TestApp } from './helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const PAYWALL_FIELDS = 'id name mode markup topupUrl trialCredits apiKeyLastFour archivedAt';

describe('paywalls and API keys', () => {
  it('creates a paywall with a prefixed key shown once, stored only as a hash', async () => {
    const r = await t.gql(
      t.ownerToken,
      `mutation { createPaywall(input: {name: "Shop", mode: DEFAULT}) { apiKey paywall { ${PAYWALL_FIELDS} } } }`,
    );
    expect(r.errors).toBeUndefined();
    const { apiKey, paywall } = r.data.createPaywall;
    expect(apiKey).toMatch(/^pk_live_[A-Za-z0-9_-]{40,}$/);
    expect(paywall).toMatchObject({
      name: 'Shop',
      mode: 'DEFAULT',
      markup: '1',
      trialCredits: '0.000000',
      apiKeyLastFour: apiKey.slice(-4),
      archivedAt: null,
    });
    const rows = await t.db.query<{ api_key_hash: string }>(
      'select api_key_hash from paywall where id = $1',
      [paywall.id],
    );
    expect(rows[0].api_key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(rows)).not.toContain(apiKey);
    // Creation emits no event (spec: "Paywall creation emits no event").
    const events = await t.db.query('select type from event where paywall_id = $1', [paywall.id]);
    expect(events).toHaveLength(0);
  });

  it('rejects bad input with a clear error and creates nothing', async () => {
    const before = await t.db.query<{ n: string }>('select count(*)::text as n from paywall');
    const r = await t.gql(
      t.ownerToken,
      `mutation { createPaywall(input: {name: "  ", mode: SHARED}) { apiKey } }`,
    );
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'name' });
    const bad = await t.gql(
      t.ownerToken,
      `mutation { createPaywall(input: {name: "x", mode: OTHER}) { apiKey } }`,
    );
    expect(bad.errors?.[0].message).toMatch(/OTHER/);
    const after = await t.db.query<{ n: string }>('select count(*)::text as n from paywall');
    expect(after[0].n).toBe(before[0].n);
  });

  it('needs an owner token to create; an API key or nothing is refused', async () => {
    const pw = await t.createPaywall();
    const withKey = await t.gql(
      pw.apiKey,
      `mutation { createPaywall(input: {name: "x", mode: DEFAULT}) { apiKey } }`,
    );
    expect(withKey.errors?.[0].extensions.code).toBe('FORBIDDEN');
    const anon = await t.gql(
      null,
      `mutation { createPaywall(input: {name: "x", mode: DEFAULT}) { apiKey } }`,
    );
    expect(anon.status).toBe(401);
    expect(anon.errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
    const wrong = await t.gql('ot_not_a_real_token_000000000', `{ paywalls { id } }`);
    expect(wrong.status).toBe(401);
  });

  it('updates settings, records paywall.updated with the changed fields, and validates each field', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Before');
    const r = await t.gql(
      pw.apiKey,
      `mutation { updatePaywall(input: {name: "After", markup: "1.5", topupUrl: "https://pay.example/top", trialCredits: "0.25", topupMessageTemplate: "Top up: {url}"}) { ${PAYWALL_FIELDS} topupMessageTemplate } }`,
    );
    expect(r.errors).toBeUndefined();
    expect(r.data.updatePaywall).toMatchObject({
      name: 'After',
      markup: '1.5',
      topupUrl: 'https://pay.example/top',
      trialCredits: '0.250000',
      topupMessageTemplate: 'Top up: {url}',
    });
    const ev = await t.db.query<any>(
      `select * from event where paywall_id = $1 and type = 'paywall.updated'`,
      [pw.id],
    );
    expect(ev).toHaveLength(1);
    expect(ev[0].version).toBe('1.0');
    expect(ev[0].data.changedFields).toEqual([
      'name',
      'markup',
      'topupUrl',
      'trialCredits',
      'topupMessageTemplate',
    ]);
    expect(ev[0].data).toMatchObject({
      paywallId: pw.id,
      summarySections: expect.arrayContaining(['general', 'pricing', 'billing', 'messages']),
    });
    expect(ev[0].trigger).toEqual({ source: 'api', actorType: 'api_key', actorId: pw.id });
    expect(ev[0].subject).toEqual({ type: 'paywall', id: pw.id, externalId: null });

    for (const [input, param] of [
      ['markup: "0"', 'markup'],
      ['markup: "-1"', 'markup'],
      ['markup: "1e3"', 'markup'],
      ['topupUrl: "ftp://x"', 'topupUrl'],
      ['trialCredits: "abc"', 'trialCredits'],
      ['connectMessageTemplate: "no link here"', 'connectMessageTemplate'],
      ['name: ""', 'name'],
    ]) {
      const bad = await t.gql(pw.apiKey, `mutation { updatePaywall(input: {${input}}) { id } }`);
      expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param });
    }
    const count = await t.db.query(`select 1 from event where paywall_id = $1 and type = 'paywall.updated'`, [
      pw.id,
    ]);
    expect(count).toHaveLength(1);
  });

  it('refuses a top-up URL on a SHARED paywall (unsupported_in_mode)', async () => {
    const pw = await t.createPaywall('SHARED');
    const r = await t.gql(
      pw.apiKey,
      `mutation { updatePaywall(input: {topupUrl: "https://x.example"}) { id } }`,
    );
    expect(r.errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      errorCode: 'unsupported_in_mode',
    });
  });

  it('rotates the key: the old key is rejected at once, the new one works, an event is recorded', async () => {
    const pw = await t.createPaywall();
    const r = await t.gql(
      pw.apiKey,
      `mutation { rotatePaywallSecret { apiKey paywall { id apiKeyLastFour } } }`,
    );
    expect(r.errors).toBeUndefined();
    const newKey = r.data.rotatePaywallSecret.apiKey;
    expect(newKey).not.toBe(pw.apiKey);
    const old = await t.rest('GET', '/v1/user/balance?user=u1', { token: pw.apiKey });
    expect(old.status).toBe(401);
    expect(old.body.error.type).toBe('authentication_error');
    const oldGql = await t.gql(pw.apiKey, `{ paywall { id } }`);
    expect(oldGql.status).toBe(401);
    const fresh = await t.gql(newKey, `{ paywall { id apiKeyLastFour } }`);
    expect(fresh.data.paywall).toEqual({ id: pw.id, apiKeyLastFour: newKey.slice(-4) });
    const ev = await t.db.query<any>(
      `select data from event where paywall_id = $1 and type = 'paywall.secret.rotated'`,
      [pw.id],
    );
    expect(ev[0].data).toEqual({
      paywallId: pw.id,
      ownerUserId: expect.any(String),
      secretLastFour: newKey.slice(-4),
      actorId: pw.id,
      actorType: 'api_key',
    });
  });

  it('archives: the key stops working, the owner still sees it with includeArchived, event recorded', async () => {
    const pw = await t.createPaywall('DEFAULT', 'To archive');
    const r = await t.gql(
      t.ownerToken,
      `mutation($id: ID) { archivePaywall(paywallId: $id, reason: "closing shop") { archivedAt } }`,
      { id: pw.id },
    );
    expect(r.data.archivePaywall.archivedAt).toMatch(/^\d{4}-/);
    expect((await t.gql(pw.apiKey, `{ paywall { id } }`)).status).toBe(401);
    const active = await t.gql(t.ownerToken, `{ paywalls { id } }`);
    expect(active.data.paywalls.map((p: any) => p.id)).not.toContain(pw.id);
    const all = await t.gql(t.ownerToken, `{ paywalls(includeArchived: true) { id } }`);
    expect(all.data.paywalls.map((p: any) => p.id)).toContain(pw.id);
    const ev = await t.db.query<any>(
      `select data from event where paywall_id = $1 and type = 'paywall.archived'`,
      [pw.id],
    );
    expect(ev[0].data).toMatchObject({ paywallId: pw.id, reason: 'closing shop' });
  });

  it("never shows another owner's or another key's paywall", async () => {
    const mine = await t.createPaywall();
    const other = await t.app.services.owners.create('someone else');
    const theirs = await t.gql(
      other.createdToken,
      `mutation { createPaywall(input: {name: "Theirs", mode: DEFAULT}) { apiKey paywall { id } } }`,
    );
    const theirId = theirs.data.createPaywall.paywall.id;
    const list = await t.gql(t.ownerToken, `{ paywalls { id } }`);
    expect(list.data.paywalls.map((p: any) => p.id)).not.toContain(theirId);
    const byId = await t.gql(t.ownerToken, `query($id: ID) { paywall(id: $id) { id } }`, { id: theirId });
    expect(byId.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const upd = await t.gql(
      t.ownerToken,
      `mutation($id: ID) { updatePaywall(input: {paywallId: $id, name: "pwned"}) { id } }`,
      { id: theirId },
    );
    expect(upd.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const viaKey = await t.gql(mine.apiKey, `query($id: ID) { paywall(id: $id) { id } }`, { id: theirId });
    expect(viaKey.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const keyList = await t.gql(mine.apiKey, `{ paywalls { id } }`);
    expect(keyList.data.paywalls).toEqual([{ id: mine.id }]);
  });

  it('pages `paywalls` (first/after, oldest first) and bounds paywalls per owner (paywall_limit_reached)', async () => {
    const owner = await t.app.services.owners.create('many paywalls');
    const { createdToken: token, ownerId } = owner;
    const created: string[] = [];
    for (let i = 0; i < 99; i++)
      created.push((await t.app.services.paywalls.create(ownerId, `P${i}`, 'DEFAULT')).paywall.id);
    // MAX_PAYWALLS_PER_OWNER (default 100): of five concurrent creates at 99, exactly one gets the last place.
    const racing = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        t.gql(
          token,
          `mutation { createPaywall(input: {name: "Race ${i}", mode: DEFAULT}) { paywall { id } } }`,
        ),
      ),
    );
    const won = racing.filter((r) => !r.errors);
    const lost = racing.filter((r) => r.errors);
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(4);
    for (const r of lost) {
      expect(r.errors![0].extensions).toMatchObject({
        code: 'BAD_USER_INPUT',
        errorCode: 'paywall_limit_reached',
      });
      expect(r.errors![0].message).toMatch(
        /already has 100 paywalls, the most allowed \(MAX_PAYWALLS_PER_OWNER is 100\)/,
      );
    }
    created.push(won[0].data.createPaywall.paywall.id);
    const [{ n }] = await t.db.query<{ n: number }>(
      `select count(*)::int as n from paywall where owner_id = $1`,
      [ownerId],
    );
    expect(n).toBe(100);
    // Archiving one frees its place.
    await t.gql(token, `mutation($id: ID) { archivePaywall(paywallId: $id) { id } }`, { id: created[0] });
    const again = await t.gql(
      token,
      `mutation { createPaywall(input: {name: "After archive", mode: DEFAULT}) { paywall { id } } }`,
    );
    expect(again.errors).toBeUndefined();
    created.push(again.data.createPaywall.paywall.id);

    // Pages of 40 with archived ones: 101 paywalls → 40 + 40 + 21, in creation order, each once.
    const PAGE = `query($after: String) { paywalls(includeArchived: true, first: 40, after: $after) { id cursor } }`;
    const seen: string[] = [];
    let after: string | null = null;
    const sizes: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r: any = await t.gql(token, PAGE, { after });
      expect(r.errors).toBeUndefined();
      sizes.push(r.data.paywalls.length);
      seen.push(...r.data.paywalls.map((p: any) => p.id));
      if (r.data.paywalls.length < 40) break;
      after = r.data.paywalls[r.data.paywalls.length - 1].cursor;
      expect(after).toEqual(expect.any(String));
    }
    expect(sizes).toEqual([40, 40, 21]);
    expect(seen).toEqual(created);
    // Default page: 50; without archived ones the first is left out.
    const def = await t.gql(token, `{ paywalls { id } }`);
    expect(def.data.paywalls).toHaveLength(50);
    expect(def.data.paywalls[0].id).toBe(created[1]);
    // Bad arguments: a 4xx naming the argument, nothing read.
    const big = await t.gql(token, `{ paywalls(first: 101) { id } }`);
    expect(big.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'first' });
    expect(big.errors?.[0].message).toBe('first must be between 1 and 100');
    const bad = await t.gql(token, `{ paywalls(after: "not-a-cursor") { id } }`);
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'after' });
  });
});
