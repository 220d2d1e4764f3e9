import { Client, fetchExchange, stringifyDocument, subscriptionExchange, type TypedDocumentNode } from 'urql';
import { cacheExchange } from '@urql/exchange-graphcache';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';

/** The token lives in this tab only (docs/reference.md §12): sessionStorage, never localStorage or a cookie. */
const TOKEN_KEY = 'paywall-proxy.token';
export const getToken = (): string | null => sessionStorage.getItem(TOKEN_KEY);
export const setToken = (t: string | null): void => {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
};

const wsUrl = () => `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;

/**
 * One urql client per signed-in token: HTTP for queries and mutations, graphql-ws for the live feed,
 * and a normalised cache (graphcache). Types without an id are embedded in their parent; a model's id is
 * only unique within its paywall, so models are embedded too.
 */
export function createApiClient(token: string): { client: Client; ws: WsClient } {
  const ws = createWsClient({
    url: wsUrl(),
    connectionParams: { authorization: `Bearer ${token}` },
    lazy: true,
    retryAttempts: 20,
    shouldRetry: () => true,
  });
  const embedded = () => null;
  const client = new Client({
    url: '/graphql',
    requestPolicy: 'cache-and-network',
    // POST always: Apollo's CSRF prevention refuses simple GET requests.
    preferGetMethod: false,
    fetchOptions: () => ({ headers: { authorization: `Bearer ${token}` } }),
    exchanges: [
      cacheExchange({
        keys: {
          Model: embedded,
          ModelPricing: embedded,
          ProviderInfo: embedded,
          StripeIntegration: embedded,
          Earnings: embedded,
          Usage: embedded,
          UsageBucket: embedded,
          PageInfo: embedded,
          WebhookDeliveryPageInfo: embedded,
          EndUserConnection: embedded,
          EndUserEdge: embedded,
          LedgerEntryConnection: embedded,
          LedgerEntryEdge: embedded,
          ChargeConnection: embedded,
          ChargeEdge: embedded,
          WebhookDeliveryConnection: embedded,
          WebhookDeliveryEdge: embedded,
          WithdrawalConnection: embedded,
          WithdrawalEdge: embedded,
          EarningsEntryConnection: embedded,
          EarningsEntryEdge: embedded,
          WalletConnectionList: embedded,
          WalletConnectionEdge: embedded,
          CreatePaywallPayload: embedded,
          DepositPayload: embedded,
          ChargePayload: embedded,
          ConnectedUser: embedded,
        },
      }),
      subscriptionExchange({
        forwardSubscription: (request) => ({
          subscribe: (sink) => ({
            unsubscribe: ws.subscribe({ ...request, query: request.query ?? '' }, sink),
          }),
        }),
      }),
      fetchExchange,
    ],
  });
  return { client, ws };
}

/** Runs one operation outside React (sign-in): the API's error message, or the data. */
export async function probe<T>(
  token: string,
  document: TypedDocumentNode<T, Record<string, never>>,
): Promise<{ data?: T; error?: string; status: number }> {
  const query = stringifyDocument(document);
  try {
    const res = await fetch('/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query }),
    });
    const body = await res.json().catch(() => ({}));
    if (body.errors?.length) return { error: body.errors[0].message, status: res.status, data: body.data };
    return { data: body.data, status: res.status };
  } catch (e) {
    return { error: (e as Error).message, status: 0 };
  }
}

/** The message of a urql error: the API's own words, without urql's "[GraphQL]" prefix. */
export function errorMessage(
  error: { graphQLErrors?: { message: string }[]; networkError?: Error; message: string } | undefined | null,
): string | null {
  if (!error) return null;
  if (error.graphQLErrors?.length) return error.graphQLErrors.map((e) => e.message).join('; ');
  if (error.networkError) return `Network error: ${error.networkError.message}`;
  return error.message;
}
