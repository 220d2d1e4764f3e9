import { connect } from 'node:net';
import OpenAI, { toFile } from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { connectEndUser, createWallet } from './helpers/wallet-fixtures.js';
import {
  chargesOf,
  client,
  createProxyPaywall,
  deposit,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * Images and audio (docs/reference.md §22) driven as a client outside the service would: raw HTTP
 * bodies a broken or hostile client can send, checked against the REST conventions of §4 (a clean 4xx in
 * OpenAI's error shape, nothing forwarded, nothing charged, the service still up).
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await createProxyPaywall(t, fake);
  await t.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: { modelId: 'whisper-1', audioSecond: '0.0001' },
  });
  await t.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: { modelId: 'dall-e-2', imagePrices: [{ size: '*', quality: '*', price: '0.02' }] },
  });
  for (const i of [
    // Priced per token only (OpenAI's list prices).
    { modelId: 'gpt-4o-transcribe', prompt: '0.0000025', audioPrompt: '0.000006', completion: '0.00001' },
    { modelId: 'gpt-image-1', prompt: '0.000005', imagePrompt: '0.00001', imageCompletion: '0.00004' },
  ])
    await t.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      i,
    });
  await t.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
    i: {
      modelId: 'dall-e-3',
      imagePrices: [
        { size: '1024x1024', quality: 'standard', price: '0.04' },
        { size: '1024x1024', quality: 'hd', price: '0.08' },
        { size: '1792x1024', quality: 'hd', price: '0.12' },
      ],
    },
  });
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

/** A 2 s WAV (8-bit mono PCM at 8 kHz). */
function wav(seconds: number): Buffer {
  const data = seconds * 8000;
  const b = Buffer.alloc(44 + data, 128);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + data, 4);
  b.write('WAVE', 8);
  b.write('fmt ', 12);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(8000, 28);
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36);
  b.writeUInt32LE(data, 40);
  return b;
}

/** A multipart/form-data body with the boundary `B0undary`, written by hand (so it can be cut). */
function multipart(parts: { name: string; value: string | Buffer; filename?: string }[]): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const file = p.filename !== undefined ? `; filename="${p.filename}"\r\nContent-Type: audio/wav` : '';
    chunks.push(Buffer.from(`--B0undary\r\nContent-Disposition: form-data; name="${p.name}"${file}\r\n\r\n`));
    chunks.push(Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from('--B0undary--\r\n'));
  return Buffer.concat(chunks);
}

async function post(path: string, user: string, body: Buffer) {
  const r = await fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${pw.apiKey}`,
      'x-paywall-user': user,
      'content-type': 'multipart/form-data; boundary=B0undary',
    },
    body: new Uint8Array(body),
  });
  return { status: r.status, body: (await r.json()) as any };
}

describe('multipart bodies a client can break', () => {
  it.each([
    ['/v1/audio/transcriptions', 'a transcription'],
    ['/v1/audio/translations', 'a translation'],
    ['/v1/images/edits', 'an image edit'],
  ])(
    '%s: a body that ends inside its file is a 400 invalid_body (%s), nothing forwarded; the service keeps serving',
    async (path) => {
      const user = `cut-${path.split('/').at(-1)}`;
      await deposit(t, pw, user, '1');
      const field = path.endsWith('/edits') ? 'image' : 'file';
      const whole = multipart([
        { name: 'model', value: path.endsWith('/edits') ? 'dall-e-2' : 'whisper-1' },
        { name: 'prompt', value: 'a cat' },
        { name: field, value: wav(2), filename: 'a.wav' },
      ]);
      // Cut in the middle of the file's bytes: the closing boundary never comes.
      const r = await post(path, user, whole.subarray(0, 400));
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        error: {
          message: 'the multipart body is malformed',
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_body',
        },
      });
      expect(fake.mediaRequests).toHaveLength(0);
      expect(await chargesOf(t, pw, user)).toHaveLength(0);
      expect((await money(t, pw, user)).balance).toBe(1_000_000n);
      // Still up: the whole body is served.
      const ok = await post(path, user, whole);
      expect(ok.status).toBe(200);
      expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    },
  );
});

describe('images whose size or quality is `auto`', () => {
  it('dall-e-3 with quality `auto` (and size `auto`) is charged what OpenAI makes and bills then, 1024x1024 standard, as when they are left out', async () => {
    await deposit(t, pw, 'auto-q', '1');
    const sdk: OpenAI = client(t, pw, 'auto-q');
    const costs: (string | null)[] = [];
    for (const req of [
      { size: '1024x1024', quality: 'auto' },
      { size: 'auto', quality: 'auto' },
      {},
    ] as const) {
      const { response } = await sdk.images
        .generate({ model: 'dall-e-3', prompt: 'a lighthouse', ...req })
        .withResponse();
      costs.push(response.headers.get('x-paywall-cost'));
    }
    // 0.04 x markup 1.5, each time (not the dearest price, 1792x1024 hd).
    expect(costs).toEqual(['0.06', '0.06', '0.06']);
    const charges = await chargesOf(t, pw, 'auto-q');
    for (const c of charges)
      expect(c.metadata.units).toEqual({
        images: 1,
        imageSize: '1024x1024',
        imageQuality: 'standard',
        imagePrice: '0.04',
      });
    expect((await money(t, pw, 'auto-q')).balance).toBe(1_000_000n - 3n * 60_000n);
  });
});

describe('a model priced per token whose answer reports no usage', () => {
  // Markup 1.5; ceil to a raw unit of 10⁻⁶ USDC (= 10⁶ pico-USDC).
  const raw = (pico: bigint) => (pico * 15n + 10n * 1_000_000n - 1n) / (10n * 1_000_000n);

  it('a transcription (JSON, no token usage) is charged its audio at the bound and its transcript counted, not nothing', async () => {
    await deposit(t, pw, 'no-usage-tr', '1');
    const sdk = client(t, pw, 'no-usage-tr');
    // A provider that answers OpenAI's shape without `usage` (or with whisper's duration usage).
    for (const answer of [
      { text: 'hello there' },
      { text: 'hello there', usage: { type: 'duration', seconds: 10 } },
    ]) {
      fake.next({ answer });
      const { response } = await sdk.audio.transcriptions
        .create({ model: 'gpt-4o-transcribe', file: await toFile(wav(10), 'a.wav') })
        .withResponse();
      // 10 s x 20 audio tokens at 0.000006, and the 2 tokens of "hello there" at 0.00001.
      const cost = raw(200n * 6_000_000n + 2n * 10_000_000n);
      expect(cost).toBe(1830n);
      expect(response.headers.get('x-paywall-cost')).toBe('0.00183');
    }
    const charges = await chargesOf(t, pw, 'no-usage-tr');
    expect(charges.map((c) => [c.status, c.amount])).toEqual([
      ['completed', '1830'],
      ['completed', '1830'],
    ]);
  });

  it('gpt-image-1 without usage is charged its prompt counted and each image at its output tokens, not nothing', async () => {
    await deposit(t, pw, 'no-usage-img', '1');
    fake.next({ answer: { created: 1, data: [{ b64_json: 'AAAA' }, { b64_json: 'AAAA' }] } });
    const { response } = await client(t, pw, 'no-usage-img')
      .images.generate({ model: 'gpt-image-1', prompt: 'a red fox', n: 2, size: '1024x1024', quality: 'low' })
      .withResponse();
    // "a red fox": 3 tokens at 0.000005; 2 images of 272 tokens (low, 1024x1024) at 0.00004.
    const cost = raw(3n * 5_000_000n + 2n * 272n * 40_000_000n);
    expect(response.headers.get('x-paywall-cost')).toBe(`0.0${cost.toString().padStart(5, '0')}`);
    expect((await chargesOf(t, pw, 'no-usage-img'))[0].amount).toBe(cost.toString());
  });
});

describe('the x-paywall-* headers of an answer that cost nothing', () => {
  it('an image answer with no image (`data: []`) still names its cost (0), the balance and the charge', async () => {
    await deposit(t, pw, 'no-image', '1');
    fake.next({ answer: { created: 1, data: [] } });
    const { data, response } = await client(t, pw, 'no-image')
      .images.generate({ model: 'dall-e-3', prompt: 'x', size: '1024x1024', quality: 'hd' })
      .withResponse();
    expect(data).toEqual({ created: 1, data: [] });
    expect(response.headers.get('x-paywall-cost')).toBe('0');
    expect(response.headers.get('x-paywall-balance')).toBe('1.000000');
    const [charge] = await chargesOf(t, pw, 'no-image');
    expect(charge.amount).toBe('0');
    expect(response.headers.get('x-paywall-charge-id')).toBe(charge.id);
  });
});

describe('a model priced per request only', () => {
  it('images, transcription and speech are charged the request price (held first), not refused', async () => {
    for (const modelId of ['img-per-call', 'stt-per-call', 'tts-per-call'])
      await t.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
        i: { modelId, request: '0.05' },
      });
    await deposit(t, pw, 'per-call', '0.12');
    const sdk = client(t, pw, 'per-call');
    const img = await sdk.images.generate({ model: 'img-per-call', prompt: 'x', n: 2 }).withResponse();
    expect(img.response.headers.get('x-paywall-cost')).toBe('0.05');
    // An answer that made no image costs nothing, the request price included.
    fake.next({ answer: { created: 1, data: [] } });
    const none = await sdk.images.generate({ model: 'img-per-call', prompt: 'x' }).withResponse();
    expect(none.response.headers.get('x-paywall-cost')).toBe('0');
    const stt = await sdk.audio.transcriptions
      .create({ model: 'stt-per-call', file: await toFile(wav(2), 'a.wav') })
      .withResponse();
    expect(stt.response.headers.get('x-paywall-cost')).toBe('0.05');
    expect(stt.response.headers.get('x-paywall-balance')).toBe('0.020000');
    // The request price is held before forwarding: 0.02 left cannot pay for another 0.05.
    const before = fake.mediaRequests.length;
    await expect(
      sdk.audio.speech.create({ model: 'tts-per-call', input: 'hello', voice: 'alloy' }),
    ).rejects.toMatchObject({ status: 402, code: 'insufficient_balance' });
    expect(fake.mediaRequests).toHaveLength(before);
    expect((await money(t, pw, 'per-call')).balance).toBe(20_000n);
  });

  it('a model with image prices none of which matches the size asked is still a 400 naming `size`', async () => {
    await t.gql(pw.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      i: {
        modelId: 'img-priced',
        request: '0.01',
        imagePrices: [{ size: '1024x1024', quality: '*', price: '0.02' }],
      },
    });
    await deposit(t, pw, 'per-call-2', '1');
    await expect(
      client(t, pw, 'per-call-2').images.generate({ model: 'img-priced', prompt: 'x', size: '1792x1024' }),
    ).rejects.toMatchObject({ status: 400, param: 'size' });
    expect(fake.mediaRequests).toHaveLength(0);
  });
});

describe('SHARED mode', () => {
  it("a connected user's speech is paid from the wallet; over the app's allowance: 402 allowance_exceeded with the wallet link, nothing forwarded", async () => {
    const shared = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    await t.gql(shared.apiKey, `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`, {
      i: { modelId: 'tts-1', characters1k: '0.015' },
    });
    const user = 'wallet-voice';
    await t.rest('GET', `/v1/user/connect?user=${user}`, { token: shared.apiKey });
    const wallet = await createWallet(t.db, { fundRaw: 10_000_000n });
    await connectEndUser(t.db, shared.id, user, wallet);
    const [conn] = await t.db.query(
      `select c.id from wallet_connection c join end_user e on e.id = c.end_user_id
        where e.paywall_id = $1 and e.external_id = $2`,
      [shared.id, user],
    );
    const sdk = client(t, shared, user);
    // 1,000 characters at 0.015 per 1,000, markup 1.5: 0.0225 each.
    const input = 'a'.repeat(1000);
    const first = await sdk.audio.speech.create({ model: 'tts-1', input, voice: 'alloy' }).withResponse();
    await first.data.arrayBuffer();
    expect(first.response.headers.get('x-paywall-cost')).toBe('0.0225');
    expect(first.response.headers.get('x-paywall-balance')).toBe('9.977500');
    // An allowance of 0.03 a day: the second 0.0225 would pass it.
    await t.app.services.authorizations.setConnectionAllowance(wallet.walletUserId, conn.id, {
      amountRaw: 30_000n,
      period: 'day',
    });
    const before = fake.mediaRequests.length;
    const r = await t.rest('POST', '/v1/audio/speech', {
      token: shared.apiKey,
      body: { model: 'tts-1', input, voice: 'alloy', user },
    });
    expect(r.status).toBe(402);
    expect(r.body.error).toMatchObject({ type: 'payment_required', code: 'allowance_exceeded', param: null });
    expect(r.body.paywall).toMatchObject({ reason: 'allowance_exceeded', url: `${t.url}/wallet` });
    expect(fake.mediaRequests).toHaveLength(before);
  });
});

describe('an upload with a wrong key', () => {
  /**
   * A client that writes its headers, gets the 401 and only then sends its body (as an SDK's multipart
   * upload does when the answer is quicker than the file): what it sent last, and how the connection
   * ended.
   */
  function uploadAfterRefusal(
    path: string,
    contentType: string,
  ): Promise<{ answer: string; outcome: string }> {
    const body = Buffer.alloc(64 * 1024, 0x41);
    return new Promise((resolve) => {
      const socket = connect({ port: Number(new URL(t.url).port), host: '127.0.0.1', allowHalfOpen: true });
      let answer = '';
      let outcome = 'open';
      socket.on('error', (e: NodeJS.ErrnoException) => (outcome = e.code ?? 'error'));
      socket.on('data', (d: Buffer) => {
        answer += d.toString();
        if (!answer.includes('\r\n\r\n{') || !answer.endsWith('}')) return;
        // The whole 401 is here: now the body, in two writes.
        socket.write(body.subarray(0, 1024), () =>
          setTimeout(() => socket.write(body.subarray(1024), () => socket.end()), 50),
        );
      });
      socket.on('close', () => {
        if (outcome === 'open') outcome = 'closed';
        resolve({ answer, outcome });
      });
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-not-a-key\r\n` +
          `Content-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
    });
  }

  it.each([
    ['/v1/audio/transcriptions', 'multipart/form-data; boundary=B'],
    ['/v1/images/edits', 'multipart/form-data; boundary=B'],
    ['/v1/images/generations', 'application/json'],
  ])(
    '%s: the 401 is answered and the body still coming is read before the connection closes (no reset under the client)',
    async (path, type) => {
      const r = await uploadAfterRefusal(path, type);
      expect(r.answer.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
      expect(JSON.parse(r.answer.slice(r.answer.indexOf('\r\n\r\n') + 4)).error).toMatchObject({
        type: 'authentication_error',
        code: 'invalid_api_key',
      });
      expect(r.outcome).toBe('closed');
      expect(fake.mediaRequests).toHaveLength(0);
    },
  );

  it('the official SDK gets the 401 authentication_error for transcriptions and edits', async () => {
    const bad = new OpenAI({ apiKey: 'sk-not-a-key', baseURL: `${t.url}/v1`, maxRetries: 0 });
    for (const call of [
      async () =>
        bad.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(wav(1), 'a.wav') }),
      async () =>
        bad.images.edit({
          model: 'dall-e-2',
          prompt: 'x',
          image: await toFile(Buffer.alloc(2 * 1024 * 1024, 1), 'a.png', { type: 'image/png' }),
        }),
    ]) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ status: 401, type: 'authentication_error', code: 'invalid_api_key' });
    }
  });
});
