import type { IncomingHttpHeaders } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { Loaders, type AppContext } from '../src/graphql/context.js';
import type { PaywallInfo } from '../src/modules/paywalls/paywall-info.js';
import type { Services } from '../src/services.js';
import { DomainError } from '../src/shared/errors.js';
import { sendError } from './errors.js';
import { checkExternalId } from '../src/modules/users/user.service.js';
import { logInternalError } from '../src/shared/route-label.js';
import { UserKeyService, type UserKeyAuth } from '../src/modules/keys/user-key.service.js';

declare module 'express-serve-static-core' {
  interface Request {
    paywall?: PaywallInfo;
    /** Set by `/v1/u/{user}/…` routes. */
    pathUser?: string;
    /** Set when the request came with an end-user key (docs/reference.md §19): it acts as that user only. */
    userKey?: UserKeyAuth;
  }
}

/** The API key of an `Authorization: Bearer …` header, or null. */
export function bearerKey(header: string | undefined): string | null {
  return /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1] ?? null;
}

/**
 * The paywall's API key of a request: `Authorization: Bearer …`, else `x-api-key` (the header
 * Anthropic's SDKs send its key in; docs/reference.md §15), on every `/v1` route. Null when neither is
 * given.
 */
export function apiKeyOf(headers: IncomingHttpHeaders): string | null {
  const bearer = bearerKey(headers.authorization);
  if (bearer !== null) return bearer;
  const x = headers['x-api-key'];
  return typeof x === 'string' && /^\S+$/.test(x.trim()) ? x.trim() : null;
}

/**
 * The 401 for a request without a valid API key (`given`: a key was sent, and is unknown; `why`: what
 * became of a real end-user key, revoked or expired).
 */
export function apiKeyRefused(given: boolean, why: string | null = null): DomainError {
  return new DomainError(
    'unauthenticated',
    given
      ? (why ?? 'Invalid API key.')
      : 'Missing API key: send it as `Authorization: Bearer <key>` or `x-api-key`.',
    null,
    given ? 'invalid_api_key' : 'missing_api_key',
  );
}

/** The 401 for a key {@link authenticateRestKey} refused, saying so when it was a revoked or expired user key. */
export async function keyRefused(
  services: Pick<Services, 'userKeys'>,
  key: string | null,
): Promise<DomainError> {
  return apiKeyRefused(key !== null, key !== null ? await services.userKeys.refusalOf(key) : null);
}

/**
 * The paywall of a key: the paywall's API key, or an end-user key (docs/reference.md §19), which also
 * names the end user. Null when unknown (revoked, expired, rotated).
 */
export async function authenticateRestKey(
  services: Pick<Services, 'paywalls' | 'userKeys'>,
  key: string,
): Promise<{ paywall: PaywallInfo; userKey?: UserKeyAuth } | null> {
  if (UserKeyService.isUserKey(key)) {
    const userKey = await services.userKeys.authenticate(key);
    return userKey ? { paywall: userKey.paywall, userKey } : null;
  }
  const paywall = await services.paywalls.authenticateKey(key);
  return paywall ? { paywall } : null;
}

/** REST calls authenticate with the paywall's API key (or an end-user key); anything else is a 401. */
export function requireApiKey(services: Services): RequestHandler {
  return async (req, res, next) => {
    try {
      const key = apiKeyOf(req.headers);
      const found = key !== null ? await authenticateRestKey(services, key) : null;
      // Through the error handler, not answered here: the entry of /v1 (src/app.ts) then closes the
      // connection only once the body that is still coming has been read (a multipart upload).
      if (!found) return next(await keyRefused(services, key));
      req.paywall = found.paywall;
      req.userKey = found.userKey;
      next();
    } catch (e) {
      next(e);
    }
  };
}

/** The context a REST route hands to a resolver: the same shape GraphQL builds. */
export function restContext(req: Request, services: Services): AppContext {
  return {
    requestId: req.id,
    auth: { kind: 'apiKey', paywall: req.paywall! },
    transport: 'rest',
    services,
    loaders: new Loaders(),
    log: req.log,
  };
}

/**
 * The end user of a request (docs/reference.md §2, §4): header `X-Paywall-User` wins over body `user` and query
 * `user`; a `/v1/u/{user}/…` path names the user and anything else given must agree with it.
 */
/**
 * The `user` query parameter: a string, or undefined when absent. Given more than once
 * (`?user=a&user=b`) it names no one user: a 400 saying so, on every route alike.
 */
export function queryUserOf(value: unknown): string | undefined {
  if (Array.isArray(value))
    throw new DomainError('invalid_request', 'user is given more than once in the query.', 'user');
  return typeof value === 'string' ? value : undefined;
}

export function userOf(req: Request, bodyUser?: unknown): string {
  const query = queryUserOf(req.query.user);
  if (req.userKey) return keyUserFrom(req.userKey, req.header('x-paywall-user'), query, req.pathUser);
  return userFrom(req.header('x-paywall-user'), query, req.pathUser, bodyUser);
}

/**
 * The end user of a request made with an end-user key (docs/reference.md §19): the key's, always. A
 * header, path or query naming another user is refused (403); one that is empty names nobody (as it gives
 * no user with the paywall key) and is ignored; a body's `user` is not looked at.
 */
export function keyUserFrom(
  key: UserKeyAuth,
  header: string | undefined,
  query: string | undefined,
  pathUser: string | undefined,
): string {
  for (const other of [header, query, pathUser])
    if (other !== undefined && other.trim() !== '' && other !== key.externalUserId)
      throw new DomainError(
        'forbidden',
        'This key acts for its own end user only: the X-Paywall-User header, the `user` query parameter or the /u/{user} path names another user.',
        'user',
        'user_key_user_mismatch',
      );
  return key.externalUserId;
}

/**
 * The routes an end-user key may call (docs/reference.md §19, §22): the proxy routes (images and audio
 * included) and its own balance, with or without `/u/{user}`. Paths are those under `/v1`.
 */
export function userKeyMayCall(method: string, path: string): boolean {
  const m = /^(?:\/u\/[^/]*)?(\/.*?)\/?$/.exec(path);
  const route = m ? m[1] : path;
  if (method === 'POST')
    return /^\/(chat\/completions|responses|embeddings|messages|messages\/count_tokens|images\/(generations|edits)|audio\/(transcriptions|translations|speech))$/.test(
      route,
    );
  if (method === 'GET' || method === 'HEAD') return /^\/(models(\/.+)?|user\/balance)$/.test(route);
  return false;
}

/** The 401 for an end-user key on a route it may not call. */
export const userKeyNotAllowed = (): DomainError =>
  new DomainError(
    'unauthenticated',
    'An end-user key may call the proxy routes and GET /v1/user/balance only; use the paywall API key for this route.',
    null,
    'user_key_not_allowed',
  );

/** {@link userOf} from its parts (the raw metered path has no Express request). */
export function userFrom(
  header: string | undefined,
  query: string | undefined,
  pathUser: string | undefined,
  bodyUser?: unknown,
  /** How the body names the user, for the message when none is given (Messages: `metadata.user_id`). */
  bodyField = 'the `user` body field',
): string {
  if (bodyUser !== undefined && bodyUser !== null && typeof bodyUser !== 'string')
    throw new DomainError('invalid_request', 'user must be a string', 'user');
  const given = header ?? (bodyUser as string | undefined) ?? query;
  if (pathUser === '') throw missingUser(bodyField);
  if (pathUser !== undefined) {
    for (const other of [header, bodyUser as string | undefined, query])
      if (other !== undefined && other !== pathUser)
        throw new DomainError(
          'invalid_request',
          'the user in the path and the user in the body or header differ',
          'user',
          'user_mismatch',
        );
    return checkUser(pathUser);
  }
  if (given === undefined || given.trim() === '') throw missingUser(bodyField);
  return checkUser(given);
}

const missingUser = (bodyField: string) =>
  new DomainError(
    'missing_user',
    `No end user given: set ${bodyField}, the \`user\` query parameter, the X-Paywall-User header, or name the user in the path (/v1/u/{user}/…).`,
    'user',
    'missing_user',
  );

/** The same rule as every service applies (printable, well-formed, at most 256 characters). */
const checkUser = (user: string): string => checkExternalId(user);

/**
 * Wraps an async route so thrown DomainErrors become OpenAI-shaped answers. Anything else (and an internal
 * DomainError, a resolver's unexpected failure wrapped by the GraphQL bridge) is a 500 "Internal server
 * error", logged here at error level with its stack and the route template (the router has not yet
 * restored `baseUrl`, so the template is whole).
 */
export const route =
  (fn: (req: Request, res: Response) => Promise<void>): RequestHandler =>
  (req: Request, res: Response, _next: NextFunction) => {
    fn(req, res).catch((e) => {
      if (e instanceof DomainError && e.code !== 'internal') {
        if (!res.headersSent) return sendError(res, e);
        return void res.end();
      }
      logInternalError(req, e, 'request failed');
      if (res.headersSent) return void res.end();
      sendError(res, new DomainError('internal', 'Internal server error'));
    });
  };

/** A JSON object body, or a 400. */
export function jsonObject(req: Request): Record<string, unknown> {
  return objectBody(req.body, req.headers['content-type']);
}

/** A JSON media type: `application/json`, or `application/…+json`. */
const JSON_MEDIA = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

/**
 * The parsed body when it is a JSON object, else a 400. A body that was not parsed because it did not
 * come as JSON (`curl -d` alone sends `application/x-www-form-urlencoded`) says which header is missing,
 * instead of calling the client's JSON object something else.
 */
export function objectBody(b: unknown, contentType?: string): Record<string, unknown> {
  if (!b || typeof b !== 'object' || Array.isArray(b)) {
    if (b === undefined && !JSON_MEDIA.test(contentType ?? ''))
      throw new DomainError(
        'invalid_request',
        `request body must be a JSON object sent with Content-Type: application/json (this one came ${contentType ? `as ${contentType.split(';')[0].trim()}` : 'without a Content-Type'})`,
        null,
      );
    throw new DomainError('invalid_request', 'request body must be a JSON object', null);
  }
  return b as Record<string, unknown>;
}

/** A single-valued query parameter (`?status=a&status=b` is a 400, not a silent pick). */
export function queryParam(req: Request, name: string): string | undefined {
  const v = req.query[name];
  if (v === undefined || typeof v === 'string') return v;
  throw new DomainError('invalid_request', `${name} must be given once, as a string`, name);
}

/** `limit` of a REST list: an integer from 1 to 100 (docs/reference.md §4 "Lists"); undefined when not given. */
export function limitParam(req: Request): number | undefined {
  const v = queryParam(req, 'limit');
  if (v === undefined) return undefined;
  const n = /^\d{1,4}$/.test(v) ? Number(v) : NaN;
  if (!(n >= 1 && n <= 100))
    throw new DomainError('invalid_request', 'limit must be an integer from 1 to 100', 'limit');
  return n;
}
