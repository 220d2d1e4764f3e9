import OpenAI from 'openai';
import { countTokens } from 'gpt-tokenizer';
import { chatCost } from '../src/shared/money.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  client,
  createProxyPaywall,
  deposit,
  eventsOf,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

const hi = [{ role: 'user' as const, content: 'Say hello' }];
const PRICE = { promptPico: 2_000_000n, completionPico: 5_000_000n, requestPico: 1_000_000_000n };
const MARKUP = 1_500_000n;
const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await FakeUpstream.start();
});
afterAll(async () => {
  await fake.close();
});

async function appWithUser(env: Record<string, string> = {}): Promise<{ t: TestApp; pw: ProxyPaywall }> {
  const t = await startTestApp(env);
  const pw = await createProxyPaywall(t, fake);
  await deposit(t, pw, 'alice', '1');
  return { t, pw };
}

describe('holds left behind', () => {
  it('the sweeper releases holds older than the request deadline (a crashed instance), and only those', async () => {
    const { t, pw } = await appWithUser();
    try {
      const user = (
        await t.db.query(`select id from end_user where paywall_id = $1 and external_id = 'alice'`, [pw.id])
      )[0];
      // Two holds as a crashed instance would leave them: one old, one recent.
      await t.db.query(
        `update ledger_account set held_raw = held_raw + 7000 where id = (select account_id from end_user where id = $1)`,
        [user.id],
      );
      await t.db.query(
        `insert into charge (id, paywall_id, user_id, account_id, kind, status, hold_raw, model, created_at)
         select gen_random_uuid(), $1, e.id, e.account_id, 'usage', 'held', h.hold, $3, h.at
           from end_user e, (values (5000, now() - interval '1 hour'), (2000, now())) h(hold, at) where e.id = $2`,
        [pw.id, user.id, MODEL],
      );
      await expectLedgerProven(t.db);
      expect(await t.app.services.proxy.sweep()).toBe(1);
      const charges = await chargesOf(t, pw, 'alice');
      expect(charges.map((c) => [c.status, c.hold, c.amount, c.error_code])).toEqual([
        ['released', '5000', '0', 'abandoned'],
        ['held', '2000', '0', null],
      ]);
      expect(await money(t, pw, 'alice')).toMatchObject({ balance: 1_000_000n, held: 2000n });
      const [failed] = await eventsOf(t, pw, 'paywall.proxy.request.failed');
      expect(failed.data).toMatchObject({
        requestId: charges[0].id,
        walletUserId: user.id,
        errorCode: 'abandoned',
        model: MODEL,
      });
      expect(await t.app.services.proxy.sweep()).toBe(0);
      await expectLedgerProven(t.db);
    } finally {
      await t.close();
    }
  });
});

describe('graceful shutdown', () => {
  it('lets a stream in flight finish and settle within the grace period', async () => {
    const { t, pw } = await appWithUser();
    try {
      fake.behavior = { content: words(12), chunkDelayMs: 40 };
      const stream = await client(t, pw, 'alice').chat.completions.create({
        model: MODEL,
        messages: hi,
        stream: true,
      });
      let text = '';
      let stopping: Promise<void> | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        stopping ??= t.app.stop(2000); // SIGTERM arrives mid-stream
      }
      await stopping;
      expect(text).toBe(words(12));
      const [charge] = await chargesOf(t, pw, 'alice');
      expect(charge).toMatchObject({ status: 'completed', amount: '1086', error_code: null });
      expect(await money(t, pw, 'alice')).toMatchObject({ balance: 1_000_000n - 1086n, held: 0n });
    } finally {
      fake.behavior = {};
      await t.close();
    }
  });

  it('returns once the last request is done, not at the end of the grace period (its connection kept alive)', async () => {
    const { t, pw } = await appWithUser();
    try {
      fake.behavior = { content: words(12), chunkDelayMs: 40 };
      // The SDK's fetch keeps the connection open after the answer (keep-alive), as HTTP clients do.
      const stream = await client(t, pw, 'alice').chat.completions.create({
        model: MODEL,
        messages: hi,
        stream: true,
      });
      let stopping: Promise<void> | null = null;
      let stopped = 0;
      for await (const chunk of stream) {
        void chunk;
        stopping ??= t.app.stop(30_000).then(() => {
          stopped = Date.now();
        });
      }
      const streamEnded = Date.now();
      await stopping;
      // Before, the idle connection held server.close() until the client's keep-alive timeout (about 4 s)
      // or the grace period ended it.
      expect(stopped - streamEnded).toBeLessThan(1500);
      const [charge] = await chargesOf(t, pw, 'alice');
      expect(charge).toMatchObject({ status: 'completed', amount: '1086', error_code: null });
    } finally {
      fake.behavior = {};
      await t.close();
    }
  });

  it('answers a whole request that outlives the grace period 503 `shutdown` (not a provider failure), charging nothing', async () => {
    const { t, pw } = await appWithUser();
    try {
      fake.behavior = { delayMs: 5000 };
      const answer = fetch(`${t.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pw.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: hi, user: 'alice' }),
      });
      while (t.app.services.proxy.inFlight === 0) await new Promise((r) => setTimeout(r, 10));
      const stopping = t.app.stop(200);
      const res = await answer;
      // Before: 502 upstream_error "The model provider failed: request canceled".
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await res.json()).toEqual({
        error: {
          message: 'The service is shutting down; the request was cut before its answer. Send it again.',
          type: 'api_error',
          param: null,
          code: 'shutdown',
        },
      });
      await stopping;
      const [charge] = await chargesOf(t, pw, 'alice');
      expect(charge).toMatchObject({ status: 'released', amount: '0', error_code: 'canceled' });
      expect(await money(t, pw, 'alice')).toMatchObject({ balance: 1_000_000n, held: 0n });
    } finally {
      fake.behavior = {};
      await t.close();
    }
  });

  it('cuts a stream that outlives the grace period and settles what it produced', async () => {
    const { t, pw } = await appWithUser();
    try {
      fake.behavior = {
        content: words(60),
        chunkDelayMs: 50,
        usage: { prompt_tokens: 11, completion_tokens: 60 },
      };
      const stream = await client(t, pw, 'alice').chat.completions.create({
        model: MODEL,
        messages: hi,
        stream: true,
      });
      let received = 0;
      let text = '';
      let stopping: Promise<void> | null = null;
      const err = await (async () => {
        for await (const chunk of stream) {
          const delta = chunk.choices[0]?.delta?.content;
          if (delta) {
            received++;
            text += delta;
          }
          if (received === 2) stopping ??= t.app.stop(300);
        }
        return null;
      })().catch((e) => e);
      await stopping;
      // The stream was cut before its end, with the shutdown's own error, not left to finish.
      expect(received).toBeGreaterThanOrEqual(2);
      expect(received).toBeLessThan(60);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.error).toEqual({
        message: 'The service is shutting down; the stream was cut.',
        type: 'api_error',
        param: null,
        code: 'shutdown',
      });
      // stop() resolved only after the proxy settled its in-flight requests: for what was relayed.
      const [charge] = await chargesOf(t, pw, 'alice');
      expect(charge.status).toBe('completed');
      expect(charge.error_code).toBe('shutdown');
      expect(charge.completion_tokens).toBe(countTokens(text));
      expect(charge.completion_tokens).toBeLessThan(60);
      expect(charge.amount).toBe(
        chatCost(PRICE, MARKUP, charge.metadata.promptEstimate, charge.completion_tokens).toString(),
      );
      const failed = (await eventsOf(t, pw, 'paywall.proxy.request.failed')).map((e) => e.data);
      expect(failed).toEqual([expect.objectContaining({ requestId: charge.id, errorCode: 'shutdown' })]);
      const m = await money(t, pw, 'alice');
      expect(m).toMatchObject({ balance: 1_000_000n - BigInt(charge.amount), held: 0n });
      expect(t.app.services.proxy.inFlight).toBe(0);
    } finally {
      fake.behavior = {};
      await t.close();
    }
  });
});
