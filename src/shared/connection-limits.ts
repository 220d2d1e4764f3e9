import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { createTrustedProxyCheck, normalizeIp } from './client-ip.js';

/*
 * Bounds on what one client address may hold open before it has authenticated anything: TCP
 * connections, and graphql-ws sockets that have not sent their credential yet.
 */

/**
 * At most `max` open TCP connections per client address (the TCP peer: X-Forwarded-For is not known
 * before a request is parsed; TRUSTED_PROXIES are exempt, their clients are many). A connection beyond
 * it is answered 429 and closed before any HTTP parsing, so it holds no parser, buffer or timer.
 */
export function limitConnectionsPerIp(server: Server, max: number, trustedProxies: readonly string[]): void {
  const isTrusted = createTrustedProxyCheck(trustedProxies);
  const open = new Map<string, number>();
  const handlers = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const ip = normalizeIp(socket.remoteAddress) ?? 'unknown';
    if (!isTrusted(ip)) {
      const n = (open.get(ip) ?? 0) + 1;
      if (n > max) {
        refuseConnection(socket, max);
        return;
      }
      open.set(ip, n);
      socket.once('close', () => {
        const left = (open.get(ip) ?? 1) - 1;
        if (left > 0) open.set(ip, left);
        else open.delete(ip);
      });
    }
    for (const h of handlers) h.call(server, socket);
  });
}

function refuseConnection(socket: Socket, max: number): void {
  const body = JSON.stringify({
    error: {
      message: `Too many open connections from this address (MAX_CONNECTIONS_PER_IP is ${max}); close some or retry later.`,
      type: 'rate_limit_error',
      param: null,
      code: 'too_many_connections',
    },
  });
  socket.on('error', () => undefined);
  socket.setTimeout(5000, () => socket.destroy());
  socket.end(
    `HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Retry-After: 1\r\nConnection: close\r\n\r\n${body}`,
  );
  // Whatever the client sends is read and dropped (not buffered) until it has the answer and closes.
  socket.resume();
}

/** How long a refused request's connection may stay open for the rest of its body (see closeAfterBody). */
export const REFUSED_BODY_LINGER_MS = 5000;

/**
 * Closes the connection of a request answered before its body was read (a 401 for a bad key) the way
 * nginx's lingering close does: the answer is written and the write side shut, then what the client is
 * still sending is read and dropped, never buffered, until the body has arrived, the client stops
 * sending or `lingerMs` pass, and only then is the socket closed. Closed at once, the body still coming
 * would meet a reset, the client's next write would fail, and a client that had not read the answer yet
 * would lose it: 107 of 1,200 unauthenticated 1 MiB uploads saw their connection cut on a loaded machine.
 */
export function closeAfterBody(req: IncomingMessage, lingerMs = REFUSED_BODY_LINGER_MS): void {
  const socket = req.socket;
  // Node's server ends a `Connection: close` answer's socket with destroySoon once the answer is handed
  // over; this socket's is replaced so the close also waits for the body.
  socket.destroySoon = () => {
    if (socket.writable) socket.end();
    let written = socket.writableFinished;
    let received = req.complete || socket.readableEnded;
    const timer = setTimeout(() => socket.destroy(), lingerMs).unref();
    const closeWhenDone = () => {
      if (!written || !received) return;
      clearTimeout(timer);
      socket.destroy();
    };
    socket.once('close', () => clearTimeout(timer));
    socket.once('finish', () => ((written = true), closeWhenDone()));
    req.once('end', () => ((received = true), closeWhenDone()));
    socket.once('end', () => ((received = true), closeWhenDone()));
    closeWhenDone();
  };
  req.resume();
}

/**
 * graphql-ws sockets that have not authenticated yet, counted per client address. A slot is taken when
 * the upgrade is accepted and given back when the socket authenticates or closes (whichever is first).
 */
export class UnauthenticatedSockets {
  private readonly byIp = new Map<string, number>();
  private readonly pending = new WeakMap<object, () => void>();

  constructor(private readonly max: number) {}

  /** Takes a slot for `ip` for the upgrade request `req`; false when the address has none left. */
  take(ip: string, req: { socket: Socket }): boolean {
    const n = this.byIp.get(ip) ?? 0;
    if (n >= this.max) return false;
    this.byIp.set(ip, n + 1);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      const left = (this.byIp.get(ip) ?? 1) - 1;
      if (left > 0) this.byIp.set(ip, left);
      else this.byIp.delete(ip);
    };
    this.pending.set(req, release);
    // Also when the upgrade never completes, or the WebSocket closes before authenticating.
    req.socket.once('close', release);
    return true;
  }

  /** The upgrade completed: the WebSocket carries the slot from here. */
  bind(socket: object, req: object): void {
    const release = this.pending.get(req);
    if (release) this.pending.set(socket, release);
  }

  /** The socket authenticated: its slot is free. */
  release(socket: object): void {
    this.pending.get(socket)?.();
  }
}
