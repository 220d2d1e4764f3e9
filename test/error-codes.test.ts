import { readFileSync } from 'node:fs';
import {
  ERROR_CODES,
  ERROR_KINDS,
  PARSER_ERROR_CODES,
  kindsOf,
  pageAnswerOf,
  type ErrorCode,
  type ErrorKind,
} from '../src/shared/error-codes.js';
import { DomainError, providerCode } from '../src/shared/errors.js';
import { errorBody } from '../rest-compat/errors.js';
import { formatGraphQLError } from '../src/graphql/errors.js';
import { GraphQLError } from 'graphql';

/** The rows of the first Markdown table after `heading`, as trimmed cells (header and rule left out). */
function tableAfter(file: string, heading: string): string[][] {
  const text = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${file}: no heading ${heading}`);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** The `code` spans of a cell. */
const codesIn = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

const kinds = Object.keys(ERROR_KINDS) as ErrorKind[];
const codes = Object.keys(ERROR_CODES) as ErrorCode[];

describe('the README error table is the map', () => {
  const rows = tableAfter('README.md', '## Conventions: errors, amounts, request ids');

  it('gives every kind the status and type the map gives it', () => {
    const seen = new Set<string>();
    for (const [kindCell, http, type] of rows)
      for (const kind of codesIn(kindCell)) {
        seen.add(kind);
        expect({
          kind,
          status: ERROR_KINDS[kind as ErrorKind]?.status,
          type: ERROR_KINDS[kind as ErrorKind]?.type,
        }).toEqual({
          kind,
          status: Number(http),
          type: codesIn(type)[0],
        });
      }
    expect([...seen].sort()).toEqual([...kinds].sort());
  });

  it('names only public codes of the row’s kinds', () => {
    for (const [kindCell, , , typical] of rows) {
      const rowKinds = codesIn(kindCell);
      // Words in parentheses explain the code (headers, GraphQL's code), they are not codes.
      for (const code of codesIn(typical.replace(/\([^)]*\)/g, '')).filter((c) => c !== 'null')) {
        expect(codes).toContain(code);
        expect({ code, ok: kindsOf(code as ErrorCode).some((k) => rowKinds.includes(k)) }).toEqual({
          code,
          ok: true,
        });
      }
    }
  });
});

describe('the reference’s "Error codes" table is the map', () => {
  const rows = tableAfter('docs/reference.md', '## Error codes');

  it('has rows', () => expect(rows.length).toBeGreaterThan(20));

  it('gives every code the status, type and GraphQL code of one of its kinds', () => {
    for (const [codeCell, http, typeCell, graphqlCell] of rows) {
      const status = /^\d{3}/.exec(http)?.[0];
      const page = /^\d{3} \(page\)$/.test(http);
      const type = codesIn(typeCell)[0];
      const graphql = codesIn(graphqlCell)[0];
      for (const code of codesIn(codeCell)) {
        if (code in PARSER_ERROR_CODES) {
          const p = PARSER_ERROR_CODES[code as keyof typeof PARSER_ERROR_CODES];
          expect({ code, status: p.status, type: 'invalid_request_error', graphql: undefined }).toEqual({
            code,
            status: Number(status),
            type,
            graphql,
          });
          continue;
        }
        // `null`: a plain validation error (kind `invalid_request`) or an internal one.
        const candidates: ErrorKind[] =
          code === 'null'
            ? ['invalid_request', 'internal']
            : codes.includes(code as ErrorCode)
              ? [...kindsOf(code as ErrorCode)]
              : [];
        const fits = candidates.some((k) => {
          const e = ERROR_KINDS[k];
          const s = page ? pageAnswerOf(k, code as ErrorCode)?.status : e.status;
          return (
            (status === undefined || s === Number(status)) &&
            (type === undefined || e.type === type) &&
            (graphql === undefined || e.graphql === graphql)
          );
        });
        expect({ code, http, type, graphql, fits }).toEqual({ code, http, type, graphql, fits: true });
      }
    }
  });

  it('lists every public code of the map', () => {
    const listed = new Set(rows.flatMap(([c]) => codesIn(c)));
    // `invalid_request` and `internal` are REST's `code: null` (the `null` rows); GraphQL names them.
    const missing = [...codes, ...Object.keys(PARSER_ERROR_CODES)].filter(
      (c) => !listed.has(c) && c !== 'invalid_request' && c !== 'internal',
    );
    expect(missing).toEqual([]);
  });
});

describe('every transport answers from the map', () => {
  it('REST: each kind gets its status and type; the public code is the one given, else the kind', () => {
    for (const kind of kinds) {
      const { status, body } = errorBody(new DomainError(kind, 'x'));
      expect({ kind, status, type: body.error.type, code: body.error.code }).toEqual({
        kind,
        status: ERROR_KINDS[kind].status,
        type: ERROR_KINDS[kind].type,
        code: kind === 'invalid_request' || kind === 'internal' ? null : kind,
      });
    }
    expect(errorBody(new DomainError('invalid_request', 'x', 'user', 'user_mismatch')).body.error).toEqual({
      message: 'x',
      type: 'invalid_request_error',
      param: 'user',
      code: 'user_mismatch',
    });
    // A provider's own code is relayed as it is.
    expect(
      errorBody(new DomainError('invalid_request', 'x', null, providerCode('context_length_exceeded'))).body
        .error.code,
    ).toBe('context_length_exceeded');
  });

  it('GraphQL: extensions.code from the kind, errorCode the public code or the kind', () => {
    for (const kind of kinds) {
      const err = new GraphQLError('x', { originalError: new DomainError(kind, 'x', 'f') });
      expect(formatGraphQLError({ message: 'x' }, err).extensions).toEqual({
        code: ERROR_KINDS[kind].graphql,
        errorCode: kind,
        param: 'f',
      });
    }
  });

  it('an unknown public code, or a code of another kind, does not compile', () => {
    // @ts-expect-error: not a public code
    const unknown = new DomainError('invalid_request', 'x', null, 'no_such_code');
    // @ts-expect-error: a code of another kind
    const otherKind = new DomainError('not_found', 'x', null, 'user_mismatch');
    expect([unknown.publicCode, otherKind.publicCode]).toEqual(['no_such_code', 'user_mismatch']);
  });

  it('pages: a 4xx or 5xx page with its title where the pages answer the kind, else a 500', () => {
    expect(pageAnswerOf('not_found', undefined)).toEqual({ status: 404, title: 'Link not valid' });
    expect(pageAnswerOf('invalid_request', 'connect_link_expired')).toEqual({
      status: 410,
      title: 'Link expired',
    });
    expect(pageAnswerOf('rate_limited', 'rate_limit_exceeded')).toEqual({
      status: 429,
      title: 'Too many attempts',
    });
    expect(pageAnswerOf('invalid_request', providerCode('whatever'))).toEqual({
      status: 400,
      title: 'That did not work',
    });
    expect(pageAnswerOf('internal', undefined)).toBeNull();
    expect(pageAnswerOf('model_not_found', undefined)).toBeNull();
  });
});
