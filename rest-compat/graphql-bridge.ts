import {
  execute,
  GraphQLError,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  Kind,
  parse,
  typeFromAST,
  validate,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLSchema,
  type VariableDefinitionNode,
} from 'graphql';
import { inspect } from 'graphql/jsutils/inspect.js';
import { printPathArray } from 'graphql/jsutils/printPathArray.js';
import type { AppContext } from '../src/graphql/context.js';
import { getSchema } from '../src/graphql/schema.js';
import { isDatabaseUnavailable } from '../src/db/db-errors.js';
import { DomainError, databaseUnavailable } from '../src/shared/errors.js';

/**
 * A GraphQL operation the REST layer runs in-process, parsed and validated once. REST routes map onto
 * the very resolvers GraphQL uses, so no rule is written twice.
 */
export class Operation {
  private doc?: DocumentNode;
  private schema?: GraphQLSchema;
  private variableDefs: readonly VariableDefinitionNode[] = [];

  constructor(private readonly source: string) {}

  private async prepare(): Promise<{ schema: GraphQLSchema; doc: DocumentNode }> {
    if (!this.doc || !this.schema) {
      const schema = await getSchema();
      const doc = parse(this.source);
      const errors = validate(schema, doc);
      if (errors.length) throw new Error(`REST operation does not match the schema: ${errors[0].message}`);
      this.schema = schema;
      this.doc = doc;
      const op = doc.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
      this.variableDefs = op?.variableDefinitions ?? [];
    }
    return { schema: this.schema, doc: this.doc };
  }

  /** Runs the operation; returns its data or throws the resolver's DomainError (or a 400 for bad input). */
  async run<T = any>(ctx: AppContext, variables: Record<string, unknown>): Promise<T> {
    const { schema, doc } = await this.prepare();
    // The REST body is checked against the variables' types first, so a refusal names the field exactly.
    const bad = checkVariables(schema, this.variableDefs, variables);
    if (bad) throw bad;
    const result = await execute({ schema, document: doc, contextValue: ctx, variableValues: variables });
    if (result.errors?.length) throw toDomainError(result.errors[0]);
    return result.data as T;
  }
}

/**
 * A resolver's DomainError passes through; an error of the GraphQL layer itself (variables are checked
 * before, so this is not expected) is a 400 with its message; anything else is an internal error.
 */
export function toDomainError(e: GraphQLError): DomainError {
  if (e.originalError instanceof DomainError) return e.originalError;
  if (!e.originalError || e.originalError instanceof GraphQLError)
    return new DomainError('invalid_request', e.message, null);
  if (isDatabaseUnavailable(e.originalError)) return databaseUnavailable(e.originalError);
  const err = new DomainError('internal', 'Internal server error');
  (err as any).cause = e.originalError;
  return err;
}

type Path = readonly (string | number)[];

/** What is wrong with one value of a REST body, found by walking it along the variable's GraphQL type. */
interface Problem {
  /** From the variable's name down to the value; for a field missing or unknown, that field. */
  path: Path;
  kind: 'required' | 'unknown' | 'scalar' | 'other';
  /** For `scalar`: the name of the built-in scalar the value does not fit. */
  scalar?: string;
  /** GraphQL's own words for it, and the value it refused (for a refusal that has no REST wording). */
  detail: string;
  value: unknown;
  /** Where the problem is inside the variable, as GraphQL reports it (the parent for a field). */
  valuePath: Path;
}

/**
 * The variables of a REST call checked as GraphQL coerces them (same rules, same order), reporting the
 * first problem with its path: `param` is then the field itself, never read back out of a message. A
 * scalar that refuses with a DomainError passes that error through.
 */
export function checkVariables(
  schema: GraphQLSchema,
  defs: readonly VariableDefinitionNode[],
  inputs: Record<string, unknown>,
): DomainError | null {
  for (const def of defs) {
    const name = def.variable.name.value;
    const type = typeFromAST(schema, def.type) as GraphQLInputType | undefined;
    if (!type) continue;
    const value = Object.hasOwn(inputs, name) ? inputs[name] : undefined;
    let problem: Problem | DomainError | null = null;
    if (!Object.hasOwn(inputs, name)) {
      if (!def.defaultValue && isNonNullType(type))
        problem = { path: [name], kind: 'required', detail: 'was not provided.', value, valuePath: [] };
    } else problem = walk(value, type, [name], []);
    if (problem instanceof DomainError) return problem;
    if (problem) return refusal(name, problem);
  }
  return null;
}

function walk(
  value: unknown,
  type: GraphQLInputType,
  path: Path,
  valuePath: Path,
): Problem | DomainError | null {
  if (isNonNullType(type)) {
    if (value != null) return walk(value, type.ofType, path, valuePath);
    return {
      path,
      kind: 'required',
      detail: `Expected non-nullable type "${inspect(type)}" not to be null.`,
      value,
      valuePath,
    };
  }
  if (value == null) return null;
  if (isListType(type)) {
    if (!Array.isArray(value)) return walk(value, type.ofType, path, valuePath);
    for (let i = 0; i < value.length; i++) {
      const p = walk(value[i], type.ofType, [...path, i], [...valuePath, i]);
      if (p) return p;
    }
    return null;
  }
  if (isInputObjectType(type)) {
    if (typeof value !== 'object')
      return {
        path,
        kind: 'other',
        detail: `Expected type "${type.name}" to be an object.`,
        value,
        valuePath,
      };
    const fields = type.getFields();
    const obj = value as Record<string, unknown>;
    for (const field of Object.values(fields)) {
      const v = obj[field.name];
      if (v === undefined) {
        if (field.defaultValue === undefined && isNonNullType(field.type))
          return {
            path: [...path, field.name],
            kind: 'required',
            detail: `Field "${field.name}" of required type "${inspect(field.type)}" was not provided.`,
            value,
            valuePath,
          };
        continue;
      }
      const p = walk(v, field.type, [...path, field.name], [...valuePath, field.name]);
      if (p) return p;
    }
    for (const key of Object.keys(obj))
      if (!fields[key])
        return {
          path: [...path, key],
          kind: 'unknown',
          detail: `Field "${key}" is not defined by type "${type.name}".`,
          value,
          valuePath,
        };
    return null;
  }
  if (isLeafType(type)) {
    let parsed: unknown;
    try {
      parsed = type.parseValue(value);
    } catch (error) {
      if (error instanceof DomainError) return error;
      if (error instanceof GraphQLError)
        return BUILT_IN.has(type.name)
          ? { path, kind: 'scalar', scalar: type.name, detail: error.message, value, valuePath }
          : { path, kind: 'other', detail: error.message, value, valuePath };
      return {
        path,
        kind: 'other',
        detail: `Expected type "${type.name}". ${(error as Error).message}`,
        value,
        valuePath,
      };
    }
    if (parsed === undefined)
      return { path, kind: 'other', detail: `Expected type "${type.name}".`, value, valuePath };
  }
  return null;
}

/** Scalars a REST client is told about in words (`SCALAR_WORDS`), not in GraphQL's message. */
const BUILT_IN = new Set(['String', 'Int', 'Float', 'Boolean', 'JSONObject']);

const SCALAR_WORDS: Record<string, string> = {
  String: 'must be a string.',
  Int: 'must be an integer.',
  Float: 'must be a number.',
  Boolean: 'must be true or false.',
  JSONObject: 'must be a JSON object.',
};

/** A REST client's words for the problem (no variable paths or GraphQL type names where avoidable). */
function refusal(variable: string, p: Problem): DomainError {
  const names = p.path.filter((k): k is string => typeof k === 'string');
  const param = names[names.length - 1] ?? variable;
  let message: string;
  if (p.kind === 'required') message = `${param} is required.`;
  else if (p.kind === 'unknown') message = `Unknown parameter: ${param}.`;
  else if (p.kind === 'scalar') message = `${param} ${SCALAR_WORDS[p.scalar!]}`;
  else {
    const at = p.valuePath.length ? ` at "${variable}${printPathArray(p.valuePath)}"` : '';
    message = `invalid value for ${param}: ${inspect(p.value)}${at}; ${p.detail}`;
  }
  return param === 'amount'
    ? new DomainError('invalid_amount', message, param, 'invalid_amount')
    : new DomainError('invalid_request', message, param);
}
