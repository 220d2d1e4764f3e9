import { spawn } from 'node:child_process';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { createAnthropic } from '@ai-sdk/anthropic';
import { ChatAnthropic } from '@langchain/anthropic';
import { tool as lcTool } from '@langchain/core/tools';
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { generateText, stepCountIs, tool as aiTool } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp, type TestApp } from './helpers/app.js';
import { AgentFake, FINAL_TEXT, Tap, type AgentUsage, type TappedRequest } from './helpers/agent-fake.js';
import { chargesOf, deposit, money, type ProxyPaywall } from './helpers/proxy-setup.js';

/**
 * The real agent tools from npm (pinned devDependencies) through the paywall, against a loopback fake
 * provider that answers a tool call and then a final answer (test/helpers/agent-fake.ts): Claude Code
 * (`claude -p`) and the Codex CLI (`codex exec`), each on a native and a translated route. Each tool is set
 * up as a person would: a base URL and an end-user key (docs/reference.md §19), no extra header — the key
 * names the paywall and the user.
 * Every run is charged to the raw unit from the fake's usage, computed here; what reached the fake is
 * compared with what the tool sent (docs/reference.md §20, §21).
 */

const BIN = new URL('../node_modules/.bin/', import.meta.url).pathname;

/** Cost prices (pico-USDC per token) of every model here; markup 1. */
const PROMPT = 1_000_000n; // 0.000001 USDC
const COMPLETION = 4_000_000n; // 0.000004 USDC

/** The charge of the answers the fake gave, computed independently: Σ (in x prompt + out x completion), each rounded up. */
const expectedRaw = (usages: AgentUsage[]) =>
  usages.reduce(
    (sum, u) => sum + (BigInt(u.input) * PROMPT + BigInt(u.output) * COMPLETION + 999_999n) / 1_000_000n,
    0n,
  );

const NATIVE_CLAUDE = 'claude-sonnet-4-20250514';
const CLAUDE_VIA_GPT = 'claude-on-gpt';
const NATIVE_GPT = 'gpt-4.1';
const GPT_VIA_CLAUDE = 'codex-on-claude';

let t: TestApp;
let fake: AgentFake;
let tap: Tap;
let pw: ProxyPaywall;

/** The model requests a tool sent (POST, the API's path; not count_tokens), in order. */
const sentTo = (path: string): TappedRequest[] =>
  tap.requests.filter((r) => r.path.split('?')[0].endsWith(path) && r.body);

/** True when `cache_control` appears anywhere in a body. */
const hasCacheControl = (v: unknown): boolean => JSON.stringify(v ?? null).includes('"cache_control"');

/**
 * Every field the paywall named in `x-paywall-dropped-fields` was in what the tool sent, and none of the
 * top-level ones reached the provider; returns the names.
 */
function expectDroppedNamed(sent: TappedRequest, reached: any): string[] {
  const header = sent.answerHeaders['x-paywall-dropped-fields'];
  const names = header ? header.split(',') : [];
  for (const name of names) {
    if (name === 'cache_control') expect(hasCacheControl(sent.body)).toBe(true);
    else expect(sent.body).toHaveProperty(name.split('.'));
    if (!name.includes('.')) expect(reached).not.toHaveProperty(name);
  }
  return names;
}

async function gqlOk(query: string, i: Record<string, unknown>) {
  const r = await t.gql(pw.apiKey, query, { i });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
}

beforeAll(async () => {
  fake = await AgentFake.start();
  t = await startTestApp();
  tap = await Tap.start(t.url);
  pw = await t.createPaywall('DEFAULT');
  const connect = `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`;
  await gqlOk(connect, { baseUrl: fake.baseUrl, apiKey: 'sk-openai-fake-0001' });
  await gqlOk(connect, {
    name: 'claude',
    kind: 'ANTHROPIC',
    baseUrl: fake.baseUrl,
    apiKey: 'sk-ant-fake-0001',
  });
  const price = `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`;
  const prices = { prompt: '0.000001', completion: '0.000004' };
  await gqlOk(price, { modelId: NATIVE_CLAUDE, provider: 'claude', ...prices });
  await gqlOk(price, { modelId: CLAUDE_VIA_GPT, upstreamModel: 'gpt-4.1', ...prices });
  await gqlOk(price, { modelId: NATIVE_GPT, ...prices });
  await gqlOk(price, {
    modelId: GPT_VIA_CLAUDE,
    provider: 'claude',
    upstreamModel: NATIVE_CLAUDE,
    ...prices,
  });
}, 60_000);
afterAll(async () => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  await tap?.close();
  await t?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  tap.reset();
});

/** Temporary HOME and work directories of the tool runs (removed at the end). */
const temps: string[] = [];
const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};

/** Runs a tool to its end; resolves with its exit code and output (never rejects). */
function run(cmd: string, args: string[], env: Record<string, string>, cwd: string) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(cmd, args, {
      cwd,
      env: { PATH: `${BIN}:/usr/bin:/bin`, LANG: 'C.UTF-8', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** An end-user key for `user` (created with the paywall's key, as an app's back end would). */
async function userKey(user: string): Promise<string> {
  const r = await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body: { user, name: 'agent tool' } });
  expect(r.status).toBe(201);
  return r.body.key as string;
}

/** Claude Code in print mode, offline but for the paywall (telemetry, updates and extra traffic off). */
async function claude(model: string, user: string, extraEnv: Record<string, string> = {}) {
  const key = await userKey(user);
  const home = tempDir('cc-home-');
  const work = tempDir('cc-work-');
  return run(
    `${BIN}claude`,
    [
      '-p',
      'Run `echo paywall-ok` with the Bash tool, then tell me what it printed.',
      '--allowedTools',
      'Bash',
    ],
    {
      HOME: home,
      ANTHROPIC_BASE_URL: tap.url,
      ANTHROPIC_API_KEY: key,
      ANTHROPIC_MODEL: model,
      ANTHROPIC_SMALL_FAST_MODEL: model,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
      ANTHROPIC_DEFAULT_SONNET_MODEL: model,
      ANTHROPIC_DEFAULT_OPUS_MODEL: model,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      DISABLE_BUG_COMMAND: '1',
      ...extraEnv,
    },
    work,
  );
}

/** The Codex CLI (`codex exec`) with a provider pointing at the paywall (config.toml in CODEX_HOME). */
async function codex(model: string, user: string, config: string[] = []) {
  const key = await userKey(user);
  const home = tempDir('codex-home-');
  const work = tempDir('codex-work-');
  writeFileSync(
    join(home, 'config.toml'),
    [
      `model = "${model}"`,
      `model_provider = "paywall"`,
      `approval_policy = "never"`,
      `sandbox_mode = "danger-full-access"`,
      // Codex offers OpenAI's hosted web search by default; an Anthropic provider has none (refused, §21).
      `web_search = "disabled"`,
      ...config,
      `[model_providers.paywall]`,
      `name = "Paywall"`,
      `base_url = "${tap.url}/v1"`,
      `env_key = "PAYWALL_KEY"`,
      `wire_api = "responses"`,
      `[analytics]`,
      `enabled = false`,
      '',
    ].join('\n'),
  );
  return run(
    `${BIN}codex`,
    ['exec', '--skip-git-repo-check', 'Run `echo paywall-ok` in the shell, then tell me what it printed.'],
    { HOME: home, CODEX_HOME: home, PAYWALL_KEY: key },
    work,
  );
}

describe('Claude Code (claude -p) through the paywall', () => {
  it.each([
    ['native, to an Anthropic provider', NATIVE_CLAUDE, '/messages'],
    ['translated, to an OpenAI-compatible provider', CLAUDE_VIA_GPT, '/chat/completions'],
  ])(
    '%s: runs the tool, gets the answer, charged to the raw unit',
    async (_, model, path) => {
      const user = `cc-${path.length}`;
      await deposit(t, pw, user, '5');
      const r = await claude(model, user);
      expect({ code: r.code, out: r.stdout.trim() }).toMatchObject({
        code: 0,
        out: expect.stringContaining('paywall-ok'),
      });
      // One request ran the tool, one got the final answer (and maybe side requests without tools).
      const calls = fake.of(path);
      expect(calls.length).toBeGreaterThanOrEqual(2);
      expect(JSON.stringify(calls.at(-1)!.body)).toContain('paywall-ok'); // the tool's output went back
      expect(r.stdout).toContain(FINAL_TEXT.slice(0, 20));
      const raw = expectedRaw(fake.usages);
      expect(await money(t, pw, user)).toMatchObject({ balance: 5_000_000n - raw, held: 0n });
      expect((await chargesOf(t, pw, user)).length).toBe(fake.usages.length);

      // What reached the provider against what Claude Code sent, request by request.
      const sent = sentTo('/messages');
      expect(sent).toHaveLength(calls.length);
      sent.forEach((s, i) => {
        const reached = calls[i].body;
        expect(s.answerHeaders['x-paywall-cap']).toBeUndefined(); // the client's cap was kept
        if (path === '/messages') {
          // Natively everything goes as sent (cap, thinking, cache_control, tools), but the end user's id.
          const { metadata: _m, ...asSent } = s.body;
          expect(reached).toEqual(asSent);
        } else {
          expect(reached.max_completion_tokens).toBe(s.body.max_tokens);
          expect(reached.model).toBe('gpt-4.1');
          expectDroppedNamed(s, reached);
          if (hasCacheControl(s.body))
            expect(s.answerHeaders['x-paywall-dropped-fields']).toContain('cache_control');
        }
      });
      expect(sent.some((s) => s.body.max_tokens > 4096)).toBe(true); // no 4,096 default in the way
    },
    180_000,
  );

  it('thinking with budget_tokens 10,000 and 0.05 USDC: max_tokens > budget_tokens ≥ 1,024 upstream, or the top-up reply; never a provider 400', async () => {
    await deposit(t, pw, 'cc-thinker', '0.05');
    const r = await claude(NATIVE_CLAUDE, 'cc-thinker', { MAX_THINKING_TOKENS: '10000' });
    const sent = sentTo('/messages');
    expect(sent.some((s) => s.body.thinking?.budget_tokens === 10000)).toBe(true); // the tool asked for it
    for (const req of fake.of('/messages')) {
      const { max_tokens, thinking } = req.body;
      if (thinking?.type !== 'enabled') continue;
      expect(max_tokens).toBeGreaterThan(thinking.budget_tokens);
      expect(thinking.budget_tokens).toBeGreaterThanOrEqual(1024);
    }
    const lowered = sent.filter((s) => s.answerHeaders['x-paywall-cap']);
    const toppedUp = r.stdout.includes('/topup/');
    expect(lowered.length > 0 || toppedUp).toBe(true);
    expect(sent.every((s) => s.status === 200)).toBe(true);
    expect((await money(t, pw, 'cc-thinker')).held).toBe(0n);
  }, 180_000);
});

describe('the Codex CLI (codex exec) through the paywall', () => {
  it.each([
    ['native, to an OpenAI provider (Responses)', NATIVE_GPT, '/responses'],
    ['translated, to an Anthropic provider', GPT_VIA_CLAUDE, '/messages'],
  ])(
    '%s: runs the tool, gets the answer, charged to the raw unit',
    async (_, model, path) => {
      const user = `codex-${path.length}`;
      await deposit(t, pw, user, '5');
      const r = await codex(model, user);
      expect({ code: r.code, out: r.stdout + r.stderr }).toMatchObject({
        code: 0,
        out: expect.stringContaining('paywall-ok'),
      });
      const calls = fake.of(path);
      expect(calls.length).toBeGreaterThanOrEqual(2);
      expect(JSON.stringify(calls.at(-1)!.body)).toContain('paywall-ok');
      const raw = expectedRaw(fake.usages);
      expect(await money(t, pw, user)).toMatchObject({ balance: 5_000_000n - raw, held: 0n });

      const sent = sentTo('/responses');
      expect(sent).toHaveLength(calls.length);
      sent.forEach((s, i) => {
        const reached = calls[i].body;
        // Codex sends no cap: the model's maximum output goes upstream, named in x-paywall-cap.
        const cap = Number(s.answerHeaders['x-paywall-cap']);
        expect(cap).toBeGreaterThanOrEqual(4096);
        if (path === '/responses') {
          // Natively the body goes as sent, with that cap as max_output_tokens.
          expect(reached).toEqual({ ...s.body, max_output_tokens: cap });
        } else {
          expect(reached.max_tokens).toBe(cap);
          const names = expectDroppedNamed(s, reached);
          expect(names).toEqual(expect.arrayContaining(['include', 'store']));
          expect(reached.model).toBe(NATIVE_CLAUDE);
        }
      });
    },
    180_000,
  );
});

describe('the Codex CLI with reasoning on a Claude model that thinks', () => {
  it('model_reasoning_effort high: the turn that calls the tool thinks, the turn that reads its result does not (Anthropic would refuse it), the run completes, charged to the raw unit', async () => {
    const user = 'codex-thinks';
    await deposit(t, pw, user, '5');
    await gqlOk(`mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      modelId: 'codex-on-thinker',
      provider: 'claude',
      upstreamModel: NATIVE_CLAUDE,
      reasoningModel: true,
      prompt: '0.000001',
      completion: '0.000004',
    });
    const r = await codex('codex-on-thinker', user, ['model_reasoning_effort = "high"']);
    expect({ code: r.code, out: r.stdout + r.stderr }).toMatchObject({
      code: 0,
      out: expect.stringContaining('paywall-ok'),
    });
    const calls = fake.of('/messages');
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(calls[0].body.thinking).toEqual({ type: 'enabled', budget_tokens: 24576 });
    expect(calls.at(-1)!.body).not.toHaveProperty('thinking');
    const raw = expectedRaw(fake.usages);
    expect(await money(t, pw, user)).toMatchObject({ balance: 5_000_000n - raw, held: 0n });
  }, 180_000);
});

/** The one tool each framework gets: the fake calls it with `{city: "Paris"}`. */
const weather = { description: 'Look up the weather of a city', answer: 'Sunny, 21 C' };

describe('agent frameworks with one tool through the paywall', () => {
  it.each([
    ['native (Responses to an OpenAI provider)', NATIVE_GPT, '/responses'],
    ['translated (Responses to an Anthropic provider)', GPT_VIA_CLAUDE, '/messages'],
  ])(
    'the OpenAI Agents SDK, %s: the tool runs, the answer comes back, charged to the raw unit',
    async (_, model, path) => {
      const user = `agents-${path.length}`;
      await deposit(t, pw, user, '1');
      setTracingDisabled(true);
      const openAIClient = new OpenAI({
        baseURL: `${tap.url}/v1`,
        apiKey: await userKey(user),
      });
      const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient }) });
      let ran = 0;
      const lookup = agentTool({
        name: 'lookup',
        description: weather.description,
        parameters: z.object({ city: z.string() }),
        execute: async ({ city }) => {
          ran++;
          return `${city}: ${weather.answer}`;
        },
      });
      const agent = new Agent({ name: 'Weather', instructions: 'Use the tool.', model, tools: [lookup] });
      const result = await runner.run(agent, 'What is the weather in Paris?');
      expect(ran).toBe(1);
      expect(result.finalOutput).toBe(FINAL_TEXT);
      expect(JSON.stringify(fake.of(path).at(-1)!.body)).toContain(weather.answer);
      const raw = expectedRaw(fake.usages);
      expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
      // The SDK sent no cap: the model's documented maximum output goes upstream (docs/reference.md §20),
      // gpt-4.1's 32,768 natively and, translated, Claude's 64,000 (models.dev), not 4,096.
      for (const s of sentTo('/responses')) expect(s.body).not.toHaveProperty('max_output_tokens');
      if (path === '/responses') for (const r of fake.of(path)) expect(r.body.max_output_tokens).toBe(32768);
      else for (const r of fake.of(path)) expect(r.body.max_tokens).toBe(64000);
    },
    60_000,
  );

  it.each([
    ['native', NATIVE_CLAUDE, '/messages'],
    ['translated to an OpenAI provider', CLAUDE_VIA_GPT, '/chat/completions'],
  ])(
    'the AI SDK (@ai-sdk/anthropic), %s: the tool runs, the client’s cap goes upstream, charged to the raw unit',
    async (_, model, path) => {
      const user = `aisdk-${path.length}`;
      await deposit(t, pw, user, '1');
      const anthropic = createAnthropic({
        baseURL: `${tap.url}/v1`,
        apiKey: await userKey(user),
      });
      let ran = 0;
      const r = await generateText({
        model: anthropic(model),
        prompt: 'What is the weather in Paris?',
        maxOutputTokens: 20000,
        maxRetries: 0,
        stopWhen: stepCountIs(3),
        tools: {
          lookup: aiTool({
            description: weather.description,
            inputSchema: z.object({ city: z.string() }),
            execute: async ({ city }) => {
              ran++;
              return `${city}: ${weather.answer}`;
            },
          }),
        },
      });
      expect(ran).toBe(1);
      expect(r.text).toBe(FINAL_TEXT);
      const raw = expectedRaw(fake.usages);
      expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
      const reached = fake.of(path);
      expect(reached).toHaveLength(2);
      for (const req of reached) expect(req.body.max_tokens ?? req.body.max_completion_tokens).toBe(20000); // kept, not 4,096
    },
    60_000,
  );

  it.each([
    ['native', NATIVE_CLAUDE, '/messages'],
    ['translated to an OpenAI provider', CLAUDE_VIA_GPT, '/chat/completions'],
  ])(
    'LangChain (@langchain/anthropic), %s: the tool call and its result, charged to the raw unit',
    async (_, model, path) => {
      const user = `lc-${path.length}`;
      await deposit(t, pw, user, '1');
      const lookup = lcTool(async ({ city }: { city: string }) => `${city}: ${weather.answer}`, {
        name: 'lookup',
        description: weather.description,
        schema: z.object({ city: z.string() }),
      });
      const llm = new ChatAnthropic({
        model,
        apiKey: await userKey(user),
        anthropicApiUrl: tap.url,
        maxTokens: 16384,
        maxRetries: 0,
      }).bindTools([lookup]);
      const history: BaseMessage[] = [new HumanMessage('What is the weather in Paris?')];
      const first = (await llm.invoke(history)) as AIMessage;
      expect(first.tool_calls).toEqual([
        expect.objectContaining({ name: 'lookup', args: { city: 'Paris' } }),
      ]);
      history.push(first);
      for (const call of first.tool_calls!)
        history.push(
          new ToolMessage({ tool_call_id: call.id!, content: String(await lookup.invoke(call.args as any)) }),
        );
      const final = await llm.invoke(history);
      expect(final.content).toBe(FINAL_TEXT);
      // The input count the answer reports is the provider's (LangChain showed 0 on translated streams).
      expect(final.usage_metadata?.input_tokens).toBeGreaterThan(0);
      const raw = expectedRaw(fake.usages);
      expect(await money(t, pw, user)).toMatchObject({ balance: 1_000_000n - raw, held: 0n });
      expect(fake.of(path)).toHaveLength(2);
      for (const req of fake.of(path))
        expect(req.body.max_tokens ?? req.body.max_completion_tokens).toBe(16384); // kept, not 4,096
    },
    60_000,
  );
});
