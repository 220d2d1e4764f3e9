import { GraphQLError } from 'graphql';
import { Arg, ID, Resolver, Root, Subscription } from 'type-graphql';
import { requireAuth, type AppContext } from '../../graphql/context.js';
import { graphqlExtensions } from '../../graphql/errors.js';
import { DomainError } from '../../shared/errors.js';
import { subscribeToEvents, type LiveEvent, type LiveEventsArgs } from './live-event-hub.js';
import { PaywallEventType } from './live-events.types.js';

/**
 * graphql-ws sends subscription errors without Apollo's formatError, so domain errors are given their
 * `extensions.code` here (graphql-js copies `extensions` from the original error).
 */
function graphqlError(err: unknown): unknown {
  if (!(err instanceof DomainError)) return err;
  return new GraphQLError(err.message, {
    originalError: err,
    extensions: graphqlExtensions(err),
  });
}

/**
 * The hub's iterator with domain errors converted. Not an async generator on purpose: a generator that is
 * awaiting the next event cannot be `return()`ed until one arrives, so an unsubscribe would hang there.
 */
function withGraphQLErrors(events: AsyncIterableIterator<LiveEvent>): AsyncIterableIterator<LiveEvent> {
  const iterator: AsyncIterableIterator<LiveEvent> = {
    next: () => events.next().catch((err) => Promise.reject(graphqlError(err))),
    return: () => events.return?.() ?? Promise.resolve({ value: undefined, done: true }),
    throw: (err) => events.throw?.(err) ?? Promise.reject(err),
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

/** `paywallEvents` subscription over graphql-ws, fed by LISTEN/NOTIFY (docs/reference.md §3). */
@Resolver()
export class LiveEventsResolver {
  @Subscription(() => PaywallEventType, {
    description:
      'Live events: an API key gets its paywall’s, an owner token all of its paywalls’ (or one, with paywallId). ' +
      '`types` takes the webhook patterns (exact names, `prefix.*`, `*`); none means all.',
    subscribe: async ({ args, context }) => {
      const ctx = context as AppContext;
      try {
        return withGraphQLErrors(
          await subscribeToEvents(ctx.services, requireAuth(ctx), args as LiveEventsArgs),
        );
      } catch (err) {
        throw graphqlError(err);
      }
    },
  })
  paywallEvents(
    @Root() event: LiveEvent,
    @Arg('types', () => [String], { nullable: true }) _types?: string[],
    @Arg('paywallId', () => ID, { nullable: true }) _paywallId?: string,
  ): PaywallEventType {
    return PaywallEventType.from(event);
  }
}
