import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import {
  chargesOf,
  deposit,
  eventsOf,
  money,
  PROVIDER_KEY,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';
import { chatCost, usdcDecimal } from '../src/shared/money.js';
import {
  audioTokenBound,
  base64Bytes,
  fileTokenBound,
  imageTokenBound,
  imagePartTokens,
  pdfPages,
  UNKNOWN_INPUT_BOUND,
} from '../src/modules/proxy/token-counter.js';
import { uncollectedByPaywall } from '../src/modules/accounts/accounts.js';
import { loadConfig } from '../src/config.js';

/**
 * The hold's input side: media parts are held at the most a provider bills for them, usage beyond a hold
 * is paid from the free balance, and what nothing could pay is a debt that blocks the user until repaid.
 */

// gpt-4o's prices: 2.5 USDC per million prompt tokens, 10 per million completion tokens, no markup.
const MODEL = 'gpt-4o';
const PRICE = { promptPico: 2_500_000n, completionPico: 10_000_000n, requestPico: 0n };
const ONE = 1_000_000n;

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

async function gqlOk(token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

async function sellingPaywall(baseUrl: string): Promise<ProxyPaywall> {
  const p = await t.createPaywall('DEFAULT');
  await gqlOk(p.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: { baseUrl, apiKey: PROVIDER_KEY },
  });
  await gqlOk(p.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: { modelId: MODEL, prompt: '0.0000025', completion: '0.00001', maxCompletionTokens: 1000 },
  });
  return p;
}

const sdk = (p: ProxyPaywall, user: string) =>
  new OpenAI({ apiKey: p.apiKey, baseURL: `${t.url}/v1/u/${user}`, maxRetries: 0 });

const cost = (prompt: number, completion: number) => chatCost(PRICE, ONE, prompt, completion);

/**
 * A cost beyond the hold that the request could still produce (docs/reference.md §5.7 clamps anything
 * more): a long prompt the provider bills at 3,547 input tokens (about 460 by the estimate's tokenizer,
 * 3,600 bytes), and the 16 completion tokens of the cap sent: cost(3547, 16) = 9,028 raw units.
 */
const LONG = 'a'.repeat(3600);
const OVER_BILLED = { usage: { prompt_tokens: 3547, completion_tokens: 16 } };

// A real 1x1 PNG: held at the one tile its pixels make, not at a 2048 x 2048 image's eight.
const PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/** A PNG data: URL whose header declares `w` x `h` pixels (no pixel data: only the header is read). */
function png(w: number, h: number): string {
  const ihdr = Buffer.alloc(25);
  ihdr.writeUInt32BE(13, 0);
  ihdr.write('IHDR', 4, 'latin1');
  ihdr.writeUInt32BE(w, 8);
  ihdr.writeUInt32BE(h, 12);
  ihdr.writeUInt8(8, 16); // bit depth
  ihdr.writeUInt8(2, 17); // RGB
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return `data:image/png;base64,${Buffer.concat([sig, ihdr]).toString('base64')}`;
}

/** A PDF of `pages` pages and about `bytes` bytes (incompressible filler), as a data: URL. */
function pdf(pages: number, bytes: number): string {
  const head = Buffer.from(
    `%PDF-1.7\n1 0 obj << /Type /Pages /Count ${pages} >> endobj\n` +
      Array.from({ length: pages }, (_, i) => `${i + 2} 0 obj << /Type /Page /Parent 1 0 R >> endobj\n`).join(
        '',
      ),
    'latin1',
  );
  return `data:application/pdf;base64,${Buffer.concat([head, randomBytes(bytes - head.length)]).toString('base64')}`;
}

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await sellingPaywall(fake.baseUrl);
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

describe('upper bounds of media parts (one place: the token counter)', () => {
  it('bounds an image by the model family and detail, never by its bytes', () => {
    // Tiles: base + 8 tiles of 512 px (2048 x 768 after scaling) for high/auto; the base alone for low.
    expect(imageTokenBound('gpt-4o', 'high')).toBe(85 + 8 * 170);
    expect(imageTokenBound('gpt-4o-2024-08-06', undefined)).toBe(1445);
    expect(imageTokenBound('gpt-4o', 'low')).toBe(85);
    expect(imageTokenBound('openai/gpt-4o-mini', 'auto')).toBe(2833 + 8 * 5667);
    expect(imageTokenBound('o3', 'high')).toBe(75 + 8 * 150);
    expect(imageTokenBound('gpt-5', 'low')).toBe(70);
    // Patches: at most 1,536, times the model's multiplier, whatever the detail.
    expect(imageTokenBound('gpt-4.1-mini', 'low')).toBe(Math.ceil(1536 * 1.62));
    expect(imageTokenBound('o4-mini', 'high')).toBe(Math.ceil(1536 * 1.72));
    // A model the table does not know: the largest bound of any family.
    expect(imageTokenBound('llava-13b', 'high')).toBe(48_169);
    expect(imageTokenBound('llava-13b', 'low')).toBe(Math.ceil(1536 * 2.46));
  });

  it('bounds an inline image by the pixel size its header declares, with the billing provider’s formula (§13)', () => {
    // Tiles of the declared size (fit in 2048, shortest side down to 768, 512 px tiles), computed here.
    const openAi = (base: number, tile: number, w: number, h: number) => {
      const fit = Math.min(1, 2048 / Math.max(w, h));
      const short = Math.min(1, 768 / (Math.min(w, h) * fit));
      return base + Math.ceil((w * fit * short) / 512) * Math.ceil((h * fit * short) / 512) * tile;
    };
    expect(imagePartTokens('gpt-4o', 'high', PNG, 'OPENAI')).toBe(85 + 170); // 1 x 1: one tile, not eight
    expect(imagePartTokens('gpt-4o', 'high', png(1024, 1024), 'OPENAI')).toBe(openAi(85, 170, 1024, 1024)); // 765
    expect(imagePartTokens('gpt-4o', 'high', png(2048, 768), 'OPENAI')).toBe(1445);
    expect(imagePartTokens('gpt-4o', 'high', png(4096, 8192), 'OPENAI')).toBe(openAi(85, 170, 4096, 8192));
    expect(imagePartTokens('gpt-4o', 'low', png(4096, 8192), 'OPENAI')).toBe(85);
    expect(imagePartTokens('gpt-4.1-mini', 'high', png(64, 64), 'OPENAI')).toBe(Math.ceil(4 * 1.62));
    // The header's bytes decide, also as bare base64 (Anthropic's source.data).
    expect(imagePartTokens('gpt-4o', 'high', png(600, 400).split(',')[1], 'OPENAI')).toBe(
      openAi(85, 170, 600, 400),
    );
    // Anthropic: width x height / 750 after scaling the long edge to 1,568 px.
    expect(imagePartTokens('claude-sonnet-4', undefined, PNG, 'ANTHROPIC')).toBe(1);
    expect(imagePartTokens('claude-sonnet-4', undefined, png(1000, 1000), 'ANTHROPIC')).toBe(
      Math.ceil((1000 * 1000) / 750),
    );
    expect(imagePartTokens('claude-sonnet-4', undefined, png(3136, 2000), 'ANTHROPIC')).toBe(
      Math.ceil((1568 * 1000) / 750),
    );
    // By URL, or bytes that are no image: the family's largest bound (Anthropic's: 1,568 x 1,568).
    expect(imagePartTokens('gpt-4o', 'high', 'https://example.com/a.png', 'OPENAI')).toBe(1445);
    expect(imagePartTokens('claude-x', undefined, 'https://example.com/a.png', 'ANTHROPIC')).toBe(
      Math.ceil((1568 * 1568) / 750),
    );
    expect(imagePartTokens('gpt-4o', 'high', 'data:image/png;base64,AAAA', 'OPENAI')).toBe(1445);
    // Bytes that are no image are read alone, never with what Node's Buffer pool holds next to them
    // (here a 1024x1024 PNG header decoded just before): still the family's largest bound.
    for (let i = 0; i < 50; i++) {
      expect(imagePartTokens('gpt-4o', 'high', png(1024, 1024), 'OPENAI')).toBe(765);
      expect(imagePartTokens('gpt-4o', 'high', 'data:image/png;base64,AAAA', 'OPENAI')).toBe(1445);
    }
  });

  it('bounds audio by its bytes (8 kbit/s at least, 20 tokens a second at most)', () => {
    expect(audioTokenBound(0)).toBe(32);
    expect(audioTokenBound(100_000)).toBe(32 + 2000);
  });

  it('bounds a file by its bytes plus a high-detail image per PDF page', () => {
    const doc = pdf(3, 30_000);
    expect(base64Bytes(doc)).toBe(30_000);
    expect(pdfPages(doc)).toBe(3);
    expect(fileTokenBound('gpt-4o', doc)).toBe(30_000 + 3 * 1445);
    const text = `data:text/plain;base64,${Buffer.from('hello world').toString('base64')}`;
    expect(fileTokenBound('gpt-4o', text)).toBe(11);
    // A file by id or URL: its size is unknown here.
    expect(fileTokenBound('gpt-4o', undefined)).toBe(UNKNOWN_INPUT_BOUND);
  });
});

describe("the probe's scenario: forty image parts on a nearly empty wallet", () => {
  const forty = (detail: string) => [
    {
      role: 'user' as const,
      content: [
        { type: 'text' as const, text: 'Describe these.' },
        ...Array.from({ length: 40 }, () => ({
          type: 'image_url' as const,
          image_url: { url: png(2048, 768), detail }, // eight 512 px tiles: gpt-4o's largest bill
        })),
      ],
    },
  ];

  it('refuses them when 0.03 USDC cannot hold what the provider may bill: nothing forwarded, nothing lost', async () => {
    await deposit(t, pw, 'probe', '0.03');
    const r = await sdk(pw, 'probe').chat.completions.create({
      model: MODEL,
      messages: forty('auto') as any,
    });
    expect((r as any).paywall.reason).toBe('insufficient_balance');
    expect(r.choices[0].message.content).toContain('/topup/');
    // Before the fix the forty parts were held as 85 tokens each and the request went upstream.
    expect(fake.chatRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'probe')).toEqual([]);
    expect((await money(t, pw, 'probe')).balance).toBe(30_000n);

    // Forty one-page PDFs of 1,000 bytes: each held at 1,000 + 1,445 tokens; refused the same way.
    const files = [
      {
        role: 'user',
        content: Array.from({ length: 40 }, (_, i) => ({
          type: 'file',
          file: { filename: `page${i}.pdf`, file_data: pdf(1, 1000) },
        })),
      },
    ];
    const r2 = await sdk(pw, 'probe').chat.completions.create({ model: MODEL, messages: files } as any);
    expect((r2 as any).paywall.reason).toBe('insufficient_balance');
    expect(fake.chatRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'probe')).toEqual([]);
    expect((await money(t, pw, 'probe')).balance).toBe(30_000n);
    expect(await uncollectedByPaywall(t.db)).not.toContainEqual(
      expect.objectContaining({ paywallId: pw.id }),
    );
  });

  it('holds them at their bound when the wallet can pay it, and charges the real usage exactly', async () => {
    await deposit(t, pw, 'probe-rich', '1');
    // The provider bills each high-detail image at most 1,445 tokens: 40 of them plus the text.
    fake.behavior = { usage: { prompt_tokens: 40 * 1445 + 5, completion_tokens: 7 } };
    await sdk(pw, 'probe-rich').chat.completions.create({ model: MODEL, messages: forty('high') as any });
    const [charge] = await chargesOf(t, pw, 'probe-rich');
    expect(charge.metadata.promptEstimate).toBeGreaterThanOrEqual(40 * 1445 + 5);
    expect(BigInt(charge.hold)).toBeGreaterThanOrEqual(cost(40 * 1445 + 5, 7));
    expect(charge.amount).toBe(cost(40 * 1445 + 5, 7).toString());
    expect(charge.amount).toBe('144583');
    expect(charge.uncollected).toBe('0');
    expect((await money(t, pw, 'probe-rich')).balance).toBe(ONE - 144_583n);
    await expectLedgerProven(t.db);
  });

  it('holds a 50,000-token PDF at least at its real cost', async () => {
    const doc = pdf(4, 150_000);
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Summarise.' },
          { type: 'file', file: { filename: 'report.pdf', file_data: doc } },
        ],
      },
    ];
    // 0.03 USDC cannot hold it (150,000 bytes + 4 pages ≈ 0.39 USDC of prompt): refused, not forwarded.
    await deposit(t, pw, 'pdf-poor', '0.03');
    const refused = await sdk(pw, 'pdf-poor').chat.completions.create({ model: MODEL, messages } as any);
    expect((refused as any).paywall.reason).toBe('insufficient_balance');
    expect(fake.chatRequests).toHaveLength(0);

    await deposit(t, pw, 'pdf-rich', '1');
    fake.behavior = { usage: { prompt_tokens: 50_000, completion_tokens: 7 } };
    await sdk(pw, 'pdf-rich').chat.completions.create({ model: MODEL, messages } as any);
    const [charge] = await chargesOf(t, pw, 'pdf-rich');
    expect(charge.metadata.promptEstimate).toBeGreaterThanOrEqual(150_000 + 4 * 1445);
    expect(BigInt(charge.hold)).toBeGreaterThan(cost(50_000, 7));
    expect(charge.amount).toBe('125070');
    expect(charge.uncollected).toBe('0');
    expect((await money(t, pw, 'pdf-rich')).balance).toBe(ONE - 125_070n);
  });

  it('accepts function messages (the older tool result) and counts their tokens', async () => {
    await deposit(t, pw, 'fn', '1');
    const messages = [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: null, function_call: { name: 'weather', arguments: '{}' } },
      { role: 'function', name: 'weather', content: 'Sunny, 21 degrees, light wind from the west.' },
    ];
    const r = await t.rest('POST', '/v1/u/fn/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, messages },
    });
    expect(r.status).toBe(200);
    expect(fake.chatRequests[0].body.messages[2]).toEqual(messages[2]);
    const [charge] = await chargesOf(t, pw, 'fn');
    const withoutResult = await t.rest('POST', '/v1/u/fn/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, messages: messages.slice(0, 2) },
    });
    expect(withoutResult.status).toBe(200);
    const second = (await chargesOf(t, pw, 'fn'))[1];
    expect(charge.metadata.promptEstimate - second.metadata.promptEstimate).toBeGreaterThanOrEqual(12);
    const noName = await t.rest('POST', '/v1/u/fn/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, messages: [{ role: 'function', content: 'x' }] },
    });
    expect(noName.status).toBe(400);
    expect(noName.body.error.param).toBe('messages[0].name');
  });
});

describe('settlement beyond the hold', () => {
  it('takes the rest from the free balance, exactly, with nothing uncollected', async () => {
    await deposit(t, pw, 'over', '1');
    // The provider bills 3,547 input tokens where the estimate counted about 460 (its tokenizer cuts
    // the text finer), within what the request's bytes can make.
    fake.behavior = OVER_BILLED;
    const r = await t.rest('POST', '/v1/u/over/chat/completions', {
      token: pw.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: LONG }], max_tokens: 16 },
    });
    const [charge] = await chargesOf(t, pw, 'over');
    const real = cost(3547, 16); // 9,028 raw units
    expect(real).toBe(9028n);
    expect(BigInt(charge.hold)).toBeLessThan(real);
    expect(charge.amount).toBe('9028');
    expect(charge.uncollected).toBe('0');
    expect(r.headers.get('x-paywall-cost')).toBe('0.009028');
    expect(r.headers.get('x-paywall-balance')).toBe(usdcDecimal(ONE - 9028n));
    expect((await money(t, pw, 'over')).balance).toBe(ONE - 9028n);
    const [ev] = (await eventsOf(t, pw, 'paywall.usage.charge.created')).filter(
      (e) => e.data.activityId === charge.id,
    );
    expect(ev.data.cost).toBe('0.009028');
    expect(ev.data.uncollected).toBeUndefined();
    await expectLedgerProven(t.db);
  });
});

describe('settlement beyond the hold, with an end-user key', () => {
  it("stops at the key's spending limit: the rest is the app's loss, never the wallet's debt", async () => {
    await deposit(t, pw, 'keyed', '1');
    // 0.005 USDC a day through this key: enough for the hold (about 1,310 raw), not for the 9,028 billed.
    const created = await t.rest('POST', '/v1/user/keys', {
      token: pw.apiKey,
      body: { user: 'keyed', name: 'agent', limit: '0.005', limit_period: 'day' },
    });
    expect(created.status).toBe(201);
    fake.behavior = OVER_BILLED;
    const r = await t.rest('POST', '/v1/chat/completions', {
      token: created.body.key,
      body: { model: MODEL, messages: [{ role: 'user', content: LONG }], max_tokens: 16 },
    });
    expect(r.status).toBe(200);
    const [charge] = await chargesOf(t, pw, 'keyed');
    const hold = BigInt(charge.hold);
    expect(hold).toBeLessThan(5000n);
    // Captured: exactly the key's limit (the hold plus the 5,000 − hold left on the key).
    expect(charge.amount).toBe('5000');
    expect(charge.uncollected).toBe('0');
    expect(charge.metadata.appLoss).toBe((9028n - 5000n).toString());
    expect(r.headers.get('x-paywall-cost')).toBe('0.005');
    expect(await money(t, pw, 'keyed')).toEqual({ balance: ONE - 5000n, held: 0n, ledgerSum: ONE - 5000n });
    const [k] = await t.db.query<any>(`select limit_spent_raw::text as spent from user_key where id = $1`, [
      created.body.id,
    ]);
    expect(k.spent).toBe('5000');
    const [{ debt }] = await t.db.query<any>(
      `select a.debt_raw::text as debt from end_user u join ledger_account a on a.id = u.account_id
        where u.paywall_id = $1 and u.external_id = 'keyed'`,
      [pw.id],
    );
    expect(debt).toBe('0');
    await expectLedgerProven(t.db);
  });
});

describe('settlement beyond the hold, concurrently', () => {
  it('never takes more than the balance, nor what another request holds: the totals are exact', async () => {
    // A paywall of its own: the debt tests below count uncollected amounts per paywall.
    const own = await sellingPaywall(fake.baseUrl);
    await deposit(t, own, 'pair', '0.005');
    // The provider answers none until all three are with it: each was held before any settles.
    let arrived = 0;
    let release!: () => void;
    const allThree = new Promise<void>((r) => (release = r));
    fake.onRequest = () => {
      if (++arrived === 3) release();
    };
    fake.behavior = { ...OVER_BILLED, gate: allThree };
    const body = { model: MODEL, messages: [{ role: 'user', content: LONG }], max_tokens: 16 };
    const answers = await Promise.all(
      [0, 1, 2].map(() => t.rest('POST', '/v1/u/pair/chat/completions', { token: own.apiKey, body })),
    ).finally(() => (fake.onRequest = undefined));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    const charges = (await chargesOf(t, own, 'pair')).filter((c) => c.status === 'completed');
    expect(charges).toHaveLength(3);
    // 3 x 9,028 billed against 5,000: all 5,000 taken, never more; the rest is uncollected.
    const sum = (k: 'amount' | 'uncollected') => charges.reduce((a, c) => a + BigInt(c[k]), 0n);
    expect(sum('amount')).toBe(5000n);
    expect(sum('uncollected')).toBe(3n * 9028n - 5000n);
    expect(await money(t, own, 'pair')).toMatchObject({ balance: 0n, held: 0n });
    await expectLedgerProven(t.db);
  });
});

describe('debt: what nothing could pay blocks the user until a deposit repays it', () => {
  it('records the uncollected rest, refuses the next requests, and repays it first from the next deposit', async () => {
    await deposit(t, pw, 'debtor', '0.005');
    fake.behavior = OVER_BILLED;
    const body = { model: MODEL, messages: [{ role: 'user', content: LONG }], max_tokens: 16 };
    await t.rest('POST', '/v1/u/debtor/chat/completions', { token: pw.apiKey, body });
    const [first] = await chargesOf(t, pw, 'debtor');
    // 9,028 owed, 5,000 in the wallet: all of it taken, 4,028 uncollected.
    expect(first.amount).toBe('5000');
    expect(first.uncollected).toBe('4028');
    expect((await money(t, pw, 'debtor')).balance).toBe(0n);
    expect(await uncollectedByPaywall(t.db)).toContainEqual({
      paywallId: pw.id,
      uncollected: '4028',
      recovered: '0',
      outstanding: '4028',
    });
    if (process.env.DATABASE_URL) {
      // The operator's `npm run admin -- ledger verify` lists it (USDC), against the same database.
      const verify = spawnSync(process.execPath, ['dist/src/admin.js', 'ledger', 'verify'], {
        env: { ...process.env, DATABASE_URL: t.config.DATABASE_URL!, LOG_LEVEL: 'silent' },
        encoding: 'utf8',
      });
      expect(verify.status).toBe(0);
      const proof = JSON.parse(verify.stdout);
      expect(proof).toMatchObject({ ok: true, total: '0' });
      expect(proof.uncollected).toContainEqual({
        paywallId: pw.id,
        uncollected: '0.004028',
        recovered: '0.000000',
        outstanding: '0.004028',
      });
    }

    // A deposit smaller than the debt: it all goes to the debt, and the request is still refused.
    await deposit(t, pw, 'debtor', '0.003');
    fake.reset();
    fake.behavior = { usage: { prompt_tokens: 11, completion_tokens: 7 } };
    const blocked = await t.rest('POST', '/v1/u/debtor/chat/completions', { token: pw.apiKey, body });
    expect(blocked.status).toBe(200);
    expect(blocked.body.paywall.reason).toBe('insufficient_balance');
    expect(blocked.body.paywall.url).toContain('/topup/');
    expect(fake.chatRequests).toHaveLength(0);
    expect((await money(t, pw, 'debtor')).balance).toBe(0n);
    let recovered = (await eventsOf(t, pw, 'paywall.usage.charge.recovered')).map((e) => e.data);
    expect(recovered).toEqual([
      expect.objectContaining({ activityId: first.id, amount: '0.003', uncollected: '0.001028' }),
    ]);

    // A deposit that covers it: the rest of the debt is repaid, then the request is served.
    await deposit(t, pw, 'debtor', '1');
    const served = await t.rest('POST', '/v1/u/debtor/chat/completions', { token: pw.apiKey, body });
    expect(served.body.paywall).toBeUndefined();
    expect(fake.chatRequests).toHaveLength(1);
    const second = (await chargesOf(t, pw, 'debtor'))[1];
    expect(second.amount).toBe(cost(11, 7).toString());
    recovered = (await eventsOf(t, pw, 'paywall.usage.charge.recovered')).map((e) => e.data);
    expect(recovered[1]).toMatchObject({ activityId: first.id, amount: '0.001028', uncollected: '0' });
    // 0.005 + 0.003 + 1 deposited; 5,000 + 4,028 (the whole first cost) + the second cost paid.
    expect((await money(t, pw, 'debtor')).balance).toBe(1_008_000n - 9028n - cost(11, 7));
    const [acct] = await t.db.query(
      `select a.debt_raw::text as debt from ledger_account a join end_user u on u.account_id = a.id
        where u.paywall_id = $1 and u.external_id = 'debtor'`,
      [pw.id],
    );
    expect(acct.debt).toBe('0');
    // The owner sees it on the charge.
    const g = await t.gql(
      pw.apiKey,
      `{ user(externalId: "debtor") { charges(first: 5) { edges { node { id amount uncollected recovered } } } } }`,
    );
    expect(g.errors).toBeUndefined();
    expect(g.data.user.charges.edges.map((e: any) => e.node).find((n: any) => n.id === first.id)).toEqual({
      id: first.id,
      amount: '0.005000',
      uncollected: '0.004028',
      recovered: '0.004028',
    });
    expect(await uncollectedByPaywall(t.db)).toContainEqual({
      paywallId: pw.id,
      uncollected: '4028',
      recovered: '4028',
      outstanding: '0',
    });
    // The paywall earned the whole first cost in the end.
    const [earned] = await t.db.query(
      `select balance_raw::text as b from ledger_account where kind = 'earnings' and paywall_id = $1`,
      [pw.id],
    );
    const [paid] = await t.db.query(
      `select coalesce(sum(amount_raw), 0)::text as s from transfer where charge_id = $1`,
      [first.id],
    );
    expect(paid.s).toBe('9028');
    expect(BigInt(earned.b)).toBeGreaterThanOrEqual(9028n);
    await expectLedgerProven(t.db);
  });

  it('with MAX_UNCOLLECTED_PER_USER, a debt within the bound does not block, and free funds still repay it', async () => {
    const t2 = await startTestApp({ MAX_UNCOLLECTED_PER_USER: '0.005' });
    const saved = t;
    try {
      t = t2;
      const p2 = await sellingPaywall(fake.baseUrl);
      const body = { model: MODEL, messages: [{ role: 'user', content: LONG }], max_tokens: 16 };
      const ask = () => t2.rest('POST', '/v1/u/within/chat/completions', { token: p2.apiKey, body });
      await deposit(t2, p2, 'within', '0.005');
      fake.behavior = OVER_BILLED;
      await ask();
      expect((await chargesOf(t2, p2, 'within'))[0]).toMatchObject({ amount: '5000', uncollected: '4028' });
      // 0.004028 owed, within 0.005: a deposit of 0.003 (less than the debt) still serves a request (with the
      // bound 0 it would all go to the debt and the request be refused, as above). The hold is placed first;
      // what is free beside it repays the debt.
      await deposit(t2, p2, 'within', '0.003');
      fake.behavior = { usage: { prompt_tokens: 11, completion_tokens: 7 } };
      const served = await ask();
      expect(served.body.paywall).toBeUndefined();
      const hold = BigInt((await chargesOf(t2, p2, 'within'))[1].hold);
      expect((await money(t2, p2, 'within')).balance).toBe(hold - cost(11, 7));
      expect(await uncollectedByPaywall(t2.db)).toEqual([
        {
          paywallId: p2.id,
          uncollected: '4028',
          recovered: (3000n - hold).toString(),
          outstanding: (4028n - 3000n + hold).toString(),
        },
      ]);
      // A deposit that covers the rest: repaid in full at the next request.
      await deposit(t2, p2, 'within', '1');
      await ask();
      expect(await uncollectedByPaywall(t2.db)).toEqual([
        { paywallId: p2.id, uncollected: '4028', recovered: '4028', outstanding: '0' },
      ]);
      expect((await money(t2, p2, 'within')).balance).toBe(1_008_000n - 9028n - 2n * cost(11, 7));
      await expectLedgerProven(t2.db);
    } finally {
      t = saved;
      await t2.close();
    }
  });

  it('reads MAX_UNCOLLECTED_PER_USER as a USDC amount (default 0: any debt blocks)', () => {
    expect(loadConfig({}).MAX_UNCOLLECTED_PER_USER).toBe(0n);
    expect(loadConfig({ MAX_UNCOLLECTED_PER_USER: '0.5' }).MAX_UNCOLLECTED_PER_USER).toBe(500_000n);
    expect(() => loadConfig({ MAX_UNCOLLECTED_PER_USER: '-1' })).toThrow(/MAX_UNCOLLECTED_PER_USER/);
  });
});

describe('Responses API: previous_response_id', () => {
  it('adds the context of a response it relayed to the estimate, and holds an unknown one at the bound', async () => {
    await deposit(t, pw, 'chain', '1');
    fake.behavior = { usage: { prompt_tokens: 1000, completion_tokens: 500 } };
    const api = sdk(pw, 'chain');
    const first = await api.responses.create({ model: MODEL, input: 'Tell me a story.' });
    const [c1] = await chargesOf(t, pw, 'chain');
    const second = await api.responses.create({
      model: MODEL,
      input: 'Tell me a story.',
      previous_response_id: first.id,
    });
    expect(second.id).toBeDefined();
    const [, c2] = await chargesOf(t, pw, 'chain');
    // The provider bills the earlier input and output again: 1,000 + 500 more tokens held.
    expect(c2.metadata.promptEstimate).toBe(c1.metadata.promptEstimate + 1500);

    // A streamed answer is remembered too (its id from the stream's events).
    const stream = await api.responses.create({ model: MODEL, input: 'Once more.', stream: true });
    let streamedId = '';
    for await (const ev of stream) if (ev.type === 'response.completed') streamedId = ev.response.id;
    expect(streamedId).not.toBe('');
    await api.responses.create({ model: MODEL, input: 'Once more.', previous_response_id: streamedId });
    const [, , c3, c4] = await chargesOf(t, pw, 'chain');
    expect(c4.metadata.promptEstimate).toBe(c3.metadata.promptEstimate + 1500);

    // An id it did not relay: held at the largest context window (2.62 USDC here), so refused with 1 USDC.
    fake.reset();
    const unknown = await api.responses.create({
      model: MODEL,
      input: 'Go on.',
      previous_response_id: 'resp_not_relayed_here',
    });
    expect((unknown as any).paywall.reason).toBe('insufficient_balance');
    expect(fake.responsesRequests).toHaveLength(0);
  });

  it("refuses another end user's response as OpenAI refuses an unknown id: nothing forwarded, held or charged", async () => {
    await deposit(t, pw, 'owner-ann', '1');
    await deposit(t, pw, 'owner-ben', '1');
    fake.behavior = { usage: { prompt_tokens: 10, completion_tokens: 5 } };
    const ann = sdk(pw, 'owner-ann');
    const ben = sdk(pw, 'owner-ben');
    const first = await ann.responses.create({ model: MODEL, input: 'My secret plan.' });
    const stream = await ann.responses.create({ model: MODEL, input: 'Another one.', stream: true });
    let streamedId = '';
    for await (const ev of stream) if (ev.type === 'response.completed') streamedId = ev.response.id;
    expect(streamedId).not.toBe('');
    const benBefore = await money(t, pw, 'owner-ben');
    fake.reset();
    for (const id of [first.id, streamedId]) {
      const err = await ben.responses
        .create({ model: MODEL, input: 'What was the plan?', previous_response_id: id })
        .then(
          () => null,
          (e: any) => e,
        );
      expect({ status: err?.status, code: err?.code, param: err?.param, type: err?.type }).toEqual({
        status: 400,
        code: 'previous_response_not_found',
        param: 'previous_response_id',
        type: 'invalid_request_error',
      });
      expect(err.message).toContain(`Previous response with id '${id}' not found.`);
    }
    expect(fake.responsesRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'owner-ben')).toHaveLength(0);
    expect(await money(t, pw, 'owner-ben')).toEqual(benBefore);
    // Its owner continues it.
    const again = await ann.responses.create({
      model: MODEL,
      input: 'Go on.',
      previous_response_id: first.id,
    });
    expect(again.id).toBeDefined();
    expect(fake.responsesRequests).toHaveLength(1);
    expect(fake.responsesRequests[0].body.previous_response_id).toBe(first.id);
  });
});

describe('empty answers cost nothing, the request price included', () => {
  let server: Server;
  let answer: unknown;
  let priced: ProxyPaywall;
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (typeof answer === 'string') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.end(answer);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    priced = await sellingPaywall(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
    await gqlOk(priced.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      i: { modelId: MODEL, prompt: '0.0000025', completion: '0.00001', request: '0.001' },
    });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('charges nothing for no output and an empty finish_reason, although usage names prompt tokens', async () => {
    await deposit(t, priced, 'empty', '1');
    answer = {
      id: 'chatcmpl-empty',
      object: 'chat.completion',
      created: 1,
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: null }],
      usage: { prompt_tokens: 11, completion_tokens: 0, total_tokens: 11 },
    };
    const r = await t.rest('POST', '/v1/u/empty/chat/completions', {
      token: priced.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(200);
    expect(r.body.usage.cost).toBe('0');
    expect(r.headers.get('x-paywall-cost')).toBeNull();
    const [charge] = await chargesOf(t, priced, 'empty');
    expect(charge.status).toBe('released');
    expect(charge.amount).toBe('0');
    expect((await money(t, priced, 'empty')).balance).toBe(ONE);

    // The same with a finish_reason is an answer: the request price and the prompt are charged.
    answer = {
      ...(answer as object),
      choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'stop' }],
    };
    await t.rest('POST', '/v1/u/empty/chat/completions', {
      token: priced.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect((await chargesOf(t, priced, 'empty'))[1].amount).toBe((1000n + cost(11, 0)).toString());
  });
  /** The request's terminal event and its charge: released, nothing taken, `failed` with the provider's fault. */
  async function expectFailedAndFree(user: string): Promise<void> {
    const [charge] = await chargesOf(t, priced, user);
    expect(charge).toMatchObject({ status: 'released', amount: '0', error_code: 'upstream_error' });
    const events = (await eventsOf(t, priced, 'paywall.')).filter(
      (e) => e.data.requestId === charge.id || e.data.activityId === charge.id,
    );
    expect(events.map((e) => e.type)).toEqual([
      'paywall.proxy.request.started',
      'paywall.proxy.request.failed',
    ]);
    expect(events[1].data.errorCode).toBe('upstream_error');
    expect((await money(t, priced, user)).balance).toBe(ONE);
  }

  it('charges nothing for no output that ended in the provider\'s error (finish_reason "error"): a failed request', async () => {
    // Issue 30 (10): this answer was charged the request price and the prompt (1,033 raw units).
    await deposit(t, priced, 'error-finish', '1');
    answer = {
      id: 'chatcmpl-error',
      object: 'chat.completion',
      created: 1,
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'error' }],
      usage: { prompt_tokens: 13, completion_tokens: 0, total_tokens: 13 },
    };
    const r = await t.rest('POST', '/v1/u/error-finish/chat/completions', {
      token: priced.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(200);
    expect(r.body.usage.cost).toBe('0');
    expect(r.headers.get('x-paywall-cost')).toBeNull();
    await expectFailedAndFree('error-finish');

    // Streamed: the error chunk, then usage and [DONE].
    await deposit(t, priced, 'error-finish-stream', '1');
    const chunk = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
    const base = { id: 'chatcmpl-se', object: 'chat.completion.chunk', created: 1, model: MODEL };
    answer =
      chunk({
        ...base,
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
      }) +
      chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'error' }] }) +
      chunk({ ...base, choices: [], usage: { prompt_tokens: 13, completion_tokens: 0, total_tokens: 13 } }) +
      'data: [DONE]\n\n';
    const s = await t.rest('POST', '/v1/u/error-finish-stream/chat/completions', {
      token: priced.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true },
    });
    expect(s.status).toBe(200);
    expect(s.body).toContain('data: [DONE]');
    await expectFailedAndFree('error-finish-stream');

    // Messages on this OpenAI-kind provider (translated): no stop reason, nothing charged.
    await deposit(t, priced, 'error-finish-messages', '1');
    answer = {
      id: 'chatcmpl-error-m',
      object: 'chat.completion',
      created: 1,
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'error' }],
      usage: { prompt_tokens: 13, completion_tokens: 0, total_tokens: 13 },
    };
    const m = await t.rest('POST', '/v1/u/error-finish-messages/messages', {
      token: priced.apiKey,
      body: { model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(m.status).toBe(200);
    expect(m.body).toMatchObject({ type: 'message', stop_reason: null, content: [] });
    expect(m.body.usage.cost).toBe('0');
    const [mc] = await chargesOf(t, priced, 'error-finish-messages');
    expect(mc).toMatchObject({ status: 'released', amount: '0' });
    expect((await money(t, priced, 'error-finish-messages')).balance).toBe(ONE);

    // An empty answer that finished normally is still an answer: the request price and the prompt.
    await deposit(t, priced, 'empty-stop', '1');
    answer = {
      ...(answer as object),
      choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'stop' }],
    };
    await t.rest('POST', '/v1/u/empty-stop/chat/completions', {
      token: priced.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
    });
    const [stopped] = await chargesOf(t, priced, 'empty-stop');
    expect(stopped).toMatchObject({ status: 'completed', amount: (1000n + cost(13, 0)).toString() });
  });

  it('charges nothing for a failed Responses answer without output', async () => {
    await deposit(t, priced, 'empty-resp', '1');
    answer = {
      id: 'resp_failed',
      object: 'response',
      created_at: 1,
      status: 'failed',
      error: { code: 'server_error', message: 'The model failed.' },
      model: MODEL,
      output: [],
      usage: { input_tokens: 11, output_tokens: 0, total_tokens: 11 },
    };
    const r = await t.rest('POST', '/v1/u/empty-resp/responses', {
      token: priced.apiKey,
      body: { model: MODEL, input: 'hi' },
    });
    expect(r.status).toBe(200);
    expect(r.body.usage.cost).toBe('0');
    await expectFailedAndFree('empty-resp');
  });

  it('charges nothing for a stream that produced no output and ended without a finish reason', async () => {
    await deposit(t, priced, 'empty-stream', '1');
    const chunk = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
    const base = { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: MODEL };
    answer =
      chunk({
        ...base,
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
      }) +
      chunk({ ...base, choices: [], usage: { prompt_tokens: 11, completion_tokens: 0, total_tokens: 11 } }) +
      'data: [DONE]\n\n';
    const r = await t.rest('POST', '/v1/u/empty-stream/chat/completions', {
      token: priced.apiKey,
      body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true },
    });
    expect(r.status).toBe(200);
    expect(r.body).toContain('data: [DONE]');
    const [charge] = await chargesOf(t, priced, 'empty-stream');
    expect(charge).toMatchObject({ status: 'released', amount: '0' });
    expect((await money(t, priced, 'empty-stream')).balance).toBe(ONE);
  });
});
