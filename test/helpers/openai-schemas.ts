import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { createParser } from 'eventsource-parser';

/**
 * Validators for the answer shapes of OpenAI's published OpenAPI document (github.com/openai/openai-openapi),
 * from the schemas kept in test/fixtures/openai-openapi-schemas.json (its `source` field names the commit
 * and version; scripts/extract-openai-schemas.ts regenerates it, docs/reference.md §11).
 */

const FIXTURE = new URL('../fixtures/openai-openapi-schemas.json', import.meta.url);

export interface OpenAISchemas {
  source: {
    repository: string;
    path: string;
    commit: string;
    version: string;
    openapi: string;
    roots: string[];
  };
  schemas: Record<string, unknown>;
}

export const openaiSchemas: OpenAISchemas = JSON.parse(readFileSync(FIXTURE, 'utf8'));

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const ajv = new Ajv2020({ allErrors: true, strictTypes: false, strictTuples: false });
addFormats(ajv);
// OpenAPI's own formats: `unixtime` is a timestamp in seconds; the numeric ones only name a width.
ajv.addFormat('unixtime', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= 0 });
for (const f of ['int64', 'double', 'float']) ajv.addFormat(f, { type: 'number', validate: () => true });
ajv.addFormat('binary', true);
ajv.addSchema({ $id: 'openai-openapi', $defs: openaiSchemas.schemas });

const compiled = new Map<string, ValidateFunction>();

/** The validator of one component schema of the document (e.g. `CreateChatCompletionResponse`). */
export function openaiValidator(name: string): ValidateFunction {
  let v = compiled.get(name);
  if (!v) {
    if (!(name in openaiSchemas.schemas)) throw new Error(`${name} is not in the fixture`);
    v = ajv.getSchema(`openai-openapi#/$defs/${name}`)!;
    compiled.set(name, v);
  }
  return v;
}

/** What `value` breaks of schema `name` (one line per violation; none when it conforms). */
export function violations(name: string, value: unknown): string[] {
  const v = openaiValidator(name);
  if (v(value)) return [];
  return (v.errors ?? []).map((e) => `${name}${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
}

/** Fails (naming every violation) unless `value` conforms to schema `name`. */
export function expectConforms(name: string, value: unknown): void {
  const errors = violations(name, value);
  if (errors.length)
    throw new Error(
      `does not conform to ${name} (openai-openapi ${openaiSchemas.source.version}):\n` +
        `${errors.slice(0, 40).join('\n')}\n${JSON.stringify(value, null, 2).slice(0, 4000)}`,
    );
}

/** `POST /v1/embeddings` answers: OpenAI's `CreateEmbeddingResponse`. */
export function validateEmbeddingResponse(body: unknown): void {
  expectConforms('CreateEmbeddingResponse', body);
}

/** The Responses stream event schema of each event type the service writes or relays. */
export const RESPONSES_EVENT_SCHEMAS: Record<string, string> = {
  'response.created': 'ResponseCreatedEvent',
  'response.in_progress': 'ResponseInProgressEvent',
  'response.output_item.added': 'ResponseOutputItemAddedEvent',
  'response.content_part.added': 'ResponseContentPartAddedEvent',
  'response.output_text.delta': 'ResponseTextDeltaEvent',
  'response.output_text.done': 'ResponseTextDoneEvent',
  'response.content_part.done': 'ResponseContentPartDoneEvent',
  'response.output_item.done': 'ResponseOutputItemDoneEvent',
  'response.completed': 'ResponseCompletedEvent',
  'response.incomplete': 'ResponseIncompleteEvent',
  'response.failed': 'ResponseFailedEvent',
  error: 'ResponseErrorEvent',
};

export interface SseEvent {
  event: string | undefined;
  data: string;
}

/** The events of a whole SSE body, in order. */
export function sseEvents(body: string): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = createParser({ onEvent: (e) => events.push({ event: e.event, data: e.data }) });
  parser.feed(body);
  return events;
}
