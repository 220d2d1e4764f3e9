import type { GraphQLField, GraphQLSchema } from 'graphql';
import type { App } from '../../src/app.js';

/** One HTTP route of the running app: method and full path template (Express syntax, e.g. `/v1/u/:pathUser/user/charge`). */
export interface RouteEntry {
  method: string;
  path: string;
}

/**
 * Every route the Express app serves, read from its router stack (Express 5 / router 2 keep each layer's
 * mount or route path in `rawPath`), so a route added anywhere shows up here without a table to update.
 * Middleware layers (`use` without a path) are walked into; array paths (`['/wallet', …]`) are mount points
 * of middleware only and add no route.
 */
export function enumerateRoutes(app: App): RouteEntry[] {
  const express = app.server.listeners('request')[0] as any;
  const out: RouteEntry[] = [];
  const walk = (stack: any[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const paths = ([] as string[]).concat(layer.route.path);
        for (const p of paths)
          for (const [m, on] of Object.entries(layer.route.methods))
            if (on && m !== '_all') out.push({ method: m.toUpperCase(), path: join(prefix, p) });
      } else if (Array.isArray(layer.handle?.stack)) {
        const raw = layer.rawPath;
        if (Array.isArray(raw)) continue; // middleware mounted on several paths, no routes of its own
        walk(layer.handle.stack, typeof raw === 'string' && raw !== '/' ? join(prefix, raw) : prefix);
      }
    }
  };
  walk(express.router.stack, '');
  const seen = new Set<string>();
  return out.filter((r) => {
    const k = `${r.method} ${r.path}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

const join = (a: string, b: string) => (a + (b.startsWith('/') ? b : `/${b}`)).replace(/\/+$/, '') || '/';

export const routeKey = (r: RouteEntry) => `${r.method} ${r.path}`;

/** Every root field of the schema, as `Query.x`, `Mutation.y`, `Subscription.z`. */
export function enumerateOperations(
  schema: GraphQLSchema,
): Array<{ key: string; kind: 'Query' | 'Mutation' | 'Subscription'; field: GraphQLField<any, any> }> {
  const out = [];
  for (const kind of ['Query', 'Mutation', 'Subscription'] as const) {
    const type =
      kind === 'Query'
        ? schema.getQueryType()
        : kind === 'Mutation'
          ? schema.getMutationType()
          : schema.getSubscriptionType();
    for (const field of Object.values(type?.getFields() ?? {}))
      out.push({ key: `${kind}.${field.name}`, kind, field });
  }
  return out;
}
