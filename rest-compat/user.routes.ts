import { Router, type Request, type Response } from 'express';
import type { AppContext } from '../src/graphql/context.js';
import type { Services } from '../src/services.js';
import { Operation } from './graphql-bridge.js';
import { triggerOf } from '../src/modules/users/user.service.js';
import { jsonObject, restContext, route, userOf } from './http.js';

const DEPOSIT = new Operation(`mutation($input: DepositInput!) {
  deposit(input: $input) { balance balanceFormatted }
}`);
const CHARGE = new Operation(`mutation($input: ChargeInput!) {
  charge(input: $input) { success message url errorCode chargeId }
}`);
const BALANCE = new Operation(
  `query($user: String!) { user(externalId: $user) { balance balanceFormatted } }`,
);
const TOPUP = new Operation(`mutation($user: String!) { topUpLink(user: $user) { url } }`);
const CONNECT = new Operation(`mutation($user: String!) {
  connectUser(user: $user) { connected connectedUser { paywallKeyId userId externalUserId createdAt } message url }
}`);
const DISCONNECT = new Operation(
  `mutation($user: String!) { disconnectUser(user: $user) { success message } }`,
);

/** Runs a deposit or charge; a replayed answer (or replayed refusal) carries `Idempotent-Replayed: true`. */
async function idempotent<T>(
  req: Request,
  res: Response,
  ctx: AppContext,
  run: () => Promise<T>,
): Promise<T> {
  try {
    return await run();
  } finally {
    if (ctx.replayed) res.setHeader('Idempotent-Replayed', 'true');
  }
}

function moneyInput(req: Request) {
  const body = jsonObject(req);
  return {
    input: {
      user: userOf(req, body.user),
      // null, not undefined: a missing amount is then reported as the field, not as the whole input.
      amount: body.amount ?? null,
      metadata: body.metadata ?? null,
      idempotencyKey: req.header('idempotency-key'),
    },
  };
}

/** `/v1/user/*`: deposit, charge, balance, top-up link, connect, disconnect (each one GraphQL operation). */
export function userRoutes(services: Services): Router {
  const r = Router();

  r.post(
    '/user/balance/deposit',
    route(async (req, res) => {
      const ctx = restContext(req, services);
      const vars = moneyInput(req);
      const { deposit } = await idempotent(req, res, ctx, () => DEPOSIT.run(ctx, vars));
      res.json(deposit);
    }),
  );

  r.post(
    '/user/charge',
    route(async (req, res) => {
      const ctx = restContext(req, services);
      const vars = moneyInput(req);
      const { charge } = await idempotent(req, res, ctx, () => CHARGE.run(ctx, vars));
      res.json(
        charge.success ? { success: true, message: charge.message, chargeId: charge.chargeId } : charge,
      );
    }),
  );

  r.get(
    '/user/balance',
    route(async (req, res) => {
      const ctx = restContext(req, services);
      const externalId = userOf(req);
      await services.users.sightOnRead(req.paywall!, externalId, triggerOf(ctx.auth!, 'rest'));
      const { user } = await BALANCE.run(ctx, { user: externalId });
      res.json(user ?? { balance: '0', balanceFormatted: '0.000000' });
    }),
  );

  r.get(
    '/user/balance/topup',
    route(async (req, res) => {
      const { topUpLink } = await TOPUP.run(restContext(req, services), { user: userOf(req) });
      res.json(topUpLink);
    }),
  );

  r.get(
    '/user/connect',
    route(async (req, res) => {
      const { connectUser: c } = await CONNECT.run(restContext(req, services), { user: userOf(req) });
      res.json(
        c.connected
          ? { connected: true, connectedUser: c.connectedUser, message: c.message }
          : { connected: false, url: c.url, message: c.message },
      );
    }),
  );

  r.get(
    '/user/disconnect',
    route(async (req, res) => {
      const { disconnectUser } = await DISCONNECT.run(restContext(req, services), { user: userOf(req) });
      res.json(disconnectUser);
    }),
  );

  return r;
}
