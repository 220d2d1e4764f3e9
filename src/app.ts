import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import { GraphQLError, Kind, specifiedRules, validate, type DocumentNode } from 'graphql';
import { WebSocketServer } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import { authenticate, Loaders, type AppContext } from './graphql/context.js';
import type { Auth } from './modules/paywalls/paywall-info.js';
import { formatGraphQLError, graphqlCode } from './graphql/errors.js';
import {
  GRAPHQL_LIMITS,
  graphqlArmor,
  introspectionNeedsCredential,
  costLimit,
  parseLimited,
} from './graphql/limits.js';
import {
  LiveConnections,
  rateLimited,
  TOO_MANY_CONNECTIONS,
  type WsExtra,
} from './graphql/live-connections.js';
import { getSchema } from './graphql/schema.js';
import { createServices, startServices, stopServices, type Services } from './services.js';
import { requestContext, type Logger } from './shared/logger.js';
import { createMetrics } from './shared/metrics.js';
import { observe } from './shared/observe.js';
import { DomainError, UNAVAILABLE_RETRY_AFTER_SECONDS, databaseUnavailable } from './shared/errors.js';
import { isDatabaseUnavailable } from './db/db-errors.js';
import { safeEqual, sha256Hex } from './shared/ids.js';
import { createRestRouter, userBaseUrl } from '../rest-compat/router.js';
import { meteredFastPath } from '../rest-compat/metered-fast-path.js';
import { answerParserError, sendError } from '../rest-compat/errors.js';
import { createPagesRouter } from './pages/pages.router.js';
import { createDashboardRouter } from './pages/dashboard.router.js';
import { createStripeWebhookRouter } from './modules/payments/stripe/stripe.router.js';
import { createClientIp } from './shared/client-ip.js';
import { closeAfterBody, limitConnectionsPerIp, UnauthenticatedSockets } from './shared/connection-limits.js';
import { requireApiKey } from '../rest-compat/http.js';
import { logInternalError, routeLabel, withoutPathUser } from './shared/route-label.js';

export interface AppDeps {
  config: Config;
  db: Database;
  log: Logger;
}

export interface App {
  server: Server;
  services: Services;
  /** Starts listeners and workers (call once, before listen). */
  start(): Promise<void>;
  /** Graceful stop: no new requests, in-flight ones (streams included) finish within the grace period. */
  stop(graceMs?: number): Promise<void>;
}

declare module 'express-serve-static-core' {
  interface Request {
    id: string;
    log: Logger;
  }
}

/** Builds the HTTP server: REST compatibility layer, GraphQL (HTTP + graphql-ws), pages, health, metrics. */
export async function createApp(deps: AppDeps): Promise<App> {
  const { config, db, log } = deps;
  const metrics = createMetrics();
  const services = createServices(config, db, log, metrics);
  const schema = await getSchema();
  const app = express();
  const server = createServer(
    {
      // A request's headers, and the whole request, must arrive in time (408 otherwise): a slow client
      // cannot hold a connection and its buffers for ever. Answers (streams) are not bounded by these.
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
      // How often Node checks them (its default, 30 s, would let a request run that much over).
      connectionsCheckingInterval: Math.min(1000, Math.ceil(config.HTTP_HEADERS_TIMEOUT_MS / 2)),
    },
    app,
  );
  server.on('clientError', answerParserError);
  const clientIp = createClientIp(config.TRUSTED_PROXIES);
  limitConnectionsPerIp(server, config.MAX_CONNECTIONS_PER_IP, config.TRUSTED_PROXIES);
  // The metered routes first, on plain node:http (rest-compat/metered-fast-path.ts); the rest is Express.
  const metered = meteredFastPath(services, log, metrics);
  // Express's own entry point (`app(req, res)` calls `app.handle`): the server's listener stays the app.
  const express5 = app as unknown as { handle: (req: any, res: any, next?: any) => void };
  const handle = express5.handle.bind(app);
  express5.handle = (req, res, next) => {
    req.url = userBaseUrl(req.url);
    if (!metered(req, res)) handle(req, res, next);
  };
  app.disable('x-powered-by');
  // The client's address comes from one helper (src/shared/client-ip.ts): X-Forwarded-For is believed
  // only from TRUSTED_PROXIES, and only a valid IP address counts. req.ip is that value everywhere.
  app.set('trust proxy', false);
  app.use((req: Request, _res: Response, next: NextFunction) => {
    Object.defineProperty(req, 'ip', { value: clientIp(req), configurable: true });
    next();
  });

  // Request id on every log line; metrics by route template and status (src/shared/observe.ts).
  app.use((req: Request, res: Response, next: NextFunction) => {
    const seen = observe(req, res, {
      log,
      metrics,
      route: () => routeLabel(req),
      url: () => withoutPathUser(req.originalUrl.split('?')[0]),
    });
    req.id = seen.id;
    req.log = seen.log();
    requestContext.run({ reqId: req.id }, next);
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const ok = await db.ping();
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'unavailable' });
  });
  app.get('/metrics', async (req, res) => {
    // Compared as digests in constant time: the token must not leak through response timing.
    const header = req.header('authorization');
    const given = sha256Hex(header ?? '');
    if (config.METRICS_TOKEN && !safeEqual(given, sha256Hex(`Bearer ${config.METRICS_TOKEN}`))) {
      // Missing or wrong, told apart with the codes of the API's other 401s.
      res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
      res.status(401).json({
        error: header
          ? {
              message: 'This bearer token is not the METRICS_TOKEN this service was started with.',
              type: 'authentication_error',
              param: null,
              code: 'invalid_api_key',
            }
          : {
              message: 'Metrics need the token METRICS_TOKEN sets: send `Authorization: Bearer <token>`.',
              type: 'authentication_error',
              param: null,
              code: 'missing_api_key',
            },
      });
      return;
    }
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  });

  const jsonBody = express.json({ limit: '1mb', type: ['application/json', 'application/*+json'] });
  const smallJsonBody = express.json({
    limit: UNAUTHENTICATED_GRAPHQL_BODY,
    type: ['application/json', 'application/*+json'],
  });

  // GraphQL over HTTP and graphql-ws: the same limits (src/graphql/limits.ts, docs/graphql.md).
  const armor = graphqlArmor();
  const live = new LiveConnections(config);
  const unauthenticated = new UnauthenticatedSockets(config.MAX_WS_UNAUTHENTICATED_PER_IP);
  const wsServer = new WebSocketServer({
    server,
    path: '/graphql',
    maxPayload: 64 * 1024,
    // Sockets still authenticating hold no connection slot (see onConnect), so they are bounded here:
    // at most MAX_WS_UNAUTHENTICATED_PER_IP per client address (a flood from one address cannot crowd
    // out everyone else's subscribers), at most MAX_WS_CONNECTIONS in all, each closed after
    // WS_CONNECTION_INIT_TIMEOUT_MS.
    verifyClient: (info, done) => {
      if (wsServer.clients.size - live.connections >= config.MAX_WS_CONNECTIONS)
        return done(false, 503, 'Too many connections waiting to authenticate; retry later');
      if (!unauthenticated.take(clientIp(info.req), info.req))
        return done(
          false,
          429,
          `Too many unauthenticated connections from this address (MAX_WS_UNAUTHENTICATED_PER_IP is ${config.MAX_WS_UNAUTHENTICATED_PER_IP}); authenticate or retry later`,
        );
      done(true);
    },
  });
  wsServer.on('connection', (socket, req) => unauthenticated.bind(socket, req));
  const wsCleanup = useServer<Record<string, unknown> | undefined, WsExtra>(
    {
      schema,
      connectionInitWaitTimeout: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      // Parsed and validated here rather than by graphql-ws, which lets a syntax error (or a document
      // over the token limit) escape as a 4500 close: here it is an `error` message for that operation.
      onSubscribe: (ctx, _id, payload) => {
        // ctx.subscriptions already holds this operation.
        if (Object.keys(ctx.subscriptions).length > config.MAX_SUBSCRIPTIONS_PER_CONNECTION)
          return [
            rateLimited(
              `too many subscriptions on this connection (MAX_SUBSCRIPTIONS_PER_CONNECTION is ${config.MAX_SUBSCRIPTIONS_PER_CONNECTION}); complete one first`,
              'too_many_subscriptions_per_connection',
            ),
          ];
        let document: DocumentNode;
        try {
          document = parseLimited(payload.query);
        } catch (err) {
          return [err instanceof GraphQLError ? err : new GraphQLError('the query could not be parsed')];
        }
        // The same depth/cost/alias limits as HTTP, and subscriptions only: queries and mutations go
        // through POST /graphql, where the HTTP-level protections (body limit, 401 mapping) apply.
        const errors = validate(schema, document, [...specifiedRules, ...armor.validationRules]);
        if (errors.length) return [...errors];
        const onlySubscriptions = document.definitions.every(
          (d) => d.kind !== Kind.OPERATION_DEFINITION || d.operation === 'subscription',
        );
        if (!onlySubscriptions)
          return [
            new GraphQLError(
              'graphql-ws carries subscriptions only; send queries and mutations with POST /graphql',
            ),
          ];
        return {
          schema,
          document,
          operationName: payload.operationName,
          variableValues: payload.variables,
        };
      },
      onConnect: async (ctx) => {
        // Full: refused before the credential costs a database lookup (checked again after it).
        if (live.connections >= config.MAX_WS_CONNECTIONS) {
          ctx.extra.socket.close(4403, TOO_MANY_CONNECTIONS);
          return false;
        }
        const header = (ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization) as
          string | undefined;
        const auth = await authenticate(services, typeof header === 'string' ? header : undefined);
        if (!auth) return false;
        const refused = live.open(ctx.extra, auth);
        if (refused) {
          // graphql-ws closes with 4403 "Forbidden" on `false`; the reason says which limit it was.
          ctx.extra.socket.close(4403, refused);
          return false;
        }
        // Authenticated: no longer counts against its address's unauthenticated budget.
        unauthenticated.release(ctx.extra.socket);
        return true;
      },
      onClose: (ctx) => live.close(ctx.extra),
      context: (ctx): AppContext => ({
        requestId: randomUUID(),
        auth: ctx.extra.auth ?? null,
        transport: 'graphql',
        services,
        loaders: new Loaders(),
        log,
      }),
    },
    wsServer,
  );
  const unauthenticatedTo401: ApolloServerPlugin<AppContext> = {
    async requestDidStart() {
      return {
        async willSendResponse({ response, errors }) {
          if (
            errors?.some((e) => (e.originalError as any)?.code === 'unauthenticated') &&
            response.body.kind === 'single'
          ) {
            if (
              !response.body.singleResult.data ||
              Object.values(response.body.singleResult.data).every((v) => v == null)
            )
              response.http.status = 401;
          }
          // A database outage that left nothing to answer: 503 with Retry-After, as REST answers it.
          if (
            errors?.some((e) => isDatabaseUnavailable(e.originalError)) &&
            response.body.kind === 'single' &&
            (!response.body.singleResult.data ||
              Object.values(response.body.singleResult.data).every((v) => v == null))
          ) {
            response.http.status = 503;
            response.http.headers.set('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
          }
        },
        async didEncounterErrors({ errors, contextValue, operationName }) {
          // Every error the client sees as INTERNAL_SERVER_ERROR is logged with its stack, the request id
          // (the context's logger), the operation and the field path.
          for (const e of errors) {
            const original = e.originalError;
            if (!original || original.constructor?.name === 'GraphQLError') continue;
            if (original instanceof DomainError && original.code !== 'internal') continue;
            contextValue.log.error(
              {
                err: (original as any).cause ?? original,
                route: '/graphql',
                operationName: operationName ?? null,
                path: e.path?.join('.') ?? null,
              },
              'graphql resolver failed',
            );
          }
        },
      };
    },
  };
  // A query may read seconds-old data on the replica; a mutation, and everything its answer reads, reads
  // the primary (docs/operations.md "Read replica"). One operation per request: batching is off.
  const queriesTolerateLag: ApolloServerPlugin<AppContext> = {
    async requestDidStart() {
      return {
        async didResolveOperation({ operation }) {
          if (operation?.operation === 'query') services.reads.tolerateLag();
        },
      };
    },
  };
  const apollo = new ApolloServer<AppContext>({
    schema,
    ...armor,
    plugins: [
      ...armor.plugins,
      introspectionNeedsCredential,
      costLimit,
      unauthenticatedTo401,
      queriesTolerateLag,
    ],
    validationRules: armor.validationRules,
    parseOptions: { maxTokens: GRAPHQL_LIMITS.maxTokens },
    formatError: formatGraphQLError,
    // With a credential only (introspectionNeedsCredential) and within the introspection depth limit.
    introspection: true,
    // main.ts owns SIGTERM (drain, settle, close the database, exit 0); Apollo's own handler would
    // stop the server under it and leave the shutdown hanging.
    stopOnTerminationSignals: false,
  });
  await apollo.start();
  const graphqlHttp = expressMiddleware(apollo, {
    context: async ({ req, res }) => ({
      requestId: req.id,
      auth: await authenticatedBeforeBody(res.locals.auth, () =>
        authenticate(services, req.header('authorization')),
      ).catch(unavailableTo503),
      transport: 'graphql' as const,
      services,
      loaders: new Loaders(),
      log: req.log,
    }),
  });
  app.use(
    '/graphql',
    // The credential is checked before the body is read: without a valid one nothing can be done but
    // be refused, so at most UNAUTHENTICATED_GRAPHQL_BODY of the body is read (413 beyond it).
    async (req: Request, res: Response, next: NextFunction) => {
      const auth = await authenticate(services, req.header('authorization')).then(
        (a) => ({ a }),
        (err: unknown) => ({ err }),
      );
      res.locals.auth = auth;
      ('a' in auth && auth.a ? jsonBody : smallJsonBody)(req, res, next);
    },
    // Each request is one unit of reads: queriesTolerateLag marks it once Apollo knows the operation.
    (req: Request, res: Response, next: NextFunction) =>
      services.reads.unit(() => graphqlHttp(req, res, next)),
  );

  // Before the JSON parser: Stripe's signature covers the raw bytes.
  app.use(createStripeWebhookRouter(services.stripeEvents));
  // The API key is checked before the body is read: an unauthenticated client gets its 401 without the
  // service buffering (up to 1 MiB of) its body. The router checks it again (a cache hit).
  const keyBeforeBody = requireApiKey(services);
  app.use(
    '/v1',
    (req: Request, res: Response, next: NextFunction) => {
      // Refused (or failed) with the body unread: the connection closes after the answer.
      res.setHeader('Connection', 'close');
      keyBeforeBody(req, res, (err?: unknown) => {
        if (err === undefined) res.removeHeader('Connection');
        // Refused: the rest of the body is read and dropped before the connection closes. Set up before
        // the answer is written: once it is, Node ends the socket at once and a client still sending its
        // body (a multipart upload, written in several parts) gets a reset instead of the 401.
        if (err !== undefined) closeAfterBody(req);
        next(err);
      });
    },
    jsonBody,
    createRestRouter(services),
  );
  app.use(createPagesRouter(services));
  app.use(createDashboardRouter());

  // Body parser and any other failure: OpenAI error shape, never a stack trace.
  app.use((err: any, req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) {
      // A failure after the answer started (a stream): the client sees the connection end; the log says why.
      if (!(err instanceof DomainError) || err.code === 'internal')
        logInternalError(req, err, 'failed after the response started');
      res.end();
      return;
    }
    if (err?.type === 'entity.too.large') {
      const limit =
        err.limit === 1024 * 1024
          ? '1 MiB'
          : `${Math.round(err.limit / 1024)} KiB without a valid credential`;
      return sendError(
        res,
        new DomainError('request_too_large', `request body exceeds ${limit}`, null, 'request_too_large'),
      );
    }
    if (err?.type === 'entity.parse.failed') {
      // The strict parser refuses JSON that is not an object or array ("x", null, 1) too: that is valid
      // JSON, and the answer says what is wrong with it.
      return sendError(
        res,
        isJson(err.body)
          ? new DomainError('invalid_request', 'request body must be a JSON object', null)
          : new DomainError('invalid_request', 'request body is not valid JSON', null, 'invalid_json'),
      );
    }
    if (err?.expose === true && err.status >= 400 && err.status < 500) {
      // Other body-parser refusals (an unsupported charset or content encoding, a body cut short): the
      // client's fault, a 400 that says what, never a 500.
      const code =
        err.type === 'charset.unsupported'
          ? 'unsupported_charset'
          : err.type === 'encoding.unsupported'
            ? 'unsupported_encoding'
            : 'invalid_body';
      return sendError(
        res,
        new DomainError('invalid_request', `request body refused: ${err.message}`, null, code),
      );
    }
    if (err instanceof URIError && (err as any).status === 400) {
      // The router could not decode a path parameter (`/v1/u/%ed%a0%80/…`, `%ff`): the client's fault.
      return sendError(
        res,
        new DomainError(
          'invalid_request',
          'a path parameter is not valid percent-encoded UTF-8',
          null,
          'invalid_path',
        ),
      );
    }
    if (err instanceof DomainError && err.code !== 'internal') return sendError(res, err);
    if (isDatabaseUnavailable(err)) {
      req.log.warn({ err }, 'database unavailable');
      return sendError(res, databaseUnavailable(err));
    }
    logInternalError(req, err, 'unhandled error');
    sendError(res, new DomainError('internal', 'Internal server error'));
  });

  let stopping = false;
  return {
    server,
    services,
    async start() {
      await startServices(services);
    },
    async stop(graceMs = config.SHUTDOWN_GRACE_MS) {
      if (stopping) return;
      stopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // server.close() closes only the connections idle at that moment: one whose request was still
      // running stays open after its answer (keep-alive) until the client or the keep-alive timeout ends
      // it, which held the process up to the whole grace period after its last request. Close each
      // connection as soon as it falls idle, so stop() returns once the in-flight requests are done.
      const idleSweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
      idleSweep.unref();
      // Live subscribers are told to go now (1001 "Going away"; they reconnect to another instance): an
      // upgraded socket is not an HTTP connection, so closeAllConnections never cuts it, and one left open
      // would hold server.close() open for ever.
      const wsClosed = Promise.resolve(wsCleanup.dispose()).catch(() => undefined);
      // After the grace period, cut what is still open (streams have been settled by then or are aborted now).
      // Proxied requests still running are cut first, so a stream ends with the shutdown's error event
      // and is settled for what it produced before its connection goes.
      // The cut waits at most CUT_SETTLE_MS for those settlements: connections are closed in any case, so
      // a settlement that cannot finish (the database gone) never holds the process open.
      const timer = setTimeout(() => {
        const settled = services.proxy.cutInFlight().catch(() => undefined);
        void Promise.race([settled, new Promise((r) => setTimeout(r, CUT_SETTLE_MS).unref())]).finally(() => {
          server.closeAllConnections();
          for (const socket of wsServer.clients) socket.terminate();
        });
      }, graceMs);
      await Promise.all([closed, wsClosed]);
      clearTimeout(timer);
      clearInterval(idleSweep);
      await apollo.stop().catch(() => undefined);
      await stopServices(services);
    },
  };
}

/** While stopping, how often connections that fell idle (keep-alive) after their last answer are closed. */
const IDLE_SWEEP_MS = 100;

/** After the grace period, how long cut streams may take to settle before their connections are closed. */
const CUT_SETTLE_MS = 3000;

/** The body limit of a POST /graphql without a valid credential (it can only be refused). */
const UNAUTHENTICATED_GRAPHQL_BODY = 64 * 1024;

/** The credential checked before the body was read (a failure then, e.g. an outage, is thrown now). */
async function authenticatedBeforeBody(
  before: { a: Auth | null } | { err: unknown } | undefined,
  again: () => Promise<Auth | null>,
): Promise<Auth | null> {
  if (!before) return again();
  if ('err' in before) throw before.err;
  return before.a;
}

/**
 * A failure while building the GraphQL context (authentication reads the database) is answered by Apollo
 * itself: a database outage there becomes a 503 with the same extensions as one inside a resolver.
 */
function unavailableTo503(err: unknown): never {
  if (!isDatabaseUnavailable(err)) throw err;
  const e = databaseUnavailable(err);
  throw new GraphQLError(e.message, {
    extensions: {
      code: graphqlCode(e.code),
      errorCode: e.publicCode,
      param: null,
      http: { status: 503, headers: new Map([['retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS)]]) },
    },
  });
}

/** Whether a body the JSON parser refused is JSON all the same (a string, a number, true/false, null). */
function isJson(body: unknown): boolean {
  if (typeof body !== 'string') return false;
  try {
    JSON.parse(body);
    return true;
  } catch {
    return false;
  }
}
