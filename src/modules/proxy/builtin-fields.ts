import { invalid } from '../../shared/errors.js';

/*
 * The platform's built-in provider (docs/reference.md §8) is paid by the token at the operator's cost
 * prices, under one key that serves every SHARED app. A request that would make the operator pay outside
 * those prices (a dearer service tier, hosted tools billed per call), or reach what the operator stored
 * under that key (a stored prompt, uploaded files), is refused before anything is held or sent: the
 * charge could not cover it, and it is not the app's.
 */

/** Service tiers billed at (or below) the standard token prices. */
const STANDARD_TIERS = new Set(['auto', 'default', 'flex']);

/** Hosted tools the provider runs and bills per call or per session, beyond the tokens. */
const BILLED_TOOL = /^(web_search|file_search|code_interpreter|image_generation|mcp)/;

const refuse = (param: string, why: string) =>
  invalid(
    `'${param}' is not available through the platform's built-in provider: ${why}`,
    param,
    'unsupported_parameter',
  );

/** Where a request body names a stored file (`file_id` anywhere in its messages or input), or null. */
function fileIdPath(v: unknown, path: string, depth = 0): string | null {
  if (depth > 64 || v === null || typeof v !== 'object') return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const found = fileIdPath(v[i], `${path}[${i}]`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  for (const [k, x] of Object.entries(v)) {
    if (k === 'file_id' && x !== undefined && x !== null) return `${path}.${k}`;
    const found = fileIdPath(x, `${path}.${k}`, depth + 1);
    if (found) return found;
  }
  return null;
}

/** Throws the 400 for a field the built-in provider must not be sent (see above); else nothing. */
export function refuseOnBuiltin(format: string, body: Record<string, unknown>): void {
  // A Messages request is translated for the built-in provider, and its `service_tier` dropped on the way.
  const tier = format === 'messages' ? undefined : body.service_tier;
  if (tier !== undefined && tier !== null && !(typeof tier === 'string' && STANDARD_TIERS.has(tier)))
    throw refuse('service_tier', `only "auto", "default" or "flex" (it is sold at the standard prices)`);
  if (body.web_search_options !== undefined && body.web_search_options !== null)
    throw refuse('web_search_options', 'web search is billed per call, outside the token prices');
  if (Array.isArray(body.tools))
    body.tools.forEach((tool, i) => {
      const type = (tool as { type?: unknown } | null)?.type;
      if (typeof type === 'string' && BILLED_TOOL.test(type))
        throw refuse(`tools[${i}].type`, `the hosted tool ${type} is billed outside the token prices`);
    });
  if (format === 'responses' && body.prompt !== undefined && body.prompt !== null)
    throw refuse('prompt', "stored prompts under the platform's key are not this app's");
  for (const field of ['messages', 'input']) {
    const at = fileIdPath(body[field], field);
    if (at) throw refuse(at, "files stored under the platform's key are not this app's");
  }
}
