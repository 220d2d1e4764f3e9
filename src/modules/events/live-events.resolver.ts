import { Resolver } from 'type-graphql';

/** `paywallEvents` subscription over graphql-ws, fed by LISTEN/NOTIFY. */
@Resolver()
export class LiveEventsResolver {}
