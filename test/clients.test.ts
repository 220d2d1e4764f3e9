import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText } from 'ai';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { createProxyPaywall, deposit, MODEL, money, type ProxyPaywall } from './helpers/proxy-setup.js';

/**
 * The client libraries developers point at the proxy, used unchanged: the Vercel AI SDK (its default
 * model calls the Responses API, `.chat()` calls chat completions) and LangChain's ChatOpenAI. Each is
 * charged exactly (11 prompt + 7 completion tokens at the proxy-setup prices, markup 1.5: 1086 raw
 * units), renders the out-of-money reply as an ordinary message, and gets a clear 400 without a user.
 */
const COST = 1086n;
const FAKE_TEXT = 'Hello from the fake upstream!';

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;
beforeAll(async () => {
  fake = await FakeUpstream.start();
  t = await startTestApp();
  pw = await createProxyPaywall(t, fake);
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

const aiProvider = (user?: string) =>
  createOpenAI({
    baseURL: `${t.url}/v1`,
    apiKey: pw.apiKey,
    headers: user ? { 'X-Paywall-User': user } : {},
  });

describe('Vercel AI SDK (ai + @ai-sdk/openai)', () => {
  it('the default model (Responses API) and .chat() answer and are charged exactly', async () => {
    await deposit(t, pw, 'vera', '1');
    const viaResponses = await generateText({
      model: aiProvider('vera')(MODEL),
      prompt: 'Say hello',
      maxRetries: 0,
    });
    expect(viaResponses.text).toBe(FAKE_TEXT);
    expect(fake.requests.at(-1)!.url).toMatch(/\/responses$/);
    expect((await money(t, pw, 'vera')).balance).toBe(1_000_000n - COST);
    const viaChat = await generateText({
      model: aiProvider('vera').chat(MODEL),
      prompt: 'Say hello',
      maxRetries: 0,
    });
    expect(viaChat.text).toBe(FAKE_TEXT);
    expect(fake.requests.at(-1)!.url).toMatch(/\/chat\/completions$/);
    expect((await money(t, pw, 'vera')).balance).toBe(1_000_000n - 2n * COST);
    await expectLedgerProven(t.db);
  });

  it('streams (chat and Responses) and charges each stream once', async () => {
    await deposit(t, pw, 'wes', '1');
    for (const model of [aiProvider('wes').chat(MODEL), aiProvider('wes')(MODEL)]) {
      const s = streamText({ model, prompt: 'Say hello', maxRetries: 0 });
      let text = '';
      for await (const delta of s.textStream) text += delta;
      expect(text).toBe(FAKE_TEXT);
    }
    expect((await money(t, pw, 'wes')).balance).toBe(1_000_000n - 2n * COST);
    await expectLedgerProven(t.db);
  });

  it('renders the out-of-money reply as a normal answer with the top-up link', async () => {
    const r = await generateText({ model: aiProvider('broke-ai').chat(MODEL), prompt: 'hi', maxRetries: 0 });
    expect(r.text).toContain(`${t.url}/topup/${pw.id}?user=broke-ai`);
    const viaResponses = await generateText({
      model: aiProvider('broke-ai')(MODEL),
      prompt: 'hi',
      maxRetries: 0,
    });
    expect(viaResponses.text).toContain(`${t.url}/topup/${pw.id}?user=broke-ai`);
  });

  it('without a user: a 400 naming it', async () => {
    await expect(
      generateText({ model: aiProvider().chat(MODEL), prompt: 'hi', maxRetries: 0 }),
    ).rejects.toMatchObject({
      statusCode: 400,
      responseBody: expect.stringContaining('missing_user'),
    });
  });
});

describe("LangChain's ChatOpenAI", () => {
  const llm = (user?: string) =>
    new ChatOpenAI({
      model: MODEL,
      apiKey: pw.apiKey,
      maxRetries: 0,
      configuration: { baseURL: `${t.url}/v1`, defaultHeaders: user ? { 'X-Paywall-User': user } : {} },
    });

  it('invoke and stream answer and are charged exactly', async () => {
    await deposit(t, pw, 'lana', '1');
    const m = await llm('lana').invoke('Say hello');
    expect(m.content).toBe(FAKE_TEXT);
    let text = '';
    for await (const chunk of await llm('lana').stream('Say hello')) text += String(chunk.content);
    expect(text).toBe(FAKE_TEXT);
    expect((await money(t, pw, 'lana')).balance).toBe(1_000_000n - 2n * COST);
    await expectLedgerProven(t.db);
  });

  it('renders the out-of-money reply as a normal message; no user is a 400', async () => {
    const m = await llm('broke-lc').invoke('hi');
    expect(String(m.content)).toContain(`${t.url}/topup/${pw.id}?user=broke-lc`);
    await expect(llm().invoke('hi')).rejects.toMatchObject({ status: 400 });
  });
});
