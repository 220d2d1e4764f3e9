import type { StreamEncoder, StreamEvent, Usage } from './neutral.js';

/**
 * What every client format's stream encoder shares: the text an event produced is handed out once, and
 * nothing is written after the client's terminal event. A subclass says what each event writes (`on`).
 */
export abstract class ClientStreamEncoder implements StreamEncoder {
  done = false;
  finished = false;
  upstreamError = false;
  /** The stream ended on the provider's error (no terminal event of the client's format follows). */
  errored = false;
  usage: Usage | null = null;
  protected out = '';

  write(e: StreamEvent): string {
    if (this.done) return '';
    this.on(e);
    // A provider's error ends the answer: the client's error event is its last (Anthropic's and OpenAI's
    // streams stop there), and what the provider may still send (a close, a finish) is not relayed.
    if (e.type === 'error') {
      this.errored = true;
      this.done = true;
    }
    const out = this.out;
    this.out = '';
    return out;
  }

  protected abstract on(e: StreamEvent): void;

  abstract tail(): string;
}
