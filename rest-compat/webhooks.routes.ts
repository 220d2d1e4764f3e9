import { Router } from 'express';
import type { Services } from '../src/services.js';

export function webhooksRoutes(_services: Services): Router {
  const r = Router();
  return r;
}
