import { Router } from 'express';
import type { Services } from '../services.js';

/** Hosted pages (connect / approve, top-up): server-rendered, tiny. */
export function createPagesRouter(_services: Services): Router {
  return Router();
}
