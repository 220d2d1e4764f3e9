import type { ApolloServerPlugin } from '@apollo/server';
import { ApolloArmor } from '@escape.tech/graphql-armor';
import {
  BREAK,
  GraphQLError,
  parse,
  visit,
  type DocumentNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import type { AppContext } from './context.js';

/**
 * The static limits of every GraphQL document, over HTTP and graphql-ws alike (docs/graphql.md). Over a
 * limit the request is a 400 with a GraphQL error saying which limit (a refused subscription over
 * graphql-ws: an `error` message), never a 500.
 */
export const GRAPHQL_LIMITS = {
  /** Lexical tokens of a document (graphql-js's own parser limit, checked while parsing). */
  maxTokens: 2000,
  /** Selection depth; fragments count as a level. */
  maxDepth: 10,
  /** Introspection (`__schema`) depth, fragments flattened: the standard introspection query is 15. */
  maxIntrospectionDepth: 15,
  maxAliases: 15,
  maxDirectives: 20,
  /** graphql-armor's static cost estimate (list sizes from `first`/`last`). */
  maxCost: 5000,
} as const;

/** Both error paths of Apollo (parse, validation) answer 400 for GraphQLErrors raised here. */
const badInput = (message: string) => new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });

/** Parses within the token limit; a document over it fails like any syntax error (a GraphQLError). */
export function parseLimited(source: string): DocumentNode {
  return parse(source, { maxTokens: GRAPHQL_LIMITS.maxTokens });
}

/** Whether a document asks for the schema (`__schema`, `__type`); `__typename` is ordinary data. */
export function isIntrospection(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Field(node) {
      if (node.name.value === '__schema' || node.name.value === '__type') {
        found = true;
        return BREAK;
      }
      return undefined;
    },
  });
  return found;
}

/**
 * graphql-armor leaves `__schema` out of its depth count (`ignoreIntrospection`, its default, which the
 * ordinary limit keeps: the standard introspection query is 21 levels deep counting fragments). This
 * rule counts it: documents that introspect obey {@link GRAPHQL_LIMITS.maxIntrospectionDepth} with
 * fragments flattened, enough for GraphiQL's and codegen's query and nothing deeper. graphql-js's own
 * `MaxIntrospectionDepthRule` (a standard rule) also refuses `fields { type { fields … } }` cycles.
 */
function introspectionDepthRule(): ValidationRule {
  const n = GRAPHQL_LIMITS.maxIntrospectionDepth;
  // graphql-armor's depth rule alone (its package does not export the rule itself).
  const [inner] = new ApolloArmor({
    blockFieldSuggestion: { enabled: false },
    maxTokens: { enabled: false },
    costLimit: { enabled: false },
    maxAliases: { enabled: false },
    maxDirectives: { enabled: false },
    maxDepth: {
      n,
      ignoreIntrospection: false,
      flattenFragments: true,
      propagateOnRejection: false,
      onReject: [
        (ctx, err) =>
          (ctx as ValidationContext | null)?.reportError(
            badInput(err.message.replace(/^Syntax Error: Query depth/, 'Introspection depth')),
          ),
      ],
    },
  }).protect().validationRules as ValidationRule[];
  return (context) => (isIntrospection(context.getDocument()) ? inner(context) : {});
}

/**
 * graphql-armor's limits as Apollo options and as validation rules (graphql-ws runs the same rules).
 * Its token-limit plugin is left off: it throws from `parsingDidStart`, which Apollo answers with a
 * 500; the parser's own `maxTokens` ({@link parseLimited}, Apollo's `parseOptions`) fails as a syntax
 * error, a 400.
 */
export function graphqlArmor(): {
  plugins: ApolloServerPlugin<AppContext>[];
  validationRules: ValidationRule[];
  allowBatchedHttpRequests: false;
  includeStacktraceInErrorResponses: false;
} {
  const armor = new ApolloArmor({
    maxDepth: { n: GRAPHQL_LIMITS.maxDepth },
    costLimit: { maxCost: GRAPHQL_LIMITS.maxCost },
    maxAliases: { n: GRAPHQL_LIMITS.maxAliases },
    maxDirectives: { n: GRAPHQL_LIMITS.maxDirectives },
    maxTokens: { enabled: false },
  }).protect() as any; // armor's types come from Apollo's CJS build; the runtime objects are the same
  return {
    ...armor,
    validationRules: [...armor.validationRules, introspectionDepthRule()],
  };
}

/**
 * Introspection needs a credential (an owner token or a paywall API key): the schema is public
 * (schema.graphql in the repository), but answering it is the largest response the API gives, so
 * anonymous callers do not get to ask for it. Unauthenticated: 401 `UNAUTHENTICATED`.
 */
export const introspectionNeedsCredential: ApolloServerPlugin<AppContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ document, contextValue }) {
        if (contextValue.auth || !isIntrospection(document)) return;
        throw new GraphQLError(
          'introspection needs an owner token or a paywall API key (Authorization: Bearer …); the schema is also published as schema.graphql',
          { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } },
        );
      },
    };
  },
};
