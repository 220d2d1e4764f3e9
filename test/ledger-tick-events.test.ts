import { randomUUID } from 'node:crypto';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven, testHold, testSettlement } from './helpers/ledger.js';
import { ledgerTick, type ReserveInput } from '../src/modules/ledger/holds.js';
import { buildEvent } from '../src/modules/events/event-payloads.js';
import { eventRows, type NewEvent } from '../src/modules/events/event.service.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

/** The stored rows of the events of `subjectIds`, as eventRows shapes them (ids and times aside). */
async function stored(paywallId: string, since: string) {
  const rows = await t.db.query<any>(
    `select paywall_id, owner_user_id, type, version, trigger, subject, data, metadata
       from event where paywall_id = $1 and seq > $2 order by seq`,
    [paywallId, since],
  );
  return rows.map((r) => ({
    ...r,
    trigger: json(r.trigger),
    subject: json(r.subject),
    data: json(r.data),
    metadata: json(r.metadata),
  }));
}
const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);
const expected = (events: NewEvent[], extraData: Record<string, unknown> = {}) =>
  eventRows(events).map(({ id: _id, ...e }) => ({ ...e, data: { ...(e.data as object), ...extraData } }));

/**
 * docs/reference.md §7: consumers rely on exact event payloads. ledger_tick writes the events of holds
 * and settlements (however it ships them to PostgreSQL): every stored row must be exactly the row
 * `eventRows` builds from the events given, whatever they share or do not share. Alone and in a batch
 * (with an operation of another paywall, whose own events are none).
 */
it.each([
  ['ledger_tick, one operation alone,', false],
  ['ledger_tick, in a batch,', true],
])(
  '%s stores exactly the events it is given (hold and settlement, shared and odd envelopes)',
  async (_, batched) => {
    const other = await t.createPaywall();
    await t.rest('POST', '/v1/user/balance/deposit', {
      token: other.apiKey,
      body: { user: 'ev2', amount: '1' },
    });
    const companion = testHold(other.id, 'ev2', { events: [] });
    const pw = await t.createPaywall();
    const [{ owner_id: ownerId }] = await t.db.query<any>('select owner_id from paywall where id = $1', [
      pw.id,
    ]);
    await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'ev', amount: '1' } });
    const [user] = await t.db.query<any>(
      `select id from end_user where paywall_id = $1 and external_id = 'ev'`,
      [pw.id],
    );
    const [{ seq: since }] = await t.db.query<any>(`select coalesce(max(seq), 0)::text as seq from event`);
    const chargeId = randomUUID();
    const paywall = { id: pw.id, ownerId };
    const trigger = { source: 'proxy' as const, actorType: 'api_key' as const, actorId: pw.id };
    const ctx = { paywall, trigger, subject: { type: 'request' as const, id: chargeId, externalId: 'ev' } };
    const holdEvents: NewEvent[] = [
      buildEvent('paywall.proxy.request.started', ctx, { requestId: chargeId, model: 'm', stream: true }),
      buildEvent(
        'paywall.usage.charge.deferred',
        { ...ctx, metadata: { note: 'x', n: 1.5 } },
        {
          deferredRequestId: chargeId,
          model: 'm',
        },
      ),
      // Another trigger, another subject, a data without the paywall ids: each is stored as given.
      {
        paywallId: pw.id,
        ownerUserId: ownerId,
        type: 'paywall.request.blocked',
        trigger: { source: 'system', actorType: 'system', actorId: 'test' },
        subject: { type: 'end_user', id: user.id },
        data: { reason: 'r', nested: { a: [1, 'b', null] } },
      },
    ];
    const hold = testHold(pw.id, 'ev', { chargeId, stream: true, events: holdEvents });
    const r = await ledgerTick(t.db, batched ? [hold, companion] : [hold], []);
    expect(r.holds.map((h) => h?.held)).toEqual(batched ? [true, true] : [true]);
    expect(await stored(pw.id, since)).toEqual(expected(holdEvents, { walletUserId: user.id }));

    const [{ seq: since2 }] = await t.db.query<any>(`select max(seq)::text as seq from event`);
    const settleEvents: NewEvent[] = [
      buildEvent('paywall.proxy.request.completed', ctx, {
        requestId: chargeId,
        walletUserId: user.id,
        model: 'm',
        provider: 'default',
      }),
      buildEvent(
        'paywall.usage.charge.created',
        { ...ctx, subject: { type: 'charge', id: chargeId, externalId: 'ev' } },
        {
          walletUserId: user.id,
          activityId: chargeId,
          model: 'm',
          promptTokens: 1,
          completionTokens: 2,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          audioPromptTokens: 0,
          reasoningTokens: 0,
          audioCompletionTokens: 0,
          costDetails: {},
          cost: '0.000500',
        },
      ),
    ];
    const settle = testSettlement(hold, 500n, { completionTokens: 2, events: settleEvents });
    const s = await ledgerTick(
      t.db,
      [],
      batched ? [settle, testSettlement(companion, 100n, { events: [] })] : [settle],
    );
    expect(s.settlements).toEqual(batched ? [true, true] : [true]);
    expect(await stored(pw.id, since2)).toEqual(expected(settleEvents));
    await expectLedgerProven(t.db);
  },
);

/**
 * Every mix of a ledger_tick call (holds only, settlements only, both; with or without an API rate limit;
 * one hold or several) answers holds and settlements alike, to the raw unit; a hold is decided against
 * the free balance before the settlements of its own call, and the holds of one call one after the other.
 */
it('every mix of a ledger_tick call (holds, settlements, both; rate-limited or not; one hold or two) answers exactly, and the ledger adds up', async () => {
  const pw = await t.createPaywall();
  await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user: 'sh', amount: '1' } });
  const hold = (rateLimit: number | null) =>
    testHold(pw.id, 'sh', { rateLimit, day: '2026-11-24', rateWindow: new Date('2026-11-24T10:00:00Z') });
  const settle = (h: ReserveInput, captured: bigint) => testSettlement(h, captured);
  const placed = (r: { holds: unknown[] }) =>
    r.holds.map((x: any) => ({
      held: x.held,
      hold: x.holdRaw,
      free: x.freeRaw,
      cap: x.cap,
      rate: x.ratePosition,
    }));

  const [a, b, c, d] = [hold(null), hold(5), hold(null), hold(5)];
  // h: one hold, 1 USDC free.
  expect(placed(await ledgerTick(t.db, [a], []))).toEqual([
    { held: true, hold: 1000n, free: 1_000_000n, cap: 10, rate: null },
  ]);
  // hr: a rate-limited hold is the first request of its minute.
  expect(placed(await ledgerTick(t.db, [b], []))).toEqual([
    { held: true, hold: 1000n, free: 999_000n, cap: 10, rate: 1 },
  ]);
  // s: settling a for 400 leaves 1,000,000 − 400 − b's 1000 free.
  expect(await ledgerTick(t.db, [], [settle(a, 400n)])).toEqual({
    holds: [],
    settlements: [true],
    freeAfter: [998_600n],
    // The spending account's low-balance alert state (none set here).
    alerts: [{ lowAlertRaw: null, lowAlerted: false, alertedPaywalls: [] }],
  });
  // hs: c is decided on the balance before b's settlement; b's answer counts c as held.
  const hs = await ledgerTick(t.db, [c], [settle(b, 1000n)]);
  expect(placed(hs)).toEqual([{ held: true, hold: 1000n, free: 998_600n, cap: 10, rate: null }]);
  expect(hs.settlements).toEqual([true]);
  expect(hs.freeAfter).toEqual([997_600n]);
  // hsr: d is the second request of the minute.
  const hsr = await ledgerTick(t.db, [d], [settle(c, 0n)]);
  expect(placed(hsr)).toEqual([{ held: true, hold: 1000n, free: 997_600n, cap: 10, rate: 2 }]);
  expect(hsr.freeAfter).toEqual([997_600n]);
  // Settling twice is refused; the last settlement leaves exactly 1 USDC − 400 − 1000 − 250.
  expect((await ledgerTick(t.db, [], [settle(c, 0n)])).settlements).toEqual([false]);
  expect((await ledgerTick(t.db, [], [settle(d, 250n)])).freeAfter).toEqual([998_350n]);
  // Two holds of one user in one call: decided one after the other (f sees e held), both at their full
  // cap, and the daily counter counts two; each settlement answers the free balance after the call.
  const [e, f] = [hold(null), hold(5)];
  expect(placed(await ledgerTick(t.db, [e, f], []))).toEqual([
    { held: true, hold: 1000n, free: 998_350n, cap: 10, rate: null },
    { held: true, hold: 1000n, free: 997_350n, cap: 10, rate: 3 },
  ]);
  expect((await ledgerTick(t.db, [], [settle(e, 0n), settle(f, 0n)])).freeAfter).toEqual([
    998_350n,
    998_350n,
  ]);
  const [counter] = await t.db.query<{ requests: number }>(
    `select requests from usage_counter where end_user_id = (select id from end_user where paywall_id = $1 and external_id = 'sh')`,
    [pw.id],
  );
  expect(counter.requests).toBe(6);
  await expectLedgerProven(t.db);
});
