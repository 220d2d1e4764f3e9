/**
 * Extracts from OpenAI's published OpenAPI document (github.com/openai/openai-openapi, `openapi.yaml` or
 * `openapi.json`) the schemas of every answer shape this service writes, with every schema they reach,
 * into test/fixtures/openai-openapi-schemas.json (test/openai-conformance.test.ts validates against it).
 *
 *   node scripts/extract-openai-schemas.ts <openapi.yaml|openapi.json> <commit> [out.json]
 *
 * The document itself is not kept in the repository: fetch it at a commit of openai/openai-openapi, run
 * this, and commit the fixture (its `source` field says where it came from). docs/reference.md §11.
 *
 * The schemas become one JSON Schema 2020-12 resource (`$defs`, refs `#/$defs/Name`), which is what an
 * OpenAPI 3.1 schema is, except for:
 * - `nullable: true` (OpenAPI 3.0, still left in places): the schema becomes `anyOf: [schema, null]`;
 * - `$recursiveAnchor` / `$recursiveRef: "#"` (draft 2019-09, in a few filters): a plain `$ref` to the
 *   schema itself;
 * - `discriminator` (OpenAPI only): dropped; the `oneOf`/`anyOf` it annotates still decides;
 * - `optional: true` (not a JSON Schema keyword; a property is optional unless `required` names it): dropped;
 * - `x-…` extensions, `example(s)` and `description`: dropped (not validation; they keep the fixture small).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The answer shapes the service writes or relays: chat, Responses, models, errors, embeddings, images and audio (docs/reference.md §4, §6, §11, §14, §22). */
const ROOTS = [
  'CreateChatCompletionResponse',
  'CreateChatCompletionStreamResponse',
  'Response',
  'ResponseCreatedEvent',
  'ResponseInProgressEvent',
  'ResponseOutputItemAddedEvent',
  'ResponseContentPartAddedEvent',
  'ResponseTextDeltaEvent',
  'ResponseTextDoneEvent',
  'ResponseContentPartDoneEvent',
  'ResponseOutputItemDoneEvent',
  'ResponseCompletedEvent',
  'ResponseIncompleteEvent',
  'ResponseFailedEvent',
  'ResponseErrorEvent',
  'ListModelsResponse',
  'Model',
  'ErrorResponse',
  'CreateEmbeddingResponse',
  // docs/reference.md §22: images and audio.
  'ImagesResponse',
  'CreateTranscriptionResponseJson',
  'CreateTranscriptionResponseVerboseJson',
  'CreateTranslationResponseJson',
  'CreateTranslationResponseVerboseJson',
];

const REF = '#/components/schemas/';
const DROP = new Set(['description', 'example', 'examples', 'discriminator', 'optional']);
/** Keywords whose value is a map of schemas, one schema, or a list of schemas. */
const SCHEMA_MAP = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas']);
const SCHEMA_ONE = new Set([
  'items',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'not',
  'if',
  'then',
  'else',
  'contains',
  'propertyNames',
]);
const SCHEMA_LIST = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };
const isObj = (v: Json | undefined): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One schema in JSON Schema 2020-12 terms; `refs` collects the component names it references. */
function convert(schema: Json, refs: Set<string>, self: string): Json {
  if (!isObj(schema)) return schema;
  const out: Obj = {};
  for (const [k, v] of Object.entries(schema)) {
    if (DROP.has(k) || k.startsWith('x-') || k === 'nullable' || k === '$recursiveAnchor') continue;
    if (k === '$recursiveRef') {
      if (v !== '#') throw new Error(`unexpected $recursiveRef ${String(v)} in ${self}`);
      out.$ref = `#/$defs/${self}`;
    } else if (k === '$ref' && typeof v === 'string') {
      if (!v.startsWith(REF)) throw new Error(`unexpected $ref ${v}`);
      const name = v.slice(REF.length);
      refs.add(name);
      out.$ref = `#/$defs/${name}`;
    } else if (SCHEMA_MAP.has(k) && isObj(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, convert(s, refs, self)]));
    else if (SCHEMA_ONE.has(k)) out[k] = convert(v, refs, self);
    else if (SCHEMA_LIST.has(k) && Array.isArray(v)) out[k] = v.map((s) => convert(s, refs, self));
    else out[k] = v;
  }
  if (schema.nullable === true) return { anyOf: [out, { type: 'null' }] };
  return out;
}

async function main(): Promise<void> {
  const [input, commit, outArg] = process.argv.slice(2);
  if (!input || !commit || !/^[0-9a-f]{40}$/.test(commit)) {
    console.error(
      'usage: node scripts/extract-openai-schemas.ts <openapi.yaml|openapi.json> <40-hex commit> [out.json]',
    );
    process.exit(2);
  }
  const text = readFileSync(input, 'utf8');
  const doc = input.endsWith('.json')
    ? JSON.parse(text)
    : // `yaml` (eemeli/yaml) comes with the dev tooling; the document uses no custom tags.
      (await import('yaml')).parse(text, { maxAliasCount: -1 });
  const all: Record<string, Json> = doc.components.schemas;
  const defs: Record<string, Json> = {};
  const todo = [...ROOTS];
  while (todo.length) {
    const name = todo.pop()!;
    if (name in defs) continue;
    if (!(name in all)) throw new Error(`schema ${name} is not in the document`);
    const refs = new Set<string>();
    defs[name] = convert(all[name], refs, name);
    for (const r of refs) if (!(r in defs)) todo.push(r);
  }
  const sorted = Object.fromEntries(
    Object.keys(defs)
      .sort()
      .map((k) => [k, defs[k]]),
  );
  const fixture = {
    source: {
      repository: 'https://github.com/openai/openai-openapi',
      path: path.basename(input),
      commit,
      version: doc.info.version,
      openapi: doc.openapi,
      roots: ROOTS,
      regenerate: `node scripts/extract-openai-schemas.ts ${path.basename(input)} ${commit}`,
    },
    schemas: sorted,
  };
  const out =
    outArg ?? path.join(import.meta.dirname, '..', 'test', 'fixtures', 'openai-openapi-schemas.json');
  writeFileSync(out, JSON.stringify(fixture, null, 2) + '\n');
  console.log(
    `${Object.keys(sorted).length} schemas (OpenAPI ${doc.openapi}, version ${doc.info.version}) → ${out}`,
  );
}

await main();
