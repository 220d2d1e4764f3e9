import { Router } from 'express';
import type { Services } from '../src/services.js';

export function chatRoutes(_services: Services): Router {
  const r = Router();
  return r;
}
