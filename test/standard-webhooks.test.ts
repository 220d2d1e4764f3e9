import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { startTestApp, type TestApp } from './helpers/app.js';
import { createSubscription, WebhookReceiver, type Received } from './helpers/webhook-receiver.js';
import { sign, standardSignature, standardWebhookHeaders } from '../src/modules/webhooks/signing.js';
import {
  generateWebhookSecret,
  webhookSecretContext,
  webhookSigningKey,
} from '../src/modules/webhooks/webhook-secrets.js';
import { loadSecretBox } from '../src/shared/crypto.js';

/**
 * docs/reference.md §17: every delivery carries webhook-id / webhook-timestamp / webhook-signature besides
 * the X-Service-* headers, and the `standardwebhooks` package (what integrators use) verifies deliveries of
 * a subscription with a generated secret.
 */

/** Wait before the first retry: above one second (with the ±20 % jitter), so the retry's Unix second differs. */
const BASE_MS = 1500;

let t: TestApp;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  t = await startTestApp({
    WEBHOOK_BACKOFF_BASE_MS: String(BASE_MS),
    WEBHOOK_MAX_ATTEMPTS: '3',
    WEBHOOK_TIMEOUT_MS: '2000',
    WEBHOOK_POLL_MS: '50',
  });
});
afterAll(async () => {
  await t.close();
  for (const r of receivers) await r.close();
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await WebhookReceiver.start();
  receivers.push(r);
  return r;
}

let n = 0;
/** Records one paywall.updated event through the API; returns its id. */
async function recordEvent(apiKey: string): Promise<string> {
  const r = await t.gql(apiKey, `mutation($name: String!) { updatePaywall(input: {name: $name}) { id } }`, {
    name: `Renamed ${++n}`,
  });
  expect(r.errors).toBeUndefined();
  const [e] = await t.db.query<{ id: string }>(
    `select id from event where paywall_id = $1 order by seq desc limit 1`,
    [r.data.updatePaywall.id],
  );
  return e.id;
}

/** The delivery's status once it is no longer pending (the outcome is recorded just after the answer). */
async function settledStatus(subscriptionId: string, eventId: string): Promise<string> {
  // The recorded outcome is the signal; the deadline only ends a broken run on a loaded machine.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const [row] = await t.db.query<{ status: string }>(
      'select status from webhook_delivery where subscription_id = $1 and event_id = $2',
      [subscriptionId, eventId],
    );
    if (row && row.status !== 'pending') return row.status;
    if (Date.now() > deadline) throw new Error(`delivery still ${row?.status ?? 'missing'}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The request's headers as the `standardwebhooks` package takes them. */
const headersOf = (r: Received): Record<string, string> =>
  Object.fromEntries(
    Object.entries(r.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)]),
  );

/** What `verify` throws, or null when it accepted. */
function rejection(wh: Webhook, body: Buffer | string, headers: Record<string, string>): Error | null {
  try {
    wh.verify(body, headers);
    return null;
  } catch (e) {
    return e as Error;
  }
}

/** HMAC-SHA256 of "<id>.<timestamp>.<raw body>" with the given key, as `v1,<base64>`: written out here on purpose. */
function expectedStandardSignature(key: Buffer, r: Received): string {
  const h = headersOf(r);
  const mac = createHmac('sha256', key)
    .update(`${h['webhook-id']}.${h['webhook-timestamp']}.`)
    .update(r.rawBody)
    .digest('base64');
  return `v1,${mac}`;
}

/** A subscription to paywall.updated at a fresh receiver, created through the API (secret given or generated). */
async function subscribe(secret?: string) {
  const pw = await t.createPaywall();
  const rcv = await receiver();
  const sub = await createSubscription(t, pw.apiKey, {
    url: rcv.url(),
    events: ['paywall.updated'],
    ...(secret ? { secret } : {}),
  });
  return { pw, rcv, sub };
}

describe('signing keys and generated secrets (unit)', () => {
  it('generates whsec_ + standard base64 of 32 random bytes, and the key is those bytes', () => {
    const seen = new Set<string>();
    let sawPlusOrSlash = false;
    for (let i = 0; i < 200; i++) {
      const secret = generateWebhookSecret();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const bytes = Buffer.from(secret.slice(6), 'base64');
      expect(bytes).toHaveLength(32);
      expect(webhookSigningKey(secret).equals(bytes)).toBe(true);
      if (/[+/]/.test(secret)) sawPlusOrSlash = true;
      seen.add(secret);
      // The package decodes the same key: its signature of any message equals ours.
      const at = new Date(1_800_000_000_000);
      expect(standardSignature(secret, 'evt', 1_800_000_000, '{"a":1}')).toBe(
        new Webhook(secret).sign('evt', at, '{"a":1}'),
      );
    }
    expect(seen.size).toBe(200);
    expect(sawPlusOrSlash).toBe(true); // the standard alphabet, not base64url
  });

  it('reads every other form as its UTF-8 bytes, the whsec_ prefix included', () => {
    const utf8 = (s: string) => Buffer.from(s, 'utf8');
    const cases = [
      'my-pre-shared-secret-0123', // a developer's own secret
      'c2VjcmV0c2VjcmV0c2VjcmV0', // base64 without the whsec_ prefix: not decoded
      `whsec_${randomBytes(32).toString('base64url')}`, // generated before §17
      'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', // old form without - or _: 43 characters, no padding
      'whsec_abc-def_ghi-jkl_', // base64url alphabet
      'whsec_QUJD=QUJD', // padding in the middle
      'whsec_QQ===', // too much padding
      'whsec_', // nothing after the prefix
    ];
    for (const s of cases) expect(webhookSigningKey(s).equals(utf8(s))).toBe(true);
    expect(webhookSigningKey('whsec_QUJD').equals(utf8('ABC'))).toBe(true);
    expect(webhookSigningKey('whsec_QUI=').equals(utf8('AB'))).toBe(true);
    expect(webhookSigningKey('whsec_QQ==').equals(utf8('A'))).toBe(true);
  });
});

describe('Standard Webhooks headers on real deliveries', () => {
  it('a generated secret: standardwebhooks verifies the first attempt and a retry (same webhook-id, new timestamp and signature)', async () => {
    const { pw, rcv, sub } = await subscribe();
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    rcv.statuses(500); // the first attempt fails, the retry succeeds
    const eventId = await recordEvent(pw.apiKey);
    await rcv.waitFor((all) => all.length >= 2, 20000, 'the first attempt and its retry');
    const [first, retry] = rcv.requests;

    const wh = new Webhook(sub.secret);
    for (const r of [first, retry]) {
      const h = headersOf(r);
      expect(h['webhook-id']).toBe(eventId);
      expect(h['webhook-timestamp']).toMatch(/^\d{10}$/);
      expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      // Signed at the attempt: within a couple of seconds of its arrival, and the same moment as X-Service-Timestamp.
      expect(Math.abs(Number(h['webhook-timestamp']) - r.at / 1000)).toBeLessThan(3);
      expect(Number(h['webhook-timestamp'])).toBe(Math.floor(Date.parse(h['x-service-timestamp']) / 1000));
      // The package accepts it (and returns the parsed body).
      expect(wh.verify(r.rawBody, h)).toEqual(JSON.parse(r.rawBody.toString('utf8')));
      // The key is the secret's 32 decoded bytes.
      expect(h['webhook-signature']).toBe(
        expectedStandardSignature(Buffer.from(sub.secret.slice(6), 'base64'), r),
      );
      // X-Service-* as before: hex HMAC of the raw body keyed with the secret's UTF-8 bytes, the event id.
      expect(h['x-service-signature']).toBe(
        createHmac('sha256', Buffer.from(sub.secret, 'utf8')).update(r.rawBody).digest('hex'),
      );
      expect(h['x-service-event-id']).toBe(eventId);
    }
    expect(first.body.delivery.attempts).toBe(1);
    expect(retry.body.delivery.attempts).toBe(2);
    const [h1, h2] = [headersOf(first), headersOf(retry)];
    expect(h2['webhook-id']).toBe(h1['webhook-id']);
    expect(Number(h2['webhook-timestamp'])).toBeGreaterThan(Number(h1['webhook-timestamp']));
    expect(h2['webhook-signature']).not.toBe(h1['webhook-signature']);

    expect(await settledStatus(sub.id, eventId)).toBe('success');
  });

  it('rejects a delivery whose webhook-timestamp was changed, or whose body differs by one byte', async () => {
    const { pw, rcv, sub } = await subscribe();
    await recordEvent(pw.apiKey);
    await rcv.waitForCount(1);
    const [r] = rcv.requests;
    const h = headersOf(r);
    const wh = new Webhook(sub.secret);
    expect(rejection(wh, r.rawBody, h)).toBeNull();

    // A timestamp moved by one second (still fresh): the signature no longer matches.
    for (const delta of [-1, 1]) {
      const moved = { ...h, 'webhook-timestamp': String(Number(h['webhook-timestamp']) + delta) };
      const err = rejection(wh, r.rawBody, moved);
      expect(err).toBeInstanceOf(WebhookVerificationError);
      expect(err?.message).toBe('No matching signature found');
    }
    // A timestamp from an hour ago is refused as too old.
    const old = { ...h, 'webhook-timestamp': String(Number(h['webhook-timestamp']) - 3600) };
    expect(rejection(wh, r.rawBody, old)?.message).toBe('Message timestamp too old');
    // Another webhook-id: refused.
    expect(rejection(wh, r.rawBody, { ...h, 'webhook-id': randomUUID() })).toBeInstanceOf(
      WebhookVerificationError,
    );

    // One byte of the body changed (a digit of the event's JSON: still valid JSON, still UTF-8).
    const changed = Buffer.from(r.rawBody);
    const at = changed.indexOf('"attempts":1');
    expect(at).toBeGreaterThan(0);
    changed[at + '"attempts":'.length] = '2'.charCodeAt(0);
    expect(changed.equals(r.rawBody)).toBe(false);
    expect(rejection(wh, changed, h)?.message).toBe('No matching signature found');

    // Another secret: refused.
    expect(rejection(new Webhook(generateWebhookSecret()), r.rawBody, h)).toBeInstanceOf(
      WebhookVerificationError,
    );
  });

  it('a pre-shared secret of another form signs with its UTF-8 bytes', async () => {
    const secret = 'my-own-shared-secret_0123+/=~';
    const { pw, rcv, sub } = await subscribe(secret);
    expect(sub.secret).toBe(secret);
    const eventId = await recordEvent(pw.apiKey);
    await rcv.waitForCount(1);
    const [r] = rcv.requests;
    const h = headersOf(r);
    expect(h['webhook-id']).toBe(eventId);
    expect(h['webhook-signature']).toBe(expectedStandardSignature(Buffer.from(secret, 'utf8'), r));
    expect(h['x-service-signature']).toBe(createHmac('sha256', secret).update(r.rawBody).digest('hex'));
    // The package reads the same key with format "raw" (ASCII secrets: UTF-8 and its byte mapping agree).
    expect(rejection(new Webhook(secret, { format: 'raw' }), r.rawBody, h)).toBeNull();
  });

  it('a pre-shared whsec_<standard base64> secret signs with the decoded bytes, as the package reads it', async () => {
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const { pw, rcv } = await subscribe(secret);
    await recordEvent(pw.apiKey);
    await rcv.waitForCount(1);
    const [r] = rcv.requests;
    expect(rejection(new Webhook(secret), r.rawBody, headersOf(r))).toBeNull();
    expect(headersOf(r)['webhook-signature']).toBe(
      expectedStandardSignature(Buffer.from(secret.slice(6), 'base64'), r),
    );
  });

  it('an old base64url secret keeps working: X-Service-* as before, webhook-signature with its UTF-8 bytes, until rotated', async () => {
    const pw = await t.createPaywall();
    const rcv = await receiver();
    const box = loadSecretBox(t.config).box;
    // Rows as the code before §17 wrote them: whsec_ + base64url of 32 random bytes, stored encrypted.
    // One random; one without - or _, which the package would misread as unpadded base64.
    const olds = [`whsec_${randomBytes(32).toString('base64url')}`, `whsec_${'Ab9'.repeat(14)}x`];
    const subs: string[] = [];
    for (const secret of olds) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
      const id = randomUUID();
      await t.db.query(
        `insert into webhook_subscription (id, paywall_id, url, events, secret_ciphertext, secret_suffix, created_by)
         values ($1, $2, $3, '{paywall.updated}', $4, $5, $6)`,
        [
          id,
          pw.id,
          rcv.url(`/old/${subs.length}`),
          box.encrypt(secret, webhookSecretContext(id)),
          secret.slice(-4),
          `api_key:${pw.id}`,
        ],
      );
      subs.push(id);
    }
    const eventId = await recordEvent(pw.apiKey);
    await rcv.waitForCount(2);
    for (const [i, secret] of olds.entries()) {
      const [r] = rcv.requests.filter((q) => q.path === `/old/${i}`);
      const h = headersOf(r);
      // X-Service-* unchanged: the old README recipe still verifies.
      expect(h['x-service-event-id']).toBe(eventId);
      expect(h['x-service-signature']).toBe(createHmac('sha256', secret).update(r.rawBody).digest('hex'));
      expect(sign(secret, r.rawBody)).toBe(h['x-service-signature']);
      // webhook-signature: keyed with the secret's UTF-8 bytes.
      expect(h['webhook-id']).toBe(eventId);
      expect(h['webhook-signature']).toBe(expectedStandardSignature(Buffer.from(secret, 'utf8'), r));
      expect(rejection(new Webhook(secret, { format: 'raw' }), r.rawBody, h)).toBeNull();
    }
    // `new Webhook(oldSecret)` cannot verify these: it throws on - or _, or decodes other bytes.
    expect(() => new Webhook(olds[0].replace(/^whsec_./, 'whsec_-'))).toThrow();
    const second = rcv.requests.find((q) => q.path === '/old/1')!;
    expect(rejection(new Webhook(olds[1]), second.rawBody, headersOf(second))?.message).toBe(
      'No matching signature found',
    );

    // Rotation gives a Standard Webhooks secret; the next deliveries (a redelivery included) verify with it.
    const rotated = await t.gql(
      pw.apiKey,
      `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret secretSuffix } }`,
      { id: subs[0] },
    );
    expect(rotated.errors).toBeUndefined();
    const fresh = rotated.data.rotateWebhookSecret.secret as string;
    expect(fresh).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(rotated.data.rotateWebhookSecret.secretSuffix).toBe(fresh.slice(-4));
    const redelivered = await t.gql(
      pw.apiKey,
      `mutation($e: ID!, $s: ID) { redeliverWebhookEvent(eventId: $e, subscriptionId: $s) { id } }`,
      { e: eventId, s: subs[0] },
    );
    expect(redelivered.errors).toBeUndefined();
    await rcv.waitForCount(3);
    const again = rcv.requests[2];
    expect(again.path).toBe('/old/0');
    const h = headersOf(again);
    expect(h['webhook-id']).toBe(eventId);
    expect(new Webhook(fresh).verify(again.rawBody, h)).toMatchObject({ event: { id: eventId } });
    expect(h['x-service-signature']).toBe(createHmac('sha256', fresh).update(again.rawBody).digest('hex'));
  });

  it('a rotation keeps the replaced secret signing for 24 hours (by the service clock): the old and the new secret both verify, then only the new', async () => {
    const { pw, rcv, sub } = await subscribe();
    const old = sub.secret as string;
    const clock = t.app.services.clock;
    const realNow = clock.now;
    try {
      const rotatedAt = new Date();
      clock.now = () => rotatedAt;
      const rotated = await t.gql(
        pw.apiKey,
        `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }`,
        { id: sub.id },
      );
      expect(rotated.errors).toBeUndefined();
      const fresh = rotated.data.rotateWebhookSecret.secret as string;
      expect(fresh).not.toBe(old);

      // In the grace period (23 h 59 min later): both secrets verify every delivery.
      clock.now = () => new Date(rotatedAt.getTime() + 24 * 3600_000 - 60_000);
      const during = await recordEvent(pw.apiKey);
      await rcv.waitForCount(1);
      const [r1] = rcv.requests;
      const h1 = headersOf(r1);
      expect(h1['webhook-id']).toBe(during);
      expect(h1['webhook-signature'].split(' ')).toHaveLength(2);
      for (const secret of [fresh, old])
        expect(new Webhook(secret).verify(r1.rawBody, h1)).toMatchObject({ event: { id: during } });
      const hex = (secret: string) => createHmac('sha256', secret).update(r1.rawBody).digest('hex');
      expect([h1['x-service-signature'], h1['x-service-signature-previous']]).toEqual([hex(fresh), hex(old)]);

      // After it (24 h and a minute): only the new secret.
      clock.now = () => new Date(rotatedAt.getTime() + 24 * 3600_000 + 60_000);
      const after = await recordEvent(pw.apiKey);
      await rcv.waitForCount(2);
      const r2 = rcv.requests[1];
      const h2 = headersOf(r2);
      expect(h2['webhook-id']).toBe(after);
      expect(h2['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(new Webhook(fresh).verify(r2.rawBody, h2)).toMatchObject({ event: { id: after } });
      expect(rejection(new Webhook(old), r2.rawBody, h2)?.message).toBe('No matching signature found');
      expect(h2['x-service-signature']).toBe(createHmac('sha256', fresh).update(r2.rawBody).digest('hex'));
      expect(h2['x-service-signature-previous']).toBeUndefined();
    } finally {
      clock.now = realNow;
    }
  });

  it("a second rotation within the grace drops the first one's old secret at once (only the secret it replaces stays)", async () => {
    const { pw, rcv, sub } = await subscribe();
    const rotate = async () =>
      (
        await t.gql(pw.apiKey, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret } }`, {
          id: sub.id,
        })
      ).data.rotateWebhookSecret.secret as string;
    const second = await rotate();
    const third = await rotate();
    const id = await recordEvent(pw.apiKey);
    await rcv.waitForCount(1);
    const [r] = rcv.requests;
    const h = headersOf(r);
    expect(h['webhook-id']).toBe(id);
    expect(rejection(new Webhook(third), r.rawBody, h)).toBeNull();
    expect(rejection(new Webhook(second), r.rawBody, h)).toBeNull();
    expect(rejection(new Webhook(sub.secret), r.rawBody, h)?.message).toBe('No matching signature found');
  });

  it('custom headers cannot take the Standard Webhooks names', async () => {
    const pw = await t.createPaywall();
    const rcv = await receiver();
    for (const name of ['webhook-id', 'Webhook-Timestamp', 'WEBHOOK-SIGNATURE']) {
      const r = await t.rest('POST', '/v1/webhooks/subscriptions', {
        token: pw.apiKey,
        body: { url: rcv.url(), events: ['*'], customHeaders: { [name]: 'x' } },
      });
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe('customHeaders');
      expect(r.body.error.message).toContain(name);
    }
  });
});

describe("the README's receiver", () => {
  /** The README's Webhooks section's code block, as written. */
  function readmeReceiver(): string {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Webhooks\n'));
    const block = /```js\n([\s\S]*?)```/.exec(section.slice(0, section.indexOf('\n## ', 1)));
    expect(block?.[1]).toContain("from 'standardwebhooks'");
    return block![1];
  }

  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill();
  });

  it('verifies a real delivery of a generated secret, and answers 401 to a forged one', async () => {
    const pw = await t.createPaywall();
    // The receiver needs its secret before the subscription exists: a secret of the generated form, given.
    const secret = generateWebhookSecret();
    const proc = spawn(process.execPath, ['--input-type=module', '--eval', readmeReceiver()], {
      cwd: new URL('..', import.meta.url).pathname,
      env: { ...process.env, PAYWALL_WEBHOOK_SECRET: secret, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    let out = '';
    let err = '';
    proc.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
    proc.stderr!.on('data', (c: Buffer) => (err += c.toString('utf8')));
    const until = async (re: RegExp): Promise<RegExpExecArray> => {
      // The receiver's printed lines are the signal; the deadline only ends a broken run (a loaded machine).
      const deadline = Date.now() + 120_000;
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        if (Date.now() > deadline || proc.exitCode != null)
          throw new Error(`receiver output: ${out}\nerrors: ${err}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    const port = Number((await until(/listening on (\d+)/))[1]);
    const url = `http://127.0.0.1:${port}/hooks/paywall`;

    const sub = await createSubscription(t, pw.apiKey, { url, events: ['paywall.updated'], secret });
    const eventId = await recordEvent(pw.apiKey);
    await until(new RegExp(`event paywall\\.updated ${eventId}`));
    expect(await settledStatus(sub.id, eventId)).toBe('success');
    const [row] = await t.db.query<{ response_status: number }>(
      'select response_status from webhook_delivery where subscription_id = $1 and event_id = $2',
      [sub.id, eventId],
    );
    expect(row.response_status).toBe(204);

    // Signed with another secret: refused.
    const body = JSON.stringify({ event: { id: eventId, type: 'paywall.updated' } });
    const forged = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...standardWebhookHeaders(generateWebhookSecret(), eventId, body, new Date()),
      },
      body,
    });
    expect(forged.status).toBe(401);
    // Signed with the right secret, but the body changed after signing: refused.
    const signed = standardWebhookHeaders(secret, eventId, body, new Date());
    const tampered = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signed },
      body: body.replace('paywall.updated', 'paywall.updatee'),
    });
    expect(tampered.status).toBe(401);
    // The same, untouched: accepted (204), and a duplicate webhook-id is not handled twice.
    const genuine = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signed },
      body,
    });
    expect(genuine.status).toBe(204);
    expect(out.match(new RegExp(eventId, 'g'))).toHaveLength(1);
  });
});
