import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSubscription } from '../helpers/webhook-receiver.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import {
  Api,
  createPaywall,
  killAllServices,
  sleep,
  startService,
  type Paywall,
  type ServiceProcess,
} from './helpers/service.js';

/**
 * Webhook receiver faults against the real service process (docs/reference.md §1 "Webhook retries",
 * docs/webhooks.md "Answers, retries and timeouts"): a receiver that hangs past WEBHOOK_TIMEOUT_MS, resets
 * the connection, redirects (not followed: a failed attempt), is slow but within the timeout, flaps (fails
 * twice, then answers), answers 410 (ends at once) or 429 (retried). One event goes to one subscription per
 * behaviour; the delivery logs (REST and GraphQL) must show the final state and the attempts, and the
 * receiver must have seen exactly those attempts.
 */

const MAX_ATTEMPTS = 4;
const TIMEOUT_MS = 1000;

type Behaviour = (req: IncomingMessage, res: ServerResponse, hit: number) => void;

let pp: PrivatePostgres;
let service: ServiceProcess;
let api: Api;
let pw: Paywall;
let receiver: Server;
let port: number;
const hits = new Map<string, { at: number; body: any }[]>();
const behaviours = new Map<string, Behaviour>([
  ['hang', () => {}],
  ['reset', (req) => req.socket.destroy()],
  ['redirect', (_q, res) => res.writeHead(302, { location: `http://127.0.0.1:${port}/target` }).end()],
  ['target', (_q, res) => res.writeHead(200).end()],
  ['slow', (_q, res) => setTimeout(() => res.writeHead(200).end('slow ok'), 600)],
  ['flap', (_q, res, hit) => (hit <= 2 ? res.writeHead(503).end('down') : res.writeHead(204).end())],
  ['gone', (_q, res) => res.writeHead(410).end('gone')],
  [
    'busy',
    (_q, res, hit) =>
      hit === 1 ? res.writeHead(429, { 'retry-after': '0' }).end() : res.writeHead(200).end(),
  ],
]);

beforeAll(async () => {
  pp = await startPrivatePostgres();
  receiver = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const name = (req.url ?? '').slice(1);
      const list = hits.get(name) ?? [];
      let body: any = null;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      } catch {
        /* not JSON */
      }
      list.push({ at: Date.now(), body });
      hits.set(name, list);
      behaviours.get(name)?.(req, res, list.length);
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  port = (receiver.address() as AddressInfo).port;
  const dbUrl = await pp.createDatabase('receiver');
  service = await startService(dbUrl, {
    WEBHOOK_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    WEBHOOK_BACKOFF_BASE_MS: '100',
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  });
  api = new Api(service.url);
  pw = await createPaywall(api, 'http://127.0.0.1:9/v1', { name: 'Receivers' });
}, 120_000);

afterAll(async () => {
  await service?.stop();
  killAllServices();
  receiver?.closeAllConnections();
  receiver?.close();
  pp?.destroy();
});

test('hang, reset, redirect, slow, flapping, 410 and 429 receivers: final states and attempts as documented', async () => {
  const started = Date.now();
  const subs = new Map<string, string>();
  for (const name of ['hang', 'reset', 'redirect', 'slow', 'flap', 'gone', 'busy'])
    subs.set(
      name,
      (
        await createSubscription(api, pw.apiKey, {
          url: `http://127.0.0.1:${port}/${name}`,
          events: ['paywall.updated'],
        })
      ).id,
    );
  await api.gql(pw.apiKey, `mutation { updatePaywall(input: {name: "Receivers 2"}) { id } }`);

  const log = async (name: string) => {
    const r = await api.rest('GET', `/v1/webhooks/logs?subscriptionId=${subs.get(name)}`, {
      token: pw.apiKey,
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toHaveLength(1);
    return r.body.data[0];
  };
  const final = new Map<string, any>();
  for (const deadline = Date.now() + 60_000; final.size < subs.size;) {
    for (const name of subs.keys()) {
      if (final.has(name)) continue;
      const entry = await log(name);
      if (entry.status !== 'pending') final.set(name, entry);
    }
    if (Date.now() > deadline)
      throw new Error(`still pending: ${[...subs.keys()].filter((n) => !final.has(n))}`);
    await sleep(200);
  }
  const seen = (name: string) => hits.get(name)?.length ?? 0;
  const state = (name: string) => {
    const e = final.get(name);
    return {
      status: e.status,
      attempts: e.attempts,
      responseStatus: e.responseStatus,
      nextAttemptAt: e.nextAttemptAt,
      seen: seen(name),
    };
  };

  expect(state('hang')).toEqual({
    status: 'error',
    attempts: MAX_ATTEMPTS,
    responseStatus: null,
    nextAttemptAt: null,
    seen: MAX_ATTEMPTS,
  });
  expect(state('reset')).toEqual({
    status: 'error',
    attempts: MAX_ATTEMPTS,
    responseStatus: null,
    nextAttemptAt: null,
    seen: MAX_ATTEMPTS,
  });
  expect(state('redirect')).toEqual({
    status: 'error',
    attempts: MAX_ATTEMPTS,
    responseStatus: 302,
    nextAttemptAt: null,
    seen: MAX_ATTEMPTS,
  });
  expect(seen('target')).toBe(0);
  expect(state('slow')).toEqual({
    status: 'success',
    attempts: 1,
    responseStatus: 200,
    nextAttemptAt: null,
    seen: 1,
  });
  expect(final.get('slow').responseLatencyMs).toBeGreaterThanOrEqual(550);
  expect(final.get('slow').responseBody).toBe('slow ok');
  expect(state('flap')).toEqual({
    status: 'success',
    attempts: 3,
    responseStatus: 204,
    nextAttemptAt: null,
    seen: 3,
  });
  expect(state('gone')).toEqual({
    status: 'error',
    attempts: 1,
    responseStatus: 410,
    nextAttemptAt: null,
    seen: 1,
  });
  expect(state('busy')).toEqual({
    status: 'success',
    attempts: 2,
    responseStatus: 200,
    nextAttemptAt: null,
    seen: 2,
  });

  // Every attempt carried the same event, numbered 1, 2, 3… in `delivery.attempts`.
  for (const name of ['hang', 'reset', 'redirect', 'flap', 'busy']) {
    const bodies = hits.get(name)!.map((h) => h.body);
    expect(bodies.map((b) => b.delivery.attempts)).toEqual(bodies.map((_, i) => i + 1));
    expect(new Set(bodies.map((b) => b.event.id)).size).toBe(1);
  }
  // A hanging receiver is given WEBHOOK_TIMEOUT_MS per attempt, then backoff (100 ms x 2^(k-1), ±20 %).
  const hangTimes = hits.get('hang')!.map((h) => h.at);
  for (let i = 1; i < hangTimes.length; i++)
    expect(hangTimes[i] - hangTimes[i - 1]).toBeGreaterThanOrEqual(
      TIMEOUT_MS + 0.8 * 100 * 2 ** (i - 1) - 50,
    );

  // GraphQL shows why the attempts got no answer, and the failures counted on the subscription.
  const gqlDeliveries = async (name: string) =>
    (
      await api.gql(
        pw.apiKey,
        `query($s: ID!) { webhookDeliveries(subscriptionId: $s, first: 5) { edges { node { status attempts lastError responseStatus } } } }`,
        { s: subs.get(name) },
      )
    ).webhookDeliveries.edges.map((e: any) => e.node);
  const [hang] = await gqlDeliveries('hang');
  expect(hang).toMatchObject({ status: 'error', attempts: MAX_ATTEMPTS, responseStatus: null });
  expect(hang.lastError).toMatch(/no response within 1000 ms/);
  const [reset] = await gqlDeliveries('reset');
  expect(reset.lastError).toBeTruthy();
  const sub = await api.gql(
    pw.apiKey,
    `query($s: ID!) { webhookSubscription(id: $s) { consecutiveFailures lastDeliveredAt } }`,
    {
      s: subs.get('hang'),
    },
  );
  expect(sub.webhookSubscription).toEqual({ consecutiveFailures: MAX_ATTEMPTS, lastDeliveredAt: null });
  const flap = await api.gql(
    pw.apiKey,
    `query($s: ID!) { webhookSubscription(id: $s) { consecutiveFailures lastDeliveredAt } }`,
    {
      s: subs.get('flap'),
    },
  );
  expect(flap.webhookSubscription.consecutiveFailures).toBe(0);
  expect(flap.webhookSubscription.lastDeliveredAt).not.toBeNull();

  const attempts = [...subs.keys()].reduce((s, n) => s + seen(n), 0);
  console.log(
    `receiver summary: ${subs.size} receivers, ${attempts} attempts received (` +
      [...subs.keys()].map((n) => `${n} ${final.get(n).status}/${final.get(n).attempts}`).join(', ') +
      `), ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
});
