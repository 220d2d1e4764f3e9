import OpenAI, { APIError, toFile } from 'openai';
import { request as httpRequest } from 'node:http';
import { render } from 'preact-render-to-string';
import { receiptOf } from '../src/modules/accounts/receipt.js';
import { ReceiptDetails } from '../src/pages/receipt.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import {
  FAKE_PNG_BASE64,
  FAKE_SPEECH_BYTES_PER_CHARACTER,
  FAKE_TRANSCRIPT,
  FakeUpstream,
} from './helpers/fake-upstream.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { expectConforms } from './helpers/openai-schemas.js';
import {
  chargesOf,
  client,
  createProxyPaywall,
  deposit,
  eventsOf,
  eventually,
  MODEL,
  money,
  type ProxyPaywall,
} from './helpers/proxy-setup.js';

/**
 * Images and audio (docs/reference.md §22) through the official openai SDK against the fake providers:
 * each call held before it is forwarded and charged to the raw unit for what it made (images by size and
 * quality, seconds of audio, characters, or the tokens of the answer's usage). Every expected amount is
 * computed here from the prices below, not with the service's helpers.
 */

let t: TestApp;
let fake: FakeUpstream;
let pw: ProxyPaywall;

/** createProxyPaywall's markup, 1.5, in millionths. */
const MARKUP = 1_500_000n;
const PICO = 1_000_000_000_000n; // pico-USDC per USDC
const RAW = 1_000_000n; // raw units per USDC

/** ceil(x / y) for bigints ≥ 0. */
const ceil = (x: bigint, y: bigint) => (x + y - 1n) / y;
/** USDC decimal → pico-USDC. */
const pico = (usdc: string): bigint => {
  const [w, f = ''] = usdc.split('.');
  return BigInt(w) * PICO + BigInt(f.padEnd(12, '0'));
};
/** markup x Σ (count x price) in raw units, rounded up once (no request price here). */
const charged = (...parts: [number, string][]): bigint =>
  ceil(MARKUP * parts.reduce((s, [n, p]) => s + BigInt(n) * pico(p), 0n), (PICO * 1_000_000n) / RAW);
/** Characters at a price per 1,000 characters, marked up, rounded up once. */
const chargedCharacters = (chars: number, per1k: string): bigint =>
  ceil(MARKUP * BigInt(chars) * pico(per1k), (PICO * 1_000_000n * 1000n) / RAW);
const usdc = (raw: bigint) => {
  const s = raw.toString().padStart(7, '0');
  return `${s.slice(0, -6)}.${s.slice(-6)}`.replace(/\.?0+$/, '') || '0';
};
/** A balance as the API writes balances: exactly 6 fraction digits. */
const balance6 = (raw: bigint) => {
  const s = raw.toString().padStart(7, '0');
  return `${s.slice(0, -6)}.${s.slice(-6)}`;
};

const DALLE = 'dall-e-3';
const GPT_IMAGE = 'gpt-image-1';
const WHISPER = 'whisper-1';
const GPT_TRANSCRIBE = 'gpt-4o-transcribe';
const TTS = 'tts-1';
const GPT_TTS = 'gpt-4o-mini-tts';

const PRICES = {
  [DALLE]: {
    imagePrices: [
      { size: '1024x1024', quality: 'standard', price: '0.04' },
      { size: '1024x1024', quality: 'hd', price: '0.08' },
      { size: '1792x1024', quality: 'hd', price: '0.12' },
    ],
  },
  // gpt-image-1's list prices per token: text input, image input, image output.
  [GPT_IMAGE]: { prompt: '0.000005', imagePrompt: '0.00001', imageCompletion: '0.00004' },
  [WHISPER]: { audioSecond: '0.0001' },
  [GPT_TRANSCRIBE]: { prompt: '0.0000025', audioPrompt: '0.000006', completion: '0.00001' },
  [TTS]: { characters1k: '0.015' },
  [GPT_TTS]: { prompt: '0.0000006', audioCompletion: '0.000012' },
};

/**
 * A real WAV file: `seconds` of 8-bit mono PCM at 8 kHz, its header declaring `declaredSeconds` (default:
 * the real length) of data.
 */
function wav(seconds: number, declaredSeconds = seconds): Buffer {
  const rate = 8000;
  const data = seconds * rate;
  const b = Buffer.alloc(44 + data);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + declaredSeconds * rate, 4);
  b.write('WAVE', 8);
  b.write('fmt ', 12);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(rate, 28); // bytes per second
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36);
  b.writeUInt32LE(declaredSeconds * rate, 40);
  for (let i = 44; i < b.length; i++) b[i] = 128 + Math.round(100 * Math.sin(i / 3));
  return b;
}

/** A WebM (Matroska) header without a Duration element: a known format whose length cannot be read. */
const WEBM_WITHOUT_DURATION = Buffer.from([
  0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0xf7, 0x81, 0x01, 0x42, 0xf2, 0x81, 0x04, 0x42,
  0xf3, 0x81, 0x08, 0x42, 0x82, 0x84, 0x77, 0x65, 0x62, 0x6d, 0x42, 0x87, 0x81, 0x04, 0x42, 0x85, 0x81, 0x02,
]);
/** 25 MB (OpenAI's upload limit) at the highest bit rate assumed for WebM, 512 kbit/s: 409.6 s, 410 held. */
const WEBM_HELD_SECONDS = 410;

async function gql(query: string, variables?: Record<string, unknown>, token = pw.apiKey) {
  const r = await t.gql(token, query, variables);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

async function price(p: ProxyPaywall, modelId: string, input: Record<string, unknown>) {
  await gql(
    `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`,
    { i: { modelId, ...input } },
    p.apiKey,
  );
}

async function mediaPaywall(): Promise<ProxyPaywall> {
  const p = await createProxyPaywall(t, fake);
  for (const [id, input] of Object.entries(PRICES)) await price(p, id, input);
  return p;
}

const chargeEvent = async (chargeId: string) =>
  (await eventsOf(t, pw, 'paywall.usage.charge.created')).find((e) => e.data.activityId === chargeId);

beforeAll(async () => {
  t = await startTestApp();
  fake = await FakeUpstream.start();
  pw = await mediaPaywall();
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

describe('prices per unit (setModelPricing, GET /v1/models, GraphQL Model)', () => {
  it('shows the image, audio-second and 1,000-character prices at end-user prices (cost x 1.5)', async () => {
    const r = await t.rest('GET', '/v1/models', { token: pw.apiKey });
    expect(r.status).toBe(200);
    const byId = Object.fromEntries(r.body.data.map((m: any) => [m.id, m.pricing]));
    expect(byId[DALLE].image).toEqual([
      { size: '1024x1024', quality: 'standard', price: '0.06' },
      { size: '1024x1024', quality: 'hd', price: '0.12' },
      { size: '1792x1024', quality: 'hd', price: '0.18' },
    ]);
    expect(byId[DALLE].audio_second).toBeNull();
    expect(byId[WHISPER]).toMatchObject({ audio_second: '0.00015', characters_1k: null, image: [] });
    expect(byId[TTS]).toMatchObject({ characters_1k: '0.0225', audio_second: null });
    expect(byId[GPT_IMAGE]).toMatchObject({
      image_prompt: '0.000015',
      image_completion: '0.00006',
      prompt: '0.0000075',
    });
    expectConforms('ListModelsResponse', r.body);

    const d = await gql(
      `{ model(id: "${DALLE}") { costPricing { image { size quality price } audioSecond characters1k } } }`,
    );
    expect(d.model.costPricing.image[1]).toEqual({ size: '1024x1024', quality: 'hd', price: '0.08' });
  });

  it('refuses a malformed image price list with a 400 naming the field, changing nothing', async () => {
    const r = await t.gql(
      pw.apiKey,
      `mutation($i: SetModelPricingInput!) { setModelPricing(input: $i) { id } }`,
      {
        i: { modelId: DALLE, imagePrices: [{ size: '1024x1024', quality: 'hd', price: '-1' }] },
      },
    );
    expect(r.errors?.[0].message).toMatch(/imagePrices\[0\]\.price/);
    const d = await gql(`{ model(id: "${DALLE}") { costPricing { image { price } } } }`);
    expect(d.model.costPricing.image).toHaveLength(3);
  });
});

describe('POST /v1/images/generations and /edits', () => {
  it('images.generate (n: 3, 1024x1024 hd) holds and charges 3 x the hd price, relays the URLs unchanged', async () => {
    await deposit(t, pw, 'img-alice', '5');
    const { data, response } = await client(t, pw, 'img-alice')
      .images.generate({ model: DALLE, prompt: 'a sea otter', n: 3, size: '1024x1024', quality: 'hd' })
      .withResponse();
    const cost = charged([3, '0.08']);
    expect(cost).toBe(360_000n);
    expect(data.data).toHaveLength(3);
    expect(data.data![0].url).toMatch(/^https:\/\/images\.example\.com\/fake-/);
    expectConforms('ImagesResponse', data);
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    expect(response.headers.get('x-paywall-balance')).toBe(balance6(5_000_000n - cost));
    const chargeId = response.headers.get('x-paywall-charge-id')!;

    const [c] = await chargesOf(t, pw, 'img-alice');
    expect(c).toMatchObject({
      id: chargeId,
      status: 'completed',
      amount: cost.toString(),
      hold: cost.toString(),
    });
    expect(c.metadata.units).toEqual({
      images: 3,
      imageSize: '1024x1024',
      imageQuality: 'hd',
      imagePrice: '0.08',
    });
    const ev = await chargeEvent(chargeId);
    expect(ev.data.units).toMatchObject({ images: 3, label: '3 images 1024x1024 hd' });
    expect(ev.data.costDetails.images).toBe('0.36');

    // Upstream: the provider's key, the client's body without the end user.
    const [up] = fake.mediaRequests;
    expect(up.url).toBe('/v1/images/generations');
    expect(up.body).toEqual({
      model: DALLE,
      prompt: 'a sea otter',
      n: 3,
      size: '1024x1024',
      quality: 'hd',
      files: [],
    });

    // The charge record and its receipt name the units.
    const r = await gql(
      `query($u: String!) { user(externalId: $u) { charges(first: 5) { edges { node {
        receipt { total units { kind label amount } } usage { images imageSize imageQuality audioSeconds characters }
      } } } } }`,
      { u: 'img-alice' },
    );
    const node = r.user.charges.edges[0].node;
    expect(node.receipt.units).toEqual([{ kind: 'images', label: '3 images 1024x1024 hd', amount: '0.36' }]);
    expect(node.receipt.total).toBe('0.360000');
    expect(node.usage).toEqual({
      images: 3,
      imageSize: '1024x1024',
      imageQuality: 'hd',
      audioSeconds: null,
      characters: null,
    });

    // The wallet page's receipt shows the unit line next to the token buckets.
    const receipt = receiptOf({
      kind: c.kind,
      model: c.model,
      promptTokens: c.prompt_tokens,
      completionTokens: c.completion_tokens,
      metadata: c.metadata,
    })!;
    const page = render(
      ReceiptDetails({
        receipt: { ...receipt, chargeId, paidRaw: cost, uncollectedRaw: 0n, recoveredRaw: 0n, refunds: [] },
      }) as any,
    );
    expect(page).toContain('Receipt <span class="receipt-sum">· 3 images 1024x1024 hd</span>');
    expect(page).toMatch(/data-bucket="images"[^]*3 images 1024x1024 hd[^]*0\.36/);
    await expectLedgerProven(t.db);
  });

  it('gpt-image-1 is charged the tokens of its usage (text in, image out) and relays b64_json unchanged', async () => {
    await deposit(t, pw, 'img-bob', '5');
    const { data, response } = await client(t, pw, 'img-bob')
      .images.generate({
        model: GPT_IMAGE,
        prompt: 'a watercolor fox in the snow',
        size: '1024x1536',
        quality: 'medium',
      })
      .withResponse();
    expectConforms('ImagesResponse', data);
    expect(data.data![0].b64_json).toBe(FAKE_PNG_BASE64);
    const u = data.usage!;
    expect(u.output_tokens).toBe(1584);
    const cost = charged(
      [u.input_tokens_details.text_tokens, '0.000005'],
      [u.input_tokens_details.image_tokens, '0.00001'],
      [u.output_tokens, '0.00004'],
    );
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    const [c] = await chargesOf(t, pw, 'img-bob');
    expect(c.amount).toBe(cost.toString());
    // The hold was the token bound: the prompt's text and 1,584 image output tokens at their prices.
    expect(BigInt(c.hold)).toBeGreaterThanOrEqual(cost);
    expect(c.metadata.buckets).toMatchObject({
      imageCompletion: 1584,
      prompt: u.input_tokens_details.text_tokens,
    });
  });

  it('images.edit (multipart) forwards the image as multipart and charges the usage, image input included', async () => {
    await deposit(t, pw, 'img-carol', '5');
    const png = Buffer.from(FAKE_PNG_BASE64, 'base64');
    const { data, response } = await client(t, pw, 'img-carol')
      .images.edit({
        model: GPT_IMAGE,
        image: await toFile(png, 'otter.png', { type: 'image/png' }),
        prompt: 'add a hat',
        quality: 'low',
        size: '1024x1024',
      })
      .withResponse();
    expectConforms('ImagesResponse', data);
    const u = data.usage!;
    expect(u.input_tokens_details.image_tokens).toBeGreaterThan(0);
    const cost = charged(
      [u.input_tokens_details.text_tokens, '0.000005'],
      [u.input_tokens_details.image_tokens, '0.00001'],
      [u.output_tokens, '0.00004'],
    );
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    const [up] = fake.mediaRequests;
    expect(up.url).toBe('/v1/images/edits');
    expect(up.body).toMatchObject({
      model: GPT_IMAGE,
      prompt: 'add a hat',
      quality: 'low',
      size: '1024x1024',
    });
    expect(up.body.user).toBeUndefined();
    expect(up.body.files).toEqual([{ field: 'image', name: 'otter.png', size: png.length }]);
  });

  it('a user who cannot pay for n: 4 gets the 402 with `paywall`, nothing forwarded; with exactly one image paid, n: 1 works', async () => {
    // One standard image is 0.04 x 1.5 = 0.06 USDC.
    await deposit(t, pw, 'img-dave', '0.06');
    const c = client(t, pw, 'img-dave');
    const err = await c.images
      .generate({ model: DALLE, prompt: 'four otters', n: 4, size: '1024x1024', quality: 'standard' })
      .catch((e) => e);
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ status: 402, type: 'payment_required', code: 'insufficient_balance' });
    const raw = await t.rest('POST', '/v1/images/generations', {
      token: pw.apiKey,
      body: {
        model: DALLE,
        prompt: 'four otters',
        n: 4,
        size: '1024x1024',
        quality: 'standard',
        user: 'img-dave',
      },
    });
    expect(raw.status).toBe(402);
    expect(raw.body.paywall).toMatchObject({ reason: 'insufficient_balance' });
    expect(raw.body.paywall.url).toMatch(/^http/);
    expectConforms('ErrorResponse', raw.body);
    expect(fake.mediaRequests).toHaveLength(0);

    const one = await c.images.generate({
      model: DALLE,
      prompt: 'one otter',
      n: 1,
      size: '1024x1024',
      quality: 'standard',
    });
    expect(one.data).toHaveLength(1);
    expect(await money(t, pw, 'img-dave')).toEqual({ balance: 0n, held: 0n, ledgerSum: 0n });
  });

  it('dall-e-3 without size or quality is held at the dearest price and charged at what OpenAI makes and bills: 1024x1024 standard', async () => {
    await deposit(t, pw, 'img-dflt', '1');
    const c = client(t, pw, 'img-dflt');
    // No quality: held at the dearest 1024x1024 price (hd, 0.08), charged standard (0.04).
    const { response: r1 } = await c.images
      .generate({ model: DALLE, prompt: 'an otter', size: '1024x1024' })
      .withResponse();
    const standard = charged([1, '0.04']);
    expect(standard).toBe(60_000n);
    expect(r1.headers.get('x-paywall-cost')).toBe(usdc(standard));
    // Neither: held at the dearest of all (1792x1024 hd, 0.12), charged 1024x1024 standard.
    const { response: r2 } = await c.images.generate({ model: DALLE, prompt: 'an otter' }).withResponse();
    expect(r2.headers.get('x-paywall-cost')).toBe(usdc(standard));
    expect(r2.headers.get('x-paywall-balance')).toBe(balance6(1_000_000n - 2n * standard));
    const charges = await chargesOf(t, pw, 'img-dflt');
    expect(charges.map((ch: any) => [ch.hold, ch.amount]).sort()).toEqual(
      [
        [charged([1, '0.08']).toString(), standard.toString()],
        [charged([1, '0.12']).toString(), standard.toString()],
      ].sort(),
    );
    for (const ch of charges)
      expect(ch.metadata.units).toEqual({
        images: 1,
        imageSize: '1024x1024',
        imageQuality: 'standard',
        imagePrice: '0.04',
      });
    expect(await money(t, pw, 'img-dflt')).toEqual({
      balance: 1_000_000n - 2n * standard,
      held: 0n,
      ledgerSum: 1_000_000n - 2n * standard,
    });
  });

  it('a provider 4xx whose error body lacks `param` and `code` reaches the client with all four fields (the provider’s message and type kept); nothing charged', async () => {
    await deposit(t, pw, 'img-fred', '1');
    fake.next({
      status: 400,
      errorBody: { error: { message: 'Your prompt is too long', type: 'invalid_request_error' } },
    });
    const r = await t.rest('POST', '/v1/images/generations', {
      token: pw.apiKey,
      body: { model: DALLE, prompt: 'x', size: '1024x1024', quality: 'standard', user: 'img-fred' },
    });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      error: { message: 'Your prompt is too long', type: 'invalid_request_error', param: null, code: null },
    });
    expectConforms('ErrorResponse', r.body);
    expect(await money(t, pw, 'img-fred')).toMatchObject({ balance: 1_000_000n, held: 0n });
  });

  it('a size no price matches is a 400 naming `size`, nothing held or forwarded', async () => {
    await deposit(t, pw, 'img-erin', '1');
    const err = await client(t, pw, 'img-erin')
      .images.generate({ model: DALLE, prompt: 'x', size: '256x256', quality: 'standard' })
      .catch((e) => e);
    expect(err).toMatchObject({ status: 400, param: 'size' });
    expect(fake.mediaRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'img-erin')).toHaveLength(0);
  });
});

describe('POST /v1/audio/transcriptions and /translations', () => {
  const TEN_MINUTES = wav(600);

  it.each(['json', 'verbose_json', 'text'] as const)(
    'a 10-minute WAV (%s) is held at its real length and charged 600 s',
    async (format) => {
      const user = `aud-${format}`;
      await deposit(t, pw, user, '1');
      const { data, response } = await client(t, pw, user)
        .audio.transcriptions.create({
          model: WHISPER,
          file: await toFile(TEN_MINUTES, 'talk.wav', { type: 'audio/wav' }),
          response_format: format,
        })
        .withResponse();
      const cost = charged([600, '0.0001']);
      expect(cost).toBe(90_000n);
      if (format === 'text') expect(data).toBe(`${FAKE_TRANSCRIPT}\n`);
      else {
        expect((data as any).text).toBe(FAKE_TRANSCRIPT);
        expectConforms(
          format === 'json' ? 'CreateTranscriptionResponseJson' : 'CreateTranscriptionResponseVerboseJson',
          data,
        );
      }
      expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
      expect(response.headers.get('x-paywall-balance')).toBe(balance6(1_000_000n - cost));
      expect(response.headers.get('x-paywall-charge-id')).toBeTruthy();
      const [c] = await chargesOf(t, pw, user);
      expect(c).toMatchObject({ amount: cost.toString(), hold: cost.toString() });
      expect(c.metadata.units).toEqual({ audioSeconds: 600 });
      const ev = await chargeEvent(c.id);
      expect(ev.data.units.label).toBe('600 s of audio');
      const [up] = fake.mediaRequests;
      expect(up.body.files).toEqual([{ field: 'file', name: 'talk.wav', size: TEN_MINUTES.length }]);
      expect(up.body.user).toBeUndefined();
    },
  );

  it('a WAV whose header declares 1 s of its 600 is held at the real 600 s', async () => {
    await deposit(t, pw, 'aud-liar', '1');
    // The provider is made to fail after the hold, so only the hold is seen.
    fake.next({ status: 500 });
    await client(t, pw, 'aud-liar')
      .audio.transcriptions.create({
        model: WHISPER,
        file: await toFile(wav(600, 1), 'a.wav', { type: 'audio/wav' }),
      })
      .catch(() => null);
    const [c] = await chargesOf(t, pw, 'aud-liar');
    expect(c).toMatchObject({ status: 'released', amount: '0' });
    // The file's bytes at the header's rate: 600 s of audio plus its 44-byte header, rounded up to 601 s.
    expect(BigInt(c.hold)).toBeGreaterThanOrEqual(charged([600, '0.0001']));
    expect(BigInt(c.hold)).toBeLessThanOrEqual(charged([601, '0.0001']));
  });

  it("a file whose length cannot be read is held at 25 MB of its format's highest bit rate and charged what the provider reports", async () => {
    await deposit(t, pw, 'aud-webm', '10');
    const { data, response } = await client(t, pw, 'aud-webm')
      .audio.transcriptions.create({
        model: WHISPER,
        file: await toFile(WEBM_WITHOUT_DURATION, 'a.webm', { type: 'audio/webm' }),
      })
      .withResponse();
    expect(data.text).toBe(FAKE_TRANSCRIPT);
    const [c] = await chargesOf(t, pw, 'aud-webm');
    expect(c.hold).toBe(charged([WEBM_HELD_SECONDS, '0.0001']).toString());
    // The fake reports 5 s (usage.seconds): that is the charge.
    expect(c.amount).toBe(charged([5, '0.0001']).toString());
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(charged([5, '0.0001'])));
  });

  it('a file of no audio format known is a 400 naming `file`, nothing held or forwarded', async () => {
    await deposit(t, pw, 'aud-junk', '1');
    const err = await client(t, pw, 'aud-junk')
      .audio.transcriptions.create({
        model: WHISPER,
        file: await toFile(Buffer.from('not audio at all '.repeat(20)), 'a.mp3'),
      })
      .catch((e) => e);
    expect(err).toMatchObject({ status: 400, param: 'file' });
    expect(fake.mediaRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'aud-junk')).toHaveLength(0);
  });

  it('an upload announced above 26 MB is refused with 413 before its body is read; a file past 25 MB too', async () => {
    await deposit(t, pw, 'aud-big', '1');
    // Announced: 30 MB, of which only the first bytes are ever sent.
    const announced = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${t.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${pw.apiKey}`,
          'x-paywall-user': 'aud-big',
          'content-type': 'multipart/form-data; boundary=xyz',
          'content-length': String(30 * 1024 * 1024),
        },
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.write('--xyz\r\n');
    });
    expect(announced.status).toBe(413);
    expect(JSON.parse(announced.body).error.code).toBe('request_too_large');
    // A body under the 26 MB total whose file passes 25 MB: refused by the streaming parser's file limit.
    const form = new FormData();
    form.append('model', WHISPER);
    form.append('file', new Blob([new Uint8Array(25 * 1024 * 1024 + 1)], { type: 'audio/wav' }), 'big.wav');
    const grown = await fetch(`${t.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${pw.apiKey}`, 'x-paywall-user': 'aud-big' },
      body: form,
    });
    expect(grown.status).toBe(413);
    expect(fake.mediaRequests).toHaveLength(0);
    expect(await chargesOf(t, pw, 'aud-big')).toHaveLength(0);
  });

  it('gpt-4o-transcribe is charged the tokens of its usage (audio in as audio prompt, text out as completion)', async () => {
    await deposit(t, pw, 'aud-gpt', '1');
    const { data, response } = await client(t, pw, 'aud-gpt')
      .audio.transcriptions.create({
        model: GPT_TRANSCRIBE,
        file: await toFile(wav(30), 'a.wav', { type: 'audio/wav' }),
      })
      .withResponse();
    expectConforms('CreateTranscriptionResponseJson', data);
    const u = (data as any).usage;
    expect(u.type).toBe('tokens');
    const cost = charged(
      [u.input_token_details.audio_tokens, '0.000006'],
      [u.input_token_details.text_tokens, '0.0000025'],
      [u.output_tokens, '0.00001'],
    );
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    const [c] = await chargesOf(t, pw, 'aud-gpt');
    expect(c.amount).toBe(cost.toString());
    expect(c.metadata.units).toBeUndefined();
  });

  it('audio.translations.create is charged the seconds the header declares (its answer reports none)', async () => {
    await deposit(t, pw, 'aud-tr', '1');
    const { data, response } = await client(t, pw, 'aud-tr')
      .audio.translations.create({
        model: WHISPER,
        file: await toFile(wav(94), 'fr.wav', { type: 'audio/wav' }),
      })
      .withResponse();
    expectConforms('CreateTranslationResponseJson', data);
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(charged([94, '0.0001'])));
    const [c] = await chargesOf(t, pw, 'aud-tr');
    expect((await chargeEvent(c.id)).data.units.label).toBe('94 s of audio');
  });
});

describe("a provider's word on images, seconds and speech tokens is bounded by the request (docs/reference.md §5.7)", () => {
  it('100 hd images answered for n: 1 standard: charged 1 image at the price asked, the excess recorded as the provider’s error', async () => {
    await deposit(t, pw, 'img-liar', '5');
    fake.next({
      answer: {
        created: 1,
        size: '1792x1024',
        quality: 'hd',
        data: Array.from({ length: 100 }, (_, i) => ({ url: `https://images.example.com/liar-${i}.png` })),
      },
    });
    const { response } = await client(t, pw, 'img-liar')
      .images.generate({ model: DALLE, prompt: 'an otter', n: 1, size: '1024x1024', quality: 'standard' })
      .withResponse();
    // 1 x 0.04 x 1.5. Before: 100 x 0.12 x 1.5 = 18 USDC, of which the whole 5 USDC balance was taken.
    const cost = charged([1, '0.04']);
    expect(cost).toBe(60_000n);
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    expect(response.headers.get('x-paywall-balance')).toBe(balance6(5_000_000n - cost));
    const [c] = await chargesOf(t, pw, 'img-liar');
    expect(c).toMatchObject({ status: 'completed', amount: cost.toString(), uncollected: '0' });
    expect(c.metadata.units).toEqual({
      images: 1,
      imageSize: '1024x1024',
      imageQuality: 'standard',
      imagePrice: '0.04',
    });
    expect(c.metadata.overReported).toEqual({ input: 0, output: 0, images: 99 });
    const health = await gql(`{ paywall { providers { name health { errors lastError } } } }`);
    expect(health.paywall.providers[0].health.lastError).toBe(
      'reported usage beyond what the request could produce',
    );
    await expectLedgerProven(t.db);
  });

  it('speech whose speech.audio.done reports 500,000,000 output tokens: charged the 132 audio tokens 11 characters can make', async () => {
    await deposit(t, pw, 'sp-inflated', '1');
    fake.next({ rawUsage: { input_tokens: 2, output_tokens: 500_000_000, total_tokens: 500_000_002 } });
    const r = await client(t, pw, 'sp-inflated').audio.speech.create({
      model: GPT_TTS,
      voice: 'coral',
      input: 'Hello there',
      stream_format: 'sse',
    });
    await r.text();
    // 12 audio tokens per character bound speech's output: 11 x 12 = 132. Before: 500,000,000 x 0.000012
    // x 1.5 = 9,000 USDC, of which the user's whole 1 USDC was taken.
    const cost = charged([2, '0.0000006'], [132, '0.000012']);
    const [c] = await eventually(
      () => chargesOf(t, pw, 'sp-inflated'),
      (cs) => cs[0]?.status === 'completed',
    );
    expect(c).toMatchObject({ amount: cost.toString(), uncollected: '0' });
    expect(c.metadata.overReported).toEqual({ input: 0, output: 500_000_000 - 132 });
    await expectLedgerProven(t.db);
  });

  it('a 60 s WAV reported as 1,000,000 s: charged at most what its bytes can play (121 s), the excess recorded', async () => {
    await deposit(t, pw, 'aud-inflated', '1');
    fake.next({ answer: { text: FAKE_TRANSCRIPT, usage: { type: 'duration', seconds: 1_000_000 } } });
    const file = wav(60);
    const { response } = await client(t, pw, 'aud-inflated')
      .audio.transcriptions.create({
        model: WHISPER,
        file: await toFile(file, 'a.wav', { type: 'audio/wav' }),
      })
      .withResponse();
    // 480,044 bytes at WAV's lowest bit rate (32 kbit/s) play at most 121 s. Before: 1,000,000 s x 0.0001
    // x 1.5 = 150 USDC, of which the user's whole 1 USDC was taken and 149 recorded as their debt.
    const bound = Math.ceil((file.length * 8) / 32_000);
    expect(bound).toBe(121);
    const cost = charged([bound, '0.0001']);
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    const [c] = await chargesOf(t, pw, 'aud-inflated');
    expect(c).toMatchObject({ status: 'completed', amount: cost.toString(), uncollected: '0' });
    expect(c.metadata.units).toEqual({ audioSeconds: bound });
    expect(c.metadata.overReported).toEqual({ input: 0, output: 0, audioSeconds: 1_000_000 - bound });
    await expectLedgerProven(t.db);
  });
});

describe('POST /v1/audio/speech', () => {
  const INPUT = 'Read aloud: the quick brown fox jumps over the lazy dog. '.repeat(4).trim();
  const CHARS = [...INPUT].length;

  it('audio.speech.create relays the audio and charges the characters of `input`', async () => {
    await deposit(t, pw, 'sp-alice', '1');
    const { data, response } = await client(t, pw, 'sp-alice')
      .audio.speech.create({ model: TTS, voice: 'alloy', input: INPUT })
      .withResponse();
    const audio = Buffer.from(await data.arrayBuffer());
    expect(audio.length).toBe(CHARS * FAKE_SPEECH_BYTES_PER_CHARACTER);
    expect(audio[1]).toBe(1);
    expect(response.headers.get('content-type')).toBe('audio/mpeg');
    const chargeId = response.headers.get('x-paywall-charge-id');
    const cost = chargedCharacters(CHARS, '0.015');
    // §22: the whole answer's cost and the balance after it, in its headers as on every other route.
    expect(response.headers.get('x-paywall-cost')).toBe(usdc(cost));
    expect(response.headers.get('x-paywall-balance')).toBe(balance6(1_000_000n - cost));
    const [c] = await eventually(
      () => chargesOf(t, pw, 'sp-alice'),
      (cs) => cs[0]?.status === 'completed',
    );
    expect(c).toMatchObject({ id: chargeId, amount: cost.toString() });
    expect(c.metadata.units).toEqual({ characters: CHARS });
    expect((await chargeEvent(c.id)).data.units.label).toBe(`${CHARS} characters`);
    expect(fake.mediaRequests[0].body).toEqual({ model: TTS, voice: 'alloy', input: INPUT, files: [] });
  });

  it('sends the cost and balance in the headers and again as trailers of the chunked answer', async () => {
    await deposit(t, pw, 'sp-trailers', '1');
    const { headers, trailers, bytes } = await new Promise<{
      headers: Record<string, unknown>;
      trailers: Record<string, string>;
      bytes: number;
    }>((resolve, reject) => {
      const body = JSON.stringify({ model: TTS, voice: 'alloy', input: INPUT, user: 'sp-trailers' });
      const req = httpRequest(`${t.url}/v1/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pw.apiKey}`, 'content-type': 'application/json' },
      });
      req.on('response', (res) => {
        let n = 0;
        res.on('data', (d: Buffer) => (n += d.length));
        res.on('end', () =>
          resolve({ headers: res.headers, trailers: res.trailers as Record<string, string>, bytes: n }),
        );
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(bytes).toBe(CHARS * FAKE_SPEECH_BYTES_PER_CHARACTER);
    const cost = chargedCharacters(CHARS, '0.015');
    expect(headers['x-paywall-cost']).toBe(usdc(cost));
    expect(headers['x-paywall-balance']).toBe(balance6(1_000_000n - cost));
    expect(trailers['x-paywall-cost']).toBe(usdc(cost));
    expect(trailers['x-paywall-balance']).toBe(balance6(1_000_000n - cost));
  });

  it('stream_format sse: the usage of speech.audio.done is charged (gpt-4o-mini-tts per token)', async () => {
    await deposit(t, pw, 'sp-sse', '1');
    const r = await client(t, pw, 'sp-sse').audio.speech.create({
      model: GPT_TTS,
      voice: 'coral',
      input: 'Hello there',
      stream_format: 'sse',
    });
    const text = await r.text();
    const done = JSON.parse(text.trim().split('\n\n').at(-1)!.slice('data: '.length));
    expect(done.type).toBe('speech.audio.done');
    const cost = charged([done.usage.input_tokens, '0.0000006'], [done.usage.output_tokens, '0.000012']);
    const [c] = await eventually(
      () => chargesOf(t, pw, 'sp-sse'),
      (cs) => cs[0]?.status === 'completed',
    );
    expect(c.amount).toBe(cost.toString());
  });

  it('a client that leaves mid-speech is charged pro rata for the bytes relayed', async () => {
    await deposit(t, pw, 'sp-gone', '1');
    const long = 'x'.repeat(2000); // 400,000 bytes in 98 chunks of the fake
    fake.next({ chunkDelayMs: 15 });
    const ctrl = new AbortController();
    const res = await fetch(`${t.url}/v1/audio/speech`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${pw.apiKey}`,
        'content-type': 'application/json',
        'x-paywall-user': 'sp-gone',
      },
      body: JSON.stringify({ model: TTS, voice: 'alloy', input: long }),
      signal: ctrl.signal,
    });
    const reader = res.body!.getReader();
    let got = 0;
    while (got < 40_000) got += (await reader.read()).value!.length;
    ctrl.abort();
    const [c] = await eventually(
      () => chargesOf(t, pw, 'sp-gone'),
      (cs) => cs[0]?.status === 'completed',
    );
    const chars = c.metadata.units.characters as number;
    // At least what the client read, and less than the whole input.
    expect(chars).toBeGreaterThanOrEqual(Math.ceil((2000 * got) / 400_000));
    expect(chars).toBeLessThan(2000);
    expect(c.amount).toBe(chargedCharacters(chars, '0.015').toString());
    expect(await money(t, pw, 'sp-gone')).toMatchObject({ held: 0n, balance: 1_000_000n - BigInt(c.amount) });
  });
});

describe('with an end-user key (§19, §22: "the user identified as for chat (user key, …)")', () => {
  async function userKey(body: Record<string, unknown>) {
    const r = await t.rest('POST', '/v1/user/keys', { token: pw.apiKey, body });
    expect(r.status).toBe(201);
    return r.body as { id: string; key: string };
  }
  const keyClient = (key: string, base = '/v1') =>
    new OpenAI({ apiKey: key, baseURL: `${t.url}${base}`, maxRetries: 0 });

  it("images, transcription and speech with only the key: charged to the key's user, the charge names the key", async () => {
    await deposit(t, pw, 'uk-media', '1');
    const { id, key } = await userKey({ user: 'uk-media', name: 'media' });
    const img = await keyClient(key)
      .images.generate({ model: DALLE, prompt: 'an otter', n: 1, size: '1024x1024', quality: 'standard' })
      .withResponse();
    const imgCost = charged([1, '0.04']);
    expect(img.response.headers.get('x-paywall-cost')).toBe(usdc(imgCost));
    const tr = await keyClient(key, '/v1/u/uk-media')
      .audio.transcriptions.create({
        model: WHISPER,
        file: await toFile(wav(10), 'note.wav', { type: 'audio/wav' }),
        // a body `user` is not looked at with a key (as for chat)
        user: 'someone-else',
      } as any)
      .withResponse();
    const trCost = charged([10, '0.0001']);
    expect(tr.response.headers.get('x-paywall-cost')).toBe(usdc(trCost));
    const speech = await keyClient(key).audio.speech.create({
      model: TTS,
      voice: 'alloy',
      input: 'Hello there',
    });
    await speech.arrayBuffer();
    const spCost = chargedCharacters(11, '0.015');
    const charges = await eventually(
      () => chargesOf(t, pw, 'uk-media'),
      (cs) => cs.length === 3 && cs.every((c: any) => c.status === 'completed'),
    );
    expect(charges.map((c: any) => BigInt(c.amount)).reduce((a: bigint, b: bigint) => a + b, 0n)).toBe(
      imgCost + trCost + spCost,
    );
    const ev = await chargeEvent(img.response.headers.get('x-paywall-charge-id')!);
    expect(ev.data.userKeyId).toBe(id);
    expect(await money(t, pw, 'uk-media')).toMatchObject({ balance: 1_000_000n - imgCost - trCost - spCost });
    expect(await money(t, pw, 'someone-else')).toMatchObject({ balance: 0n });
  });

  it('another user in the path or header: 403; over the key’s limit: 402 key_limit_exceeded, nothing forwarded', async () => {
    await deposit(t, pw, 'uk-media-2', '1');
    const { key } = await userKey({ user: 'uk-media-2', name: 'm2', limit: '0.05', limit_period: 'day' });
    const other = await keyClient(key, '/v1/u/bob')
      .images.generate({ model: DALLE, prompt: 'x', size: '1024x1024', quality: 'standard' })
      .catch((e) => e);
    expect([other.status, other.error?.code]).toEqual([403, 'user_key_user_mismatch']);
    const header = await keyClient(key)
      .audio.speech.create(
        { model: TTS, voice: 'alloy', input: 'hi' },
        { headers: { 'X-Paywall-User': 'bob' } },
      )
      .catch((e) => e);
    expect(header.status).toBe(403);
    const over = await keyClient(key)
      .images.generate({ model: DALLE, prompt: 'x', n: 2, size: '1024x1024', quality: 'standard' })
      .catch((e) => e);
    expect(over).toBeInstanceOf(APIError);
    expect([over.status, over.error?.type, over.error?.code]).toEqual([
      402,
      'payment_required',
      'key_limit_exceeded',
    ]);
    expect(fake.mediaRequests).toHaveLength(0);
  });
});

describe('usage reports (the roll-ups of the dashboard)', () => {
  it('name the images, seconds and characters per model, with their cost at cost prices, today and rolled up', async () => {
    const p = await mediaPaywall();
    await deposit(t, p, 'u-1', '5');
    const c = client(t, p, 'u-1');
    await c.images.generate({ model: DALLE, prompt: 'x', n: 3, size: '1024x1024', quality: 'hd' });
    await c.audio.transcriptions.create({
      model: WHISPER,
      file: await toFile(wav(94), 'a.wav', { type: 'audio/wav' }),
    });
    const speech = await c.audio.speech.create({ model: TTS, voice: 'alloy', input: 'y'.repeat(1820) });
    await speech.arrayBuffer();
    await eventually(
      () => chargesOf(t, p, 'u-1'),
      (cs) => cs.length === 3 && cs.every((x: any) => x.status === 'completed'),
    );
    const report = async (from: string) => {
      const r = await t.gql(
        p.apiKey,
        `query($f: String!, $t: String!) { paywall { usage(from: $f, to: $t, groupBy: MODEL) { buckets {
          key images audioSeconds characters revenue providerCost } } } }`,
        { f: from, t: new Date().toISOString().slice(0, 10) },
      );
      expect(r.errors).toBeUndefined();
      return Object.fromEntries(r.data.paywall.usage.buckets.map((b: any) => [b.key, b]));
    };
    // Provider cost: the units at the cost prices, no markup; revenue what was charged (x 1.5).
    const expected = {
      [DALLE]: { images: 3, audioSeconds: 0, characters: 0, providerCost: '0.240000', revenue: '0.360000' },
      [WHISPER]: {
        images: 0,
        audioSeconds: 94,
        characters: 0,
        providerCost: '0.009400',
        revenue: '0.014100',
      },
      [TTS]: { images: 0, audioSeconds: 0, characters: 1820, providerCost: '0.027300', revenue: '0.040950' },
    };
    const today = new Date().toISOString().slice(0, 10);
    expect(await report(today)).toMatchObject(expected);
    // Settled two days ago (the roll-up mark forgotten, as before any report): read from the daily
    // roll-ups instead, the same figures.
    await t.db.query(
      `update charge set settled_at = settled_at - interval '2 days', created_at = created_at - interval '2 days'
        where paywall_id = $1`,
      [p.id],
    );
    await t.db.query(`delete from usage_rollup where paywall_id = $1`, [p.id]);
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000).toISOString().slice(0, 10);
    expect(await report(twoDaysAgo)).toMatchObject(expected);
    const [rolled] = await t.db.query(
      `select count(*)::int as n from usage_day_model where paywall_id = $1 and images + audio_seconds + characters > 0`,
      [p.id],
    );
    expect(rolled.n).toBe(3);
  });
});

describe('providers and concurrency', () => {
  it('an image or audio route to an ANTHROPIC provider is a clear 400', async () => {
    const p = await createProxyPaywall(t, fake);
    await gql(
      `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { id } }`,
      { i: { name: 'claude', kind: 'ANTHROPIC', baseUrl: fake.baseUrl, apiKey: 'sk-ant-x' } },
      p.apiKey,
    );
    await price(p, 'img-on-claude', {
      provider: 'claude',
      imagePrices: [{ size: '*', quality: '*', price: '0.01' }],
    });
    await deposit(t, p, 'anth', '1');
    const err = await client(t, p, 'anth')
      .images.generate({ model: 'img-on-claude', prompt: 'x' })
      .catch((e) => e);
    expect(err).toMatchObject({ status: 400, param: 'model' });
    expect(err.message).toMatch(/Anthropic provider/);
    expect(fake.requests).toHaveLength(0);
  });

  it('50 concurrent mixed calls (images, transcription, speech, chat) of one user never overspend; the ledger proof holds', async () => {
    const user = 'mix-user';
    await deposit(t, pw, user, '0.5');
    const c: OpenAI = client(t, pw, user);
    const short = wav(10);
    const calls = Array.from({ length: 50 }, (_, i) => {
      switch (i % 4) {
        case 0:
          return c.images.generate({ model: DALLE, prompt: 'p', size: '1024x1024', quality: 'standard' });
        case 1:
          return toFile(short, 's.wav', { type: 'audio/wav' }).then((file) =>
            c.audio.transcriptions.create({ model: WHISPER, file }),
          );
        case 2:
          return c.audio.speech
            .create({ model: TTS, voice: 'alloy', input: 'short words' })
            .then((r) => r.arrayBuffer());
        default:
          return c.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
      }
    });
    const results = await Promise.allSettled(calls);
    for (const r of results)
      if (r.status === 'rejected') expect(r.reason).toMatchObject({ status: 402, type: 'payment_required' });
    const charges = await eventually(
      () => chargesOf(t, pw, user),
      (cs) => cs.every((x: any) => x.status !== 'held'),
    );
    const spent = charges.reduce((s: bigint, x: any) => s + BigInt(x.amount), 0n);
    const m = await money(t, pw, user);
    expect(m.held).toBe(0n);
    expect(m.balance).toBeGreaterThanOrEqual(0n);
    expect(spent + m.balance).toBe(500_000n);
    expect(charges.every((x: any) => x.uncollected === '0')).toBe(true);
    expect(results.filter((r) => r.status === 'fulfilled').length).toBeGreaterThan(5);
    await expectLedgerProven(t.db);
  });
});
