import type { Sql } from '../../../src/db/database.js';
import { Api, chatBody, type Paywall, MODEL, sleep, type HttpAnswer } from './service.js';

/**
 * Mixed client load for the fault suite: REST deposits and manual charges with idempotency keys,
 * GraphQL deposit/charge mutations (idempotencyKey), JSON chats and SSE streams. Every money operation
 * carries its key in `metadata.op`, so the test can find its ledger entries by key.
 */

export type OpKind =
  'deposit-rest' | 'charge-rest' | 'deposit-gql' | 'charge-gql' | 'chat-json' | 'chat-stream';

export interface MoneyOp {
  key: string;
  kind: OpKind;
  user: string;
  amount: string;
  amountRaw: bigint;
  /** 'acked': a 2xx answer; 'lost': no answer (connection cut); 'refused': a non-2xx answer. */
  outcome: 'acked' | 'lost' | 'refused';
  status?: number;
  /** The first 2xx answer (what a replay must repeat). */
  answer?: { status: number; text: string; body: any };
  /** A charge that succeeded (or a deposit): one ledger movement expected. */
  applied?: boolean;
  /** GraphQL deposit: the ledger entry id answered. */
  ledgerEntryId?: string;
}

export interface ChatOp {
  kind: 'chat-json' | 'chat-stream';
  user: string;
  outcome: 'charged' | 'blocked' | 'lost' | 'failed';
  status?: number;
  cost?: string;
}

const DEPOSIT_GQL = `mutation($i: DepositInput!) { deposit(input: $i) { balance ledgerEntryId replayed } }`;
const CHARGE_GQL = `mutation($i: ChargeInput!) { charge(input: $i) { success balance replayed } }`;

export function toRaw(amount: string): bigint {
  const [i, f = ''] = amount.split('.');
  return BigInt(i) * 1_000_000n + BigInt(f.padEnd(6, '0'));
}

export class LoadGenerator {
  readonly money = new Map<string, MoneyOp>();
  readonly chats: ChatOp[] = [];
  /** Unexpected answers (5xx, a non-JSON error…): the test fails on any. */
  readonly anomalies: string[] = [];
  sent = 0;
  inFlightChats = 0;
  private seq = 0;

  constructor(
    private readonly rnd: () => number,
    private readonly pw: Paywall,
    readonly users: string[],
    private readonly prefix: string,
  ) {}

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rnd() * xs.length)];
  }

  private amount(minRaw: number, maxRaw: number): string {
    const raw = minRaw + Math.floor(this.rnd() * (maxRaw - minRaw));
    return (raw / 1_000_000).toFixed(6);
  }

  /** The body of a money operation (REST and GraphQL use the same fields). */
  static bodyOf(op: MoneyOp) {
    return { user: op.user, amount: op.amount, metadata: { op: op.key } };
  }

  /** Sends one money operation (new, or again with the same key) and returns the raw answer. */
  async sendMoney(api: Api, op: MoneyOp): Promise<HttpAnswer> {
    const body = LoadGenerator.bodyOf(op);
    if (op.kind === 'deposit-rest' || op.kind === 'charge-rest') {
      const path = op.kind === 'deposit-rest' ? '/v1/user/balance/deposit' : '/v1/user/charge';
      return api.rest('POST', path, { token: this.pw.apiKey, body, headers: { 'idempotency-key': op.key } });
    }
    const query = op.kind === 'deposit-gql' ? DEPOSIT_GQL : CHARGE_GQL;
    return api.rest('POST', '/graphql', {
      token: this.pw.apiKey,
      body: { query, variables: { i: { ...body, idempotencyKey: op.key } } },
    });
  }

  /** Whether an answer is a 2xx success of the operation, and whether it moved money. */
  static judge(op: MoneyOp, r: HttpAnswer): { ok: boolean; applied: boolean; ledgerEntryId?: string } {
    if (r.status < 200 || r.status >= 300) return { ok: false, applied: false };
    switch (op.kind) {
      case 'deposit-rest':
        return { ok: typeof r.body?.balance === 'string', applied: true };
      case 'charge-rest':
        return { ok: typeof r.body?.success === 'boolean', applied: r.body?.success === true };
      case 'deposit-gql': {
        const d = r.body?.data?.deposit;
        return { ok: !!d && !r.body.errors, applied: true, ledgerEntryId: d?.ledgerEntryId };
      }
      case 'charge-gql': {
        const d = r.body?.data?.charge;
        return { ok: !!d && !r.body.errors, applied: d?.success === true };
      }
      default:
        return { ok: false, applied: false };
    }
  }

  newMoneyOp(kind: OpKind, user: string, amount: string): MoneyOp {
    const op: MoneyOp = {
      key: `${this.prefix}-${++this.seq}-${kind}`,
      kind,
      user,
      amount,
      amountRaw: toRaw(amount),
      outcome: 'lost',
    };
    this.money.set(op.key, op);
    return op;
  }

  async runMoney(api: Api, op: MoneyOp): Promise<void> {
    this.sent++;
    let r: HttpAnswer;
    try {
      r = await this.sendMoney(api, op);
    } catch {
      op.outcome = 'lost';
      return;
    }
    this.record(op, r);
  }

  /** Records an answer to a (possibly repeated) money operation. */
  record(op: MoneyOp, r: HttpAnswer): void {
    op.status = r.status;
    const j = LoadGenerator.judge(op, r);
    if (j.ok) {
      op.outcome = 'acked';
      op.applied = j.applied;
      op.ledgerEntryId = j.ledgerEntryId;
      op.answer = { status: r.status, text: r.text, body: r.body };
      return;
    }
    // GraphQL reports a 409-style conflict as an error in a 200; REST as 409. Both are "try later".
    const conflict =
      r.status === 409 || (r.body?.errors ?? []).some((e: any) => /still being processed/.test(e.message));
    if (!conflict) this.anomalies.push(`${op.kind} ${op.key}: ${r.status} ${r.text.slice(0, 300)}`);
    op.outcome = op.outcome === 'acked' ? 'acked' : 'refused';
  }

  async runChat(api: Api, kind: 'chat-json' | 'chat-stream', user: string): Promise<void> {
    this.sent++;
    this.inFlightChats++;
    const c: ChatOp = { kind, user, outcome: 'lost' };
    this.chats.push(c);
    try {
      const r = await api.rest('POST', '/v1/chat/completions', {
        token: this.pw.apiKey,
        headers: { 'x-paywall-user': user },
        body: chatBody(
          kind === 'chat-stream' ? { stream: true, stream_options: { include_usage: true } } : {},
        ),
      });
      c.status = r.status;
      if (r.status !== 200) {
        c.outcome = 'failed';
        this.anomalies.push(`${kind}: ${r.status} ${r.text.slice(0, 300)}`);
      } else if (kind === 'chat-json') {
        if (r.body?.paywall) c.outcome = 'blocked';
        else {
          c.outcome = 'charged';
          c.cost = r.headers.get('x-paywall-cost') ?? undefined;
        }
      } else if (r.text.includes('"paywall"')) c.outcome = 'blocked';
      else if (r.text.trimEnd().endsWith('data: [DONE]') && !r.text.includes('"error"')) {
        c.outcome = 'charged';
        c.cost = /"cost":"([0-9.]+)"/.exec(r.text)?.[1];
      } else c.outcome = 'lost'; // cut mid-stream by the kill
    } catch {
      c.outcome = 'lost';
    } finally {
      this.inFlightChats--;
    }
  }

  /** One random operation (weights: chats and money movements about even). */
  async step(api: Api): Promise<void> {
    const user = this.pick(this.users);
    const x = this.rnd();
    if (x < 0.2)
      return this.runMoney(api, this.newMoneyOp('deposit-rest', user, this.amount(10_000, 200_000)));
    if (x < 0.35) return this.runMoney(api, this.newMoneyOp('charge-rest', user, this.amount(100, 50_000)));
    if (x < 0.45)
      return this.runMoney(api, this.newMoneyOp('deposit-gql', user, this.amount(10_000, 200_000)));
    if (x < 0.55) return this.runMoney(api, this.newMoneyOp('charge-gql', user, this.amount(100, 50_000)));
    if (x < 0.8) return this.runChat(api, 'chat-json', user);
    return this.runChat(api, 'chat-stream', user);
  }

  /** `workers` loops of steps until `stop()` says so; `apis` are used round-robin per step. */
  run(apis: Api[], workers: number, until: () => boolean, maxSteps = Infinity): Promise<void> {
    let n = 0;
    const loop = async () => {
      while (!until() && n < maxSteps) {
        const api = apis[n++ % apis.length];
        await this.step(api);
        await sleep(Math.floor(this.rnd() * 10));
      }
    };
    return Promise.all(Array.from({ length: workers }, loop)).then(() => undefined);
  }

  /**
   * Compares the ledger with what the clients were told: every movement of the paywall's users is a known
   * operation (by `metadata.op`) of the right kind and amount, or the usage of a completed chat charge; no
   * key moved money twice; each acknowledged operation moved money exactly when it said so (a GraphQL
   * deposit under the ledger id it answered); acknowledged chats were charged CHAT_COST_RAW each.
   * Returns the problems found (empty when all is well).
   */
  async verifyLedger(sql: Sql, paywallId: string, chatCostRaw: bigint): Promise<string[]> {
    const problems: string[] = [];
    const rows = await sql.query<{
      id: string;
      kind: string;
      amount: string;
      op: string | null;
      charge_id: string | null;
    }>(
      `select t.id, t.kind, t.amount_raw::text as amount, t.metadata->>'op' as op, t.charge_id
         from transfer t where t.paywall_id = $1 and t.end_user_id is not null`,
      [paywallId],
    );
    const byOp = new Map<string, typeof rows>();
    let usage = 0;
    for (const r of rows) {
      if (r.kind === 'usage') {
        usage++;
        continue;
      }
      const op = r.op ? this.money.get(r.op) : undefined;
      if (!op) {
        problems.push(`a ${r.kind} transfer ${r.id} no client sent (op ${r.op})`);
        continue;
      }
      const kind = op.kind.startsWith('deposit') ? 'deposit' : 'charge';
      if (r.kind !== kind) problems.push(`${op.key}: transfer kind ${r.kind}, expected ${kind}`);
      if (BigInt(r.amount) !== op.amountRaw) problems.push(`${op.key}: amount ${r.amount} ≠ ${op.amountRaw}`);
      byOp.set(op.key, [...(byOp.get(op.key) ?? []), r]);
    }
    for (const [key, list] of byOp)
      if (list.length > 1) problems.push(`${key}: applied ${list.length} times`);
    for (const op of this.money.values()) {
      const n = byOp.get(op.key)?.length ?? 0;
      if (op.outcome === 'acked' && n !== (op.applied ? 1 : 0))
        problems.push(`${op.key}: acknowledged (applied=${op.applied}) but ${n} ledger movements`);
      if (op.ledgerEntryId && byOp.get(op.key)?.[0]?.id !== op.ledgerEntryId)
        problems.push(`${op.key}: answered ledger entry ${op.ledgerEntryId}, not in the ledger`);
    }
    const charges = await sql.query<{ status: string; amount: string; n: number }>(
      `select status, amount_raw::text as amount, count(*)::int as n from charge
        where paywall_id = $1 and kind = 'usage' group by 1, 2`,
      [paywallId],
    );
    const completed = charges.filter((c) => c.status === 'completed');
    for (const c of completed)
      if (BigInt(c.amount) !== chatCostRaw) problems.push(`${c.n} completed chat(s) charged ${c.amount}`);
    const nCompleted = completed.reduce((s, c) => s + c.n, 0);
    if (usage !== nCompleted) problems.push(`${usage} usage transfers for ${nCompleted} completed chats`);
    const charged = this.chats.filter((c) => c.outcome === 'charged');
    if (nCompleted < charged.length)
      problems.push(`${charged.length} chats charged but ${nCompleted} completed`);
    if (nCompleted > this.chats.length)
      problems.push(`${nCompleted} completed chats of ${this.chats.length} sent`);
    const costs = new Set(charged.map((c) => c.cost));
    const expected = (Number(chatCostRaw) / 1e6).toFixed(6);
    if (charged.length && (costs.size !== 1 || !costs.has(expected)))
      problems.push(`chat costs answered: ${[...costs].join(', ')} (expected ${expected})`);
    return problems;
  }

  counts() {
    const money = [...this.money.values()];
    return {
      sent: this.sent,
      moneyOps: money.length,
      moneyAcked: money.filter((o) => o.outcome === 'acked').length,
      chats: this.chats.length,
      chatsCharged: this.chats.filter((c) => c.outcome === 'charged').length,
      chatsBlocked: this.chats.filter((c) => c.outcome === 'blocked').length,
      chatsLost: this.chats.filter((c) => c.outcome === 'lost').length,
    };
  }
}

export { MODEL };
