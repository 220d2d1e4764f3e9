import { randomBytes } from 'node:crypto';
import type { EventSourceMessage } from 'eventsource-parser';
import { invalid } from '../../shared/errors.js';
import { ZERO_COST_DETAILS } from '../../shared/money.js';
import type { BlockedReply } from './blocked-reply.js';
import { checkBodyAndModel } from './chat-request.js';
import {
  inputTokens,
  outputTokens,
  type ReportedUsage,
  type UsageBuckets,
} from '../../shared/usage-buckets.js';
import { responsesUsage } from './provider-usage.js';
import { chargedFields } from './sse-relay.js';
import { contentTokens, countText, ProducedText, type ImageBiller } from './token-counter.js';
import { isObject, type Charged, type StreamRelay, type WireFormat } from './wire-format.js';
import { SseTransformer } from './formats/common.js';

/**
 * OpenAI's Responses API (`POST /v1/responses`), docs/reference.md §11: the same money rules as chat
 * completions; the output cap is `max_output_tokens`, usage is `input_tokens` / `output_tokens`, and a
 * stream is named events (`event: response.output_text.delta` …) ending in `response.completed`.
 */

/** Per input item (role / item framing), like chat's per-message overhead. */
const PER_ITEM = 3;

const jsonTokens = (v: unknown): number => (v === undefined || v === null ? 0 : countText(JSON.stringify(v)));

/** Prompt tokens of a Responses request: instructions, input (text or items), tools, text format. */
export function countResponsesPrompt(body: Record<string, unknown>, biller: ImageBiller = 'OPENAI'): number {
  const model = typeof body.model === 'string' ? body.model : '';
  let n = 3;
  if (typeof body.instructions === 'string') n += PER_ITEM + countText(body.instructions);
  const input = body.input;
  if (typeof input === 'string') n += PER_ITEM + countText(input);
  else if (Array.isArray(input))
    for (const item of input) {
      n += PER_ITEM;
      if (isObject(item) && 'content' in item) n += contentTokens(model, item.content, biller);
      else if (isObject(item) && Array.isArray(item.output)) {
        // A tool's output as parts (text, images): each image at its bound, not its base64 as text.
        const { output, ...rest } = item;
        n += contentTokens(model, output, biller) + jsonTokens(rest);
      } else n += jsonTokens(item);
    }
  n += jsonTokens(body.tools);
  if (isObject(body.text) && body.text.format !== undefined) n += jsonTokens(body.text.format);
  return n;
}

/** The usage: the provider's, else the metered counts per bucket; with what was charged. */
const usageWithCost = (u: unknown, usage: UsageBuckets, charged: Charged): Record<string, unknown> => ({
  ...(isObject(u)
    ? u
    : {
        input_tokens: inputTokens(usage),
        input_tokens_details: { cached_tokens: usage.cacheRead, cache_write_tokens: usage.cacheWrite },
        output_tokens: outputTokens(usage),
        output_tokens_details: { reasoning_tokens: usage.reasoning },
        total_tokens: inputTokens(usage) + outputTokens(usage),
      }),
  ...chargedFields(charged),
});

const sseEvent = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

/** Text an output item (or a streamed `…delta` / `…done` event) produced. */
function addOutput(produced: ProducedText, item: unknown): void {
  if (!isObject(item)) return;
  if (Array.isArray(item.content))
    for (const c of item.content) if (isObject(c)) produced.add(c.text ?? c.refusal);
  if (Array.isArray(item.summary)) for (const s of item.summary) if (isObject(s)) produced.add(s.text);
  produced.add(item.arguments);
  produced.add(item.name);
}

const TERMINAL = new Set(['response.completed', 'response.incomplete']);

/**
 * Relays the Responses API event stream as it arrives. The terminal `response.completed` (or
 * `response.incomplete`) is held back: the core settles first, then writes it with `usage.cost`.
 */
class ResponsesRelay extends SseTransformer implements StreamRelay {
  done = false;
  finished = false;
  upstreamError = false;
  /** The held-back terminal event (its parsed data). */
  final: Record<string, any> | null = null;
  finalType = 'response.completed';
  /** The response as announced by response.created (id, model, created_at). */
  head: Record<string, any> | null = null;
  lastSeq = 0;
  private readonly produced = new ProducedText();

  protected onEvent(e: EventSourceMessage): void {
    if (this.done || e.data === '[DONE]') return;
    let data: Record<string, any> | null;
    try {
      const parsed = JSON.parse(e.data);
      data = isObject(parsed) ? parsed : null;
    } catch {
      data = null;
    }
    const type = (typeof data?.type === 'string' ? data.type : e.event) ?? '';
    if (typeof data?.sequence_number === 'number') this.lastSeq = data.sequence_number;
    if (type === 'response.created' && isObject(data?.response)) this.head = data.response;
    if (TERMINAL.has(type) && data) {
      this.done = true;
      this.finished = true;
      this.final = data;
      this.finalType = type;
      return;
    }
    if (type === 'error' || type === 'response.failed') this.upstreamError = true;
    // Count what the model produced from the deltas (text, refusals, tool arguments, reasoning).
    if (type.endsWith('.delta') && typeof data?.delta === 'string') this.produced.add(data.delta);
    const prefix = e.event ? `event: ${e.event}\n` : '';
    this.out += `${prefix}data: ${e.data.replace(/\n/g, '\ndata: ')}\n\n`;
  }

  usageTokens(): ReportedUsage | null {
    return responsesUsage(this.final?.response?.usage);
  }

  producedTokens(): number {
    return this.produced.tokens();
  }

  progressTokens(): number {
    return this.produced.runningTokens();
  }

  responseId(): unknown {
    return isObject(this.final?.response) ? this.final.response.id : this.head?.id;
  }
}

export const responsesFormat: WireFormat = {
  name: 'responses',
  upstreamPath: '/responses',

  parse(input) {
    const { body, model } = checkBodyAndModel(input);
    const inp = body.input;
    if (inp !== undefined && inp !== null && typeof inp !== 'string' && !Array.isArray(inp))
      throw invalid("'input' must be a string or an array of input items", 'input', 'invalid_type');
    if (Array.isArray(inp) && !inp.every(isObject))
      throw invalid("'input' items must be objects", 'input', 'invalid_type');
    if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean')
      throw invalid("'stream' must be a boolean", 'stream', 'invalid_type');
    const max = body.max_output_tokens;
    if (max !== undefined && max !== null && (typeof max !== 'number' || !Number.isInteger(max) || max < 1))
      throw invalid("'max_output_tokens' must be a positive integer", 'max_output_tokens', 'invalid_value');
    if (body.background === true)
      throw invalid(
        "'background' responses are not supported by this proxy",
        'background',
        'unsupported_parameter',
      );
    return {
      model,
      stream: body.stream === true,
      n: 1,
      clientMaxTokens: typeof max === 'number' ? max : null,
      promptEstimate: countResponsesPrompt(body),
      body,
    };
  },

  countPrompt: (req, biller) => countResponsesPrompt(req.body, biller),

  upstreamBody(req, cap, up) {
    const body: Record<string, unknown> = { ...req.body, model: up.model };
    body.max_output_tokens = cap;
    delete body.user;
    return JSON.stringify(body);
  },

  jsonUsage: (json) => responsesUsage(json.usage),

  jsonFinished: (json) => json.error == null && (json.status === 'completed' || json.status === 'incomplete'),

  jsonEndedInError: (json) => json.error != null || json.status === 'failed',

  countJson(json) {
    const produced = new ProducedText();
    if (Array.isArray(json.output)) for (const item of json.output) addOutput(produced, item);
    return produced.tokens();
  },

  addCost(json, usage, charged) {
    json.usage = usageWithCost(json.usage, usage, { ...charged, balance: null });
  },

  relay: () => new ResponsesRelay(),

  streamEnd(_req, relay, usage, charged) {
    const r = relay as ResponsesRelay;
    const final = r.final ?? { type: 'response.completed', sequence_number: r.lastSeq + 1, response: {} };
    const response = isObject(final.response) ? final.response : {};
    final.response = { ...response, usage: usageWithCost(response.usage, usage, charged) };
    return sseEvent(r.finalType, final);
  },

  streamError(relay, message, code) {
    const r = relay as ResponsesRelay;
    return sseEvent('error', {
      type: 'error',
      code,
      message,
      param: null,
      sequence_number: r.lastSeq + 1,
    });
  },

  blockedJson: (reply) => blockedResponse(reply, 'completed'),

  blockedStream(reply) {
    const msgId = `msg_${randomBytes(12).toString('hex')}`;
    const part = outputText(reply.text);
    const item = { id: msgId, type: 'message', status: 'completed', role: 'assistant', content: [part] };
    // OpenAI's schema has no null usage: a response in progress has none yet, so the field is left out.
    const inProgress: Record<string, unknown> = { ...blockedResponse(reply, 'in_progress'), output: [] };
    delete inProgress.usage;
    const events: [string, Record<string, unknown>][] = [
      ['response.created', { response: inProgress }],
      ['response.in_progress', { response: inProgress }],
      [
        'response.output_item.added',
        { output_index: 0, item: { ...item, status: 'in_progress', content: [] } },
      ],
      [
        'response.content_part.added',
        { item_id: msgId, output_index: 0, content_index: 0, part: { ...part, text: '' } },
      ],
      [
        'response.output_text.delta',
        { item_id: msgId, output_index: 0, content_index: 0, delta: reply.text, logprobs: [] },
      ],
      [
        'response.output_text.done',
        { item_id: msgId, output_index: 0, content_index: 0, text: reply.text, logprobs: [] },
      ],
      ['response.content_part.done', { item_id: msgId, output_index: 0, content_index: 0, part }],
      ['response.output_item.done', { output_index: 0, item }],
      ['response.completed', { response: { ...blockedResponse(reply, 'completed'), output: [item] } }],
    ];
    return events
      .map(([type, data], i) => sseEvent(type, { type, sequence_number: i, ...data, paywall: reply.paywall }))
      .join('');
  },
};

/** An `output_text` content part (OpenAI's OutputTextContent: `annotations` and `logprobs` are required). */
const outputText = (text: string) => ({ type: 'output_text', text, annotations: [], logprobs: [] });

/**
 * A payment-blocked reply as an ordinary `response` object whose output message holds the link, with every
 * field OpenAI's `Response` schema requires (docs/reference.md §11 "Conformance").
 */
function blockedResponse(r: BlockedReply, status: 'completed' | 'in_progress'): Record<string, unknown> {
  return {
    id: `resp_${r.id.replace(/^chatcmpl-/, '')}`,
    object: 'response',
    created_at: r.created,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    metadata: {},
    model: r.model,
    output: [
      {
        id: `msg_${r.id.replace(/^chatcmpl-/, '')}`,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [outputText(r.text)],
      },
    ],
    parallel_tool_calls: true,
    previous_response_id: null,
    temperature: null,
    tool_choice: 'auto',
    tools: [],
    top_p: null,
    usage: {
      input_tokens: 0,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 0,
      cost: '0',
      cost_details: ZERO_COST_DETAILS,
    },
    paywall: r.paywall,
  };
}
