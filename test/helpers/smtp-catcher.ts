import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface CaughtMail {
  from: string;
  to: string[];
  subject: string;
  /** The decoded text body. */
  text: string;
  raw: string;
}

export interface SmtpCatcher {
  /** smtp://127.0.0.1:PORT, for SMTP_URL. */
  url: string;
  messages: CaughtMail[];
  /** Resolves with the next message to `email` not returned before (waits up to `timeoutMs`). */
  waitForMessage(email: string, timeoutMs?: number): Promise<CaughtMail>;
  /** The 6-digit code of the next message to `email`. */
  waitForCode(email: string, timeoutMs?: number): Promise<string>;
  close(): Promise<void>;
}

function decodeBody(raw: string): { subject: string; text: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = split >= 0 ? raw.slice(0, split) : raw;
  let body = split >= 0 ? raw.slice(split + 4) : '';
  const headers = head.replace(/\r\n[ \t]+/g, ' ');
  const subject = /^subject:\s*(.*)$/im.exec(headers)?.[1] ?? '';
  const encoding = /^content-transfer-encoding:\s*(\S+)/im.exec(headers)?.[1]?.toLowerCase();
  if (encoding === 'quoted-printable')
    body = body
      .replace(/=\r?\n/g, '')
      .replace(/=([0-9A-F]{2})/gi, (_m, hex) => String.fromCharCode(parseInt(hex, 16)));
  else if (encoding === 'base64') body = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  return { subject, text: body };
}

/**
 * A real SMTP server on loopback (no TLS, no auth) that keeps every message: the service's mailer
 * talks to it through `SMTP_URL` exactly as to a production relay.
 */
export async function startSmtpCatcher(): Promise<SmtpCatcher> {
  const messages: CaughtMail[] = [];
  const returned = new Set<CaughtMail>();
  const waiters: (() => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const { subject, text } = decodeBody(raw);
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          subject,
          text,
          raw,
        });
        for (const w of waiters.splice(0)) w();
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = ((server as any).server.address() as AddressInfo).port;

  const waitForMessage = async (email: string, timeoutMs = 10000): Promise<CaughtMail> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = messages.find((x) => !returned.has(x) && x.to.includes(email.toLowerCase()));
      if (m) {
        returned.add(m);
        return m;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no e-mail to ${email} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  };
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    waitForMessage,
    async waitForCode(email, timeoutMs) {
      const m = await waitForMessage(email, timeoutMs);
      const code = /\b(\d{6})\b/.exec(m.text)?.[1];
      if (!code) throw new Error(`the e-mail to ${email} has no 6-digit code in its text body`);
      return code;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
