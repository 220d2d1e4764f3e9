import { Router, type NextFunction, type Request, type Response } from 'express';
import { countRequest, rateHeaders, RateLimitError } from '../src/modules/limits/rate-limit.js';
import type { Services } from '../src/services.js';
import { DomainError } from '../src/shared/errors.js';
import { sendError } from './errors.js';
import { requireApiKey, userKeyMayCall, userKeyNotAllowed } from './http.js';
import { keysRoutes } from './keys.routes.js';
import { userRoutes } from './user.routes.js';
import { chatRoutes } from './chat.routes.js';
import { mediaRoutes } from './media.routes.js';
import { modelsRoutes } from './models.routes.js';
import { webhooksRoutes } from './webhooks.routes.js';

/**
 * docs/reference.md §10: `RATE_LIMIT_PER_MINUTE` per paywall key across instances. Chat, Responses, embeddings and Messages requests are
 * counted by the hold's own statement (no extra round trip); every other route here (Messages'
 * count_tokens too: it places no hold), with one small statement.
 */
function rateLimit(services: Services) {
  const limit = services.config.RATE_LIMIT_PER_MINUTE;
  return async (req: Request, res: Response, next: NextFunction) => {
    if (!limit || CHAT_PATH.test(req.path)) return next();
    try {
      const state = await countRequest(services.db, req.paywall!.id, limit, services.clock.now());
      res.set(rateHeaders(state));
      if (state.over) return sendError(res, new RateLimitError(state));
      next();
    } catch (e) {
      next(e);
    }
  };
}
const CHAT_PATH =
  /^(\/u\/[^/]*)?\/(chat\/completions|responses|embeddings|messages|images\/(generations|edits)|audio\/(transcriptions|translations|speech))\/?$/;

const USER_BASE = /^\/u\/([^/?#]*)\/v1(?=[/?]|$)/;

/**
 * `/u/{user}/v1/…` is `/v1/u/{user}/…` (docs/reference.md §19 "Base URL forms"): a client that appends
 * `/v1/messages` to its base URL (Anthropic's SDKs) works with the base URL `…/u/{user}`. Any other URL
 * is returned as it is.
 */
export function userBaseUrl(url: string): string {
  const m = USER_BASE.exec(url);
  return m ? `/v1/u/${m[1]}${url.slice(m[0].length)}` : url;
}

/**
 * The REST compatibility layer under `/v1`: OpenAI-style routes and `/v1/user/*`, each mapped onto the
 * resolvers GraphQL uses. `/v1/u/{user}/…` repeats every route with the user named in the path.
 */
export function createRestRouter(services: Services): Router {
  const routes = Router();
  routes.use(userRoutes(services));
  routes.use(keysRoutes(services));
  routes.use(chatRoutes(services));
  routes.use(mediaRoutes(services));
  routes.use(modelsRoutes(services));
  routes.use(webhooksRoutes(services));

  const v1 = Router();
  v1.use(requireApiKey(services));
  // An end-user key acts on the proxy routes and its own balance only (docs/reference.md §19).
  v1.use((req, res, next) =>
    req.userKey && !userKeyMayCall(req.method, req.path) ? sendError(res, userKeyNotAllowed()) : next(),
  );
  v1.use(rateLimit(services));
  v1.use(
    '/u/:pathUser',
    (req, _res, next) => {
      req.pathUser = String(req.params.pathUser);
      next();
    },
    routes,
  );
  // `/v1/u//…`: a path naming an empty user is the route without it, with no user given (400 missing_user).
  v1.use((req, _res, next) => {
    if (req.url.startsWith('/u//')) {
      req.pathUser = '';
      req.url = req.url.slice('/u/'.length);
    }
    next();
  });
  v1.use(routes);
  v1.use((req, res) =>
    sendError(
      res,
      new DomainError('not_found', `Unknown route: ${req.method} /v1${req.path}`, null, 'unknown_route'),
    ),
  );
  return v1;
}
