import type { Response } from 'express';
import type { Duplex } from 'node:stream';
import { DomainError, UNAVAILABLE_RETRY_AFTER_SECONDS, type ErrorKind } from '../src/shared/errors.js';
import { ERROR_KINDS, PARSER_ERROR_CODES } from '../src/shared/error-codes.js';
import { RateLimitError, rateHeaders } from '../src/modules/limits/rate-limit.js';
import { anthropicErrorOf, isMessagesUrl, type AnthropicError } from './anthropic-errors.js';

export interface OpenAIError {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** HTTP status and OpenAI error `type` of each kind of domain error (from the one map, so exhaustive). */
export function httpStatusOf(code: ErrorKind): { status: number; type: string } {
  const { status, type } = ERROR_KINDS[code];
  return { status, type };
}

/**
 * OpenAI's `error.code`: the public code when it differs from the kind, else the kind itself, except for a
 * plain validation error and an internal error, which carry `null` (`param` names the field of the former).
 */
export function publicCodeOf(e: DomainError): string | null {
  return e.publicCode ?? (e.code === 'internal' || e.code === 'invalid_request' ? null : e.code);
}

/** The answer to a domain error: status, OpenAI error body and the headers that go with it. */
export function errorBody(e: DomainError): {
  status: number;
  body: OpenAIError;
  headers: Record<string, string>;
} {
  const { status, type } = httpStatusOf(e.code);
  return {
    status,
    headers:
      e instanceof RateLimitError
        ? rateHeaders(e.state)
        : e.code === 'unavailable'
          ? { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) }
          : {},
    body: {
      error: {
        message: e.message,
        type,
        param: e.param,
        code: publicCodeOf(e),
      },
    },
  };
}

/** Which error body a route answers: OpenAI's, or Anthropic's on the Messages routes (§15). */
export type ErrorShape = 'openai' | 'anthropic';

/** The error shape of a request URL (path and query). */
export const errorShapeOf = (url: string): ErrorShape => (isMessagesUrl(url) ? 'anthropic' : 'openai');

/** {@link errorBody} in the given shape: the same status and headers, Anthropic's body on its routes. */
export function shapedErrorBody(
  e: DomainError,
  shape: ErrorShape,
): { status: number; body: OpenAIError | AnthropicError; headers: Record<string, string> } {
  const answer = errorBody(e);
  return shape === 'anthropic' ? { ...answer, body: anthropicErrorOf(e) } : answer;
}

/** Answers a domain error in the shape of the request's route. */
export function sendError(res: Response, e: DomainError): void {
  const { status, body, headers } = shapedErrorBody(e, errorShapeOf(res.req?.originalUrl ?? ''));
  res.set(headers).status(status).json(body);
}

/**
 * Node's HTTP parser refuses some requests before any route runs (headers over 16 KiB, malformed HTTP, a
 * request not sent in time) and by default answers them with an empty body. The same status, with the
 * OpenAI error body every other non-2xx REST answer has (docs/reference.md §4); the connection is closed after it.
 */
export function answerParserError(err: Error & { code?: string }, socket: Duplex): void {
  const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) {
    socket.destroy();
    return;
  }
  const code =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request_timeout'
        : 'invalid_http';
  const { status, reason, message } = PARSER_ERROR_CODES[code];
  const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}
