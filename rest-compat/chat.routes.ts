import { Router } from 'express';
import type { Services } from '../src/services.js';
import { queryUserOf, route } from './http.js';
import { serveMetered, type MeteredKind } from './metered.js';

/**
 * POST /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/messages and /v1/messages/count_tokens
 * (and their /v1/u/{user}/… forms) as Express routes,
 * for the requests the fast path leaves to Express (chunked or compressed bodies, other charsets). Both
 * call the one metered handler (metered.ts).
 *
 * The handler calls ProxyService.chat / .responses / .embeddings / .messages directly (chat is the very call the GraphQL
 * `createChatCompletion` resolver makes with the same context): a stream cannot pass through GraphQL
 * execution, and for whole answers skipping a per-request GraphQL execution keeps the hot path lean.
 * All rules (validation, holds, blocked replies, settlement) live in the service.
 */
export function chatRoutes(services: Services): Router {
  const r = Router();
  const serve = (kind: MeteredKind) =>
    route(async (req, res) => {
      const q = req.query.user;
      await serveMetered(
        services.proxy,
        {
          kind,
          paywall: req.paywall!,
          headers: req.headers,
          queryUser: queryUserOf(q),
          pathUser: req.pathUser,
          body: req.body,
          userKey: req.userKey,
        },
        res,
      );
    });
  r.post('/chat/completions', serve('chat'));
  r.post('/responses', serve('responses'));
  r.post('/embeddings', serve('embeddings'));
  r.post('/messages', serve('messages'));
  r.post('/messages/count_tokens', serve('count_tokens'));
  return r;
}
