import type { StreamEncoder, StreamEvent, Usage } from './neutral.js';

/**
 * What every client format's stream encoder shares: the text an event produced is handed out once, and
 * nothing is written after the client's terminal event. A subclass says what each event writes (`on`).
 */
export abstract class ClientStreamEncoder implements StreamEncoder {
  done = false;
  finished = false;
  upstreamError = false;
  usage: Usage | null = null;
  protected out = '';

  write(e: StreamEvent): string {
    if (this.done) return '';
    this.on(e);
    const out = this.out;
    this.out = '';
    return out;
  }

  protected abstract on(e: StreamEvent): void;

  abstract tail(): string;
}
