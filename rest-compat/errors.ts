import type { Response } from 'express';
import type { Duplex } from 'node:stream';
import { DomainError, UNAVAILABLE_RETRY_AFTER_SECONDS, type ErrorCode } from '../src/shared/errors.js';
import { RateLimitError, rateHeaders } from '../src/modules/limits/rate-limit.js';

export interface OpenAIError {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** HTTP status and OpenAI error `type` for each domain error code (exhaustive; CONTRACT §4). */
export function httpStatusOf(code: ErrorCode): { status: number; type: string } {
  switch (code) {
    case 'invalid_request':
    case 'invalid_amount':
    case 'missing_user':
    case 'unsupported_in_mode':
      return { status: 400, type: 'invalid_request_error' };
    case 'request_too_large':
      return { status: 413, type: 'invalid_request_error' };
    case 'unauthenticated':
      return { status: 401, type: 'authentication_error' };
    case 'forbidden':
      return { status: 403, type: 'permission_error' };
    case 'not_found':
    case 'model_not_found':
      return { status: 404, type: 'not_found_error' };
    case 'idempotency_in_flight':
      return { status: 409, type: 'idempotency_error' };
    case 'conflict':
      return { status: 409, type: 'invalid_request_error' };
    case 'idempotency_mismatch':
      return { status: 422, type: 'idempotency_error' };
    case 'rate_limited':
      return { status: 429, type: 'rate_limit_error' };
    case 'upstream_error':
      return { status: 502, type: 'api_error' };
    case 'provider_not_connected':
    case 'unavailable':
      return { status: 503, type: 'api_error' };
    case 'internal':
      return { status: 500, type: 'api_error' };
  }
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
        code: e.publicCode ?? (e.code === 'internal' || e.code === 'invalid_request' ? null : e.code),
      },
    },
  };
}

export function sendError(res: Response, e: DomainError): void {
  const { status, body, headers } = errorBody(e);
  res.set(headers).status(status).json(body);
}

/**
 * Node's HTTP parser refuses some requests before any route runs (headers over 16 KiB, malformed HTTP, a
 * request not sent in time) and by default answers them with an empty body. The same status, with the
 * OpenAI error body every other non-2xx REST answer has (CONTRACT §4); the connection is closed after it.
 */
export function answerParserError(err: Error & { code?: string }, socket: Duplex): void {
  const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'headers_too_large', 'The request headers exceed 16 KiB.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request_timeout', 'The request was not received in time.']
        : [400, 'Bad Request', 'invalid_http', 'The request is not valid HTTP/1.1.'];
  const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}
