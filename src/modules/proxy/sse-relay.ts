import type { EventSourceMessage } from 'eventsource-parser';
import { ProducedText } from './token-counter.js';
import { ERROR_FINISH, SseTransformer } from './formats/common.js';

export interface UpstreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  [key: string]: unknown;
}

// A key `"usage"` followed by an object. Quotes inside JSON strings are escaped, so this never matches
// text the model wrote; `"usage":null` (on every chunk once include_usage is on) does not match either.
const USAGE_OBJECT = /"usage"\s*:\s*\{/;
const FINISHED = /"finish_reason"\s*:\s*"(?!error")/;
/** A choice that ended in the provider's error (`finish_reason: "error"`): not a finish. */
const ERROR_FINISHED = /"finish_reason"\s*:\s*"error"/;
/** An OpenAI-style error event (`{"error": {...}}`) in the middle of a stream. */
const UPSTREAM_ERROR = /^\s*\{\s*"error"\s*:/;

/** What a settled answer reports of its charge (docs/reference.md §13): `usage.cost`, `usage.cost_details`. */
export interface Charged {
  cost: string;
  costDetails: Record<string, string>;
  /** The free balance after the charge, when known (streams write it into the usage). */
  balance: string | null;
}

/** `cost`, `cost_details`, and `balance` when known, for a usage object (docs/reference.md §13). */
export const chargedFields = (c: Charged): Record<string, unknown> =>
  c.balance === null
    ? { cost: c.cost, cost_details: c.costDetails }
    : { cost: c.cost, cost_details: c.costDetails, balance: c.balance };

export const sseData = (data: string): string =>
  data.includes('\n') ? `${data.replace(/\n/g, '\ndata: ').replace(/^/, 'data: ')}\n\n` : `data: ${data}\n\n`;

/**
 * Relays an upstream chat-completion SSE stream chunk by chunk. Chunks are passed through as the
 * upstream wrote their data (no JSON re-serialisation), except the usage: it is removed when the client
 * did not ask for usage; when it did, the usage chunk is held back with `[DONE]`: the proxy settles the
 * charge first, then ends the stream with the usage plus `cost` and `balance` (docs/reference.md §11). The data of every relayed chunk is kept
 * (as text) so tokens can be counted afterwards when no usage arrives (disconnect, upstream failure).
 */
export class SseRelay extends SseTransformer {
  usage: UpstreamUsage | null = null;
  done = false;
  finished = false;
  /** The upstream sent an `error` event. */
  upstreamError = false;
  private readonly chunks: string[] = [];

  /** The usage chunk (`choices: []`), held until the charge is settled. */
  private heldUsage: Record<string, any> | null = null;

  /** @param clientWantsUsage the client set stream_options.include_usage */
  constructor(private readonly clientWantsUsage: boolean) {
    super();
  }

  protected onEvent(e: EventSourceMessage): void {
    const data = e.data;
    if (data === '[DONE]') {
      this.done = true;
      return;
    }
    if (this.done) return;
    const prefix = e.event && e.event !== 'message' ? `event: ${e.event}\n` : '';
    if (USAGE_OBJECT.test(data)) {
      const rewritten = this.onUsageChunk(data);
      if (rewritten !== null) this.out += prefix + sseData(rewritten);
      return;
    }
    if (!this.finished && FINISHED.test(data)) this.finished = true;
    if (UPSTREAM_ERROR.test(data) || ERROR_FINISHED.test(data)) this.upstreamError = true;
    this.chunks.push(data);
    this.out += prefix + sseData(data);
  }

  /** Returns the chunk to send instead (null = drop it). */
  private onUsageChunk(data: string): string | null {
    let chunk: Record<string, any>;
    try {
      chunk = JSON.parse(data);
    } catch {
      this.chunks.push(data);
      return data;
    }
    const usage = chunk.usage as UpstreamUsage | undefined;
    if (usage && typeof usage === 'object') {
      this.usage = usage;
    }
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    if (choices.length > 0) {
      // Some providers put usage on the last content chunk: keep the content, count it.
      this.chunks.push(data);
      if (choices.some((c: any) => c?.finish_reason && c.finish_reason !== ERROR_FINISH))
        this.finished = true;
      if (choices.some((c: any) => c?.finish_reason === ERROR_FINISH)) this.upstreamError = true;
    }
    if (this.clientWantsUsage && this.usage)
      this.heldUsage = {
        id: chunk.id,
        object: chunk.object ?? 'chat.completion.chunk',
        created: chunk.created,
        model: chunk.model,
        ...(chunk.system_fingerprint !== undefined ? { system_fingerprint: chunk.system_fingerprint } : {}),
        choices: [],
        usage: this.usage,
      };
    if (choices.length === 0) return null;
    delete chunk.usage;
    return JSON.stringify(chunk);
  }

  /** The held usage chunk with what was charged and the balance after, or null when none came. */
  usageChunk(charged: Charged): string | null {
    if (!this.heldUsage) return null;
    return JSON.stringify({
      ...this.heldUsage,
      usage: { ...this.heldUsage.usage, ...chargedFields(charged) },
    });
  }

  /** Tokens of what was relayed, counted with the tokenizer (for settlement without usage). */
  producedTokens(): number {
    const text = new ProducedText();
    for (const data of this.chunks) {
      try {
        const chunk = JSON.parse(data);
        if (Array.isArray(chunk?.choices)) for (const c of chunk.choices) text.addMessage(c?.delta);
      } catch {
        /* not JSON: nothing the model produced */
      }
    }
    return text.tokens();
  }

  private readonly progress = new ProducedText();
  private progressAt = 0;

  /** producedTokens, counted incrementally (see StreamRelay.progressTokens). */
  progressTokens(): number {
    for (; this.progressAt < this.chunks.length; this.progressAt++) {
      try {
        const chunk = JSON.parse(this.chunks[this.progressAt]);
        if (Array.isArray(chunk?.choices)) for (const c of chunk.choices) this.progress.addMessage(c?.delta);
      } catch {
        /* not JSON: nothing the model produced */
      }
    }
    return this.progress.runningTokens();
  }

  /** id / created / model of the stream (from its first chunk), to build a chunk of our own. */
  header(): { id: string; created: number; model: string | undefined } {
    for (const data of this.chunks) {
      try {
        const c = JSON.parse(data);
        if (c && typeof c.id === 'string')
          return { id: c.id, created: c.created ?? Math.floor(Date.now() / 1000), model: c.model };
      } catch {
        /* try the next */
      }
    }
    return { id: '', created: Math.floor(Date.now() / 1000), model: undefined };
  }
}
