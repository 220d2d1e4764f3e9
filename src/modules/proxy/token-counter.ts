import { countTokens } from 'gpt-tokenizer';
import type { ChatRequest } from './chat-request.js';

/**
 * Token counts with a real BPE tokenizer (o200k_base, the encoding of current OpenAI models). Used
 * for the prompt estimate of a hold, and for settlement when the upstream sends no `usage` (a client
 * disconnect, a stream that died, a provider that never reports usage).
 */

// User text may contain strings like "<|endoftext|>": count them as plain text instead of throwing.
const PLAIN = { disallowedSpecial: new Set<string>() };

/** OpenAI's chat format adds about 3 tokens per message and 3 to prime the reply. */
const PER_MESSAGE = 3;
const PER_NAME = 1;
const REPLY_PRIMING = 3;
/** An image part is billed by the provider from its size; a low-detail image is 85 tokens. */
const PER_IMAGE_PART = 85;

export function countText(text: string): number {
  return text ? countTokens(text, PLAIN) : 0;
}

function contentTokens(content: unknown): number {
  if (typeof content === 'string') return countText(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const part of content) {
    if (part && typeof part === 'object') {
      const p = part as Record<string, unknown>;
      if (typeof p.text === 'string') n += countText(p.text);
      else if (typeof p.refusal === 'string') n += countText(p.refusal);
      else n += PER_IMAGE_PART;
    }
  }
  return n;
}

const jsonTokens = (v: unknown): number => (v === undefined || v === null ? 0 : countText(JSON.stringify(v)));

/** Prompt tokens of a request: messages, names, tool calls, tool and schema definitions. */
export function countPromptTokens(req: ChatRequest): number {
  let n = REPLY_PRIMING;
  for (const m of req.messages) {
    n += PER_MESSAGE + contentTokens(m.content);
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
