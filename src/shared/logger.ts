import { pino, type Logger } from 'pino';

/** Structured JSON logs. Secrets never reach a line: auth headers and keys are redacted by path. */
export function createLogger(level: string): Logger {
  return pino({
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
  });
}
export type { Logger };
