import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import type { Sql } from '../../db/database.js';
import { DomainError } from '../../shared/errors.js';
import type { CodeOf } from '../../shared/error-codes.js';
import { safeEqual } from '../../shared/ids.js';
import type { Database } from '../../db/database.js';
import type { Logger } from '../../shared/logger.js';
import type { Mailer } from '../../shared/mailer.js';
import { clientNetwork } from '../../shared/client-ip.js';
import { newToken, tokenHash, type WalletSecrets } from './wallet-secrets.js';

/** Sign-in rules. Limits are counted in the database, so they hold across instances. */
export const SIGN_IN = {
  codeTtlMinutes: 10,
  maxWrongTries: 5,
  limitWindowMinutes: 15,
  /**
   * Codes per address from one client network (an IPv4 address, an IPv6 /64): what one person (or one
   * stranger) can ask for.
   */
  perAddressAndIp: 5,
  /**
   * Codes per address from one browser that signed in to it before (its known-browser cookie): counted
   * apart from everything else, so strangers' requests, from however many networks, never use them up.
   */
  perKnownBrowser: 5,
  /** A known browser is forgotten after this long without a sign-in. */
  knownBrowserDays: 365,
  /**
   * Codes e-mailed per address from all networks together (requests a per-network limit held back do not
   * count: one network's flood cannot use up the others' allowance): a mailbox is never flooded.
   */
  perAddress: 30,
  perIp: 20,
  sessionDays: 30,
  /** Rows past every rule that reads them are deleted hourly: codes after a day, sessions and connect
   * links a day after they expired (a stale link then reads "not found" rather than "expired"). */
  purgeAfterDays: 1,
  connectRequestPurgeDays: 30,
} as const;

const PURGE_EVERY_MS = 60 * 60 * 1000;

export const SESSION_COOKIE = 'pp_wallet_session';
/** The browser's sign-in challenge: codes are sent to, and verified for, the browser holding it. */
export const CHALLENGE_COOKIE = 'pp_sign_in';
/** A browser that signed in before: its own allowance of codes for that address (SIGN_IN.perKnownBrowser). */
export const KNOWN_BROWSER_COOKIE = 'pp_wallet_browser';

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

export const INVALID_EMAIL_MESSAGE = 'Enter a valid email address (like name@example.com).';

/** Characters of an unquoted local part (RFC 5322 `atext`); dots are checked apart. */
const LOCAL_ATOM = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+$/;
/** One DNS label: letters, digits and inner hyphens, 1 to 63 characters. */
const DOMAIN_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Trims and lower-cases an address and refuses what cannot be delivered: a strict check of the common
 * form `local@domain` (ASCII only; no quoted local parts, no address literals). Control characters
 * (NUL included), spaces, a leading, trailing or doubled dot, and a domain without a dot or with an
 * empty label are all refused before anything is stored or sent.
 */
export function normalizeEmail(input: unknown): string {
  const email = typeof input === 'string' ? input.trim().toLowerCase() : '';
  const invalid = () => new DomainError('invalid_request', INVALID_EMAIL_MESSAGE, 'email', 'invalid_email');
  if (!email || email.length > 254) throw invalid();
  const at = email.lastIndexOf('@');
  if (at <= 0 || at !== email.indexOf('@')) throw invalid();
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > 64 || !local.split('.').every((atom) => LOCAL_ATOM.test(atom))) throw invalid();
  const labels = domain.split('.');
  if (labels.length < 2 || !labels.every((l) => DOMAIN_LABEL.test(l))) throw invalid();
  // The top-level domain is never all digits (that would be an IP address).
  if (/^\d+$/.test(labels[labels.length - 1])) throw invalid();
  return email;
}

/** A challenge token as this service issues them (43 base64url characters); anything else is none. */
const isChallengeToken = (v: unknown): v is string => typeof v === 'string' && /^[\w-]{43}$/.test(v);

const codeError = (code: CodeOf<'invalid_request'>, message: string) =>
  new DomainError('invalid_request', message, 'code', code);

/**
 * Passwordless sign-in to the hosted wallet: a 6-digit code by e-mail, then a session cookie.
 *
 * Codes are drawn with `crypto.randomInt`, stored only as a peppered HMAC bound to the address, valid
 * for 10 minutes and once, and locked after 5 wrong tries. Sending is limited per address and per IP
 * (counted in `wallet_sign_in`, serialised with advisory locks so concurrent requests cannot overshoot).
 * Sessions are random 256-bit tokens stored as SHA-256 digests; the cookie holds the token.
 */
/** What sign-in needs: the database, a mailer for the codes, and the secrets that pepper them. */
export interface SignInServiceDeps {
  db: Database;
  log: Logger;
  mailer: Mailer;
  secrets: WalletSecrets;
}

export class SignInService {
  private timer?: NodeJS.Timeout;

  private readonly secrets: WalletSecrets;

  constructor(private readonly deps: SignInServiceDeps) {
    this.secrets = deps.secrets;
  }

  /** Hourly purge (unref'd: never keeps the process alive). */
  start(): void {
    this.timer = setInterval(() => {
      this.purgeExpired().catch((err) => this.deps.log.warn({ err }, 'wallet purge failed'));
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
  async purgeExpired(): Promise<{
    codes: number;
    sessions: number;
    connectRequests: number;
    knownBrowsers: number;
  }> {
    const [codes, sessions, connectRequests, knownBrowsers] = await Promise.all([
      this.deps.db.query(
        `delete from wallet_sign_in where created_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.purgeAfterDays],
      ),
      this.deps.db.query(
        `delete from wallet_session where expires_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.purgeAfterDays],
      ),
      this.deps.db.query(
        `delete from connect_request where expires_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.connectRequestPurgeDays],
      ),
      this.deps.db.query(
        `delete from wallet_known_browser where last_used_at < now() - make_interval(days => $1) returning 1`,
        [SIGN_IN.knownBrowserDays],
      ),
    ]);
    return {
      codes: codes.length,
      sessions: sessions.length,
      connectRequests: connectRequests.length,
      knownBrowsers: knownBrowsers.length,
    };
  }

  /**
   * Asks for a code for `email` from one browser (`challenge`: the token of its sign-in cookie, or
   * undefined for a new one) and one client network. The answer is the same whether a code was sent or
   * a limit held it back, so it says nothing about the address; `sent` is for the log and tests only.
   * The e-mail goes out after the answer (its failure is logged), so the answer takes as long either way.
   *
   * Limits count client networks (an IPv6 /64 is one client). A browser that signed in to this address
   * before (`knownBrowser`: its known-browser cookie) has its own allowance, apart from all other
   * requests: strangers can hold back codes for new browsers, never for the owner's own.
   */
  async sendCode(
    emailInput: unknown,
    ip: string,
    challenge?: string,
    knownBrowser?: string,
  ): Promise<{ email: string; challenge: string; sent: boolean }> {
    const email = normalizeEmail(emailInput);
    const token = isChallengeToken(challenge) ? challenge : newToken();
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const clientIp = clientNetwork(ip).slice(0, 64);
    const sent = await this.deps.db.transaction(async (tx) => {
      const browserHash = isChallengeToken(knownBrowser) ? tokenHash(knownBrowser) : null;
      const [known] = browserHash
        ? await tx.query(
            `update wallet_known_browser set last_used_at = now() where token_hash = $1 and email = $2 returning 1`,
            [browserHash, email],
          )
        : [];
      if (known) {
        await tx.query(
          `select pg_advisory_xact_lock(hashtextextended('wallet_sign_in:browser:' || $1::text, 0))`,
          [browserHash],
        );
        const [own] = await tx.query(
          `select count(*)::int as n from wallet_sign_in
            where email = $1 and browser_hash = $2 and created_at > now() - make_interval(mins => $3)`,
          [email, browserHash, SIGN_IN.limitWindowMinutes],
        );
        const allowed = own.n < SIGN_IN.perKnownBrowser;
        if (!allowed) this.deps.log.info({ byBrowser: own.n }, 'sign-in code held back by a limit');
        await tx.query(
          `insert into wallet_sign_in (id, email, code_hash, challenge_hash, browser_hash, ip, attempts, sent, expires_at, created_at)
           values ($1, $2, $3, $4, $5, $6, 0, $7, now() + make_interval(mins => $8), now())`,
          [
            randomUUID(),
            email,
            allowed ? this.secrets.codeHash(email, code) : randomBytes(32).toString('hex'),
            tokenHash(token),
            browserHash,
            clientIp,
            allowed,
            SIGN_IN.codeTtlMinutes,
          ],
        );
        return allowed;
      }
      // Email first, IP second in every transaction: no lock cycle between two senders.
      await tx.query(
        `select pg_advisory_xact_lock(hashtextextended('wallet_sign_in:email:' || $1::text, 0))`,
        [email],
      );
      await tx.query(`select pg_advisory_xact_lock(hashtextextended('wallet_sign_in:ip:' || $1::text, 0))`, [
        clientIp,
      ]);
      const [counts] = await tx.query(
        `select (select count(*) from wallet_sign_in
                  where email = $1 and sent and browser_hash is null
                    and created_at > now() - make_interval(mins => $3))::int as by_email,
                (select count(*) from wallet_sign_in
                  where email = $1 and ip = $2 and browser_hash is null
                    and created_at > now() - make_interval(mins => $3))::int as by_email_ip,
                (select count(*) from wallet_sign_in
                  where ip = $2 and browser_hash is null
                    and created_at > now() - make_interval(mins => $3))::int as by_ip`,
        [email, clientIp, SIGN_IN.limitWindowMinutes],
      );
      const allowed =
        counts.by_email_ip < SIGN_IN.perAddressAndIp &&
        counts.by_email < SIGN_IN.perAddress &&
        counts.by_ip < SIGN_IN.perIp;
      if (!allowed)
        this.deps.log.info(
          { byEmail: counts.by_email, byIp: counts.by_ip },
          'sign-in code held back by a limit',
        );
      // A held-back request is recorded too, with a code nobody knows: limits count requests, and a code
      // typed after it gets the same answers ("not right", tries left) as after a real send. Only up to
      // twice the per-network limit, so one network cannot grow the table without bound (beyond that,
      // what differs tells a flooder only about their own flood, never about the address).
      if (!allowed && counts.by_ip >= 2 * SIGN_IN.perIp) return false;
      await tx.query(
        `insert into wallet_sign_in (id, email, code_hash, challenge_hash, ip, attempts, sent, expires_at, created_at)
         values ($1, $2, $3, $4, $5, 0, $6, now() + make_interval(mins => $7), now())`,
        [
          randomUUID(),
          email,
          allowed ? this.secrets.codeHash(email, code) : randomBytes(32).toString('hex'),
          tokenHash(token),
          clientIp,
          allowed,
          SIGN_IN.codeTtlMinutes,
        ],
      );
      return allowed;
    });
    if (sent)
      this.deps.mailer
        .send({
          to: email,
          subject: `Your sign-in code: ${code}`,
          text:
            `Your Paywall Proxy wallet sign-in code is ${code}\n\n` +
            `It works once, for ${SIGN_IN.codeTtlMinutes} minutes, in the browser where you asked for it. ` +
            `If you did not ask for it, ignore this e-mail: nobody can sign in without the code.\n`,
        })
        .catch((err) => this.deps.log.error({ err }, 'sign-in e-mail could not be sent'));
    return { email, challenge: token, sent };
  }

  /**
   * Checks a code of THIS browser's challenge and opens a session (creating the wallet user on first
   * sign-in). Only codes sent with this challenge are looked at, and only they count wrong tries, so
   * another browser's guesses can never lock them. Wrong tries are committed before the error is
   * thrown, so the 5-try lock holds whatever the caller does next.
   */
  async verifyCode(
    emailInput: unknown,
    codeInput: unknown,
    challenge: string | undefined,
    knownBrowser?: string,
  ): Promise<{ token: string; session: WalletSession; knownBrowser: string }> {
    const email = normalizeEmail(emailInput);
    const code = typeof codeInput === 'string' ? codeInput.replace(/\s+/g, '') : '';
    const noCode = () =>
      codeError(
        'code_missing',
        'No code is waiting for this address in this browser. Request a new code here, then enter it on this page.',
      );
    if (!isChallengeToken(challenge)) throw noCode();
    const outcome = await this.deps.db.transaction(async (tx) => {
      // Locks this browser's recent codes for the address: its concurrent tries run one at a time.
      const rows = await tx.query(
        `select id, code_hash, attempts, used_at, expires_at <= now() as expired
           from wallet_sign_in
          where email = $1 and challenge_hash = $2 and created_at > now() - interval '1 day'
          order by created_at desc limit 20 for update`,
        [email, tokenHash(challenge)],
      );
      if (!rows.length) return { error: noCode() };
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
        // This browser is now known for the address: its later code requests have their own allowance.
        const kept = isChallengeToken(knownBrowser)
          ? await tx.query(
              `update wallet_known_browser set last_used_at = now() where token_hash = $1 and email = $2 returning 1`,
              [tokenHash(knownBrowser), email],
            )
          : [];
        const browser = kept.length ? (knownBrowser as string) : newToken();
        if (!kept.length)
          await tx.query(
            `insert into wallet_known_browser (token_hash, email, created_at, last_used_at) values ($1, $2, now(), now())`,
            [tokenHash(browser), email],
          );
        return {
          token,
          knownBrowser: browser,
          session: { id: s.id as string, user, expiresAt: new Date(s.expires_at) },
        };
      }
      const live = rows.filter((r) => !r.used_at && !r.expired && r.attempts < SIGN_IN.maxWrongTries);
      if (!live.length) {
        const latest = rows[0];
        if (!latest) return { error: noCode() };
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
    const rows = await this.deps.db.query(
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
    await this.deps.db.query(`delete from wallet_session where id = $1`, [sessionId]);
  }
}
