import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * The request being served, set by the app's first middleware. Services log with the process logger
 * (they have no request object); the mixin below still stamps those lines with the request id.
 */
export const requestContext = new AsyncLocalStorage<{ reqId: string }>();

/** Structured JSON logs. Secrets never reach a line: auth headers and keys are redacted by path. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'paywall-proxy' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'authorization',
        'apiKey',
        '*.apiKey',
        'secret',
        '*.secret',
        'token',
      ],
      censor: '[redacted]',
    },
    mixin(_obj, _level, logger) {
      const store = requestContext.getStore();
      // A request's child logger already carries reqId in its bindings: don't write the key twice.
      if (!store || (logger as any)[pino.symbols.chindingsSym]?.includes('"reqId":')) return {};
      return { reqId: store.reqId };
    },
  };
  // stdout unless told otherwise (tests capture the lines to check them).
  return destination ? pino(options, destination) : pino(options);
}
export type { Logger };
