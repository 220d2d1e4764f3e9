import type { Request } from 'express';

/** `/v1/u/alice/…` → `/v1/u/{user}/…`: labels and logs never carry an end-user id (docs/reference.md §11). */
const PATH_USER = /^\/v1\/u\/[^/?]*/;
export const withoutPathUser = (path: string): string => path.replace(PATH_USER, '/v1/u/{user}');

/** Static files (the dashboard's hashed assets, served by express.static: no route template). */
const STATIC_PREFIXES = ['/dashboard/assets/'];

/**
 * A bounded label: the matched route template, never a raw path with ids in it. A route of several paths
 * (the dashboard's page and its client-side routes) is labelled by its first; static files are `static`.
 */
export function routeLabel(req: Request): string {
  const route = (req as any).route?.path as string | string[] | undefined;
  const template = Array.isArray(route) ? route[0] : route;
  if (template) return withoutPathUser(`${req.baseUrl}${template}`);
  const path = req.originalUrl.split('?')[0];
  if (path === '/graphql' || ['/healthz', '/readyz', '/metrics'].includes(path)) return path;
  if (STATIC_PREFIXES.some((prefix) => path.startsWith(prefix))) return 'static';
  return 'unmatched';
}

/**
 * Logs an unexpected failure (a 500) at error level with its stack, the request id (from the request's
 * child logger), method and route template. The client only ever gets "Internal server error".
 */
export function logInternalError(req: Request, err: unknown, msg = 'internal error'): void {
  const cause = (err as any)?.code === 'internal' && (err as any)?.cause ? (err as any).cause : err;
  req.log.error(
    {
      err: cause,
      method: req.method,
      route: routeLabel(req),
      url: withoutPathUser(req.originalUrl.split('?')[0]),
    },
    msg,
  );
}
