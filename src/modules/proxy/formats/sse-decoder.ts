import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import type { NeutralError, StreamDecoder, StreamEvent } from './neutral.js';

/** Reads SSE text fed in pieces split anywhere as a provider adapter's neutral events. */
export abstract class SseDecoder implements StreamDecoder {
  private readonly parser: EventSourceParser;
  private emit: (e: StreamEvent) => void = () => {};

  constructor() {
    this.parser = createParser({ onEvent: (e) => this.onEvent(e, this.emit) });
  }

  feed(text: string, emit: (e: StreamEvent) => void): void {
    this.emit = emit;
    this.parser.feed(text);
  }

  /** The provider's body ended: nothing more is owed unless a subclass says so. */
  end(_emit: (e: StreamEvent) => void): void {}

  protected abstract onEvent(e: EventSourceMessage, emit: (e: StreamEvent) => void): void;
}

/** A provider's `{error: {type, message}}` object as the neutral error (both kinds send this pair). */
export function neutralError(error: Record<string, unknown>): NeutralError {
  const text = (v: unknown) => (v === undefined || v === null ? null : String(v));
  return { type: text(error.type), message: text(error.message) };
}
