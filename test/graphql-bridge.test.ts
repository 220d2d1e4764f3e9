import { readFileSync } from 'node:fs';
import { buildSchema, getVariableValues, Kind, parse, type OperationDefinitionNode } from 'graphql';
import { checkVariables } from '../rest-compat/graphql-bridge.js';

/** The REST body checked as the bridge checks it, against the committed schema. */
const schema = buildSchema(readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8'));
const defsOf = (source: string) =>
  (parse(source).definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION) as OperationDefinitionNode)
    .variableDefinitions ?? [];
const DEPOSIT = defsOf(`mutation($input: DepositInput!) { deposit(input: $input) { balance } }`);
const SUBSCRIBE = defsOf(
  `mutation($input: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $input) { id } }`,
);
const BALANCE = defsOf(`query($user: String!) { user(externalId: $user) { balance } }`);

const refusal = (defs: typeof DEPOSIT, vars: Record<string, unknown>) => {
  const e = checkVariables(schema, defs, vars);
  return e && { code: e.code, publicCode: e.publicCode ?? null, param: e.param, message: e.message };
};

describe('the REST → GraphQL bridge names the field from the variable path', () => {
  it('keeps the REST wording for a missing, mistyped or unknown field', () => {
    expect(refusal(DEPOSIT, { input: { user: 'ann', amount: 1 } })).toEqual({
      code: 'invalid_amount',
      publicCode: 'invalid_amount',
      param: 'amount',
      message: 'amount must be a string.',
    });
    expect(refusal(DEPOSIT, { input: { user: 'ann', amount: null } })).toEqual({
      code: 'invalid_amount',
      publicCode: 'invalid_amount',
      param: 'amount',
      message: 'amount is required.',
    });
    expect(refusal(DEPOSIT, { input: { amount: '1' } })).toEqual({
      code: 'invalid_request',
      publicCode: null,
      param: 'user',
      message: 'user is required.',
    });
    expect(refusal(DEPOSIT, { input: { user: 'ann', amount: '1', colour: 'red' } })).toEqual({
      code: 'invalid_request',
      publicCode: null,
      param: 'colour',
      message: 'Unknown parameter: colour.',
    });
    expect(refusal(DEPOSIT, { input: { user: 'ann', amount: '1' } })).toBeNull();
  });

  it('names the list field of a bad item (was param null and GraphQL’s own message)', () => {
    expect(
      refusal(SUBSCRIBE, { input: { url: 'https://example.com/h', events: ['usage.recorded', 5] } }),
    ).toEqual({
      code: 'invalid_request',
      publicCode: null,
      param: 'events',
      message: 'events must be a string.',
    });
  });

  it('names a whole variable that is null or of the wrong type (was param null)', () => {
    expect(refusal(BALANCE, { user: null })).toMatchObject({ param: 'user', message: 'user is required.' });
    expect(refusal(BALANCE, { user: 7 })).toMatchObject({ param: 'user', message: 'user must be a string.' });
    expect(refusal(BALANCE, {})).toMatchObject({ param: 'user', message: 'user is required.' });
  });

  it('refuses exactly what GraphQL’s own coercion refuses', () => {
    const values: unknown[] = [
      undefined,
      null,
      '1',
      1,
      1.5,
      true,
      [],
      ['x'],
      [1],
      {},
      { a: 1 },
      'x'.repeat(3),
    ];
    const fields = ['user', 'amount', 'metadata', 'paywallId', 'unknown'];
    let checked = 0;
    for (const a of values)
      for (const b of values)
        for (const [f, g] of [
          [fields[0], fields[1]],
          [fields[1], fields[2]],
          [fields[3], fields[4]],
        ]) {
          const input: Record<string, unknown> = { user: 'ann', amount: '1' };
          if (a === undefined) delete input[f];
          else input[f] = a;
          if (b === undefined) delete input[g];
          else input[g] = b;
          const ours = checkVariables(schema, DEPOSIT, { input });
          const theirs = getVariableValues(schema, DEPOSIT, { input });
          expect({ input, refused: ours !== null }).toEqual({ input, refused: 'errors' in theirs });
          checked++;
        }
    expect(checked).toBe(values.length ** 2 * 3);
  });
});
