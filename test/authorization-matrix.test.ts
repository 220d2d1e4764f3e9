import { randomUUID } from 'node:crypto';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { eventually, liveClient, LiveSubscription } from './helpers/live-client.js';
import { LiveEventHub } from '../src/modules/live-events/live-event-hub.js';
import { enumerateOperations, enumerateRoutes, routeKey } from './helpers/routes.js';
import { getSchema } from '../src/graphql/schema.js';

/**
 * Authorization matrix (issue 10): every GraphQL root field and every REST route, called by every kind of
 * wrong caller, gets the documented refusal and shows nothing of the other tenant.
 *
 * Callers: no key, a made-up key, a rotated (old) key, an archived paywall's key (all four: REST 401
 * `authentication_error`, GraphQL UNAUTHENTICATED / graphql-ws close 4403); another owner's paywall key and
 * another owner's token aimed at the victim's paywall or resources (GraphQL NOT_FOUND, or FORBIDDEN for
 * owner-only operations; REST 404 for another tenant's resource, 401 for an owner token since REST takes
 * API keys only). Each case carries valid arguments, checked by a control call of the rightful owner that
 * must not be refused for authorization or validation reasons.
 *
 * Operations and routes are read from the built schema and the live Express router: one without a case
 * here fails the first two tests.
 */

interface Tenant {
  ownerToken: string;
  /** DEFAULT paywall with a user, a deposit, a webhook subscription, a priced model and a provider. */
  pw: { id: string; apiKey: string };
  /** SHARED paywall. */
  shared: { id: string; apiKey: string };
  user: string;
  subscriptionId: string;
  /** An end-user key of `user` (docs/reference.md §19). */
  userKeyId: string;
  eventId: string;
  modelId: string;
  /** Strings only this tenant's data contains: none may appear in an answer to another caller. */
  markers: string[];
}

type Principal = 'none' | 'wrongKey' | 'rotatedKey' | 'archivedKey' | 'otherKey' | 'otherOwner';
const UNAUTH: Principal[] = ['none', 'wrongKey', 'rotatedKey', 'archivedKey'];
const CROSS: Principal[] = ['otherKey', 'otherOwner'];

interface GqlCase {
  /** Selection and arguments; `T` is the tenant whose data the call targets. */
  query: string;
  vars: (T: Tenant) => Record<string, unknown>;
  /** Expected GraphQL code for a cross-tenant caller (default NOT_FOUND); 'own' = allowed, acts on the caller's own tenant only. */
  cross?: Partial<Record<Principal, string>>;
  /** Codes the control call may legitimately get (the fixture cannot make it succeed), with why. */
  controlMay?: string[];
}

const PW = 'id name description';
const SUB = 'id paywallId url events description secretSuffix';

/** One case per root field. */
const GQL: Record<string, GqlCase> = {
  'Query.paywalls': {
    query: `query { paywalls(includeArchived: true) { ${PW} } }`,
    vars: () => ({}),
    cross: { otherKey: 'own', otherOwner: 'own' },
  },
  'Query.paywall': { query: `query($p: ID) { paywall(id: $p) { ${PW} } }`, vars: (T) => ({ p: T.pw.id }) },
  'Query.user': {
    query: `query($p: ID, $u: String!) { user(paywallId: $p, externalId: $u) { id externalId balance } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Query.users': {
    query: `query($p: ID) { users(paywallId: $p) { edges { node { id externalId balance } } } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Query.models': {
    query: `query($p: ID) { models(paywallId: $p) { id name description } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Query.model': {
    query: `query($p: ID, $m: String!) { model(paywallId: $p, id: $m) { id name description } }`,
    vars: (T) => ({ p: T.pw.id, m: T.modelId }),
  },
  'Query.webhookSubscriptions': {
    query: `query($p: ID) { webhookSubscriptions(paywallId: $p) { ${SUB} } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Query.webhookSubscription': {
    query: `query($id: ID!) { webhookSubscription(id: $id) { ${SUB} } }`,
    vars: (T) => ({ id: T.subscriptionId }),
  },
  'Query.webhookDeliveries': {
    query: `query($p: ID, $s: ID) { webhookDeliveries(paywallId: $p, subscriptionId: $s) { nodes { id eventId event } } }`,
    vars: (T) => ({ p: T.pw.id, s: T.subscriptionId }),
  },
  'Mutation.createPaywall': {
    query: `mutation { createPaywall(input: { name: "matrix-new", mode: DEFAULT }) { apiKey paywall { id } } }`,
    vars: () => ({}),
    cross: { otherKey: 'FORBIDDEN', otherOwner: 'own' },
  },
  'Mutation.updatePaywall': {
    query: `mutation($p: ID) { updatePaywall(input: { paywallId: $p, name: "renamed" }) { ${PW} } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Mutation.rotatePaywallSecret': {
    query: `mutation($p: ID) { rotatePaywallSecret(paywallId: $p) { apiKey paywall { id } } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Mutation.archivePaywall': {
    query: `mutation($p: ID) { archivePaywall(paywallId: $p, reason: "matrix") { ${PW} } }`,
    vars: (T) => ({ p: T.shared.id }),
  },
  'Mutation.connectProvider': {
    query: `mutation($p: ID, $b: String!) { connectProvider(input: { paywallId: $p, baseUrl: $b, apiKey: "sk-matrix-0001" }) { ${PW} } }`,
    vars: (T) => ({ p: T.pw.id, b: upstream.baseUrl }),
  },
  'Mutation.disconnectProvider': {
    query: `mutation($p: ID) { disconnectProvider(paywallId: $p) { ${PW} } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Mutation.connectUser': {
    query: `mutation($p: ID, $u: String!) { connectUser(paywallId: $p, user: $u) { connected url connectedUser { userId externalUserId } } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Mutation.disconnectUser': {
    query: `mutation($p: ID, $u: String!) { disconnectUser(paywallId: $p, user: $u) { success message } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Mutation.topUpLink': {
    query: `mutation($p: ID, $u: String!) { topUpLink(paywallId: $p, user: $u) { url } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Mutation.deposit': {
    query: `mutation($p: ID, $u: String!) { deposit(input: { paywallId: $p, user: $u, amount: "1" }) { balance } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Mutation.charge': {
    query: `mutation($p: ID, $u: String!) { charge(input: { paywallId: $p, user: $u, amount: "0.5" }) { success message balance } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Mutation.requestWithdrawal': {
    query: `mutation($p: ID) { requestWithdrawal(input: { paywallId: $p, amount: "1", destination: "iban" }) { id amount } }`,
    vars: (T) => ({ p: T.shared.id }),
    // A fresh SHARED paywall has no earnings to withdraw.
    controlMay: ['BAD_USER_INPUT'],
  },
  'Mutation.cancelWithdrawal': {
    query: `mutation($p: ID, $id: ID!) { cancelWithdrawal(paywallId: $p, id: $id) { id amount } }`,
    vars: (T) => ({ p: T.shared.id, id: randomUUID() }),
    // No withdrawal exists in the fixture: the control reaches the withdrawal lookup (not the paywall one).
    controlMay: ['NOT_FOUND'],
  },
  'Mutation.refundCharge': {
    query: `mutation($p: ID, $c: ID!) { refundCharge(input: { paywallId: $p, chargeId: $c }) { id amount } }`,
    vars: (T) => ({ p: T.pw.id, c: randomUUID() }),
    // The fixture has no charge: the control reaches the charge lookup (not the paywall one). A real
    // charge refunded across tenants: test/refunds.test.ts.
    controlMay: ['NOT_FOUND'],
  },
  'Mutation.createUserKey': {
    query: `mutation($p: ID, $u: String!) { createUserKey(input: { paywallId: $p, externalUserId: $u, name: "m" }) { key userKey { id name } } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user }),
  },
  'Mutation.revokeUserKey': {
    query: `mutation($p: ID, $id: ID!) { revokeUserKey(input: { paywallId: $p, id: $id }) { id name externalUserId } }`,
    vars: (T) => ({ p: T.pw.id, id: T.userKeyId }),
  },
  'Mutation.setModelPricing': {
    query: `mutation($p: ID) { setModelPricing(input: { paywallId: $p, modelId: "matrix-model", prompt: "0.000001" }) { id name } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Mutation.removeModelPricing': {
    query: `mutation($p: ID, $m: String!) { removeModelPricing(paywallId: $p, modelId: $m) }`,
    vars: (T) => ({ p: T.pw.id, m: T.modelId }),
  },
  'Mutation.createChatCompletion': {
    query: `mutation($p: ID, $u: String!, $m: String!) { createChatCompletion(input: { paywallId: $p, user: $u, model: $m, messages: [{ role: "user", content: "hi" }] }) { id choices { message { content } } } }`,
    vars: (T) => ({ p: T.pw.id, u: T.user, m: T.modelId }),
  },
  'Mutation.createWebhookSubscription': {
    query: `mutation($p: ID, $url: String!) { createWebhookSubscription(input: { paywallId: $p, url: $url, events: ["*"] }) { ${SUB} } }`,
    vars: (T) => ({ p: T.pw.id, url: 'http://127.0.0.1:9/matrix-new-hook' }),
  },
  'Mutation.deactivateWebhookSubscription': {
    query: `mutation($id: ID!) { deactivateWebhookSubscription(id: $id) { ${SUB} } }`,
    vars: (T) => ({ id: T.subscriptionId }),
  },
  'Mutation.reactivateWebhookSubscription': {
    query: `mutation($id: ID!) { reactivateWebhookSubscription(id: $id) { ${SUB} } }`,
    vars: (T) => ({ id: T.subscriptionId }),
  },
  'Mutation.rotateWebhookSecret': {
    query: `mutation($id: ID!) { rotateWebhookSecret(id: $id) { ${SUB} secret } }`,
    vars: (T) => ({ id: T.subscriptionId }),
  },
  'Mutation.redeliverWebhookEvent': {
    query: `mutation($e: ID!, $s: ID) { redeliverWebhookEvent(eventId: $e, subscriptionId: $s) { id eventId event } }`,
    vars: (T) => ({ e: T.eventId, s: T.subscriptionId }),
  },
  'Mutation.connectStripe': {
    query: `mutation($p: ID) { connectStripe(input: { paywallId: $p, secretKey: "sk_test_matrix" }) { ${PW} } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Mutation.rotateStripeWebhook': {
    query: `mutation($p: ID) { rotateStripeWebhook(paywallId: $p) { ${PW} } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Mutation.disconnectStripe': {
    query: `mutation($p: ID) { disconnectStripe(paywallId: $p) { ${PW} } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
  'Subscription.paywallEvents': {
    query: `subscription($p: ID) { paywallEvents(paywallId: $p) { id type data paywallId } }`,
    vars: (T) => ({ p: T.pw.id }),
  },
};

/** A form's address opened with GET (back button, reload): a 303 to the page it belongs to, nothing done. */
const FORM_ADDRESS_BY_GET = "303 to the form's own page (src/pages/page-fallbacks.ts): no data, no action";

/**
 * REST routes outside the API-key surface, each with the reason. Everything else must be in REST below.
 */
const PUBLIC: Record<string, string> = {
  'GET /healthz': 'liveness probe, no data (docs/reference.md §1)',
  'GET /readyz': 'readiness probe, no data (docs/reference.md §1)',
  'GET /metrics': 'METRICS_TOKEN bearer when set; checked in ops.test.ts and below',
  'POST /v1/stripe/webhooks/wallet':
    'authenticated by the Stripe-Signature of the platform endpoint (docs/reference.md §8)',
  'POST /v1/stripe/webhooks/:paywallId':
    "authenticated by the Stripe-Signature of the paywall's endpoint (docs/reference.md §9)",
  'GET /assets/pages.css': 'static stylesheet of the hosted pages',
  'GET /connect/:paywallId/approve': FORM_ADDRESS_BY_GET,
  'GET /connect/:paywallId/decline': FORM_ADDRESS_BY_GET,
  'GET /wallet/alert': FORM_ADDRESS_BY_GET,
  'GET /wallet/autotopup/off': FORM_ADDRESS_BY_GET,
  'GET /wallet/connections/:connectionId/allowance': FORM_ADDRESS_BY_GET,
  'GET /wallet/connections/:connectionId/disconnect': FORM_ADDRESS_BY_GET,
  'GET /wallet/keys/:keyId/revoke': FORM_ADDRESS_BY_GET,
  'GET /wallet/sign-in/code': FORM_ADDRESS_BY_GET,
  'GET /wallet/sign-out': FORM_ADDRESS_BY_GET,
  'GET /wallet/topup/checkout': FORM_ADDRESS_BY_GET,
  'GET /wallet/sign-in': 'hosted sign-in form (docs/reference.md §8)',
  'POST /wallet/sign-in': 'e-mails a one-time code; CSRF token, per-IP limit',
  'POST /wallet/sign-in/code': 'checks the one-time code; CSRF token',
  'POST /wallet/sign-out': 'wallet session cookie + CSRF token',
  'GET /connect/:paywallId': 'consent page: wallet session cookie (redirects to sign-in)',
  'POST /connect/:paywallId/approve': 'wallet session cookie + CSRF token + the connect request id',
  'POST /connect/:paywallId/decline': 'wallet session cookie + CSRF token + the connect request id',
  'GET /wallet': 'wallet session cookie',
  'POST /wallet/connections/:connectionId/disconnect':
    "wallet session cookie + CSRF; only the session's own connections",
  'POST /wallet/connections/:connectionId/allowance':
    "wallet session cookie + CSRF; only the session's own active connections (docs/reference.md §16)",
  'POST /wallet/keys/:keyId/revoke':
    "wallet session cookie + CSRF; only keys of the session's own connected end users (docs/reference.md §19)",
  'POST /wallet/alert':
    "wallet session cookie + CSRF; the session's own low-balance alert (docs/reference.md §16)",
  'POST /wallet/autotopup/off':
    "wallet session cookie + CSRF; the session's own auto top-up (docs/reference.md §16)",
  'POST /topup/:paywallId/autotopup/off':
    'public top-up page: turns off (never on) the auto top-up of the user the link names; CSRF token (docs/stripe.md)',
  'GET /wallet/topup': 'wallet session cookie',
  'POST /wallet/topup': 'wallet session cookie + CSRF token',
  'POST /wallet/topup/checkout': 'wallet session cookie + CSRF token',
  'GET /topup/:paywallId': 'signed top-up link token in the query (docs/reference.md §9)',
  'POST /topup/:paywallId/checkout': 'signed top-up link token + CSRF token',
  'GET /dashboard':
    'the static console (no data; it calls GraphQL with the token typed in, docs/reference.md §12)',
  'GET /dashboard/*path': 'the console and its assets (client-side routes get the same static page)',
};

interface RestCase {
  /** Concrete path for the tenant T (path parameters filled). */
  path: (T: Tenant) => string;
  body?: (T: Tenant) => unknown;
  /** Status the other tenant's key gets (404: the resource is not theirs; 'own': acts on its own paywall only). */
  otherKey: 404 | 'own';
  controlMay?: number[];
}

/** A 1x1 PNG, and a second of 8 kHz 8-bit mono WAV: the uploads of the multipart routes. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);
const WAV = (() => {
  const b = Buffer.alloc(44 + 8000, 128);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + 8000, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(8000, 28);
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36);
  b.writeUInt32LE(8000, 40);
  return b;
})();
/** A multipart body: the fields and one file. */
function multipart(fields: Record<string, string>, field: string, bytes: Buffer, type: string): FormData {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  form.append(field, new Blob([new Uint8Array(bytes)], { type }), type === 'image/png' ? 'a.png' : 'a.wav');
  return form;
}

/** API-key routes, by their template under /v1 (each also served as /v1/u/:pathUser/…). */
const REST: Record<string, RestCase> = {
  'POST /user/balance/deposit': {
    path: () => '/user/balance/deposit',
    body: (T) => ({ user: T.user, amount: '1' }),
    otherKey: 'own',
  },
  'POST /user/charge': {
    path: () => '/user/charge',
    body: (T) => ({ user: T.user, amount: '0.1' }),
    otherKey: 'own',
  },
  'GET /user/balance': { path: (T) => `/user/balance?user=${T.user}`, otherKey: 'own' },
  'GET /user/balance/topup': { path: (T) => `/user/balance/topup?user=${T.user}`, otherKey: 'own' },
  'GET /user/connect': { path: (T) => `/user/connect?user=${T.user}`, otherKey: 'own' },
  'GET /user/disconnect': { path: (T) => `/user/disconnect?user=${T.user}`, otherKey: 'own' },
  'POST /user/keys': {
    path: () => '/user/keys',
    body: (T) => ({ user: T.user, name: 'm' }),
    otherKey: 'own',
  },
  'GET /user/keys': { path: (T) => `/user/keys?user=${T.user}`, otherKey: 'own' },
  'DELETE /user/keys/:id': { path: (T) => `/user/keys/${T.userKeyId}`, otherKey: 404 },
  'POST /chat/completions': {
    path: () => '/chat/completions',
    body: (T) => ({ user: T.user, model: T.modelId, messages: [{ role: 'user', content: 'hi' }] }),
    otherKey: 'own',
  },
  'POST /responses': {
    path: () => '/responses',
    body: (T) => ({ user: T.user, model: T.modelId, input: 'hi' }),
    otherKey: 'own',
  },
  'POST /embeddings': {
    path: () => '/embeddings',
    body: (T) => ({ user: T.user, model: T.modelId, input: 'hi' }),
    otherKey: 'own',
  },
  'POST /messages': {
    path: () => '/messages',
    body: (T) => ({
      metadata: { user_id: T.user },
      model: T.modelId,
      max_tokens: 20,
      messages: [{ role: 'user', content: 'hi' }],
    }),
    otherKey: 'own',
  },
  'POST /messages/count_tokens': {
    path: () => '/messages/count_tokens',
    body: (T) => ({ model: T.modelId, messages: [{ role: 'user', content: 'hi' }] }),
    otherKey: 'own',
  },
  // docs/reference.md §22: the image and audio routes (the multipart ones refuse a JSON body with a 400).
  'POST /images/generations': {
    path: () => '/images/generations',
    body: (T) => ({ user: T.user, model: T.modelId, prompt: 'hi' }),
    otherKey: 'own',
  },
  'POST /images/edits': {
    path: () => '/images/edits',
    body: (T) => multipart({ user: T.user, model: T.modelId, prompt: 'hi' }, 'image', PNG, 'image/png'),
    otherKey: 'own',
  },
  'POST /audio/transcriptions': {
    path: () => '/audio/transcriptions',
    body: (T) => multipart({ user: T.user, model: T.modelId }, 'file', WAV, 'audio/wav'),
    otherKey: 'own',
  },
  'POST /audio/translations': {
    path: () => '/audio/translations',
    body: (T) => multipart({ user: T.user, model: T.modelId }, 'file', WAV, 'audio/wav'),
    otherKey: 'own',
  },
  'POST /audio/speech': {
    path: () => '/audio/speech',
    body: (T) => ({ user: T.user, model: T.modelId, input: 'hi', voice: 'alloy' }),
    otherKey: 'own',
  },
  'GET /models': { path: () => '/models', otherKey: 'own' },
  // The model id is the victim's; the other paywall does not sell it.
  'GET /models/*id': { path: (T) => `/models/${T.modelId}`, otherKey: 404 },
  'POST /webhooks/subscriptions': {
    path: () => '/webhooks/subscriptions',
    body: () => ({ url: 'http://127.0.0.1:9/matrix-rest-hook', events: ['*'] }),
    otherKey: 'own',
  },
  'GET /webhooks/subscriptions': { path: () => '/webhooks/subscriptions', otherKey: 'own' },
  'GET /webhooks/subscriptions/:id': {
    path: (T) => `/webhooks/subscriptions/${T.subscriptionId}`,
    otherKey: 404,
  },
  'DELETE /webhooks/subscriptions/:id': {
    path: (T) => `/webhooks/subscriptions/${T.subscriptionId}`,
    otherKey: 404,
  },
  'GET /webhooks/logs': {
    path: (T) => `/webhooks/logs?subscriptionId=${T.subscriptionId}`,
    otherKey: 404,
  },
};

let t: TestApp;
let stripe: FakeStripe;
let upstream: FakeUpstream;
let victim: Tenant;
let control: Tenant;
let attacker: { ownerToken: string; pw: { id: string; apiKey: string } };
let rotatedKey: string;
let archivedKey: string;

async function ok(token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

async function paywallOf(ownerToken: string, mode: 'DEFAULT' | 'SHARED', name: string) {
  const d = await ok(
    ownerToken,
    `mutation($i: CreatePaywallInput!) { createPaywall(input: $i) { apiKey paywall { id } } }`,
    { i: { name, mode, description: `${name}-description` } },
  );
  return { id: d.createPaywall.paywall.id as string, apiKey: d.createPaywall.apiKey as string };
}

async function tenant(ownerToken: string, tag: string): Promise<Tenant> {
  const pw = await paywallOf(ownerToken, 'DEFAULT', `${tag}-paywall`);
  const shared = await paywallOf(ownerToken, 'SHARED', `${tag}-shared`);
  const user = `${tag}-user`;
  const modelId = `${tag}-model`;
  await ok(
    pw.apiKey,
    `mutation($b: String!) { connectProvider(input: { baseUrl: $b, apiKey: "sk-${tag}-provider" }) { id } }`,
    {
      b: upstream.baseUrl,
    },
  );
  await ok(
    pw.apiKey,
    `mutation($m: String!) { setModelPricing(input: { modelId: $m, prompt: "0.000001", completion: "0.000001", displayName: "${tag}-display" }) { id } }`,
    { m: modelId },
  );
  await ok(pw.apiKey, `mutation($u: String!) { deposit(input: { user: $u, amount: "5" }) { balance } }`, {
    u: user,
  });
  const sub = await ok(
    pw.apiKey,
    `mutation { createWebhookSubscription(input: { url: "http://127.0.0.1:9/${tag}-hook", events: ["*"], description: "${tag}-sub" }) { id } }`,
  );
  const [ev] = await t.db.query<{ id: string }>(
    `select id from event where paywall_id = $1 order by seq desc limit 1`,
    [pw.id],
  );
  const key = await ok(
    pw.apiKey,
    `mutation($u: String!) { createUserKey(input: { externalUserId: $u, name: "${tag}-key" }) { userKey { id } } }`,
    { u: user },
  );
  await ok(
    pw.apiKey,
    `mutation($p: ID) { connectStripe(input: { paywallId: $p, secretKey: "sk_test_${tag}" }) { id } }`,
    {
      p: pw.id,
    },
  );
  return {
    ownerToken,
    pw,
    shared,
    user,
    subscriptionId: sub.createWebhookSubscription.id,
    userKeyId: key.createUserKey.userKey.id,
    eventId: ev.id,
    modelId,
    markers: [
      `${tag}-paywall`,
      `${tag}-shared`,
      `${tag}-description`,
      `${tag}-hook`,
      `${tag}-sub`,
      `${tag}-display`,
      `${tag}-user`,
      `${tag}-key`,
    ],
  };
}

beforeAll(async () => {
  stripe = await new FakeStripe().start();
  upstream = await FakeUpstream.start();
  t = await startTestApp({ STRIPE_API_BASE: stripe.url });
  victim = await tenant(t.ownerToken, 'victimzq');
  control = await tenant(t.ownerToken, 'controlzq');
  const other = await t.app.services.owners.create('attacker');
  const attackerPw = await paywallOf(other.createdToken, 'DEFAULT', 'attacker-paywall');
  attacker = { ownerToken: other.createdToken, pw: attackerPw };
  await ok(
    attackerPw.apiKey,
    `mutation { setModelPricing(input: { modelId: "attacker-model", prompt: "0" }) { id } }`,
  );
  const rotated = await paywallOf(t.ownerToken, 'DEFAULT', 'rotated');
  await ok(rotated.apiKey, `mutation { rotatePaywallSecret { apiKey } }`);
  rotatedKey = rotated.apiKey;
  const archived = await paywallOf(t.ownerToken, 'DEFAULT', 'archived');
  await ok(t.ownerToken, `mutation($p: ID) { archivePaywall(paywallId: $p) { id } }`, { p: archived.id });
  archivedKey = archived.apiKey;
}, 60_000);
afterAll(async () => {
  await t?.close();
  await stripe?.stop();
  await upstream?.close();
});

function tokenOf(p: Principal): string | null {
  switch (p) {
    case 'none':
      return null;
    case 'wrongKey':
      return 'pk_live_0000000000000000000000000000000000';
    case 'rotatedKey':
      return rotatedKey;
    case 'archivedKey':
      return archivedKey;
    case 'otherKey':
      return attacker.pw.apiKey;
    case 'otherOwner':
      return attacker.ownerToken;
  }
}

/** No data: `data` absent, or every root field null (a nullable field such as `user` resolves to null). */
function expectNoData(data: Record<string, unknown> | null | undefined) {
  expect(Object.values(data ?? {}).filter((v) => v != null)).toEqual([]);
}

function expectNoLeak(what: string, request: string, answer: unknown) {
  const text = JSON.stringify(answer);
  const leaked = victim.markers.filter((m) => !request.includes(m) && text.includes(m));
  expect({ what, leaked }).toEqual({ what, leaked: [] });
  // Never a stack trace or an internal error, whoever asks.
  expect({ what, internal: /INTERNAL_SERVER_ERROR|api_error|\n\s+at /.test(text) }).toEqual({
    what,
    internal: false,
  });
}

async function subscribeOnce(token: string | null, c: GqlCase, T: Tenant): Promise<any> {
  const client = liveClient(t.url, token ?? '');
  const s = new LiveSubscription(client, c.vars(T), c.query);
  try {
    return await s.untilError(5000);
  } finally {
    s.unsubscribe();
    await client.dispose();
  }
}

describe('authorization matrix', () => {
  it('has a case for every GraphQL operation of the schema', async () => {
    const ops = enumerateOperations(await getSchema()).map((o) => o.key);
    expect(ops.length).toBeGreaterThan(30);
    expect(Object.keys(GQL).sort()).toEqual([...ops].sort());
  });

  it('has a case (or a public reason) for every route of the app', () => {
    const routes = enumerateRoutes(t.app).map(routeKey);
    const declared = [
      ...Object.keys(PUBLIC),
      ...Object.keys(REST).flatMap((k) => {
        const [m, p] = k.split(' ');
        return [`${m} /v1${p}`, `${m} /v1/u/:pathUser${p}`];
      }),
    ];
    expect([...routes].sort()).toEqual([...declared].sort());
  });

  describe.each(Object.keys(GQL).filter((k) => !k.startsWith('Subscription.')))('GraphQL %s', (key) => {
    const c = GQL[key];

    it.each(UNAUTH)('refuses %s with 401 UNAUTHENTICATED and no data', async (p) => {
      const r = await t.gql(tokenOf(p), c.query, c.vars(victim));
      expect({ p, status: r.status, codes: r.errors?.map((e) => e.extensions?.code) }).toEqual({
        p,
        status: 401,
        codes: ['UNAUTHENTICATED'],
      });
      expectNoData(r.data);
      expectNoLeak(`${key} ${p}`, c.query + JSON.stringify(c.vars(victim)), r);
    });

    it.each(CROSS)("refuses %s on the victim's data and shows none of it", async (p) => {
      const vars = c.vars(victim);
      const r = await t.gql(tokenOf(p), c.query, vars);
      const want = c.cross?.[p] ?? 'NOT_FOUND';
      if (want === 'own') {
        expect({ p, errors: r.errors }).toEqual({ p, errors: undefined });
      } else {
        expect({ p, codes: r.errors?.map((e) => e.extensions?.code) }).toEqual({ p, codes: [want] });
        expectNoData(r.data);
      }
      expectNoLeak(`${key} ${p}`, c.query + JSON.stringify(vars), r);
    });
  });

  it.each(UNAUTH)('graphql-ws refuses %s at connection (4403)', async (p) => {
    const err = await subscribeOnce(tokenOf(p), GQL['Subscription.paywallEvents'], victim);
    expect(err.code).toBe(4403);
  });

  it.each(CROSS)("graphql-ws refuses %s on the victim's paywall with NOT_FOUND", async (p) => {
    const err = await subscribeOnce(tokenOf(p), GQL['Subscription.paywallEvents'], victim);
    expect(err.extensions?.code).toBe('NOT_FOUND');
  });

  describe.each(Object.keys(REST))('REST %s', (key) => {
    const c = REST[key];
    const [method] = key.split(' ');
    const forms = [
      { name: '/v1', prefix: '/v1' },
      { name: '/v1/u/{user}', prefix: `/v1/u/` },
    ];
    const pathOf = (prefix: string, T: Tenant) =>
      prefix.endsWith('/u/') ? `${prefix}${encodeURIComponent(T.user)}${c.path(T)}` : `${prefix}${c.path(T)}`;

    it.each(
      forms.flatMap((f) => [...UNAUTH, 'otherOwner' as Principal].map((p) => [f.name, f.prefix, p] as const)),
    )('%s refuses %s with 401 authentication_error', async (_form, prefix, p) => {
      const r = await t.rest(method, pathOf(prefix, victim), { token: tokenOf(p), body: c.body?.(victim) });
      expect({ p, status: r.status, type: r.body?.error?.type }).toEqual({
        p,
        status: 401,
        type: 'authentication_error',
      });
      // The Messages routes answer in Anthropic's error shape ({type: "error", error}).
      expect(Object.keys(r.body)).toEqual(key.includes('/messages') ? ['type', 'error'] : ['error']);
      expectNoLeak(`${key} ${p}`, pathOf(prefix, victim) + JSON.stringify(c.body?.(victim) ?? ''), r.body);
    });

    it.each(forms.map((f) => [f.name, f.prefix] as const))(
      "%s: another owner's paywall key sees nothing of the victim",
      async (_form, prefix) => {
        const path = pathOf(prefix, victim);
        const body = c.body?.(victim);
        const r = await t.rest(method, path, { token: attacker.pw.apiKey, body });
        if (c.otherKey === 404) {
          expect({ status: r.status, type: r.body?.error?.type }).toEqual({
            status: 404,
            type: 'not_found_error',
          });
        } else {
          expect(r.status).toBeLessThan(500);
        }
        expectNoLeak(`${key} otherKey`, path + JSON.stringify(body ?? ''), r.body);
      },
    );
  });

  it('leaves the victim exactly as it was: balance, key, name, subscription, provider, Stripe, model', async () => {
    const d = await ok(
      victim.pw.apiKey,
      `query($u: String!, $s: ID!, $m: String!) {
        paywall { name archivedAt stripe { connected } }
        user(externalId: $u) { balance }
        webhookSubscription(id: $s) { isActive url secretSuffix }
        model(id: $m) { id }
      }`,
      { u: victim.user, s: victim.subscriptionId, m: victim.modelId },
    );
    expect(d.paywall).toEqual({ name: 'victimzq-paywall', archivedAt: null, stripe: { connected: true } });
    expect(d.user.balance).toBe('5000000');
    expect(d.webhookSubscription).toMatchObject({ isActive: true, url: 'http://127.0.0.1:9/victimzq-hook' });
    expect(d.model.id).toBe(victim.modelId);
    const shared = await ok(t.ownerToken, `query($p: ID) { paywall(id: $p) { archivedAt } }`, {
      p: victim.shared.id,
    });
    expect(shared.paywall.archivedAt).toBeNull();
    const [provider] = await t.db.query<any>(`select base_url from provider where paywall_id = $1`, [
      victim.pw.id,
    ]);
    expect(provider.base_url).toBe(upstream.baseUrl);
  });

  it('GET /metrics needs its token when METRICS_TOKEN is set (see ops.test.ts); open here', async () => {
    const r = await t.rest('GET', '/metrics');
    expect(r.status).toBe(200);
  });

  // Last: the control calls change the control tenant (archive, rotate, disconnect); REST first (it needs
  // the control key), the key-changing and model-removing mutations at the very end.
  const LAST = [
    'Mutation.disconnectProvider',
    'Mutation.removeModelPricing',
    'Mutation.archivePaywall',
    'Mutation.rotatePaywallSecret',
  ];
  const controlOrder = [
    ...Object.keys(GQL).filter((k) => !k.startsWith('Subscription.') && !LAST.includes(k)),
    ...LAST,
  ];
  describe('control: the rightful owner is not refused (the cases carry valid arguments)', () => {
    it.each(Object.keys(REST))('REST %s', async (key) => {
      const c = REST[key];
      const [method] = key.split(' ');
      const r = await t.rest(method, `/v1${c.path(control)}`, {
        token: control.pw.apiKey,
        body: c.body?.(control),
      });
      expect({
        key,
        status: r.status < 300 || (c.controlMay ?? []).includes(r.status),
        body: r.status < 300 ? null : r.body,
      }).toEqual({
        key,
        status: true,
        body: null,
      });
    });

    it.each(controlOrder)('%s', async (key) => {
      const c = GQL[key];
      const r = await t.gql(control.ownerToken, c.query, c.vars(control));
      const codes = (r.errors ?? []).map((e) => e.extensions?.code);
      expect({ key, codes: codes.filter((x) => !(c.controlMay ?? []).includes(x)) }).toEqual({
        key,
        codes: [],
      });
    });

    it('Subscription.paywallEvents', async () => {
      const client = liveClient(t.url, control.ownerToken);
      const before = LiveEventHub.for(t.db).size;
      const s = new LiveSubscription(
        client,
        GQL['Subscription.paywallEvents'].vars(control),
        GQL['Subscription.paywallEvents'].query,
      );
      // Ready when the service has registered the subscription (not after a guessed delay).
      await eventually(() => LiveEventHub.for(t.db).size, before + 1);
      await ok(
        control.ownerToken,
        `mutation($p: ID) { deposit(input: { paywallId: $p, user: "live", amount: "1" }) { balance } }`,
        {
          p: control.pw.id,
        },
      );
      await s.untilEvents(1);
      s.unsubscribe();
      await client.dispose();
    });
  });
});
