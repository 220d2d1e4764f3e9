import nodemailer from 'nodemailer';
import type { Logger } from './logger.js';

/** One e-mail: plain text always (the sign-in code lives there), HTML optional. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

export interface Mailer {
  /** Sends the message; rejects when the SMTP server refuses it. */
  send(message: MailMessage): Promise<void>;
  /** 'smtp' when SMTP_URL is set, 'log' in development. */
  readonly transport: 'smtp' | 'log';
  /**
   * Resolves once every message handed to `send` so far was sent or refused: callers that fire and forget
   * (alerts) leave nothing behind unseen, and a test can tell "no second e-mail" from "not yet".
   */
  idle(): Promise<void>;
  close(): void;
}

/**
 * The service's outgoing mail (docs/reference.md §8): nodemailer over `SMTP_URL` (smtp:// or smtps://) from
 * `MAIL_FROM`. Without `SMTP_URL` the message is written to the log at info level, code included, so a
 * developer can sign in locally; production sets SMTP_URL and nothing secret reaches the log.
 */
export function createMailer(config: { SMTP_URL?: string; MAIL_FROM: string }, log: Logger): Mailer {
  if (!config.SMTP_URL) {
    return {
      transport: 'log',
      async send(m) {
        log.info(
          { mail: { to: m.to, subject: m.subject, text: m.text } },
          'e-mail (SMTP_URL is not set: written to the log instead of sent)',
        );
      },
      idle: async () => {},
      close() {},
    };
  }
  const transporter = nodemailer.createTransport(config.SMTP_URL, {
    from: config.MAIL_FROM,
  } as any);
  const inFlight = new Set<Promise<unknown>>();
  return {
    transport: 'smtp',
    async send(m) {
      const sending = transporter.sendMail({
        from: config.MAIL_FROM,
        to: m.to,
        subject: m.subject,
        text: m.text,
        html: m.html,
      });
      inFlight.add(sending);
      try {
        await sending;
      } finally {
        inFlight.delete(sending);
      }
    },
    async idle() {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
    close() {
      transporter.close();
    },
  };
}
