import OpenAI from 'openai';
import { connectEndUser, createWallet } from './wallet-fixtures.js';
import type { TestApp } from './app.js';
import type { FakeUpstream } from './fake-upstream.js';

export const PROVIDER_KEY = 'sk-upstream-provider-secret-0001';
export const MODEL = 'gpt-test';

export interface ProxyPaywall {
  id: string;
  apiKey: string;
}

async function gqlOk(t: TestApp, token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

/**
 * A paywall selling MODEL through the fake upstream: prompt 0.000002, completion 0.000005 and request
 * 0.001 USDC, markup 1.5 (so 11 prompt + 7 completion tokens cost 1086 raw units).
 */
export async function createProxyPaywall(
  t: TestApp,
  fake: FakeUpstream,
  opts: {
    mode?: 'DEFAULT' | 'SHARED';
    maxCompletionTokens?: number | null;
    markup?: string;
    /** connectProvider's `capParameter` (omitted: the service's default). */
    capParameter?: 'MAX_COMPLETION_TOKENS' | 'MAX_TOKENS';
  } = {},
): Promise<ProxyPaywall> {
  const pw = await t.createPaywall(opts.mode ?? 'DEFAULT');
  const provider = { baseUrl: fake.baseUrl, apiKey: PROVIDER_KEY };
  await gqlOk(t, pw.apiKey, `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`, {
    i: opts.capParameter ? { ...provider, capParameter: opts.capParameter } : provider,
  });
  await gqlOk(t, pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: {
      modelId: MODEL,
      prompt: '0.000002',
      completion: '0.000005',
      request: '0.001',
      maxCompletionTokens: opts.maxCompletionTokens === undefined ? 1000 : opts.maxCompletionTokens,
    },
  });
  await gqlOk(t, pw.apiKey, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
    i: { markup: opts.markup ?? '1.5' },
  });
  return pw;
}

/** Credits a user through the deposit endpoint (DEFAULT mode). */
export async function deposit(t: TestApp, pw: ProxyPaywall, user: string, amount: string): Promise<void> {
  const r = await t.rest('POST', '/v1/user/balance/deposit', { token: pw.apiKey, body: { user, amount } });
  if (r.status !== 200) throw new Error(`deposit failed: ${r.status} ${JSON.stringify(r.body)}`);
}

/**
 * SHARED mode: connects a user (seen before) to a new wallet user funded with `fundRaw` (what the hosted
 * approval page and a top-up do). Returns the wallet.
 */
export async function connectShared(
  t: TestApp,
  pw: ProxyPaywall,
  user: string,
  fundRaw = 0n,
): Promise<{ walletUserId: string; accountId: string }> {
  const wallet = await createWallet(t.db, { fundRaw });
  await connectEndUser(t.db, pw.id, user, wallet);
  return wallet;
}

export interface UserMoney {
  balance: bigint;
  held: bigint;
  ledgerSum: bigint;
}

export async function money(t: TestApp, pw: ProxyPaywall, user: string): Promise<UserMoney> {
  // ledgerSum: the sum of the transfers of the account the user spends (credits − debits).
  const rows = await t.db.query(
    `select coalesce(a.balance_raw, 0)::text as b, coalesce(a.held_raw, 0)::text as h,
            (select coalesce(sum(case when x.credit_account_id = a.id then x.amount_raw else -x.amount_raw end), 0)::text
               from transfer x where x.credit_account_id = a.id or x.debit_account_id = a.id) as s
       from end_user u left join ledger_account a on a.id = u.account_id
      where u.paywall_id = $1 and u.external_id = $2`,
    [pw.id, user],
  );
  if (!rows.length) return { balance: 0n, held: 0n, ledgerSum: 0n };
  return { balance: BigInt(rows[0].b), held: BigInt(rows[0].h), ledgerSum: BigInt(rows[0].s) };
}

export async function chargesOf(t: TestApp, pw: ProxyPaywall, user: string): Promise<any[]> {
  return t.db.query(
    `select c.id, c.kind, c.status, c.model, c.prompt_tokens, c.completion_tokens, c.max_completion_tokens,
            c.amount_raw::text as amount, c.hold_raw::text as hold, c.uncollected_raw::text as uncollected,
            c.stream, c.error_code, c.metadata
       from charge c join end_user u on u.id = c.user_id
      where u.paywall_id = $1 and u.external_id = $2 order by c.created_at`,
    [pw.id, user],
  );
}

export async function eventsOf(t: TestApp, pw: ProxyPaywall, prefix = 'paywall.'): Promise<any[]> {
  return t.db.query(
    `select type, data, subject, trigger from event where paywall_id = $1 and type like $2 order by seq`,
    [pw.id, `${prefix}%`],
  );
}

/**
 * Waits until `check` holds (settlement after a disconnect happens after the client left) and returns
 * the value; fails the test when it still does not hold after `ms`.
 */
export async function eventually<T>(fn: () => Promise<T>, check: (v: T) => boolean, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (check(v)) return v;
    if (Date.now() > until)
      throw new Error(`eventually: the condition did not hold within ${ms} ms (last value: ${String(v)})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function client(t: TestApp, pw: ProxyPaywall, user?: string, viaPath = false): OpenAI {
  return new OpenAI({
    apiKey: pw.apiKey,
    baseURL: viaPath && user ? `${t.url}/v1/u/${encodeURIComponent(user)}` : `${t.url}/v1`,
    defaultHeaders: user && !viaPath ? { 'X-Paywall-User': user } : {},
    maxRetries: 0,
  });
}
