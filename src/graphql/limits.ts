import type { ApolloServerPlugin } from '@apollo/server';
import { ApolloArmor } from '@escape.tech/graphql-armor';
import {
  BREAK,
  GraphQLError,
  Kind,
  getArgumentValues,
  getNamedType,
  getNullableType,
  getVariableValues,
  isInterfaceType,
  isListType,
  isObjectType,
  parse,
  visit,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import { MAX_USAGE_DAYS } from '../modules/usage/usage.service.js';
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
    // The cost limit is the fan-out cost below (costLimit, QUERY_COST), which knows this schema's lists;
    // armor's generic estimate (×1.5 per level) refused a full page of ledger entries with every field.
    costLimit: { enabled: false },
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

/**
 * The fan-out cost of an operation (docs/graphql.md, "Fan-out cost"): what it may make the service read,
 * counted before anything runs. Every field costs 1; the fields selected under a list cost once per item
 * the list may hold — its `first` (or `first`'s default), for a connection counted once at the
 * connection; a list without `first` counts {@link DEFAULT_LIST_SIZE} items;
 * `Paywall.usage` costs one per day of its range, and its `buckets` count one item per day (`DAY`) or
 * `limit` (`MODEL`, `USER`).
 */
export const QUERY_COST = {
  max: 10_000,
} as const;

/**
 * Lists that are a value of the row their parent was read from, at most a few entries and no resolver
 * work (a model's prices per image: at most 50): counted as one item.
 */
const VALUE_LISTS: ReadonlySet<string> = new Set(['ModelPricing.image']);

/** Items counted for a list without a `first` argument (and for `first` left unset without a default). */
const DEFAULT_LIST_SIZE = 100;

const usageDays = (args: Record<string, unknown>): number => {
  const day = (v: unknown) =>
    typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) ? Date.parse(`${v}T00:00:00Z`) / 86_400_000 : NaN;
  const n = day(args.to) - day(args.from) + 1;
  // A range the service refuses (reversed, too long, not a date) costs the most a valid one can.
  return Number.isFinite(n) && n >= 1 && n <= MAX_USAGE_DAYS ? n : MAX_USAGE_DAYS;
};

/** The cost of one operation of a document with the request's variables (see {@link QUERY_COST}). */
export function queryCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  rawVariables: Record<string, unknown> | undefined,
): number {
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], rawVariables ?? {});
  // Bad variables are reported by execution itself; count with none (defaults and the maximums).
  const variables = coerced.coerced ?? {};
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions)
    if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const root =
    operation.operation === 'query'
      ? schema.getQueryType()
      : operation.operation === 'mutation'
        ? schema.getMutationType()
        : schema.getSubscriptionType();
  if (!root) return 0;

  const seen = new Set<string>();
  const selectionCost = (set: SelectionSetNode, parent: GraphQLNamedType, buckets: number): number => {
    let sum = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.INLINE_FRAGMENT) {
        const type = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parent;
        if (type) sum += selectionCost(sel.selectionSet, type, buckets);
      } else if (sel.kind === Kind.FRAGMENT_SPREAD) {
        const f = fragments.get(sel.name.value);
        const type = f && schema.getType(f.typeCondition.name.value);
        if (!f || !type || seen.has(f.name.value)) continue; // cycles: refused by validation already
        seen.add(f.name.value);
        sum += selectionCost(f.selectionSet, type, buckets);
        seen.delete(f.name.value);
      } else {
        const name = sel.name.value;
        if (name.startsWith('__')) continue;
        if (!isObjectType(parent) && !isInterfaceType(parent)) continue;
        const def = parent.getFields()[name] as GraphQLField<unknown, unknown> | undefined;
        if (!def) continue;
        let args: Record<string, unknown> = {};
        try {
          args = getArgumentValues(def, sel, variables);
        } catch {
          /* an invalid argument fails at execution; count the defaults */
        }
        const key = `${parent.name}.${name}`;
        let own = 1;
        let innerBuckets = buckets;
        if (key === 'Paywall.usage') {
          own = usageDays(args);
          const limit = typeof args.limit === 'number' && args.limit >= 1 ? Math.min(args.limit, 1000) : 1000;
          innerBuckets = args.groupBy === 'DAY' ? own : limit;
        }
        if (!sel.selectionSet) {
          sum += own;
          continue;
        }
        const isList = isListType(getNullableType(def.type));
        const first = typeof args.first === 'number' && args.first > 0 ? args.first : undefined;
        const hasFirst = def.args.some((a) => a.name === 'first');
        let items = 1;
        if (hasFirst) items = first ?? DEFAULT_LIST_SIZE;
        else if (isList) {
          const isPage = isObjectType(parent) && 'pageInfo' in parent.getFields();
          items = key === 'Usage.buckets' ? buckets : isPage || VALUE_LISTS.has(key) ? 1 : DEFAULT_LIST_SIZE;
        }
        sum += own + items * selectionCost(sel.selectionSet, getNamedType(def.type), innerBuckets);
      }
    }
    return sum;
  };
  return selectionCost(operation.selectionSet, root, 1);
}

/**
 * Refuses an operation over {@link QUERY_COST} before it runs (after validation, with the request's
 * variables): 400, `extensions.code` `COST_LIMIT_EXCEEDED`, with `cost` and `maxCost`.
 */
export const costLimit: ApolloServerPlugin<AppContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ schema, document, operation, request }) {
        if (!operation) return;
        const cost = queryCost(schema, document, operation, request.variables);
        if (cost <= QUERY_COST.max) return;
        throw new GraphQLError(
          `Query cost ${cost} exceeds the limit of ${QUERY_COST.max}: fields under a list count once per item it may hold (its \`first\`; \`paywalls\` 50 by default) and \`usage\` once per day of its range. Ask for fewer items, fewer fields or a shorter range.`,
          {
            extensions: {
              code: 'COST_LIMIT_EXCEEDED',
              cost,
              maxCost: QUERY_COST.max,
              http: { status: 400 },
            },
          },
        );
      },
    };
  },
};
