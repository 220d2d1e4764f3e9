import DataLoader from 'dataloader';
import { Field, ID, ObjectType } from 'type-graphql';
import type { AppContext } from '../../graphql/context.js';
import { MoneyScalar } from '../../graphql/scalars.js';
import { Connection } from '../../graphql/connection.js';
import { formatUsdc } from '../../shared/money.js';
import type { PaywallInfo } from '../paywalls/paywall-info.js';
import { isConnected, type EndUserRow } from './user.service.js';

/** Per-request loader of end users by id: one query for every user a response mentions. */
export const userLoader = (ctx: AppContext): DataLoader<string, EndUserRow | null> =>
  ctx.loaders.get(
    'endUserById',
    () => new DataLoader((ids: readonly string[]) => ctx.services.users.byIds(ids)),
  );

@ObjectType('EndUser', { description: 'An end user of one paywall, created on first sight.' })
export class EndUserType {
  @Field(() => ID) id!: string;
  @Field({ description: 'The identifier the app uses (`user` / X-Paywall-User).' }) externalId!: string;
  @Field({ description: 'Free balance (holds excluded) in raw units of 10⁻⁶ USDC, e.g. "1500000".' })
  balance!: string;
  @Field({ description: 'Free balance as a decimal with 6 fraction digits, e.g. "1.500000".' })
  balanceFormatted!: string;
  @Field(() => MoneyScalar, { description: 'Reserved by chat requests in progress.' }) held!: bigint;
  @Field({ description: 'Held amount in raw units.' }) heldRaw!: string;
  @Field({ description: 'DEFAULT mode: always true. SHARED: the user authorized this paywall.' })
  connected!: boolean;
  @Field(() => String, { nullable: true, description: 'SHARED mode: when the user connected.' })
  connectedAt!: string | null;
  @Field() createdAt!: string;

  static from(u: EndUserRow, paywall: PaywallInfo): EndUserType {
    const free = u.balanceRaw - u.heldRaw;
    return Object.assign(new EndUserType(), {
      id: u.id,
      externalId: u.externalId,
      balance: free.toString(),
      balanceFormatted: formatUsdc(free),
      held: u.heldRaw,
      heldRaw: u.heldRaw.toString(),
      connected: isConnected(paywall, u),
      connectedAt: u.connectedAt ? u.connectedAt.toISOString() : null,
      createdAt: u.createdAt.toISOString(),
    });
  }
}

export const EndUserConnection = Connection(EndUserType, {
  connection: 'EndUserConnection',
  edge: 'EndUserEdge',
});
export type EndUserConnection = InstanceType<typeof EndUserConnection>;

@ObjectType({ description: 'A user connected to the paywall (spec: "Connected user").' })
export class ConnectedUser {
  @Field({ description: 'The paywall the connection belongs to.' }) paywallKeyId!: string;
  @Field({ description: 'DEFAULT: the end user id. SHARED: the wallet user id.' }) userId!: string;
  @Field() externalUserId!: string;
  @Field() createdAt!: string;
}

@ObjectType()
export class ConnectResult {
  @Field() connected!: boolean;
  @Field(() => ConnectedUser, { nullable: true }) connectedUser!: ConnectedUser | null;
  @Field() message!: string;
  @Field(() => String, { nullable: true, description: 'Where to send an unconnected user to authorize.' })
  url!: string | null;
}

@ObjectType()
export class DisconnectResult {
  @Field({ description: 'True when the user is not connected afterwards (SHARED mode).' }) success!: boolean;
  @Field() message!: string;
}

@ObjectType()
export class TopUpLink {
  @Field() url!: string;
}
