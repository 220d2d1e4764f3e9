import { execute, GraphQLError, parse, validate, type DocumentNode, type GraphQLSchema } from 'graphql';
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

  constructor(private readonly source: string) {}

  private async prepare(): Promise<{ schema: GraphQLSchema; doc: DocumentNode }> {
    if (!this.doc || !this.schema) {
      const schema = await getSchema();
      const doc = parse(this.source);
      const errors = validate(schema, doc);
      if (errors.length) throw new Error(`REST operation does not match the schema: ${errors[0].message}`);
      this.schema = schema;
      this.doc = doc;
    }
    return { schema: this.schema, doc: this.doc };
  }

  /** Runs the operation; returns its data or throws the resolver's DomainError (or a 400 for bad input). */
  async run<T = any>(ctx: AppContext, variables: Record<string, unknown>): Promise<T> {
    const { schema, doc } = await this.prepare();
    const result = await execute({ schema, document: doc, contextValue: ctx, variableValues: variables });
    if (result.errors?.length) throw toDomainError(result.errors[0]);
    return result.data as T;
  }
}

/**
 * A resolver's DomainError passes through; a variable that does not coerce (e.g. a number where the
 * API wants a decimal string) is a 400 naming the field; anything else is an internal error.
 */
export function toDomainError(e: GraphQLError): DomainError {
  if (e.originalError instanceof DomainError) return e.originalError;
  if (!e.originalError || e.originalError instanceof GraphQLError) {
    const m =
      /at "[^"]*?\.?([A-Za-z_][A-Za-z0-9_]*)"/.exec(e.message) ??
      /Field "([A-Za-z_][A-Za-z0-9_]*)"/.exec(e.message);
    const param = m ? m[1] : null;
    const code = param === 'amount' ? 'invalid_amount' : undefined;
    return new DomainError(
      param === 'amount' ? 'invalid_amount' : 'invalid_request',
      param ? coercionMessage(param, e.message) : e.message,
      param,
      code,
    );
  }
  if (isDatabaseUnavailable(e.originalError)) return databaseUnavailable(e.originalError);
  const err = new DomainError('internal', 'Internal server error');
  (err as any).cause = e.originalError;
  return err;
}

/** A REST client's words for GraphQL's coercion errors (no variable paths or GraphQL type names). */
function coercionMessage(param: string, graphqlMessage: string): string {
  if (/not to be null|was not provided/.test(graphqlMessage)) return `${param} is required.`;
  if (/is not defined by type/.test(graphqlMessage)) return `Unknown parameter: ${param}.`;
  const kind = /(String|Int|Float|Boolean) cannot represent/.exec(graphqlMessage)?.[1];
  if (kind === 'String') return `${param} must be a string.`;
  if (kind === 'Int') return `${param} must be an integer.`;
  if (kind === 'Float') return `${param} must be a number.`;
  if (kind === 'Boolean') return `${param} must be true or false.`;
  return `invalid value for ${param}: ${graphqlMessage.replace(/^Variable "\$\w+" got invalid value /, '')}`;
}
