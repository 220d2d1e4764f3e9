import type { WebSocket } from 'ws';
import { ERROR_KINDS, type CodeOf } from '../shared/error-codes.js';
import { GraphQLError } from 'graphql';
import type { Config } from '../config.js';
import type { Auth } from '../modules/paywalls/paywall-info.js';

/** What this service keeps on a graphql-ws connection (graphql-ws's `ctx.extra`, beside socket and request). */
export type WsExtra = {
  /** Set once the connection has authenticated and holds a slot. */
  auth?: Auth;
  tenant?: string;
};

/**
 * Who shares the per-tenant limits: a paywall (its API key) or an owner account (its token, over all of
 * its paywalls). One tenant at its limits does not touch anyone else's.
 */
export function tenantOf(auth: Auth): string {
  return auth.kind === 'apiKey' ? `paywall:${auth.paywall.id}` : `owner:${auth.ownerId}`;
}

/** The tenant's name in a refusal, as the caller knows it. */
export const tenantWord = (tenant: string): string =>
  tenant.startsWith('paywall:') ? 'this paywall' : 'this owner account';

/** The close reason (with code 4403) of a connection over MAX_WS_CONNECTIONS. */
export const TOO_MANY_CONNECTIONS = 'Too many connections on this server; retry later';

/** `RATE_LIMITED` as graphql-ws sends it (its errors bypass Apollo's formatError). */
export function rateLimited(message: string, errorCode: CodeOf<'rate_limited'>): GraphQLError {
  return new GraphQLError(message, { extensions: { code: ERROR_KINDS.rate_limited.graphql, errorCode } });
}

/**
 * The authenticated graphql-ws connections of this instance: MAX_WS_CONNECTIONS in all and
 * MAX_WS_CONNECTIONS_PER_TENANT per tenant. Only connections that have authenticated hold a slot, so
 * sockets that never send `connection_init` (closed after WS_CONNECTION_INIT_TIMEOUT_MS) cannot crowd
 * out real clients.
 */
export class LiveConnections {
  private count = 0;
  private readonly byTenant = new Map<string, number>();

  constructor(
    private readonly config: Pick<Config, 'MAX_WS_CONNECTIONS' | 'MAX_WS_CONNECTIONS_PER_TENANT'>,
  ) {}

  /** Authenticated connections right now. */
  get connections(): number {
    return this.count;
  }

  /**
   * Takes a slot for a connection that has just authenticated; returns why not when a limit is reached
   * (or the socket closed while its credential was being checked). Synchronous: no race between check
   * and count.
   */
  open(extra: WsExtra & { socket: WebSocket }, auth: Auth): string | null {
    if (extra.socket.readyState !== extra.socket.OPEN) return 'Connection closed';
    if (this.count >= this.config.MAX_WS_CONNECTIONS) return TOO_MANY_CONNECTIONS;
    const tenant = tenantOf(auth);
    const mine = this.byTenant.get(tenant) ?? 0;
    if (mine >= this.config.MAX_WS_CONNECTIONS_PER_TENANT)
      return `Too many connections for ${tenantWord(tenant)} (MAX_WS_CONNECTIONS_PER_TENANT is ${this.config.MAX_WS_CONNECTIONS_PER_TENANT})`;
    this.count++;
    this.byTenant.set(tenant, mine + 1);
    extra.auth = auth;
    extra.tenant = tenant;
    return null;
  }

  /** The socket closed: free its slot (if it held one). */
  close(extra: WsExtra): void {
    const tenant = extra.tenant;
    if (tenant === undefined) return;
    extra.tenant = undefined;
    this.count--;
    const left = (this.byTenant.get(tenant) ?? 1) - 1;
    if (left > 0) this.byTenant.set(tenant, left);
    else this.byTenant.delete(tenant);
  }
}
