import { randomInt, randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import { safeEqual } from '../../shared/ids.js';
import type { Services } from '../../services.js';
import { newToken, tokenHash, type WalletSecrets } from './wallet-secrets.js';

/** Sign-in rules (CONTRACT §8). Limits are counted in the database, so they hold across instances. */
export const SIGN_IN = {
  codeTtlMinutes: 10,
  maxWrongTries: 5,
  limitWindowMinutes: 15,
  perAddress: 5,
  perIp: 20,
  sessionDays: 30,
  /** Rows past every rule that reads them are deleted hourly: codes after a day, sessions and connect
   * links a day after they expired (a stale link then reads "not found" rather than "expired"). */
  purgeAfterDays: 1,
  connectRequestPurgeDays: 30,
} as const;

const PURGE_EVERY_MS = 60 * 60 * 1000;

export const SESSION_COOKIE = 'pp_wallet_session';

export interface WalletUser {
  id: string;
  email: string;
  accountId: string;
}

export interface WalletSession {
  /** The session row id (CSRF tokens are bound to it). */
  id: string;
  user: WalletUser;
  expiresAt: Date;
}

const EMAIL = /^[^\s@<>()[\]\\,;:"]+@[^\s@<>()[\]\\,;:"]+\.[^\s@<>()[\]\\,;:"]+$/;

/** Trims and lower-cases an address; refuses what cannot be one. */
export function normalizeEmail(input: unknown): string {
  const email = typeof input === 'string' ? input.trim().toLowerCase() : '';
  if (!email || email.length > 254 || !EMAIL.test(email))
    throw new DomainError('invalid_request', 'Enter a valid e-mail address.', 'email', 'invalid_email');
  return email;
}

const codeError = (code: string, message: string) =>
  new DomainError('invalid_request', message, 'code', code);

/**
 * Passwordless sign-in to the hosted wallet: a 6-digit code by e-mail, then a session cookie.
 *
 * Codes are drawn with `crypto.randomInt`, stored only as a peppered HMAC bound to the address, valid
 * for 10 minutes and once, and locked after 5 wrong tries. Sending is limited per address and per IP
 * (counted in `wallet_sign_in`, serialised with advisory locks so concurrent requests cannot overshoot).
 * Sessions are random 256-bit tokens stored as SHA-256 digests; the cookie holds the token.
 */
export class SignInService {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly s: Services,
    private readonly secrets: WalletSecrets,
  ) {}

  /** Hourly purge (unref'd: never keeps the process alive). */
  start(): void {
    this.timer = setInterval(() => {
      this.purgeExpired().catch((err) => this.s.log.warn({ err }, 'wallet purge failed'));
    }, PURGE_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Deletes sign-in codes older than a day (the verify and send limits look back at most a day), sessions
   * a day after they expired and connect requests long expired, so these tables stay small however many
   * codes are asked for. Returns how many rows of each went.
   */
  async purgeExpired(): Promise<{ codes: number; sessions: number; connectRequests: number }> {
    const [codes, sessions, connectRequests] = await Promise.all([
      this.s.db.query(
        `delete from wallet_sign_in where created_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.purgeAfterDays],
      ),
      this.s.db.query(
        `delete from wallet_session where expires_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.purgeAfterDays],
      ),
      this.s.db.query(
        `delete from connect_request where expires_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.connectRequestPurgeDays],
      ),
    ]);
    return { codes: codes.length, sessions: sessions.length, connectRequests: connectRequests.length };
  }

  /** Sends a new code to `email`. Throws `rate_limited` past the per-address or per-IP limit. */
  async sendCode(emailInput: unknown, ip: string): Promise<{ email: string }> {
    const email = normalizeEmail(emailInput);
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    await this.s.db.transaction(async (tx) => {
      // Email first, IP second in every transaction: no lock cycle between two senders.
      await tx.query(
        `select pg_advisory_xact_lock(hashtextextended('wallet_sign_in:email:' || $1::text, 0))`,
        [email],
      );
      await tx.query(`select pg_advisory_xact_lock(hashtextextended('wallet_sign_in:ip:' || $1::text, 0))`, [
        ip,
      ]);
      const [counts] = await tx.query(
        `select (select count(*) from wallet_sign_in
                  where email = $1 and created_at > now() - make_interval(mins => $3))::int as by_email,
                (select count(*) from wallet_sign_in
                  where ip = $2 and created_at > now() - make_interval(mins => $3))::int as by_ip`,
        [email, ip, SIGN_IN.limitWindowMinutes],
      );
      if (counts.by_email >= SIGN_IN.perAddress || counts.by_ip >= SIGN_IN.perIp)
        throw new DomainError(
          'rate_limited',
          `Too many codes were requested ${counts.by_email >= SIGN_IN.perAddress ? 'for this address' : 'from your network'}. ` +
            `Wait ${SIGN_IN.limitWindowMinutes} minutes, then try again.`,
          'email',
          'too_many_codes',
        );
      await tx.query(
        `insert into wallet_sign_in (id, email, code_hash, ip, attempts, expires_at, created_at)
         values ($1, $2, $3, $4, 0, now() + make_interval(mins => $5), now())`,
        [randomUUID(), email, this.secrets.codeHash(email, code), ip.slice(0, 64), SIGN_IN.codeTtlMinutes],
      );
    });
    try {
      await this.s.mailer.send({
        to: email,
        subject: `Your sign-in code: ${code}`,
        text:
          `Your Paywall Proxy wallet sign-in code is ${code}\n\n` +
          `It works once, for ${SIGN_IN.codeTtlMinutes} minutes. If you did not ask for it, ignore this e-mail: ` +
          `nobody can sign in without the code.\n`,
      });
    } catch (err) {
      this.s.log.error({ err }, 'sign-in e-mail could not be sent');
      throw new DomainError(
        'upstream_error',
        'The sign-in e-mail could not be sent. Try again in a moment.',
        null,
        'mail_failed',
      );
    }
    return { email };
  }

  /**
   * Checks a code and opens a session (creating the wallet user on first sign-in). Wrong tries are
   * committed before the error is thrown, so the 5-try lock holds whatever the caller does next.
   */
  async verifyCode(
    emailInput: unknown,
    codeInput: unknown,
  ): Promise<{ token: string; session: WalletSession }> {
    const email = normalizeEmail(emailInput);
    const code = typeof codeInput === 'string' ? codeInput.replace(/\s+/g, '') : '';
    const outcome = await this.s.db.transaction(async (tx) => {
      // Locks this address's recent codes: concurrent tries of one address run one at a time.
      const rows = await tx.query(
        `select id, code_hash, attempts, used_at, expires_at <= now() as expired
           from wallet_sign_in where email = $1 and created_at > now() - interval '1 day'
          order by created_at desc limit 20 for update`,
        [email],
      );
      const hash = /^\d{6}$/.test(code) ? this.secrets.codeHash(email, code) : null;
      const matching = hash ? rows.find((r) => safeEqual(r.code_hash, hash)) : undefined;
      if (matching) {
        if (matching.used_at)
          return { error: codeError('code_used', 'This code was already used. Request a new one.') };
        if (matching.expired)
          return {
            error: codeError(
              'code_expired',
              'This code has expired (codes last 10 minutes). Request a new one.',
            ),
          };
        if (matching.attempts >= SIGN_IN.maxWrongTries)
          return {
            error: codeError('code_locked', 'This code is locked after 5 wrong tries. Request a new one.'),
          };
        await tx.query(`update wallet_sign_in set used_at = now() where id = $1`, [matching.id]);
        const user = await this.ensureWalletUser(tx, email);
        const token = newToken();
        const [s] = await tx.query(
          `insert into wallet_session (id, token_hash, wallet_user_id, expires_at, created_at)
           values ($1, $2, $3, now() + make_interval(days => $4), now()) returning id, expires_at`,
          [randomUUID(), tokenHash(token), user.id, SIGN_IN.sessionDays],
        );
        return { token, session: { id: s.id as string, user, expiresAt: new Date(s.expires_at) } };
      }
      const live = rows.filter((r) => !r.used_at && !r.expired && r.attempts < SIGN_IN.maxWrongTries);
      if (!live.length) {
        const latest = rows[0];
        if (!latest)
          return { error: codeError('code_missing', 'No code was sent to this address. Request one first.') };
        if (latest.attempts >= SIGN_IN.maxWrongTries)
          return {
            error: codeError('code_locked', 'This code is locked after 5 wrong tries. Request a new one.'),
          };
        if (latest.expired)
          return {
            error: codeError(
              'code_expired',
              'This code has expired (codes last 10 minutes). Request a new one.',
            ),
          };
        return { error: codeError('code_used', 'This code was already used. Request a new one.') };
      }
      const updated = await tx.query(
        `update wallet_sign_in set attempts = attempts + 1 where id = any($1::uuid[]) returning attempts`,
        [live.map((r) => r.id)],
      );
      const left = SIGN_IN.maxWrongTries - Math.max(...updated.map((r) => Number(r.attempts)));
      return {
        error:
          left <= 0
            ? codeError(
                'code_locked',
                'Wrong code. After 5 wrong tries the code is locked: request a new one.',
              )
            : codeError(
                'code_invalid',
                `That code is not right. ${left} ${left === 1 ? 'try' : 'tries'} left.`,
              ),
      };
    });
    if ('error' in outcome) throw outcome.error;
    return outcome;
  }

  /** Gets or creates the wallet user and its `wallet` ledger account (one statement). */
  private async ensureWalletUser(sql: Sql, email: string): Promise<WalletUser> {
    const rows = await sql.query(
      `with existing as (select id, email, account_id from wallet_user where email = $1),
       a as (insert into ledger_account (id, kind, paywall_id, balance_raw, held_raw, created_at)
             select $2::uuid, 'wallet', null, 0, 0, now() where not exists (select 1 from existing)
             returning id),
       w as (insert into wallet_user (id, email, account_id, created_at)
             select $3::uuid, $1, a.id, now() from a returning id, email, account_id)
       select * from w union all select * from existing`,
      [email, randomUUID(), randomUUID()],
    );
    const r = rows[0];
    return { id: r.id, email: r.email, accountId: r.account_id };
  }

  /** The live session of a cookie token, or null (unknown, expired, or signed out). */
  async session(token: string | undefined): Promise<WalletSession | null> {
    if (!token || token.length > 128) return null;
    const rows = await this.s.db.query(
      `select s.id, s.expires_at, w.id as wallet_user_id, w.email, w.account_id
         from wallet_session s join wallet_user w on w.id = s.wallet_user_id
        where s.token_hash = $1 and s.expires_at > now()`,
      [tokenHash(token)],
      'wallet_session_by_token',
    );
    if (!rows.length) return null;
    const r = rows[0];
    return {
      id: r.id,
      expiresAt: new Date(r.expires_at),
      user: { id: r.wallet_user_id, email: r.email, accountId: r.account_id },
    };
  }

  /** Ends a session (sign-out). */
  async signOut(sessionId: string): Promise<void> {
    await this.s.db.query(`delete from wallet_session where id = $1`, [sessionId]);
  }
}
