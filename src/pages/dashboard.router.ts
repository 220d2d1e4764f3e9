import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type Request, type Response } from 'express';

/** The project root: the nearest folder above this module with a package.json (src/ or dist/src/). */
function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** Where `npm run build:dashboard` (run by `npm ci` through `prepare`) writes the console. */
export const DASHBOARD_DIR = join(projectRoot(), 'dist', 'dashboard');

/**
 * The developer console (docs/reference.md §12): a static single-page app over the public GraphQL API. Scripts,
 * styles and connections from this origin only; hashed assets cached for a year, the page itself never
 * (a new build is picked up at once); every other path under /dashboard is a client-side route and gets
 * the page (SPA fallback), except missing assets, which are 404s.
 */
export function createDashboardRouter(dir = DASHBOARD_DIR): Router {
  const router = Router();
  const headers = (res: Response) =>
    res.set({
      'Content-Security-Policy':
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
      'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'same-origin',
      'X-Content-Type-Options': 'nosniff',
    });
  router.use(
    '/dashboard/assets',
    express.static(join(dir, 'assets'), {
      index: false,
      immutable: true,
      maxAge: '365d',
      setHeaders: (res) => headers(res as unknown as Response),
    }),
  );
  // A missing asset (an old build's file): a plain 404, never the page.
  router.use('/dashboard/assets', (_req, res) => {
    headers(res);
    res.status(404).type('text/plain').send('Not found');
  });
  const page = (_req: Request, res: Response) => {
    headers(res);
    res.set('Cache-Control', 'no-cache');
    const index = join(dir, 'index.html');
    if (!existsSync(index)) {
      // 404, not 5xx: the service itself is healthy; the console was not built.
      res
        .status(404)
        .type('text/plain')
        .send('The dashboard is not built: npm run build:dashboard (npm ci does it).');
      return;
    }
    res.sendFile(index);
  };
  router.get(['/dashboard', '/dashboard/', '/dashboard/*path'], (req, res) => {
    // A file of the build's root (favicon.svg): served as is.
    const file = req.path.slice('/dashboard/'.length);
    if (/^[\w.-]+\.(svg|png|ico|txt)$/.test(file) && existsSync(join(dir, file))) {
      headers(res);
      res.set('Cache-Control', 'public, max-age=3600');
      return res.sendFile(join(dir, file));
    }
    page(req, res);
  });
  return router;
}
