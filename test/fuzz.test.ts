import fc from 'fast-check';
import {
  getNamedType,
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLScalarType,
  isLeafType,
  type GraphQLInputType,
} from 'graphql';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { enumerateOperations, enumerateRoutes, routeKey } from './helpers/routes.js';
import { getSchema } from '../src/graphql/schema.js';

/**
 * Fuzz (issue 10): random JSON and hostile strings into every REST route (body, query, path parameters,
 * the user header) and every argument of every GraphQL query and mutation (generated from the schema's
 * input types, so a new argument or input field is fuzzed without a change here). The answer is always a
 * valid 2xx or a 4xx in the documented error shape, never a 5xx; a refused call changes no balance.
 *
 * Bounded and repeatable: a fixed seed (FUZZ_SEED overrides it; printed) and FUZZ_RUNS runs per route and
 * per operation.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.FUZZ_RUNS ?? 20);
/** REST calls are cheaper than GraphQL ones: twice the runs for the same time. */
const REST_RUNS = RUNS * 2;

let t: TestApp;
let stripe: FakeStripe;
let upstream: FakeUpstream;
let pw: { id: string; apiKey: string };
/** A paywall the destructive operations (archive, rotate) may hit; replaced once they succeed. */
let spare: { id: string; apiKey: string };
let subscriptionId: string;
let eventId: string;
const MODEL = 'fuzz-model';
const USER = 'fuzz-user';

async function ok(token: string, query: string, variables?: Record<string, unknown>) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

beforeAll(async () => {
  console.log(
    `fuzz seed ${SEED}, ${REST_RUNS} runs per route, ${RUNS} per GraphQL operation (FUZZ_SEED / FUZZ_RUNS to change)`,
  );
  stripe = await new FakeStripe().start();
  upstream = await FakeUpstream.start();
  t = await startTestApp({ STRIPE_API_BASE: stripe.url });
  pw = await t.createPaywall('DEFAULT', 'fuzz');
  spare = await t.createPaywall('DEFAULT', 'fuzz-spare');
  await ok(
    pw.apiKey,
    `mutation($b: String!) { connectProvider(input: { baseUrl: $b, apiKey: "sk-fuzz-0001" }) { id } }`,
    {
      b: upstream.baseUrl,
    },
  );
  await ok(
    pw.apiKey,
    `mutation { setModelPricing(input: { modelId: "${MODEL}", prompt: "0.000001", completion: "0.000001" }) { id } }`,
  );
  await ok(pw.apiKey, `mutation { deposit(input: { user: "${USER}", amount: "100" }) { balance } }`);
  const sub = await ok(
    pw.apiKey,
    `mutation { createWebhookSubscription(input: { url: "http://127.0.0.1:9/fuzz", events: ["*"] }) { id } }`,
  );
  subscriptionId = sub.createWebhookSubscription.id;
  [{ id: eventId }] = await t.db.query<{ id: string }>(`select id from event where paywall_id = $1 limit 1`, [
    pw.id,
  ]);
}, 60_000);
afterAll(async () => {
  await t?.close();
  await stripe?.stop();
  await upstream?.close();
});

/** Balances and holds of every account: what a refused call must leave as it was. */
const balances = async () =>
  JSON.stringify(
    await t.db.query(`select id, balance_raw::text, held_raw::text from ledger_account order by id`),
  );

// ---------------------------------------------------------------------------------------------- values

const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udc00y',
  '\ufffe\uffff',
  '\u202e',
  '1e309',
  '-1e309',
  '-0',
  '0',
  '-1',
  'NaN',
  'Infinity',
  '0x10',
  '1e3',
  '0.0000001',
  '1000000001',
  '9'.repeat(400),
  '１２',
  '../../etc/passwd',
  '%00',
  "' or 1=1 --",
  '"; drop table paywall; --',
  '<script>alert(1)</script>',
  '{{7*7}}',
  '${jndi:ldap://x}',
  '__proto__',
  'constructor',
  '*',
  'paywall.*',
  'http://127.0.0.1:1/x',
  'javascript:alert(1)',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
];

const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  // Huge strings: up to a few hundred KB (the body limit is 1 MiB).
  { weight: 1, arbitrary: fc.constantFrom(50_000, 300_000).map((n) => 'A'.repeat(n)) },
  { weight: 1, arbitrary: fc.constantFrom(2_000, 60_000).map((n) => '\ud83d\ude00'.repeat(n)) },
);

const hostileNumber = fc.oneof(
  fc.constantFrom(0, -0, -1, 1e308, -1e308, 2 ** 53, 2 ** 31, -(2 ** 31) - 1, 0.1, 1e-7, 5e-324),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Nested arrays/objects to a depth JSON parsers and validators must survive. */
const deep = fc.constantFrom(10, 100, 300).map((n) => {
  let v: unknown = 'x';
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { a: v };
  return v;
});

const hostileKey = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', '\u0000', '\ud800', '', 'a'.repeat(5000)),
  fc.string(),
);

const hostileValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { weight: 4, arbitrary: hostileString },
    { weight: 2, arbitrary: hostileNumber },
    { weight: 1, arbitrary: fc.constantFrom(null, true, false) },
    { weight: 1, arbitrary: fc.array(tie('value'), { maxLength: 3 }) },
    { weight: 1, arbitrary: fc.dictionary(hostileKey, tie('value'), { maxKeys: 3 }) },
    { weight: 1, arbitrary: deep },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  ),
})).value;

/** Raw JSON texts JSON.stringify cannot make: numbers out of range, duplicate keys, deep nesting. */
const RAW_BODIES = [
  '{"amount":1e309,"user":"fuzz-user"}',
  '{"amount":-0,"user":"fuzz-user"}',
  '{"amount":"1","amount":"2","user":"fuzz-user"}',
  '['.repeat(100_000) + ']'.repeat(100_000),
  '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000),
  '"just a string"',
  '123',
  'null',
  '[]',
  '{"user":"\\ud800"}',
  '{"user":"fuzz-user","amount":"1","metadata":{"k":"\\u0000"}}',
  '{',
  '\u0000',
];

// ---------------------------------------------------------------------------------------------- REST

interface RestShape {
  body?: Record<string, unknown>;
  query?: Record<string, string>;
  /** Values for the path parameters (valid ones; fuzzed ones replace them). */
  params?: Record<string, string>;
}

/** A valid request per API route (under /v1, also served as /v1/u/:pathUser/…); fuzzing starts from it. */
const REST: Record<string, RestShape> = {
  'POST /user/balance/deposit': { body: { user: USER, amount: '1', metadata: { a: 'b' } } },
  'POST /user/charge': { body: { user: USER, amount: '0.01', metadata: { a: 'b' } } },
  'GET /user/balance': { query: { user: USER } },
  'GET /user/balance/topup': { query: { user: USER } },
  'GET /user/connect': { query: { user: USER } },
  'GET /user/disconnect': { query: { user: USER } },
  'POST /user/keys': {
    body: { user: USER, name: 'fuzz', limit: '1', limit_period: 'day', expires_at: null },
  },
  'GET /user/keys': { query: { user: USER } },
  'DELETE /user/keys/:id': { params: { id: '00000000-0000-4000-8000-00000000abcd' } },
  'POST /chat/completions': {
    body: {
      user: USER,
      model: MODEL,
      messages: [{ role: 'user', content: 'hi', name: 'n' }],
      max_tokens: 20,
      temperature: 0.5,
      stream: false,
    },
  },
  'POST /responses': {
    body: { user: USER, model: MODEL, input: 'hi', max_output_tokens: 20, stream: false },
  },
  'POST /embeddings': {
    body: { user: USER, model: MODEL, input: ['hi', 'there'], encoding_format: 'float' },
  },
  'POST /messages': {
    body: {
      metadata: { user_id: USER },
      model: MODEL,
      max_tokens: 20,
      system: 'be brief',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      stream: false,
    },
  },
  'POST /messages/count_tokens': {
    body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
  },
  // docs/reference.md §22 (the multipart routes take these as fields; a JSON body is a 400 there).
  'POST /images/generations': { body: { user: USER, model: MODEL, prompt: 'hi', n: 2, size: '1024x1024' } },
  'POST /images/edits': { body: { user: USER, model: MODEL, prompt: 'hi' } },
  'POST /audio/transcriptions': { body: { user: USER, model: MODEL, response_format: 'json' } },
  'POST /audio/translations': { body: { user: USER, model: MODEL } },
  'POST /audio/speech': { body: { user: USER, model: MODEL, input: 'hi', voice: 'alloy' } },
  'GET /models': {},
  'GET /models/*id': { params: { id: MODEL } },
  'POST /webhooks/subscriptions': {
    body: { url: 'http://127.0.0.1:9/f', events: ['*'], description: 'd', customHeaders: { 'x-a': 'b' } },
  },
  'GET /webhooks/subscriptions': { query: { status: 'active' } },
  'GET /webhooks/subscriptions/:id': { params: { id: '<sub>' } },
  'DELETE /webhooks/subscriptions/:id': { params: { id: '<sub>' } },
  'GET /webhooks/logs': { query: { subscriptionId: '<sub>', status: 'success', eventType: 'x', limit: '5' } },
};

/** Routes outside the API-key surface: fuzzed with the same inputs; only "never a 5xx" is asserted. */
const OTHER_ROUTES_PREFIXES = [
  '/healthz',
  '/readyz',
  '/metrics',
  '/v1/stripe/',
  '/assets/',
  '/wallet',
  '/connect/',
  '/topup/',
  '/dashboard',
];

/** A path segment: valid, or hostile (percent-encoded bytes, invalid UTF-8, dot segments, very long). */
const pathSegment = (valid: string) =>
  fc.oneof(
    { weight: 2, arbitrary: fc.constant(encodeURIComponent(valid)) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        '%ff%fe',
        '%00',
        '%2e%2e',
        '..',
        '%2F',
        '%ed%a0%80',
        'a'.repeat(10_000),
        '%',
        '%zz',
        '~',
        '*',
      ),
    },
    {
      weight: 2,
      arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 30 }).map(encodeURIComponent),
    },
    { weight: 1, arbitrary: hostileString.filter((s) => s.length > 0 && s.length < 5000).map(encodeUtf8) },
  );

/** encodeURIComponent, except that lone surrogates become U+FFFD instead of throwing. */
function encodeUtf8(s: string): string {
  return [...Buffer.from(s, 'utf8')].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
}

interface RestInput {
  form: 'plain' | 'path-user';
  pathUser: string;
  params: Record<string, string>;
  query: Array<[string, unknown]>;
  body: { kind: 'json'; value: unknown } | { kind: 'raw'; text: string } | { kind: 'none' };
  userHeader?: string;
  idempotencyKey?: string;
}

/** Start from the valid request and break some of it (one field, the whole body, the query, the path). */
function restInput(shape: RestShape): fc.Arbitrary<RestInput> {
  const body = shape.body ?? {};
  const fields = Object.keys(body);
  const jsonBody = fc.oneof(
    // one field replaced by a hostile value
    ...(fields.length
      ? [
          fc.tuple(fc.constantFrom(...fields), hostileValue).map(([k, v]) => ({ ...body, [k]: v })),
          // several fields replaced, and unknown ones added
          fc
            .tuple(fc.subarray(fields), hostileValue, fc.dictionary(hostileKey, hostileValue, { maxKeys: 2 }))
            .map(([ks, v, extra]) => ({ ...body, ...Object.fromEntries(ks.map((k) => [k, v])), ...extra })),
        ]
      : []),
    // the whole body: any JSON value (arrays instead of objects, scalars, deep nesting)
    hostileValue,
  );
  const queryArb = fc.oneof(
    fc.constant(Object.entries(shape.query ?? {})),
    fc
      .tuple(fc.constantFrom(...Object.keys(shape.query ?? { user: '' })), hostileValue)
      .map(([k, v]) => [
        ...Object.entries(shape.query ?? {}).filter(([q]) => q !== k),
        [k, v] as [string, unknown],
      ]),
    // repeated parameters (?status=a&status=b) and bracket syntax (?user[a]=b)
    fc.constantFrom<Array<[string, unknown]>>(
      [
        ['user', USER],
        ['user', 'other'],
      ],
      [['user[a]', 'b']],
      [['status', ['a', 'b']]],
      [['limit', '1e309']],
      [['limit', '-0']],
      [['limit', '101']],
    ),
  );
  const params = Object.fromEntries(Object.entries(shape.params ?? {}).map(([k, v]) => [k, pathSegment(v)]));
  return fc.record({
    form: fc.constantFrom('plain' as const, 'path-user' as const),
    pathUser: pathSegment(USER),
    params: fc.record(params) as fc.Arbitrary<Record<string, string>>,
    query: queryArb,
    body: fc.oneof(
      { weight: 6, arbitrary: jsonBody.map((value) => ({ kind: 'json' as const, value })) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(...RAW_BODIES).map((text) => ({ kind: 'raw' as const, text })),
      },
      { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
    ),
    userHeader: fc.option(
      fc.oneof(fc.constant(USER), fc.string({ unit: 'grapheme-ascii', maxLength: 300 })),
      {
        nil: undefined,
      },
    ),
    idempotencyKey: fc.option(fc.string({ unit: 'grapheme-ascii', maxLength: 400 }), { nil: undefined }),
  });
}

function queryString(q: Array<[string, unknown]>): string {
  const parts: string[] = [];
  for (const [k, v] of q) {
    const values = Array.isArray(v) ? v : [v];
    for (const one of values) {
      const text = typeof one === 'string' ? one : (JSON.stringify(one) ?? '');
      parts.push(`${encodeUtf8(k)}=${encodeUtf8(text.slice(0, 20_000))}`);
    }
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

async function send(method: string, path: string, input: RestInput, token: string | null) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (input.userHeader !== undefined) headers['x-paywall-user'] = input.userHeader;
  if (input.idempotencyKey !== undefined) headers['idempotency-key'] = input.idempotencyKey;
  let body: string | undefined;
  if (method !== 'GET' && method !== 'HEAD' && input.body.kind !== 'none') {
    headers['content-type'] = 'application/json';
    body = input.body.kind === 'raw' ? input.body.text : JSON.stringify(input.body.value);
  }
  const res = await fetch(t.url + path, { method, headers, body });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON (pages, SSE) */
  }
  return { status: res.status, body: parsed, text };
}

function fillPath(template: string, input: RestInput): string {
  return template
    .replace(/:pathUser/, input.pathUser)
    .replace(/[:*]([A-Za-z]+)/g, (_m, name) =>
      (input.params[name] ?? 'x').replace('%3Csub%3E', subscriptionId).replace('<sub>', subscriptionId),
    );
}

/** Anthropic's error shape, which the Messages routes answer in (docs/reference.md §15). */
const isAnthropicErrorShape = (b: any) =>
  b &&
  typeof b === 'object' &&
  Object.keys(b).sort().join() === 'error,type' &&
  b.type === 'error' &&
  typeof b.error?.type === 'string' &&
  typeof b.error?.message === 'string';

const isErrorShape = (b: any) =>
  b &&
  typeof b === 'object' &&
  Object.keys(b).length === 1 &&
  typeof b.error?.message === 'string' &&
  typeof b.error?.type === 'string' &&
  'param' in b.error &&
  'code' in b.error;

// ---------------------------------------------------------------------------------------------- GraphQL

/** A generator for a GraphQL input type: shaped like the type with hostile leaves, or any JSON at all. */
function inputArb(type: GraphQLInputType, name: string, depth = 0): fc.Arbitrary<unknown> {
  if (type instanceof GraphQLNonNull) return inputArb(type.ofType, name, depth);
  const anything = hostileValue;
  let shaped: fc.Arbitrary<unknown>;
  if (type instanceof GraphQLList) {
    shaped = fc.array(inputArb(type.ofType, name, depth + 1), { maxLength: 3 });
  } else if (type instanceof GraphQLInputObjectType) {
    const fields = type.getFields();
    shaped = fc.record(
      Object.fromEntries(Object.values(fields).map((f) => [f.name, inputArb(f.type, f.name, depth + 1)])),
      {
        requiredKeys: Object.values(fields)
          .filter((f) => f.type instanceof GraphQLNonNull)
          .map((f) => f.name),
      },
    );
  } else if (type instanceof GraphQLEnumType) {
    shaped = fc.constantFrom(...type.getValues().map((v) => v.name));
  } else {
    shaped = leafArb(type as GraphQLScalarType, name);
  }
  // Mostly well-typed (so the call reaches the resolver and the service), now and then anything at all.
  return fc.oneof({ weight: depth ? 14 : 4, arbitrary: shaped }, { weight: 1, arbitrary: anything });
}

/** Leaves: a valid value of this argument (ids of the fixture) or a hostile one of the scalar's kind. */
function leafArb(type: GraphQLScalarType, name: string): fc.Arbitrary<unknown> {
  const valid: unknown[] = [];
  if (/^paywallId$/i.test(name)) valid.push(pw.id, undefined);
  if (/^(user|externalId)$/.test(name)) valid.push(USER);
  if (/^(modelId|model)$/.test(name)) valid.push(MODEL);
  if (/^(subscriptionId)$/.test(name)) valid.push(subscriptionId);
  if (/^(eventId)$/.test(name)) valid.push(eventId);
  if (/amount|markup|prompt|completion|request|credits|limit/i.test(name)) valid.push('1', '0.5');
  const validArb = valid.length ? [fc.constantFrom(...valid)] : [];
  switch (type.name) {
    case 'Int':
      return fc.oneof(...validArb, fc.integer(), fc.integer({ min: -5, max: 200 }), hostileNumber);
    case 'Float':
      return fc.oneof(hostileNumber);
    case 'Boolean':
      return fc.boolean();
    case 'JSON':
    case 'JSONObject':
      return fc.oneof(fc.dictionary(hostileKey, hostileValue, { maxKeys: 4 }), hostileValue);
    default:
      return fc.oneof(
        { weight: 2, arbitrary: hostileString },
        ...validArb.map((arbitrary) => ({ weight: 1, arbitrary })),
      );
  }
}

/** archivePaywall and rotatePaywallSecret may succeed: they run with the owner token on the spare paywall. */
const DESTRUCTIVE = new Set(['Mutation.archivePaywall', 'Mutation.rotatePaywallSecret']);

describe('fuzz', () => {
  it('has a REST shape for every API-key route, and every other route is a known public one', () => {
    const routes = enumerateRoutes(t.app).map(routeKey);
    const api = routes.filter((r) => / \/v1\//.test(r) && !r.includes('/v1/stripe/'));
    const declared = Object.keys(REST).flatMap((k) => {
      const [m, p] = k.split(' ');
      return [`${m} /v1${p}`, `${m} /v1/u/:pathUser${p}`];
    });
    expect([...api].sort()).toEqual([...declared].sort());
    const others = routes.filter((r) => !api.includes(r));
    expect(others.filter((r) => !OTHER_ROUTES_PREFIXES.some((p) => r.split(' ')[1].startsWith(p)))).toEqual(
      [],
    );
  });

  it('REST: every route answers 2xx or a 4xx in the OpenAI error shape (Anthropic’s on the Messages routes), never a 5xx; refusals change no balance', async () => {
    const routes = enumerateRoutes(t.app);
    let runs = 0;
    const statuses: Record<string, number> = {};
    for (const route of routes) {
      const rel = route.path.replace(/^\/v1(\/u\/:pathUser)?/, '');
      const shape = REST[`${route.method} ${rel}`];
      const apiRoute = !!shape && route.path.startsWith('/v1');
      if (route.path.startsWith('/v1/u/')) continue; // covered by the `form` of the plain route
      await fc.assert(
        fc.asyncProperty(restInput(shape ?? {}), async (input) => {
          runs++;
          const template = apiRoute && input.form === 'path-user' ? `/v1/u/:pathUser${rel}` : route.path;
          const path = fillPath(template, input) + queryString(input.query);
          const before = await balances();
          const r = await send(route.method, path, input, pw.apiKey);
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
          const what = `${route.method} ${path.slice(0, 300)} body ${JSON.stringify(input.body).slice(0, 300)}`;
          if (r.status >= 500) throw new Error(`${r.status} for ${what}: ${r.text.slice(0, 500)}`);
          // 431: Node's HTTP parser refuses a request line or headers over 16 KiB before the app sees it
          // (no body; the status says what). Every other refusal is the app's, in the error shape.
          const shaped = rel.startsWith('/messages') ? isAnthropicErrorShape(r.body) : isErrorShape(r.body);
          if (apiRoute && r.status >= 400 && r.status !== 431 && !shaped)
            throw new Error(`${r.status} without the error shape for ${what}: ${r.text.slice(0, 300)}`);
          if (r.status >= 400 && (await balances()) !== before)
            throw new Error(`refused (${r.status}) but balances changed: ${what}`);
        }),
        { seed: SEED, numRuns: REST_RUNS, endOnFailure: true },
      );
    }
    expect(runs).toBeGreaterThan(0);
    console.log(
      `REST fuzz: ${runs} requests over ${routes.length} routes, statuses ${JSON.stringify(statuses)}`,
    );
    await expectLedgerProven(t.db);
  }, 120_000);

  it('a NUL or a lone surrogate in any string argument (every String/ID/JSON leaf of the schema) is a 400 naming the field', async () => {
    // Found by this file: createPaywall/updatePaywall name and description, setModelPricing displayName and
    // description answered 500 (PostgreSQL refuses NUL in text).
    const schema = await getSchema();
    const leaves = (type: GraphQLInputType, path: string): string[] => {
      if (type instanceof GraphQLNonNull || type instanceof GraphQLList)
        return leaves(type.ofType as GraphQLInputType, path);
      if (type instanceof GraphQLInputObjectType)
        return Object.values(type.getFields()).flatMap((f) => leaves(f.type, `${path}.${f.name}`));
      return ['String', 'ID', 'JSON', 'JSONObject'].includes(getNamedType(type).name) ? [path] : [];
    };
    /** The value of `type` with only its required fields (simple valid values), and `bad` at `poison`. */
    const build = (
      type: GraphQLInputType,
      name: string,
      path: string,
      poison: string,
      bad: string,
    ): unknown => {
      if (type instanceof GraphQLNonNull) return build(type.ofType, name, path, poison, bad);
      if (type instanceof GraphQLList) return [build(type.ofType, name, path, poison, bad)];
      if (type instanceof GraphQLInputObjectType)
        return Object.fromEntries(
          Object.values(type.getFields())
            .filter((f) => f.type instanceof GraphQLNonNull || poison.startsWith(`${path}.${f.name}`))
            .map((f) => [f.name, build(f.type, f.name, `${path}.${f.name}`, poison, bad)]),
        );
      const named = getNamedType(type);
      if (path === poison) return named.name.startsWith('JSON') ? { note: bad } : bad;
      if (named instanceof GraphQLEnumType) return named.getValues()[0].name;
      return named.name === 'Int' ? 20 : named.name === 'Boolean' ? true : named.name === 'Float' ? 1 : 'x';
    };
    let checked = 0;
    for (const op of enumerateOperations(schema).filter((o) => o.kind !== 'Subscription')) {
      const args = op.field.args;
      const decl = args.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
      const call = args.map((a) => `${a.name}: $${a.name}`).join(', ');
      const selection = isLeafType(getNamedType(op.field.type)) ? '' : ' { __typename }';
      const query = `${op.kind.toLowerCase()}${decl ? `(${decl})` : ''} { ${op.field.name}${call ? `(${call})` : ''}${selection} }`;
      for (const arg of args)
        for (const leaf of leaves(arg.type, arg.name))
          for (const bad of ['a\u0000b', 'x\ud800']) {
            const variables = Object.fromEntries(
              args.map((a) => [a.name, build(a.type, a.name, a.name, leaf, bad)]),
            );
            const token =
              op.key === 'Mutation.createPaywall' || DESTRUCTIVE.has(op.key) ? t.ownerToken : pw.apiKey;
            const r = await t.gql(token, query, variables);
            const parts = leaf.split('.');
            const param = parts[0] === 'input' ? parts[1] : parts[0];
            expect({
              op: op.key,
              leaf,
              bad,
              below500: r.status < 500,
              error: r.errors?.[0]?.extensions,
            }).toEqual({
              op: op.key,
              leaf,
              bad,
              below500: true,
              error: expect.objectContaining({ code: 'BAD_USER_INPUT', param }),
            });
            checked++;
          }
    }
    expect(checked).toBeGreaterThan(50);
  });

  it('GraphQL: every query and mutation, every argument, answers data or non-internal errors, never a 5xx', async () => {
    const schema = await getSchema();
    const ops = enumerateOperations(schema).filter((o) => o.kind !== 'Subscription');
    let runs = 0;
    const outcomes: Record<string, number> = {};
    for (const op of ops) {
      const { field } = op;
      const args = field.args;
      const decl = args.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
      const call = args.map((a) => `${a.name}: $${a.name}`).join(', ');
      const selection = isLeafType(getNamedType(field.type)) ? '' : ' { __typename }';
      const query = `${op.kind.toLowerCase()}${decl ? `(${decl})` : ''} { ${field.name}${call ? `(${call})` : ''}${selection} }`;
      const vars = fc.record(Object.fromEntries(args.map((a) => [a.name, inputArb(a.type, a.name)])), {
        requiredKeys: [],
      });
      const destructive = DESTRUCTIVE.has(op.key);
      const owner = op.key === 'Mutation.createPaywall' || destructive;
      await fc.assert(
        fc.asyncProperty(vars, async (variables) => {
          runs++;
          if (destructive && variables.paywallId === pw.id) variables.paywallId = spare.id;
          const before = await balances();
          const r = await t.gql(owner ? t.ownerToken : pw.apiKey, query, variables);
          const what = `${op.key} ${JSON.stringify(variables).slice(0, 500)}`;
          const outcome = r.errors?.length ? String(r.errors[0].extensions?.code) : 'data';
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
          if (r.status >= 500) throw new Error(`${r.status} for ${what}: ${JSON.stringify(r.errors)}`);
          const internal = (r.errors ?? []).filter(
            (e) => !e.extensions?.code || e.extensions.code === 'INTERNAL_SERVER_ERROR',
          );
          if (internal.length)
            throw new Error(`internal error for ${what}: ${JSON.stringify(internal).slice(0, 500)}`);
          if (r.errors?.length && (await balances()) !== before)
            throw new Error(`refused but balances changed: ${what}`);
          if (destructive && !r.errors?.length) spare = await t.createPaywall('DEFAULT', 'fuzz-spare');
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true },
      );
    }
    console.log(
      `GraphQL fuzz: ${runs} operations over ${ops.length} root fields, outcomes ${JSON.stringify(outcomes)}`,
    );
    await expectLedgerProven(t.db);
  }, 120_000);
});
