import { pino, type DestinationStream, type Logger } from 'pino';

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
  };
  // stdout unless told otherwise (tests capture the lines to check them).
  return destination ? pino(options, destination) : pino(options);
}
export type { Logger };
