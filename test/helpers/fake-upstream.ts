import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { base64Embedding, OPENAI_EMBEDDINGS_RESPONSE } from './embeddings-fixture.js';
import { anthropicErrorBody, ANTHROPIC_STREAM_ERROR_EVENT } from './anthropic-fixture.js';
import { parseBuffer } from 'music-metadata';

/** How the fake answers one request. Every field is optional; see `DEFAULT_BEHAVIOR`. */
export interface FakeBehavior {
  /** Reply text; streamed as one chunk per word (a leading space kept), like a tokenizer would. */
  content?: string;
  /** Usage to report; null = never report usage (the proxy must count tokens itself). */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** Answer this HTTP status with an OpenAI error body (`errorBody` to override). */
  status?: number;
  errorBody?: unknown;
  /** The error answer as raw text (e.g. a proxy's HTML page) instead of a JSON body. */
  errorText?: string;
  /** Extra headers of the error answer (e.g. `retry-after`). */
  errorHeaders?: Record<string, string>;
  /** Wait before answering (headers). */
  delayMs?: number;
  /** Answer (headers) only once this settles: requests held at the provider until the test lets them go. */
  gate?: Promise<unknown>;
  /** Wait between SSE chunks. */
  chunkDelayMs?: number;
  /** Destroy the connection after this many content chunks (an upstream dying mid-stream). */
  dieAfterChunks?: number;
  /** Report usage on the finish chunk instead of a separate `choices: []` chunk. */
  usageOnFinishChunk?: boolean;
  /** Ignore max_tokens (an upstream that overspends the cap). Default: the answer is cut at max_tokens. */
  ignoreMaxTokens?: boolean;
  /** Tool calls to return instead of text (non-streaming). */
  toolCalls?: unknown[];
  /**
   * A provider's own usage object, sent exactly as given instead of the one built from `usage` (a
   * recorded fixture: test/helpers/provider-usage.ts). Not cut at the cap.
   */
  rawUsage?: Record<string, unknown>;
  /**
   * A recorded event stream (a provider's transcript, test/fixtures/), sent as it is to a streaming
   * request, in pieces of 61 bytes: split inside lines and events as a network does.
   */
  sse?: string;
  /** Answer 200 with this JSON body instead of the generated answer (e.g. an embeddings answer that is not a list). */
  answer?: unknown;
  /**
   * Refuse a chat request that carries `max_tokens`, as OpenAI answers for its reasoning models (HTTP 400,
   * `unsupported_parameter`, see {@link MAX_TOKENS_REFUSAL}).
   */
  refuseMaxTokens?: boolean;
  /**
   * Messages streams: the final message_delta's usage also repeats the input fields (input_tokens and
   * the cache fields), as current API versions send (see anthropic-fixture.ts ANTHROPIC_STREAM_TOOL).
   */
  deltaRepeatsInput?: boolean;
  /**
   * Messages streams: an Anthropic `error` event after this many text deltas, instead of the end; chat
   * streams: OpenAI's mid-stream error chunk (`data: {"error": …}`), then the body ends.
   */
  errorEventAfterChunks?: number;
}

/**
 * Anthropic's refusal of thinking in a tool-use cycle whose assistant turn has no thinking block (the
 * client did not send its thinking back), or null: with thinking enabled, the assistant turn whose tool
 * calls the last user turn answers must start with a thinking block.
 */
function thinkingRefusal(body: any): string | null {
  if (body?.thinking?.type !== 'enabled' || !Array.isArray(body.messages)) return null;
  const msgs = body.messages;
  const last = msgs.at(-1);
  const answersTools =
    last?.role === 'user' &&
    Array.isArray(last.content) &&
    last.content.some((b: any) => b?.type === 'tool_result');
  if (!answersTools) return null;
  const i = msgs.length - 2;
  const first = Array.isArray(msgs[i]?.content) ? msgs[i].content[0] : null;
  if (first?.type === 'thinking' || first?.type === 'redacted_thinking') return null;
  return (
    `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first?.type ?? 'text'}\`. ` +
    'When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the ' +
    'lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from ' +
    'previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at ' +
    'https://docs.claude.com/en/docs/build-with-claude/extended-thinking'
  );
}

/** What OpenAI sends when a stream fails after it started: an error chunk, and no `[DONE]`. */
const OPENAI_STREAM_ERROR_CHUNK = `data: ${JSON.stringify({
  error: {
    message: 'The server had an error while processing your request. Sorry about that!',
    type: 'server_error',
    param: null,
    code: null,
  },
})}\n\n`;

/** OpenAI's answer (HTTP 400) to `max_tokens` sent to one of its reasoning models (o1, o3, gpt-5 …). */
export const MAX_TOKENS_REFUSAL = {
  error: {
    message:
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    type: 'invalid_request_error',
    param: 'max_tokens',
    code: 'unsupported_parameter',
  },
};

export const DEFAULT_BEHAVIOR: Required<Pick<FakeBehavior, 'content' | 'usage'>> = {
  content: 'Hello from the fake upstream!',
  usage: { prompt_tokens: 11, completion_tokens: 7 },
};

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: any;
  /** The client (the proxy) went away before the answer ended. */
  aborted: boolean;
  /** Content chunks written before the end or the abort. */
  chunksSent: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The image and audio routes (OpenAI's API reference; docs/reference.md §22 of the service). */
const MEDIA_PATH = /\/(images\/(generations|edits)|audio\/(transcriptions|translations|speech))$/;

/** gpt-image-1's output tokens per image by quality and size (OpenAI's pricing guide). */
export const FAKE_IMAGE_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};
/** Image input tokens the fake bills per input image of an edit. */
export const FAKE_INPUT_IMAGE_TOKENS = 323;
/** The fake's speech: this many bytes of audio per input character, sent in chunks of SPEECH_CHUNK. */
export const FAKE_SPEECH_BYTES_PER_CHARACTER = 200;
export const FAKE_SPEECH_CHUNK = 4096;
/** What the fake transcribes every file to. */
export const FAKE_TRANSCRIPT = 'The beach was a popular spot on a hot summer day.';
/** The smallest PNG (1x1, transparent): the fake's generated image. */
export const FAKE_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
const AUDIO_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

/**
 * A real OpenAI-compatible server on 127.0.0.1 for tests and the bench: POST /v1/chat/completions and
 * POST /v1/responses in JSON or SSE (per the request's `stream`), POST /v1/embeddings (the shape of
 * embeddings-fixture.ts), recording every request (headers and body). Behaviour is
 * set for all requests (`behavior`) or queued for the next ones (`next(...)`).
 */
export class FakeUpstream {
  readonly requests: RecordedRequest[] = [];
  behavior: FakeBehavior = {};
  /** Told of every request (the development CLI prints them). */
  onRequest?: (url: string, body: any) => void;
  private readonly queue: FakeBehavior[] = [];
  private seq = 0;

  private constructor(
    private readonly server: Server,
    /** Base URL to connect as a provider, e.g. http://127.0.0.1:PORT/v1 */
    readonly baseUrl: string,
    /** Keep request records (off in the bench). */
    private readonly record: boolean,
  ) {}

  static async start(opts: { record?: boolean; port?: number } = {}): Promise<FakeUpstream> {
    const self: { fake?: FakeUpstream } = {};
    const server = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        let body: any;
        try {
          body = JSON.parse(Buffer.concat(parts).toString('utf8'));
        } catch {
          body = null;
        }
        const url = req.url ?? '/';
        if (req.method === 'POST' && MEDIA_PATH.test(url.split('?')[0]))
          return void self
            .fake!.media(url, req.headers, Buffer.concat(parts), body, res)
            .catch(() => res.destroy());
        self.fake!.handle(req.method ?? 'GET', url, req.headers, body, res).catch(() => res.destroy());
      });
    });
    server.keepAliveTimeout = 60_000;
    // A busy port rejects (the CLI then exits 1 with one line) instead of an unhandled 'error' event.
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as AddressInfo).port;
    self.fake = new FakeUpstream(server, `http://127.0.0.1:${port}/v1`, opts.record ?? true);
    return self.fake;
  }

  /** Queues behaviours for the next requests, in order (then `behavior` applies again). */
  next(...b: FakeBehavior[]): void {
    this.queue.push(...b);
  }

  /** Responses API requests received so far. */
  get responsesRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.endsWith('/responses'));
  }

  /** Embeddings requests received so far. */
  get embeddingsRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.endsWith('/embeddings'));
  }

  /** Messages requests received so far (POST /v1/messages, not count_tokens). */
  get messagesRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.endsWith('/messages'));
  }

  /** Messages count_tokens requests received so far. */
  get countTokensRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.endsWith('/messages/count_tokens'));
  }

  /** Image and audio requests received so far (multipart ones recorded as their fields and files). */
  get mediaRequests(): RecordedRequest[] {
    return this.requests.filter((r) => MEDIA_PATH.test(r.url.split('?')[0]));
  }

  /**
   * POST /v1/images/generations and /edits, /v1/audio/transcriptions and /translations, /v1/audio/speech,
   * in the shapes of OpenAI's API reference (test/fixtures/openai/): gpt-image models answer `b64_json`
   * with `size`, `quality` and token `usage` (text and image input, image output per FAKE_IMAGE_TOKENS);
   * other image models a `url` (or `b64_json`) per image, no usage. Transcription reads the file's length
   * with music-metadata (5 s when it cannot): whisper-style models report `usage: {type: "duration"}`,
   * gpt-… models token usage (10 audio tokens per second); text formats answer plain text. Speech sends
   * FAKE_SPEECH_BYTES_PER_CHARACTER bytes per input character, chunked (no length), or with
   * `stream_format: "sse"` `speech.audio.delta` events and a `speech.audio.done` with usage.
   */
  async media(
    url: string,
    headers: IncomingHttpHeaders,
    raw: Buffer,
    json: any,
    res: ServerResponse,
  ): Promise<void> {
    const path = url.split('?')[0];
    let fields: Record<string, any> = json ?? {};
    const files: { field: string; name: string; type: string; bytes: Buffer }[] = [];
    const type = headers['content-type'] ?? '';
    if (type.startsWith('multipart/form-data')) {
      const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': type } }).formData();
      fields = {};
      for (const [name, value] of form as unknown as Iterable<[string, string | File]>) {
        if (typeof value === 'string') fields[name] = value;
        else
          files.push({
            field: name,
            name: value.name,
            type: value.type,
            bytes: Buffer.from(await value.arrayBuffer()),
          });
      }
    }
    const body = {
      ...fields,
      files: files.map((f) => ({ field: f.field, name: f.name, size: f.bytes.length })),
    };
    const rec: RecordedRequest = { method: 'POST', url, headers, body, aborted: false, chunksSent: 0 };
    this.onRequest?.(url, body);
    if (this.record) this.requests.push(rec);
    res.on('close', () => {
      if (!res.writableFinished) rec.aborted = true;
    });
    const b: FakeBehavior = { ...this.behavior, ...(this.queue.shift() ?? {}) };
    if (b.delayMs) await sleep(b.delayMs);
    if (b.status && b.status >= 400) {
      res.writeHead(b.status, { 'content-type': 'application/json', ...b.errorHeaders });
      res.end(
        JSON.stringify(
          b.errorBody ?? {
            error: {
              message: `fake upstream error ${b.status}`,
              type: 'server_error',
              param: null,
              code: null,
            },
          },
        ),
      );
      return;
    }
    const send = (answer: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    };
    if (b.answer !== undefined) return send(b.answer);
    const model = String(fields.model ?? '');
    // Text tokens: one per word (a tokenizer counts at least that many for plain English).
    const words = (text: string) => text.split(/\s+/).filter(Boolean).length;
    if (path.endsWith('/images/generations') || path.endsWith('/images/edits')) {
      const n = Number(fields.n ?? 1);
      const prompt = String(fields.prompt ?? '');
      if (model.startsWith('gpt-image')) {
        const quality = !fields.quality || fields.quality === 'auto' ? 'high' : String(fields.quality);
        const size = !fields.size || fields.size === 'auto' ? '1024x1024' : String(fields.size);
        const imageIn = files.filter((f) => f.field !== 'mask').length * FAKE_INPUT_IMAGE_TOKENS;
        const textIn = words(prompt);
        const out = n * (FAKE_IMAGE_TOKENS[quality]?.[size] ?? 4160);
        return send({
          created: Math.floor(Date.now() / 1000),
          data: Array.from({ length: n }, () => ({ b64_json: FAKE_PNG_BASE64 })),
          background: 'opaque',
          output_format: 'png',
          size,
          quality,
          usage: {
            total_tokens: textIn + imageIn + out,
            input_tokens: textIn + imageIn,
            output_tokens: out,
            input_tokens_details: { text_tokens: textIn, image_tokens: imageIn },
          },
        });
      }
      const byUrl = fields.response_format !== 'b64_json';
      return send({
        created: Math.floor(Date.now() / 1000),
        data: Array.from({ length: n }, (_, i) =>
          byUrl
            ? { url: `https://images.example.com/fake-${++this.seq}-${i}.png`, revised_prompt: prompt }
            : { b64_json: FAKE_PNG_BASE64, revised_prompt: prompt },
        ),
      });
    }
    if (path.endsWith('/audio/transcriptions') || path.endsWith('/audio/translations')) {
      const file = files.find((f) => f.field === 'file');
      let duration = 5;
      try {
        const meta = await parseBuffer(file!.bytes, { size: file!.bytes.length }, { duration: true });
        if (typeof meta.format.duration === 'number' && meta.format.duration > 0)
          duration = meta.format.duration;
      } catch {
        /* 5 s */
      }
      const format = String(fields.response_format ?? 'json');
      const translate = path.endsWith('/translations');
      if (format === 'text' || format === 'srt' || format === 'vtt') {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(
          format === 'text'
            ? `${FAKE_TRANSCRIPT}\n`
            : `1\n00:00:00,000 --> 00:00:0${Math.min(9, Math.ceil(duration))},000\n${FAKE_TRANSCRIPT}\n\n`,
        );
        return;
      }
      const seconds = { type: 'duration', seconds: Math.ceil(duration) };
      if (format === 'verbose_json')
        return send({
          task: translate ? 'translate' : 'transcribe',
          language: 'english',
          duration,
          text: FAKE_TRANSCRIPT,
          segments: [
            {
              id: 0,
              seek: 0,
              start: 0,
              end: duration,
              text: ` ${FAKE_TRANSCRIPT}`,
              tokens: [50364, 440, 7534, 390, 257, 3743, 4008],
              temperature: 0,
              avg_logprob: -0.28,
              compression_ratio: 1.23,
              no_speech_prob: 0.0098,
            },
          ],
          usage: seconds,
        });
      if (translate) return send({ text: FAKE_TRANSCRIPT });
      if (model.startsWith('gpt-')) {
        const audio = Math.ceil(duration * 10);
        const text = words(String(fields.prompt ?? ''));
        const out = words(FAKE_TRANSCRIPT);
        return send({
          text: FAKE_TRANSCRIPT,
          usage: {
            type: 'tokens',
            input_tokens: audio + text,
            input_token_details: { text_tokens: text, audio_tokens: audio },
            output_tokens: out,
            total_tokens: audio + text + out,
          },
        });
      }
      return send({ text: FAKE_TRANSCRIPT, usage: seconds });
    }
    // Speech: the audio bytes, chunked as they are made.
    const input = String(fields.input ?? '');
    const audio = Buffer.alloc([...input].length * FAKE_SPEECH_BYTES_PER_CHARACTER);
    for (let i = 0; i < audio.length; i++) audio[i] = i % 251;
    const sse = fields.stream_format === 'sse';
    res.writeHead(200, {
      'content-type': sse
        ? 'text/event-stream'
        : (AUDIO_TYPES[String(fields.response_format ?? 'mp3')] ?? 'audio/mpeg'),
    });
    for (let at = 0; at < audio.length; at += FAKE_SPEECH_CHUNK) {
      if (res.destroyed) return;
      const chunk = audio.subarray(at, at + FAKE_SPEECH_CHUNK);
      res.write(
        sse
          ? `data: ${JSON.stringify({ type: 'speech.audio.delta', audio: chunk.toString('base64') })}\n\n`
          : chunk,
      );
      rec.chunksSent++;
      if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
    }
    if (sse) {
      const inputTokens = words(input);
      const outputTokens = [...input].length * 5;
      res.write(
        `data: ${JSON.stringify({ type: 'speech.audio.done', usage: b.rawUsage ?? { input_tokens: inputTokens, output_tokens: outputTokens, total_tokens: inputTokens + outputTokens } })}\n\n`,
      );
    }
    res.end();
  }

  /** Chat requests received so far. */
  get chatRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.endsWith('/chat/completions'));
  }

  reset(): void {
    this.requests.length = 0;
    this.queue.length = 0;
    this.behavior = {};
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private async handle(
    method: string,
    url: string,
    headers: IncomingHttpHeaders,
    body: any,
    res: ServerResponse,
  ): Promise<void> {
    const rec: RecordedRequest = { method, url, headers, body, aborted: false, chunksSent: 0 };
    this.onRequest?.(url, body);
    if (this.record) this.requests.push(rec);
    res.on('close', () => {
      if (!res.writableFinished) rec.aborted = true;
    });
    const responses = method === 'POST' && url.endsWith('/responses');
    const embeddings = method === 'POST' && url.endsWith('/embeddings');
    const messages = method === 'POST' && url.endsWith('/messages');
    const countTokens = method === 'POST' && url.endsWith('/messages/count_tokens');
    if (messages || countTokens) return this.anthropic(countTokens, body, rec, res);
    if (method !== 'POST' || (!url.endsWith('/chat/completions') && !responses && !embeddings)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: { message: 'not found', type: 'invalid_request_error', param: null, code: null },
        }),
      );
      return;
    }
    const own: FakeBehavior = { ...this.behavior, ...(this.queue.shift() ?? {}) };
    const b: FakeBehavior = { ...DEFAULT_BEHAVIOR, ...own };
    if (b.gate) await b.gate;
    if (b.delayMs) await sleep(b.delayMs);
    if (b.refuseMaxTokens && !responses && body?.max_tokens !== undefined) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify(MAX_TOKENS_REFUSAL));
      return;
    }
    if (b.status && b.status >= 400) {
      if (b.errorText !== undefined) {
        res.writeHead(b.status, { 'content-type': 'text/html', ...b.errorHeaders });
        res.end(b.errorText);
        return;
      }
      res.writeHead(b.status, { 'content-type': 'application/json', ...b.errorHeaders });
      res.end(
        JSON.stringify(
          b.errorBody ?? {
            error: {
              message: `fake upstream error ${b.status}`,
              type: 'server_error',
              param: null,
              code: null,
            },
          },
        ),
      );
      return;
    }
    if (b.answer !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(b.answer));
      return;
    }
    if (b.sse !== undefined && body?.stream) return this.replay(b.sse, res);
    if (responses) return this.respond(b, body, rec, res);
    if (embeddings) return this.embed(own, body, res);
    const id = `chatcmpl-fake-${++this.seq}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body?.model ?? 'unknown';
    const cap: number | undefined = body?.max_completion_tokens ?? body?.max_tokens ?? undefined;
    let words: string[] = (b.content ?? '').match(/\s*\S+/g) ?? [];
    const usage = b.usage ? { ...b.usage } : null;
    let finish = 'stop';
    if (!b.ignoreMaxTokens && cap !== undefined) {
      if (words.length > cap) {
        words = words.slice(0, cap);
        finish = 'length';
      }
      if (usage && usage.completion_tokens > cap) {
        usage.completion_tokens = cap;
        finish = 'length';
      }
    }
    const fullUsage =
      b.rawUsage ??
      (usage ? { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } : null);

    if (body?.stream !== true) {
      const message: Record<string, unknown> = { role: 'assistant', content: words.join(''), refusal: null };
      if (b.toolCalls) {
        message.content = null;
        message.tool_calls = b.toolCalls;
        finish = 'tool_calls';
      }
      const answer: Record<string, unknown> = {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
        system_fingerprint: 'fp_fake',
      };
      if (fullUsage) answer.usage = fullUsage;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
      return;
    }

    const includeUsage = body?.stream_options?.include_usage === true && fullUsage !== null;
    const extra = includeUsage ? { usage: null } : {};
    const chunk = (choices: unknown[], more: Record<string, unknown> = extra) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_fake', choices, ...more })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const write = async (s: string) => {
      if (res.destroyed) throw new Error('client gone');
      res.write(s);
      if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
    };
    try {
      await write(
        chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]),
      );
      for (const w of words) {
        if (b.dieAfterChunks !== undefined && rec.chunksSent >= b.dieAfterChunks) {
          res.destroy();
          return;
        }
        if (b.errorEventAfterChunks !== undefined && rec.chunksSent >= b.errorEventAfterChunks) {
          res.end(OPENAI_STREAM_ERROR_CHUNK);
          return;
        }
        await write(chunk([{ index: 0, delta: { content: w }, logprobs: null, finish_reason: null }]));
        rec.chunksSent++;
      }
      const finishChoice = [{ index: 0, delta: {}, logprobs: null, finish_reason: finish }];
      if (includeUsage && b.usageOnFinishChunk) {
        await write(chunk(finishChoice, { usage: fullUsage }));
      } else {
        await write(chunk(finishChoice));
        if (includeUsage) await write(chunk([], { usage: fullUsage }));
      }
      res.end('data: [DONE]\n\n');
    } catch {
      /* the proxy went away */
    }
  }

  /**
   * POST /v1/embeddings: one `embedding` per input (a string or token-id array is one input, an array of
   * strings or of token-id arrays one per item), the fixture's vector as floats or, with
   * `encoding_format: "base64"`, as base64 float32; usage from the behaviour's `usage.prompt_tokens`,
   * else the fixture's (8); `usage: null` leaves usage out.
   */
  private embed(own: FakeBehavior, body: any, res: ServerResponse): void {
    const input = body?.input;
    const count =
      Array.isArray(input) && input.length > 0 && (typeof input[0] === 'string' || Array.isArray(input[0]))
        ? input.length
        : 1;
    const vector = OPENAI_EMBEDDINGS_RESPONSE.data[0].embedding;
    const embedding = body?.encoding_format === 'base64' ? base64Embedding(vector) : [...vector];
    const prompt =
      own.usage === null
        ? null
        : (own.usage?.prompt_tokens ?? OPENAI_EMBEDDINGS_RESPONSE.usage.prompt_tokens);
    const answer: Record<string, unknown> = {
      object: 'list',
      data: Array.from({ length: count }, (_, index) => ({ object: 'embedding', embedding, index })),
      model: body?.model ?? 'unknown',
    };
    if (prompt !== null) answer.usage = { prompt_tokens: prompt, total_tokens: prompt };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  }

  /**
   * POST /v1/responses (OpenAI's Responses API): a `response` object, or with `stream: true` its named
   * events (response.created … response.output_text.delta … response.completed with `response.usage`).
   * `max_output_tokens` cuts the answer (status `incomplete`), `usage` maps to input/output tokens.
   */
  private async respond(
    b: FakeBehavior,
    body: any,
    rec: RecordedRequest,
    res: ServerResponse,
  ): Promise<void> {
    const seq = ++this.seq;
    const id = `resp_fake_${seq}`;
    const msgId = `msg_fake_${seq}`;
    const createdAt = Math.floor(Date.now() / 1000);
    const model = body?.model ?? 'unknown';
    const cap: number | undefined = body?.max_output_tokens ?? undefined;
    let words: string[] = (b.content ?? '').match(/\s*\S+/g) ?? [];
    const tokens = b.usage ? { ...b.usage } : null;
    let truncated = false;
    if (!b.ignoreMaxTokens && cap !== undefined) {
      if (words.length > cap) {
        words = words.slice(0, cap);
        truncated = true;
      }
      if (tokens && tokens.completion_tokens > cap) {
        tokens.completion_tokens = cap;
        truncated = true;
      }
    }
    const usage = b.rawUsage
      ? b.rawUsage
      : tokens
        ? {
            input_tokens: tokens.prompt_tokens,
            input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
            output_tokens: tokens.completion_tokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: tokens.prompt_tokens + tokens.completion_tokens,
          }
        : null;
    const text = words.join('');
    const part = { type: 'output_text', text, annotations: [], logprobs: [] };
    const item = { id: msgId, type: 'message', status: 'completed', role: 'assistant', content: [part] };
    const status = truncated ? 'incomplete' : 'completed';
    // The shape of OpenAI's `Response` schema (every required field; no usage while in progress).
    const response = (st: string, output: unknown[], u: unknown) => ({
      id,
      object: 'response',
      created_at: createdAt,
      status: st,
      error: null,
      incomplete_details: st === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      instructions: body?.instructions ?? null,
      max_output_tokens: cap ?? null,
      metadata: {},
      model,
      output,
      parallel_tool_calls: true,
      previous_response_id: null,
      temperature: 1,
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
      ...(u ? { usage: u } : {}),
    });

    if (body?.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(response(status, [item], usage)));
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let n = 0;
    const write = async (type: string, data: Record<string, unknown>) => {
      if (res.destroyed) throw new Error('client gone');
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n++, ...data })}\n\n`);
      if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
    };
    const at = { item_id: msgId, output_index: 0, content_index: 0 };
    try {
      await write('response.created', { response: response('in_progress', [], null) });
      await write('response.in_progress', { response: response('in_progress', [], null) });
      await write('response.output_item.added', {
        output_index: 0,
        item: { ...item, status: 'in_progress', content: [] },
      });
      await write('response.content_part.added', { ...at, part: { ...part, text: '' } });
      for (const w of words) {
        if (b.dieAfterChunks !== undefined && rec.chunksSent >= b.dieAfterChunks) {
          res.destroy();
          return;
        }
        await write('response.output_text.delta', { ...at, delta: w, logprobs: [] });
        rec.chunksSent++;
      }
      await write('response.output_text.done', { ...at, text, logprobs: [] });
      await write('response.content_part.done', { ...at, part });
      await write('response.output_item.done', { output_index: 0, item });
      await write(truncated ? 'response.incomplete' : 'response.completed', {
        response: response(status, [item], usage),
      });
      res.end();
    } catch {
      /* the proxy went away */
    }
  }

  /**
   * Anthropic's Messages API: POST /v1/messages answers a `message` (JSON) or its event stream
   * (`stream: true`: message_start … message_stop, the shape of anthropic-fixture.ts), cut at
   * `max_tokens` (`stop_reason: "max_tokens"`); usage `input_tokens` / `output_tokens` from the
   * behaviour's `usage`, or `rawUsage` as given (its input fields on message_start, its output_tokens on
   * message_delta). POST /v1/messages/count_tokens answers `{"input_tokens": N}` (the behaviour's
   * prompt_tokens). Errors in Anthropic's shape.
   */
  /** Sends a recorded event stream as it is, in 61-byte pieces. */
  private async replay(sse: string, res: ServerResponse): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const bytes = Buffer.from(sse);
    for (let i = 0; i < bytes.length; i += 61) {
      if (res.destroyed) return;
      res.write(bytes.subarray(i, i + 61));
      await sleep(0);
    }
    res.end();
  }

  private async anthropic(
    countTokens: boolean,
    body: any,
    rec: RecordedRequest,
    res: ServerResponse,
  ): Promise<void> {
    const own: FakeBehavior = { ...this.behavior, ...(this.queue.shift() ?? {}) };
    const b: FakeBehavior = { ...DEFAULT_BEHAVIOR, ...own };
    if (b.delayMs) await sleep(b.delayMs);
    const refusal = thinkingRefusal(body);
    if (refusal && !countTokens) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify(anthropicErrorBody('invalid_request_error', refusal)));
      return;
    }
    if (b.sse !== undefined && body?.stream && !countTokens) return this.replay(b.sse, res);
    if (b.answer !== undefined && !countTokens) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(b.answer));
      return;
    }
    if (b.status && b.status >= 400) {
      if (b.errorText !== undefined) {
        res.writeHead(b.status, { 'content-type': 'text/html', ...b.errorHeaders });
        res.end(b.errorText);
        return;
      }
      const type =
        {
          400: 'invalid_request_error',
          401: 'authentication_error',
          404: 'not_found_error',
          429: 'rate_limit_error',
          529: 'overloaded_error',
        }[b.status] ?? 'api_error';
      res.writeHead(b.status, { 'content-type': 'application/json', ...b.errorHeaders });
      res.end(JSON.stringify(b.errorBody ?? anthropicErrorBody(type, `fake upstream error ${b.status}`)));
      return;
    }
    if (b.answer !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(b.answer));
      return;
    }
    if (countTokens) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ input_tokens: b.usage?.prompt_tokens ?? 0 }));
      return;
    }
    const id = `msg_fake_${++this.seq}`;
    const model = body?.model ?? 'unknown';
    const cap: number | undefined = typeof body?.max_tokens === 'number' ? body.max_tokens : undefined;
    let words: string[] = (b.content ?? '').match(/\s*\S+/g) ?? [];
    const tokens = b.usage ? { ...b.usage } : null;
    let stop = 'end_turn';
    if (!b.ignoreMaxTokens && cap !== undefined) {
      if (words.length > cap) {
        words = words.slice(0, cap);
        stop = 'max_tokens';
      }
      if (tokens && tokens.completion_tokens > cap) {
        tokens.completion_tokens = cap;
        stop = 'max_tokens';
      }
    }
    const usage: Record<string, unknown> | null =
      b.rawUsage ??
      (tokens
        ? {
            input_tokens: tokens.prompt_tokens,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            output_tokens: tokens.completion_tokens,
            service_tier: 'standard',
          }
        : null);
    const text = words.join('');
    const message = (content: unknown[], stopReason: string | null, u: unknown) => ({
      id,
      type: 'message',
      role: 'assistant',
      model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      ...(u ? { usage: u } : {}),
    });

    if (body?.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(message([{ type: 'text', text }], stop, usage)));
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const write = async (type: string, data: Record<string, unknown>) => {
      if (res.destroyed) throw new Error('client gone');
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
    };
    // message_start: the input side, and output_tokens as far as known (Anthropic sends 1).
    let startUsage: Record<string, unknown> | null = null;
    if (usage) {
      startUsage = { ...usage, output_tokens: 1 };
    }
    const inputFields = (u: Record<string, unknown>) => {
      const out: Record<string, unknown> = {};
      for (const k of ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'])
        if (u[k] !== undefined) out[k] = u[k];
      return out;
    };
    try {
      await write('message_start', { message: message([], null, startUsage) });
      await write('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      await write('ping', {});
      for (const w of words) {
        if (b.dieAfterChunks !== undefined && rec.chunksSent >= b.dieAfterChunks) {
          res.destroy();
          return;
        }
        if (b.errorEventAfterChunks !== undefined && rec.chunksSent >= b.errorEventAfterChunks) {
          res.end(ANTHROPIC_STREAM_ERROR_EVENT);
          return;
        }
        await write('content_block_delta', { index: 0, delta: { type: 'text_delta', text: w } });
        rec.chunksSent++;
      }
      await write('content_block_stop', { index: 0 });
      const deltaUsage = usage
        ? { ...(b.deltaRepeatsInput ? inputFields(usage) : {}), output_tokens: usage.output_tokens }
        : undefined;
      await write('message_delta', {
        delta: { stop_reason: stop, stop_sequence: null },
        ...(deltaUsage ? { usage: deltaUsage } : {}),
      });
      await write('message_stop', {});
      res.end();
    } catch {
      /* the proxy went away */
    }
  }
}
