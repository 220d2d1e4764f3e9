import { Router } from 'express';
import type { Services } from '../src/services.js';
import { DomainError } from '../src/shared/errors.js';
import { sendError } from './errors.js';
import { requireApiKey } from './http.js';
import { userRoutes } from './user.routes.js';
import { chatRoutes } from './chat.routes.js';
import { modelsRoutes } from './models.routes.js';
import { webhooksRoutes } from './webhooks.routes.js';

/**
 * The REST compatibility layer under `/v1`: OpenAI-style routes and `/v1/user/*`, each mapped onto the
 * resolvers GraphQL uses. `/v1/u/{user}/…` repeats every route with the user named in the path.
 */
export function createRestRouter(services: Services): Router {
  const routes = Router();
  routes.use(userRoutes(services));
  routes.use(chatRoutes(services));
  routes.use(modelsRoutes(services));
  routes.use(webhooksRoutes(services));

  const v1 = Router();
  v1.use(requireApiKey(services));
  v1.use(
    '/u/:pathUser',
    (req, _res, next) => {
      req.pathUser = String(req.params.pathUser);
      next();
    },
    routes,
  );
  v1.use(routes);
  v1.use((req, res) =>
    sendError(
      res,
      new DomainError('not_found', `Unknown route: ${req.method} /v1${req.path}`, null, 'unknown_route'),
    ),
  );
  return v1;
}
