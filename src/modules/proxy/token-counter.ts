import { imageSize } from 'image-size';
import type { ProviderKind } from '../providers/provider-client.js';
import type { ChatRequest } from './chat-request.js';
import { countBounded } from './token-worker.js';

/**
 * Whose formula bills an image (docs/reference.md §13 "The hold's input side"): the kind of the provider
 * the request goes to (Anthropic's width x height / 750; OpenAI's tiles or patches for any other kind).
 */
export type ImageBiller = ProviderKind;

/**
 * Token counts with a real BPE tokenizer (o200k_base, the encoding of current OpenAI models). Used
 * for the prompt estimate of a hold, and for settlement when the upstream sends no `usage` (a client
 * disconnect, a stream that died, a provider that never reports usage).
 */

/** OpenAI's chat format adds about 3 tokens per message and 3 to prime the reply. */
const PER_MESSAGE = 3;
const PER_NAME = 1;
const REPLY_PRIMING = 3;

/** The texts a prompt count set aside (see collectTexts), or null when texts are counted at once. */
let collecting: string[] | null = null;

/** Tokens of a text (long runs counted in slices: token-worker.ts); inside collectTexts, 0 and set aside. */
export function countText(text: string): number {
  if (!text) return 0;
  if (collecting) {
    collecting.push(text);
    return 0;
  }
  return countBounded(text);
}

/**
 * Runs a synchronous count with its texts set aside instead of tokenized: returns what `count` found
 * (the parts that are not text: per-message overheads, media at their bounds) and the texts, which the
 * caller counts with bounded CPU (PromptTokenizer). Nothing else can run during `count`, so the
 * module-level collector is never shared.
 */
export function collectTexts<T>(count: () => T): { value: T; texts: string[] } {
  const texts: string[] = [];
  const outer = collecting;
  collecting = texts;
  try {
    return { value: count(), texts };
  } finally {
    collecting = outer;
  }
}

const jsonTokens = (v: unknown): number => (v === undefined || v === null ? 0 : countText(JSON.stringify(v)));

/*
 * Upper bounds for the parts that are not text (images, audio, files). A provider bills these from
 * their pixels, duration or pages, not from the characters of the request, so the hold counts each at
 * the most a provider can bill for it (docs/proxy.md "The prompt estimate"). Every bound lives here.
 */

/** How a model family bills an image: tiles (base + per 512 px tile) or 32 px patches (x multiplier). */
type ImageBilling = { kind: 'tiles'; base: number; tile: number } | { kind: 'patches'; multiplier: number };

/**
 * OpenAI's published image billing per model family (the longest matching prefix wins). A high or auto
 * detail image is scaled to fit 2048 x 2048, then its shortest side to 768 px: at most 2 x 4 = 8 tiles
 * of 512 px. Patch-billed models count 32 px patches, at most 1,536, times the model's multiplier.
 */
const IMAGE_BILLING: [string, ImageBilling][] = (
  [
    ['gpt-4o-mini', { kind: 'tiles', base: 2833, tile: 5667 }],
    ['gpt-4.1-mini', { kind: 'patches', multiplier: 1.62 }],
    ['gpt-4.1-nano', { kind: 'patches', multiplier: 2.46 }],
    ['gpt-5-mini', { kind: 'patches', multiplier: 1.62 }],
    ['gpt-5-nano', { kind: 'patches', multiplier: 2.46 }],
    ['o4-mini', { kind: 'patches', multiplier: 1.72 }],
    ['gpt-5', { kind: 'tiles', base: 70, tile: 140 }],
    ['gpt-4o', { kind: 'tiles', base: 85, tile: 170 }],
    ['chatgpt-4o', { kind: 'tiles', base: 85, tile: 170 }],
    ['gpt-4.1', { kind: 'tiles', base: 85, tile: 170 }],
    ['gpt-4.5', { kind: 'tiles', base: 85, tile: 170 }],
    ['o1', { kind: 'tiles', base: 75, tile: 150 }],
    ['o3', { kind: 'tiles', base: 75, tile: 150 }],
    ['computer-use-preview', { kind: 'tiles', base: 65, tile: 129 }],
  ] as [string, ImageBilling][]
).sort((a, b) => b[0].length - a[0].length);

/** Tiles of a high-detail image at most (2048 x 768 after scaling: 4 x 2). */
export const MAX_IMAGE_TILES = 8;
/** Patches of an image at most, on patch-billed models. */
export const MAX_IMAGE_PATCHES = 1536;

const billingBound = (b: ImageBilling, low: boolean): number =>
  b.kind === 'tiles'
    ? b.base + (low ? 0 : MAX_IMAGE_TILES * b.tile)
    : Math.ceil(MAX_IMAGE_PATCHES * b.multiplier);

/** The model id without a router's provider prefix (`openai/gpt-4o` → `gpt-4o`), lower case. */
const modelFamily = (model: string): string => model.toLowerCase().split('/').pop() ?? '';

/**
 * The most a provider bills for one image sent to `model` with `detail` ("low", "high", "auto" or
 * none). A model not in the table gets the largest bound of the table (48,169 tokens for a high-detail
 * image, gpt-4o-mini's; 3,779 for a low-detail one, gpt-4.1-nano's): it may bill like any of them.
 */
export function imageTokenBound(model: string, detail: unknown, biller: ImageBiller = 'OPENAI'): number {
  if (biller === 'ANTHROPIC') return anthropicImageTokens(ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_EDGE);
  const low = detail === 'low';
  const family = modelFamily(model);
  const known = IMAGE_BILLING.find(([prefix]) => family.startsWith(prefix));
  if (known) return billingBound(known[1], low);
  return Math.max(...IMAGE_BILLING.map(([, b]) => billingBound(b, low)));
}

/** Anthropic scales an image whose long edge exceeds this many pixels down to it (aspect kept). */
export const ANTHROPIC_MAX_EDGE = 1568;

/** Anthropic's tokens for an image of `w` x `h` pixels: (w x h) / 750 after its resize. */
export function anthropicImageTokens(w: number, h: number): number {
  const scale = Math.min(1, ANTHROPIC_MAX_EDGE / Math.max(w, h, 1));
  return Math.ceil((Math.ceil(w * scale) * Math.ceil(h * scale)) / 750);
}

/** OpenAI's tokens for an image of `w` x `h` pixels under one family's billing. */
function openAiImageTokens(b: ImageBilling, w: number, h: number, low: boolean): number {
  if (b.kind === 'patches') {
    const patches = Math.min(MAX_IMAGE_PATCHES, Math.ceil(w / 32) * Math.ceil(h / 32));
    return Math.ceil(patches * b.multiplier);
  }
  if (low) return b.base;
  // Fit in 2048 x 2048, then the shortest side down to 768 px (never enlarged), then 512 px tiles.
  const fit = Math.min(1, 2048 / Math.max(w, h, 1));
  const short = Math.min(1, 768 / Math.max(1, Math.min(w, h) * fit));
  const tiles = Math.ceil((w * fit * short) / 512) * Math.ceil((h * fit * short) / 512);
  return b.base + Math.min(MAX_IMAGE_TILES, Math.max(1, tiles)) * b.tile;
}

/** How many base64 characters of an image are decoded at first to find its size (its header). */
const HEADER_CHARS = 64 * 1024;

/**
 * The pixel size an inline image's header declares (a `data:` URL or bare base64), or null when it is
 * not an image `image-size` reads. Only the first bytes are decoded unless the header lies further on.
 */
export function inlineImageSize(data: unknown): { width: number; height: number } | null {
  if (typeof data !== 'string' || data === '') return null;
  let b64 = data;
  if (data.startsWith('data:')) {
    const comma = data.indexOf(',');
    if (comma < 0 || !data.slice(0, comma).endsWith(';base64')) return null;
    b64 = data.slice(comma + 1);
  } else if (/^https?:/i.test(data)) return null;
  for (const chars of [HEADER_CHARS, Infinity]) {
    const part = chars === Infinity ? b64 : b64.slice(0, chars - (chars % 4));
    try {
      // A copy with an ArrayBuffer of its own: image-size reads through DataViews of `input.buffer`
      // that are not bounded to the input, and a small Buffer is a slice of Node's shared pool, so
      // a few undecodable bytes could be read as an earlier request's image header.
      const size = imageSize(new Uint8Array(Buffer.from(part, 'base64')));
      if (size.width && size.height) return { width: size.width, height: size.height };
    } catch {
      /* not enough bytes yet, or not an image */
    }
    if (part.length === b64.length) break;
  }
  return null;
}

/**
 * The most a provider bills for one image (docs/reference.md §13): an inline image by the pixel size
 * its header declares, with the formula of the provider kind that bills it; an image by URL (or one whose
 * size cannot be read) at the family's largest bound.
 */
export function imagePartTokens(model: string, detail: unknown, data: unknown, biller: ImageBiller): number {
  const size = inlineImageSize(data);
  if (!size) return imageTokenBound(model, detail, biller);
  const { width: w, height: h } = size;
  if (biller === 'ANTHROPIC') return anthropicImageTokens(w, h);
  const low = detail === 'low';
  const family = modelFamily(model);
  const known = IMAGE_BILLING.find(([prefix]) => family.startsWith(prefix));
  if (known) return openAiImageTokens(known[1], w, h, low);
  return Math.max(...IMAGE_BILLING.map(([, b]) => openAiImageTokens(b, w, h, low)));
}

/**
 * Audio: at least 1,000 bytes a second of sound (8 kbit/s, MP3's lowest bit rate; WAV takes far more),
 * and at most 20 tokens a second (OpenAI bills input audio at 10, output audio at 20): one token per 50
 * bytes, plus a frame's worth.
 */
export const AUDIO_BYTES_PER_TOKEN = 50;
const AUDIO_OVERHEAD = 32;
export const audioTokenBound = (bytes: number): number =>
  AUDIO_OVERHEAD + Math.ceil(bytes / AUDIO_BYTES_PER_TOKEN);

/**
 * Inputs whose size the proxy cannot see (a file by id or URL, an earlier response it did not relay):
 * held at the largest context window a provider offers (1,048,576 tokens, gpt-4.1's), since no
 * provider bills more input than its model takes in one request.
 */
export const UNKNOWN_INPUT_BOUND = 1_048_576;

/** Bytes of a base64 payload (a data: URL or bare base64), without decoding it; null when there is none. */
export function base64Bytes(data: unknown): number | null {
  if (typeof data !== 'string' || data === '') return null;
  let b64 = data;
  if (data.startsWith('data:')) {
    const comma = data.indexOf(',');
    if (comma < 0) return null;
    // A data: URL without ;base64 carries its bytes as they are (percent-encoded at most).
    if (!data.slice(0, comma).endsWith(';base64')) return data.length - comma - 1;
    b64 = data.slice(comma + 1);
  }
  const len = b64.replace(/\s+/g, '').replace(/=+$/, '').length;
  return Math.floor((len * 3) / 4);
}

/** Pages of a PDF at least, from its page objects and its page tree's `/Count`; 0 for another file. */
export function pdfPages(data: string): number {
  const comma = data.startsWith('data:') ? data.indexOf(',') : -1;
  const text = Buffer.from(data.slice(comma + 1), 'base64').toString('latin1');
  if (!text.startsWith('%PDF')) return 0;
  const objects = text.match(/\/Type\s*\/Page(?![a-zA-Z])/g)?.length ?? 0;
  let count = 0;
  for (const m of text.matchAll(/\/Count\s+(\d{1,6})/g)) count = Math.max(count, Number(m[1]));
  return Math.max(1, objects, count);
}

/**
 * A file's bound: one token per byte of the file (a BPE token is at least one byte of text, and the
 * text a PDF or office file compresses takes about four times fewer bytes, one token's worth of
 * characters), plus, for a PDF, a high-detail image of every page (providers bill each page's picture
 * too). A file the request names by id or URL: UNKNOWN_INPUT_BOUND.
 */
export function fileTokenBound(model: string, fileData: unknown): number {
  const bytes = base64Bytes(fileData);
  if (bytes === null) return UNKNOWN_INPUT_BOUND;
  const pages = typeof fileData === 'string' ? pdfPages(fileData) : 0;
  return bytes + pages * imageTokenBound(model, 'high');
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Tokens of one content part that is not text, chat or Responses shape: `image_url` / `input_image`,
 * `input_audio`, `file` / `input_file`. Null for a part of another kind.
 */
export function mediaPartTokens(
  model: string,
  p: Record<string, unknown>,
  biller: ImageBiller = 'OPENAI',
): number | null {
  const type = p.type;
  if (type === 'image_url' || type === 'input_image') {
    // chat: { image_url: { url, detail } }; Responses: { image_url: string, detail } or { file_id }
    const img = isRecord(p.image_url) ? p.image_url : p;
    const url = isRecord(p.image_url) ? p.image_url.url : p.image_url;
    return imagePartTokens(model, img.detail ?? p.detail, url, biller);
  }
  if (type === 'input_audio') {
    const audio = isRecord(p.input_audio) ? p.input_audio : p;
    const bytes = base64Bytes(audio.data);
    return bytes === null ? UNKNOWN_INPUT_BOUND : audioTokenBound(bytes);
  }
  if (type === 'file' || type === 'input_file') {
    const file = isRecord(p.file) ? p.file : p;
    return fileTokenBound(model, file.file_data);
  }
  return null;
}

/** Tokens of a message's (or input item's) content: text counted, media parts at their bound. */
export function contentTokens(model: string, content: unknown, biller: ImageBiller = 'OPENAI'): number {
  if (typeof content === 'string') return countText(content);
  if (!Array.isArray(content)) return jsonTokens(content);
  let n = 0;
  for (const part of content) {
    if (!isRecord(part)) continue;
    if (typeof part.text === 'string') n += countText(part.text);
    else if (typeof part.refusal === 'string') n += countText(part.refusal);
    else n += mediaPartTokens(model, part, biller) ?? jsonTokens(part);
  }
  return n;
}

/** Prompt tokens of a request: messages, names, tool calls, tool and schema definitions. */
export function countPromptTokens(req: ChatRequest, biller: ImageBiller = 'OPENAI'): number {
  let n = REPLY_PRIMING;
  for (const m of req.messages) {
    n += PER_MESSAGE + contentTokens(req.model, m.content, biller);
    if (typeof m.name === 'string') n += PER_NAME + countText(m.name);
    if (m.tool_calls !== undefined) n += jsonTokens(m.tool_calls);
    if (m.function_call !== undefined) n += jsonTokens(m.function_call);
  }
  const b = req.body;
  n += jsonTokens(b.tools) + jsonTokens(b.functions);
  const format = b.response_format as Record<string, unknown> | undefined;
  if (format && typeof format === 'object' && format.json_schema !== undefined)
    n += jsonTokens(format.json_schema);
  return n;
}

/** Accumulates what an answer produced (text, tool-call arguments, refusals) to count it afterwards. */
export class ProducedText {
  private parts: string[] = [];
  add(s: unknown): void {
    if (typeof s === 'string' && s) this.parts.push(s);
  }
  /** From a chat.completion message or a stream delta. */
  addMessage(m: unknown): void {
    if (!m || typeof m !== 'object') return;
    const msg = m as Record<string, unknown>;
    this.add(msg.content);
    this.add(msg.refusal);
    this.add(msg.reasoning_content);
    this.add(msg.reasoning);
    const calls = msg.tool_calls;
    if (Array.isArray(calls))
      for (const c of calls) {
        const fn = (c as Record<string, any>)?.function;
        if (fn) {
          this.add(fn.name);
          this.add(fn.arguments);
        }
      }
    const fc = msg.function_call as Record<string, unknown> | undefined;
    if (fc) {
      this.add(fc.name);
      this.add(fc.arguments);
    }
  }
  private counted = 0;
  private countedTokens = 0;
  /** Tokens so far, tokenizing only the parts added since the last call (each call's text on its own). */
  runningTokens(): number {
    if (this.counted < this.parts.length) {
      this.countedTokens += countText(this.parts.slice(this.counted).join(''));
      this.counted = this.parts.length;
    }
    return this.countedTokens;
  }
  get empty(): boolean {
    return this.parts.length === 0;
  }
  tokens(): number {
    return countText(this.parts.join(''));
  }
}
