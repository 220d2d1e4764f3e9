import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';
import { GraphQLJSON } from 'graphql-scalars';
import { formatUsdc } from '../shared/money.js';

/**
 * A USDC amount out of the API: a decimal string with exactly 6 fraction digits ("1.500000"). Values are
 * raw-unit bigints inside. Amounts going in are plain `String` arguments validated by the services, so a
 * bad amount is a clear `invalid_amount` error naming the field.
 */
export const MoneyScalar = new GraphQLScalarType({
  name: 'Money',
  description: 'A USDC amount as a decimal string with 6 fraction digits, e.g. "1.500000" (output only).',
  serialize(value: unknown): string {
    if (typeof value === 'bigint') return formatUsdc(value);
    if (typeof value === 'string' && /^-?\d+$/.test(value)) return formatUsdc(BigInt(value));
    throw new GraphQLError('Money cannot represent a non-integer raw amount');
  },
  parseValue(): never {
    throw new GraphQLError('Money is output only; send amounts as decimal strings');
  },
  parseLiteral(ast): never {
    throw new GraphQLError(`Money is output only (got ${ast.kind === Kind.STRING ? 'a string' : ast.kind})`);
  },
});

/**
 * `JSON`: any JSON value (event `data`, payloads, metadata). One shared instance, so every module that
 * uses it refers to the same schema type (two scalars named JSON would break the schema build).
 */
export const JSONScalar = GraphQLJSON;

/**
 * `PriceOrBoolean`, input only: a USDC decimal string (a price) or a boolean. setModelPricing's `reasoning`
 * is both the reasoning token's price and, as `true` / `false`, whether the model reasons (the same as
 * `reasoningModel`): integrations write it either way. The catalogue checks the string as a price.
 */
export const PriceOrBooleanScalar = new GraphQLScalarType({
  name: 'PriceOrBoolean',
  description: 'A USDC decimal string (a price, e.g. "0.000004"), or true / false (input only).',
  serialize(value: unknown): string | boolean {
    if (typeof value === 'string' || typeof value === 'boolean') return value;
    throw new GraphQLError('PriceOrBoolean is a string or a boolean');
  },
  parseValue(value: unknown): string | boolean {
    if (typeof value === 'string' || typeof value === 'boolean') return value;
    throw new GraphQLError('expected a USDC decimal string (a price) or true / false');
  },
  parseLiteral(ast): string | boolean {
    if (ast.kind === Kind.STRING || ast.kind === Kind.BOOLEAN) return ast.value;
    throw new GraphQLError('expected a USDC decimal string (a price) or true / false');
  },
});
