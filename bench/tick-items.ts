/**
 * The bench database of the ledger micro-benches (bench/tick.ts, bench/tick-compare.ts): a database kept by
 * `BENCH_KEEP_DB=1 npm run bench` (1,000 funded users, one paywall), its end users, and holds and
 * settlements shaped like the proxy's (the same events, per-token prices, one transfer each).
 */
import { randomUUID } from 'node:crypto';
import { Database } from '../src/db/database.js';
import { buildEvent } from '../src/modules/events/event-payloads.js';
import type { ReserveInput, SettleInput } from '../src/modules/ledger/holds.js';
import { usdcDecimal } from '../src/shared/money.js';

/** One connection to the kept bench database (TICK_DB), its paywall's end users, and its backend's pid. */
export async function openTickDb(url: string | undefined) {
  if (!url) throw new Error('TICK_DB: the URL of a database kept by BENCH_KEEP_DB=1 npm run bench');
  const db = await Database.open({ url, poolMax: 1 });
  const [pw] = await db.query(
    `select p.id, p.owner_id from paywall p where exists (select 1 from end_user e where e.paywall_id = p.id)
      order by p.created_at limit 1`,
  );
  const users = (
    await db.query(`select external_id from end_user where paywall_id = $1 order by external_id limit 1000`, [
      pw.id,
    ])
  ).map((r) => r.external_id as string);
  const [{ pid }] = await db.query(`select pg_backend_pid() as pid`);
  paywall = { id: pw.id as string, ownerId: pw.owner_id as string };
  trigger = { source: 'proxy' as const, actorType: 'api_key' as const, actorId: paywall.id };
  return { db, users, pid: pid as number };
}

let paywall = { id: '', ownerId: '' };
let trigger = { source: 'proxy' as const, actorType: 'api_key' as const, actorId: '' };
const day = new Date().toISOString().slice(0, 10);

export function hold(externalUserId: string): ReserveInput {
  const chargeId = randomUUID();
  const ctx = {
    paywall,
    trigger,
    subject: { type: 'request' as const, id: chargeId, externalId: externalUserId },
  };
  return {
    chargeId,
    paywallId: paywall.id,
    externalUserId,
    requireConnected: false,
    // 15 prompt tokens at 1 pico x 1.5 markup, 2 pico per completion token (the bench's prices' order).
    fixedScaled: 1_500_000n * 15n * 1_000_000n,
    perTokenScaled: 1_500_000n * 2_000_000n,
    maxCap: 256,
    minCap: 16,
    model: 'gpt-4o-mini',
    stream: false,
    metadata: { promptEstimate: 15 },
    events: [
      buildEvent('paywall.proxy.request.started', ctx, {
        requestId: chargeId,
        model: 'gpt-4o-mini',
        stream: false,
      }),
    ],
    day,
    requestLimit: null,
    spendLimitRaw: null,
    modelRequestLimit: null,
    rateLimit: null,
    rateWindow: new Date(),
  };
}

export function settlement(h: ReserveInput, walletUserId: string | null): SettleInput {
  const ctx = {
    paywall,
    trigger,
    subject: { type: 'request' as const, id: h.chargeId, externalId: h.externalUserId },
  };
  const captured = 38n;
  const data = { requestId: h.chargeId, walletUserId, model: h.model };
  return {
    chargeId: h.chargeId,
    paywallId: paywall.id,
    status: 'completed',
    capturedRaw: captured,
    earningsRaw: captured,
    feeRaw: 0n,
    providerRaw: 0n,
    uncollectedRaw: 0n,
    promptTokens: 9,
    completionTokens: 4,
    errorCode: null,
    ledgerEntryId: randomUUID(),
    metadata: { model: h.model, outcome: 'completed' },
    events: [
      buildEvent('paywall.proxy.request.completed', ctx, { ...data, provider: 'default' }),
      buildEvent(
        'paywall.usage.charge.created',
        { ...ctx, subject: { type: 'charge', id: h.chargeId, externalId: h.externalUserId } },
        {
          walletUserId,
          activityId: h.chargeId,
          model: h.model,
          promptTokens: 9,
          completionTokens: 4,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          audioPromptTokens: 0,
          reasoningTokens: 0,
          audioCompletionTokens: 0,
          costDetails: {},
          cost: usdcDecimal(captured),
        },
      ),
    ],
  };
}
