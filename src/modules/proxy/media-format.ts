import { FormData } from 'undici';
import { invalid } from '../../shared/errors.js';
import {
  hasTokenPrices,
  highestImagePrice,
  imagePriceFor,
  isOpen,
  type MediaUnits,
} from '../../shared/media-units.js';
import { splitUsage, type ReportedUsage, type UsageBuckets } from '../../shared/usage-buckets.js';
import { bucketPico } from '../../shared/money.js';
import type { ModelPriceInfo } from '../catalog/catalog-model.js';
import { checkBodyAndModel } from './chat-request.js';
import { embeddingsFormat } from './embeddings-format.js';
import { countText } from './token-counter.js';
import { isObject, tokenCount, type MeteredRequest, type WireFormat } from './wire-format.js';

/**
 * OpenAI's image and audio APIs (docs/reference.md §22): `POST /v1/images/generations` (JSON),
 * `/v1/images/edits` (multipart), `/v1/audio/transcriptions` and `/v1/audio/translations` (multipart,
 * field `file`) and `/v1/audio/speech` (JSON → audio bytes), on the metered core like chat. A format
 * here knows its request, what the hold must cover (images, seconds of audio, characters, or a token
 * bound) and what an answer is charged for; the core holds, forwards and settles. Answers are relayed as
 * the provider sent them (the cost is in the `x-paywall-*` headers); a user who cannot pay gets the 402
 * of embeddings.
 */

/** One uploaded file of a multipart request, read within the upload limits. */
export interface UploadedFile {
  field: string;
  filename: string;
  mimeType: string;
  bytes: Buffer;
}

/** A multipart request as the transport parsed it: its fields (in order, repeats kept) and files. */
export interface MultipartBody {
  multipart: true;
  fields: [string, string][];
  files: UploadedFile[];
}

export const isMultipart = (v: unknown): v is MultipartBody =>
  isObject(v) && v.multipart === true && Array.isArray(v.fields) && Array.isArray(v.files);

/** What an audio file's header says (ProxyService reads it with music-metadata before the hold). */
export interface AudioProbe {
  /** Whole seconds (rounded up) the hold covers: the header's length, or the format's maximum. */
  seconds: number;
  /** False when the length could not be read (held at the maximum). */
  measured: boolean;
  /**
   * The most seconds the file can play (its bytes at its container's lowest bit rate, at least
   * `seconds`): a provider reporting more is clamped to it (docs/reference.md §5.7).
   */
  maxSeconds: number;
}

/** What an image or audio request may cost besides its request price (the hold's units and token bound). */
export interface MediaHold {
  images?: { n: number; size: string | undefined; quality: string | undefined };
  audioSeconds?: number;
  characters?: number;
  /** The most tokens per bucket the provider can bill (for a model priced per token). */
  tokens?: Partial<UsageBuckets>;
}

/** A validated image or audio request. */
export interface MediaRequest extends MeteredRequest {
  media: MediaHold;
  /** The multipart upload (edits, transcription, translation), forwarded as multipart. */
  upload?: MultipartBody;
  /** The answer is not JSON: `bytes` relayed as it arrives (speech), `text` read whole (text, srt, vtt). */
  answer?: 'bytes' | 'text';
  /** Speech: the characters of `input` (charged pro rata when the client leaves mid-answer). */
  characters?: number;
  /** Transcription: what the file's header said. */
  probe?: AudioProbe;
}

export type MediaKind = 'image_generations' | 'image_edits' | 'transcriptions' | 'translations' | 'speech';

/**
 * gpt-image-1's output tokens per image (OpenAI's pricing guide), by quality and size; an open or
 * unlisted size or quality takes the largest. The token bound of an image hold.
 */
const IMAGE_OUTPUT_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};
export const MAX_IMAGE_OUTPUT_TOKENS = 6240;
/** Each input image (and mask) of an edit is bounded at the largest image's tokens. */
export const INPUT_IMAGE_TOKENS = MAX_IMAGE_OUTPUT_TOKENS;
/** Audio input tokens per second (gpt-4o-transcribe bills about 17; the bound leaves room). */
export const AUDIO_TOKENS_PER_SECOND = 20;
/** Transcript tokens per second of audio (fast speech is about 5), plus a fixed 16. */
export const TRANSCRIPT_TOKENS_PER_SECOND = 10;
/** Audio output tokens per input character of speech (about 6 at speed 0.25; the bound leaves room). */
export const SPEECH_TOKENS_PER_CHARACTER = 12;
/** OpenAI's limits: images per request, speech input length, files per edit. */
const MAX_IMAGES = 10;
const MAX_SPEECH_CHARACTERS = 4096;
const MAX_EDIT_IMAGES = 16;

export function imageOutputTokens(size: string | undefined, quality: string | undefined): number {
  const q =
    quality && IMAGE_OUTPUT_TOKENS[quality]
      ? [IMAGE_OUTPUT_TOKENS[quality]]
      : Object.values(IMAGE_OUTPUT_TOKENS);
  return Math.max(
    ...q.map((bySize) =>
      size && bySize[size] !== undefined ? bySize[size] : Math.max(...Object.values(bySize)),
    ),
  );
}

const optionalString = (body: Record<string, unknown>, field: string): string | undefined => {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`'${field}' must be a string`, field, 'invalid_type');
  return v;
};

const requiredString = (body: Record<string, unknown>, field: string): string => {
  const v = optionalString(body, field);
  if (v === undefined || v === '')
    throw invalid(`missing required parameter: '${field}'`, field, 'missing_required_parameter');
  return v;
};

/** `n`: 1 to 10 (default 1); a multipart field arrives as a string of digits. */
function imageCount(v: unknown): number {
  if (v === undefined || v === null) return 1;
  const n = typeof v === 'string' && /^\d{1,3}$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_IMAGES)
    throw invalid(`'n' must be an integer from 1 to ${MAX_IMAGES}`, 'n', 'invalid_value');
  return n;
}

const noStreaming = (stream: unknown, what: string) => {
  if (stream === true || stream === 'true')
    throw invalid(
      `streamed ${what} is not served by this proxy; send the request without 'stream'`,
      'stream',
      'unsupported_parameter',
    );
};

/** The fields of a multipart request as an object (the first value of each name), for validation. */
const fieldsOf = (m: MultipartBody): Record<string, unknown> => {
  const out: Record<string, unknown> = {};
  for (const [name, value] of m.fields) if (!(name in out)) out[name] = value;
  return out;
};

/** The multipart body sent upstream: the client's fields and files but the end user, `model` the provider's. */
function upstreamForm(upload: MultipartBody, model: string): FormData {
  const form = new FormData();
  for (const [name, value] of upload.fields) {
    if (name === 'user') continue;
    form.append(name, name === 'model' ? model : value);
  }
  for (const f of upload.files)
    form.append(f.field, new Blob([new Uint8Array(f.bytes)], { type: f.mimeType }), f.filename);
  return form;
}

const jsonBodyUpstream = (req: MeteredRequest, model: string): string => {
  const body: Record<string, unknown> = { ...req.body, model };
  delete body.user;
  return JSON.stringify(body);
};

/** An answer charged by tokens when it counts tokens and the model has token prices (docs/reference.md §22). */
const byTokens = (reported: ReportedUsage | null, price: ModelPriceInfo): boolean =>
  reported !== null && reported.input !== undefined && hasTokenPrices(price);

/** Images: gpt-image-1's `usage` (input with its text and image parts; output, all image unless itemised). */
function imagesUsage(json: Record<string, any>): ReportedUsage | null {
  const u = json.usage;
  if (!isObject(u)) return null;
  const input = tokenCount(u.input_tokens) ?? undefined;
  const output = tokenCount(u.output_tokens) ?? undefined;
  const inDetails = isObject(u.input_tokens_details) ? u.input_tokens_details : {};
  const outDetails = isObject(u.output_tokens_details) ? u.output_tokens_details : null;
  return {
    input,
    output,
    imagePrompt: tokenCount(inDetails.image_tokens) ?? undefined,
    imageCompletion: outDetails ? (tokenCount(outDetails.image_tokens) ?? undefined) : output,
  };
}

/**
 * What OpenAI makes and bills when a DALL·E request leaves the size or quality out (its answers do not
 * name them): `1024x1024`, `standard`. gpt-image-1 names both in its answer.
 */
const IMAGE_DEFAULTS: Record<string, { size: string; quality: string }> = {
  'dall-e-2': { size: '1024x1024', quality: 'standard' },
  'dall-e-3': { size: '1024x1024', quality: 'standard' },
};

/**
 * The images an answer is charged for (docs/reference.md §22), at the size and quality the request asked
 * for; where it left one open, the answer's, else the model's documented default (what the provider
 * billed); only where all leave it open, the dearest. The provider's word never makes an image dearer
 * than the one asked for. The count is the answer's: settlement clamps it to the `n` asked (§5.7).
 */
function imageUnits(req: MediaRequest, json: Record<string, any>, price: ModelPriceInfo): MediaUnits | null {
  const count = Array.isArray(json.data) ? json.data.length : 0;
  if (count === 0 || !req.media.images) return null;
  const asked = req.media.images;
  const byDefault = IMAGE_DEFAULTS[price.upstreamModel ?? req.model];
  const answered = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  // `auto` is open like an absent field: the provider makes (and bills) its default then.
  const size = !isOpen(asked.size) ? asked.size : (answered(json.size) ?? byDefault?.size ?? asked.size);
  const quality = !isOpen(asked.quality)
    ? asked.quality
    : (answered(json.quality) ?? byDefault?.quality ?? asked.quality);
  const pico =
    imagePriceFor(price.imagePrices, size, quality) ??
    highestImagePrice(price.imagePrices, asked.size, asked.quality);
  if (pico === null) return null;
  return { images: { count, size: size ?? 'auto', quality: quality ?? 'auto', pico } };
}

/** The parts every image and audio format shares (JSON answers relayed unchanged, 402 when blocked). */
const common = {
  countJson: () => 0,
  // The answer is relayed as the provider sent it: the cost is in the x-paywall-* headers.
  addCost: () => {},
  relay: (): never => {
    throw new Error('image and audio answers are relayed by Forwarder.relayMedia');
  },
  streamEnd: (): never => {
    throw new Error('never streamed as SSE');
  },
  streamError: (): never => {
    throw new Error('never streamed as SSE');
  },
  blockedStream: (): never => {
    throw new Error('never streamed as SSE');
  },
  blockedJson: embeddingsFormat.blockedJson,
  blockedHttp: embeddingsFormat.blockedHttp,
  jsonFinished: () => true,
};

function imageRequest(body: Record<string, unknown>, model: string, inputImages: number): MediaRequest {
  const prompt = requiredString(body, 'prompt');
  const n = imageCount(body.n);
  const size = optionalString(body, 'size');
  const quality = optionalString(body, 'quality');
  noStreaming(body.stream, 'image generation');
  return {
    model,
    stream: false,
    n: 0,
    clientMaxTokens: 0,
    promptEstimate: 0,
    body,
    media: {
      images: { n, size, quality },
      tokens: {
        prompt: countText(prompt),
        imagePrompt: inputImages * INPUT_IMAGE_TOKENS,
        imageCompletion: n * imageOutputTokens(size, quality),
      },
    },
  };
}

/**
 * An image answer without `usage` for a model priced per token (docs/reference.md §22): the prompt as
 * counted and the input images at their bound (as held), and per image returned (at most the `n` asked)
 * the output tokens of its size and quality (the answer's where the request left them open). No image:
 * nothing.
 */
function imagesCountedUsage(req: MediaRequest, json: Record<string, any>): UsageBuckets {
  const asked = req.media.images!;
  const count = Math.min(Array.isArray(json.data) ? json.data.length : 0, asked.n);
  if (count === 0) return splitUsage(0, 0, {});
  const answered = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  const size = isOpen(asked.size) ? (answered(json.size) ?? asked.size) : asked.size;
  const quality = isOpen(asked.quality) ? (answered(json.quality) ?? asked.quality) : asked.quality;
  const imagePrompt = req.media.tokens?.imagePrompt ?? 0;
  const output = count * imageOutputTokens(size, quality);
  return splitUsage((req.media.tokens?.prompt ?? 0) + imagePrompt, output, {
    imagePrompt,
    imageCompletion: output,
  });
}

export const imageGenerationsFormat: WireFormat<MediaRequest> = {
  ...common,
  name: 'image_generations',
  upstreamPath: '/images/generations',
  parse(input) {
    const { body, model } = checkBodyAndModel(input);
    return imageRequest(body, model, 0);
  },
  upstreamBody: (req, _cap, up) => jsonBodyUpstream(req, up.model),
  jsonUsage: imagesUsage,
  countedUsage: imagesCountedUsage,
  // No image made: nothing is charged, the request price included (as an empty list of embeddings).
  jsonFinished: (json) => Array.isArray(json.data) && json.data.length > 0,
  malformed: (json) =>
    Array.isArray(json.data) ? null : 'the answer was not a list of images (no `data` array)',
  units: (req, json, reported, price) => (byTokens(reported, price) ? null : imageUnits(req, json!, price)),
};

export const imageEditsFormat: WireFormat<MediaRequest> = {
  ...imageGenerationsFormat,
  name: 'image_edits',
  upstreamPath: '/images/edits',
  parse(input) {
    if (!isMultipart(input))
      throw invalid('an image edit is sent as multipart/form-data', null, 'invalid_body');
    const { body, model } = checkBodyAndModel(fieldsOf(input));
    const images = input.files.filter((f) => f.field === 'image' || f.field === 'image[]');
    if (images.length === 0)
      throw invalid("missing required parameter: 'image'", 'image', 'missing_required_parameter');
    if (images.length > MAX_EDIT_IMAGES)
      throw invalid(`at most ${MAX_EDIT_IMAGES} images can be edited at once`, 'image', 'invalid_value');
    const masks = input.files.filter((f) => f.field === 'mask').length;
    return { ...imageRequest(body, model, images.length + masks), upload: input };
  },
  upstreamBody: () => '',
  upstreamForm: (req, model) => upstreamForm(req.upload!, model),
};

/** `response_format` of a transcription: JSON ones are relayed as JSON, the others as text. */
const TEXT_FORMATS = new Set(['text', 'srt', 'vtt']);
const JSON_FORMATS = new Set(['json', 'verbose_json', 'diarized_json']);

function audioRequest(input: unknown, what: string): MediaRequest {
  if (!isMultipart(input)) throw invalid(`${what} is sent as multipart/form-data`, null, 'invalid_body');
  const { body, model } = checkBodyAndModel(fieldsOf(input));
  const file = input.files.find((f) => f.field === 'file');
  if (!file) throw invalid("missing required parameter: 'file'", 'file', 'missing_required_parameter');
  noStreaming(body.stream, what);
  const format = optionalString(body, 'response_format') ?? 'json';
  if (!TEXT_FORMATS.has(format) && !JSON_FORMATS.has(format))
    throw invalid(
      `'response_format' must be one of json, text, srt, verbose_json, vtt, diarized_json`,
      'response_format',
      'invalid_value',
    );
  const probe = (input as MultipartBody & { probe?: AudioProbe }).probe;
  if (!probe) throw new Error('the audio file was not probed before parsing');
  const prompt = optionalString(body, 'prompt') ?? '';
  return {
    model,
    stream: false,
    n: 0,
    clientMaxTokens: 0,
    promptEstimate: 0,
    body,
    upload: input,
    answer: TEXT_FORMATS.has(format) ? 'text' : undefined,
    probe,
    media: {
      audioSeconds: probe.seconds,
      tokens: {
        prompt: countText(prompt),
        audioPrompt: probe.seconds * AUDIO_TOKENS_PER_SECOND,
        completion: probe.seconds * TRANSCRIPT_TOKENS_PER_SECOND + 16,
      },
    },
  };
}

/** Transcription usage: `{type: "tokens", input_tokens, input_token_details, output_tokens}` (else none). */
function transcriptionUsage(json: Record<string, any>): ReportedUsage | null {
  const u = json.usage;
  if (!isObject(u) || u.type !== 'tokens') return null;
  const input = tokenCount(u.input_tokens) ?? undefined;
  const details = isObject(u.input_token_details) ? u.input_token_details : null;
  return {
    input,
    output: tokenCount(u.output_tokens) ?? undefined,
    // Without details all of the input is the audio.
    audioPrompt: details ? (tokenCount(details.audio_tokens) ?? undefined) : input,
  };
}

/**
 * A transcript without token usage for a model priced per token (docs/reference.md §22): the prompt as
 * counted and the audio at its bound (as held), the transcript's text counted with the tokenizer.
 */
export function transcriptCountedUsage(req: MediaRequest, text: string): UsageBuckets {
  const audioPrompt = req.media.tokens?.audioPrompt ?? 0;
  return splitUsage((req.media.tokens?.prompt ?? 0) + audioPrompt, countText(text), { audioPrompt });
}

/**
 * The seconds a transcription is charged for: the provider's (`usage.seconds`, else verbose_json's
 * `duration`), else what the file's header said (a file whose length could not be read: the hold's).
 */
function audioSeconds(req: MediaRequest, json: Record<string, any> | null): number {
  const u = json?.usage;
  const reported =
    isObject(u) && u.type === 'duration' && typeof u.seconds === 'number'
      ? u.seconds
      : typeof json?.duration === 'number'
        ? json.duration
        : null;
  if (reported !== null && Number.isFinite(reported) && reported >= 0)
    return Math.min(Math.ceil(reported), 2_147_483_647);
  return req.probe!.seconds;
}

const audioFormat = (name: 'transcriptions' | 'translations', what: string): WireFormat<MediaRequest> => ({
  ...common,
  name,
  upstreamPath: `/audio/${name}`,
  parse: (input) => audioRequest(input, what),
  upstreamBody: () => '',
  upstreamForm: (req, model) => upstreamForm(req.upload!, model),
  jsonUsage: transcriptionUsage,
  countedUsage: (req, json) => transcriptCountedUsage(req, typeof json.text === 'string' ? json.text : ''),
  malformed: (json) =>
    typeof json.text === 'string' ? null : 'the answer was not a transcription (no `text`)',
  units: (req, json, reported, price) =>
    byTokens(reported, price) || price.audioSecondPico == null
      ? null
      : { audioSeconds: audioSeconds(req, json) },
});

export const transcriptionsFormat = audioFormat('transcriptions', 'a transcription');
export const translationsFormat = audioFormat('translations', 'a translation');

export const speechFormat: WireFormat<MediaRequest> = {
  ...common,
  name: 'speech',
  upstreamPath: '/audio/speech',
  parse(input) {
    const { body, model } = checkBodyAndModel(input);
    const text = requiredString(body, 'input');
    const characters = [...text].length;
    if (characters > MAX_SPEECH_CHARACTERS)
      throw invalid(`'input' must be at most ${MAX_SPEECH_CHARACTERS} characters`, 'input', 'invalid_value');
    requiredString(body, 'voice');
    const instructions = optionalString(body, 'instructions') ?? '';
    const streamFormat = optionalString(body, 'stream_format');
    if (streamFormat !== undefined && streamFormat !== 'audio' && streamFormat !== 'sse')
      throw invalid("'stream_format' must be 'audio' or 'sse'", 'stream_format', 'invalid_value');
    return {
      model,
      stream: false,
      n: 0,
      clientMaxTokens: 0,
      promptEstimate: 0,
      body,
      answer: 'bytes',
      characters,
      media: {
        characters,
        tokens: {
          prompt: countText(text) + countText(instructions),
          audioCompletion: characters * SPEECH_TOKENS_PER_CHARACTER,
        },
      },
    };
  },
  upstreamBody: (req, _cap, up) => jsonBodyUpstream(req, up.model),
  // Speech answers are audio; with `stream_format: "sse"` the usage is in `speech.audio.done` (see
  // speechSseUsage), read by the relay.
  jsonUsage: () => null,
};

/** The usage of a `speech.audio.done` event (`stream_format: "sse"`), or null. */
export function speechSseUsage(event: unknown): ReportedUsage | null {
  if (!isObject(event) || event.type !== 'speech.audio.done' || !isObject(event.usage)) return null;
  const input = tokenCount(event.usage.input_tokens);
  const output = tokenCount(event.usage.output_tokens);
  if (input === null || output === null) return null;
  // Speech output is audio.
  return { input, output, audioCompletion: output };
}

/**
 * The units a speech answer is charged for: the characters of `input`, all of them when the whole
 * answer was relayed, else pro rata by the bytes relayed of the bytes the provider sent (rounded up).
 */
export function speechUnits(
  req: MediaRequest,
  price: ModelPriceInfo,
  relayedBytes: number,
  totalBytes: number,
): MediaUnits | null {
  if (price.characters1kPico == null) return null;
  const all = req.characters ?? 0;
  if (relayedBytes >= totalBytes || totalBytes === 0) return { characters: relayedBytes > 0 ? all : 0 };
  // Integer arithmetic: characters x bytes relayed / bytes sent, rounded up.
  const n = (BigInt(all) * BigInt(relayedBytes) + BigInt(totalBytes) - 1n) / BigInt(totalBytes);
  return { characters: Number(n) };
}

export const MEDIA_FORMATS: Record<MediaKind, WireFormat<MediaRequest>> = {
  image_generations: imageGenerationsFormat,
  image_edits: imageEditsFormat,
  transcriptions: transcriptionsFormat,
  translations: translationsFormat,
  speech: speechFormat,
};

/**
 * What an image or audio request's hold covers besides the request price, in pico-USDC x ppm
 * (docs/reference.md §22): markup x the larger of the units at their prices (images: `n` x the dearest
 * price that matches the size and quality asked; seconds of audio; characters) and the token bound at
 * the bucket prices, since the answer decides which one is charged. A 400 before anything is held when
 * the model has neither price for this request, unless it is priced per request only (then 0).
 */
export function mediaHoldScaled(price: ModelPriceInfo, markupPpm: bigint, hold: MediaHold): bigint {
  let unitsMilli = 0n;
  let unitPriced = false;
  if (hold.images) {
    const top = highestImagePrice(price.imagePrices, hold.images.size, hold.images.quality);
    if (top !== null) {
      unitPriced = true;
      unitsMilli += BigInt(hold.images.n) * top * 1000n;
    }
  }
  if (hold.audioSeconds !== undefined && price.audioSecondPico != null) {
    unitPriced = true;
    unitsMilli += BigInt(hold.audioSeconds) * price.audioSecondPico * 1000n;
  }
  if (hold.characters !== undefined && price.characters1kPico != null) {
    unitPriced = true;
    unitsMilli += BigInt(hold.characters) * price.characters1kPico;
  }
  const tokenPriced = hasTokenPrices(price);
  if (!unitPriced && !tokenPriced) {
    // A model priced per request only (no unit price of any kind, no token price): the request price,
    // held by the caller, is its whole charge.
    const anyUnitPrice =
      (price.imagePrices?.length ?? 0) > 0 || price.audioSecondPico != null || price.characters1kPico != null;
    if (price.requestPico > 0n && !anyUnitPrice) return 0n;
    if (hold.images)
      throw invalid(
        `The model \`${price.modelId}\` has no image price for size ${hold.images.size ?? 'auto'} and quality ${hold.images.quality ?? 'auto'}.`,
        hold.images.size !== undefined ? 'size' : 'quality',
        'invalid_value',
      );
    throw invalid(
      `The model \`${price.modelId}\` has no price for ${hold.audioSeconds !== undefined ? 'audio seconds' : 'characters'} or tokens.`,
      'model',
      'invalid_value',
    );
  }
  let tokensPico = 0n;
  if (tokenPriced)
    for (const [b, n] of Object.entries(hold.tokens ?? {}) as [keyof UsageBuckets, number][])
      tokensPico += BigInt(n) * bucketPico(price, b);
  const unitsPico = (unitsMilli + 999n) / 1000n;
  return markupPpm * (unitsPico > tokensPico ? unitsPico : tokensPico);
}
