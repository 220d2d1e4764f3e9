import { Router } from 'express';
import type { Services } from '../src/services.js';

/** `/v1/user/*`: deposit, charge, balance, top-up link, connect, disconnect. */
export function userRoutes(_services: Services): Router {
  const r = Router();
  return r;
}
