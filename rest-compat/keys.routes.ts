import { Router } from 'express';
import type { Services } from '../src/services.js';
import { DomainError } from '../src/shared/errors.js';
import { Operation } from './graphql-bridge.js';
import { jsonObject, limitParam, restContext, route, userOf } from './http.js';

const KEY_FIELDS = `id name externalUserId lastFour createdAt lastUsedAt expiresAt revokedAt
  limit { amount period spent resetsAt }`;
const CREATE = new Operation(`mutation($input: CreateUserKeyInput!) {
  createUserKey(input: $input) { key userKey { ${KEY_FIELDS} } }
}`);
const LIST = new Operation(
  `query($user: String) { paywall { userKeys(externalUserId: $user) { ${KEY_FIELDS} } } }`,
);
const REVOKE = new Operation(
  `mutation($input: RevokeUserKeyInput!) { revokeUserKey(input: $input) { ${KEY_FIELDS} } }`,
);

const PERIODS = ['day', 'week', 'month', 'total'];

/** createUserKey's input fields under their REST names: a 400 names the field the client sent. */
const REST_NAMES: Record<string, string> = {
  limitPeriod: 'limit_period',
  expiresAt: 'expires_at',
  externalUserId: 'user',
};

function inRestNames(e: unknown): unknown {
  if (!(e instanceof DomainError) || e.param === null || !(e.param in REST_NAMES)) return e;
  let message = e.message;
  for (const [gql, rest] of Object.entries(REST_NAMES)) message = message.split(gql).join(rest);
  return new DomainError(e.code, message, REST_NAMES[e.param], e.publicCode as never);
}

/** A key's record in REST's snake case (docs/reference.md §19); never the key itself. */
function keyJson(k: Record<string, any>) {
  return {
    object: 'user_key',
    id: k.id,
    name: k.name,
    user: k.externalUserId,
    last_four: k.lastFour,
    created_at: k.createdAt,
    last_used_at: k.lastUsedAt,
    expires_at: k.expiresAt,
    revoked_at: k.revokedAt,
    limit: k.limit
      ? {
          amount: k.limit.amount,
          period: String(k.limit.period).toLowerCase(),
          spent: k.limit.spent,
          resets_at: k.limit.resetsAt,
        }
      : null,
  };
}

/**
 * `/v1/user/keys`: end-user keys with the paywall's API key (docs/reference.md §19). Each route is one
 * GraphQL operation (createUserKey, Paywall.userKeys, revokeUserKey).
 */
export function keysRoutes(services: Services): Router {
  const r = Router();

  r.post(
    '/user/keys',
    route(async (req, res) => {
      const body = jsonObject(req);
      const period = body.limit_period;
      if (
        period !== undefined &&
        period !== null &&
        !(typeof period === 'string' && PERIODS.includes(period.toLowerCase()))
      )
        throw new DomainError(
          'invalid_request',
          `limit_period must be one of ${PERIODS.join(', ')}`,
          'limit_period',
        );
      const { createUserKey } = await CREATE.run(restContext(req, services), {
        input: {
          externalUserId: userOf(req, body.user),
          name: body.name ?? null,
          limit: body.limit ?? null,
          limitPeriod: typeof period === 'string' ? period.toUpperCase() : null,
          expiresAt: body.expires_at ?? null,
        },
      }).catch((e) => {
        throw inRestNames(e);
      });
      const k = keyJson(createUserKey.userKey);
      res.status(201).json({
        object: k.object,
        id: k.id,
        key: createUserKey.key,
        name: k.name,
        user: k.user,
        last_four: k.last_four,
        created_at: k.created_at,
        expires_at: k.expires_at,
        limit: k.limit,
      });
    }),
  );

  r.get(
    '/user/keys',
    route(async (req, res) => {
      const q = req.query.user;
      if (q !== undefined && typeof q !== 'string')
        throw new DomainError('invalid_request', 'user must be given once', 'user');
      // Newest first; `limit` (1 to 100) takes the newest ones, as on the other REST lists.
      const limit = limitParam(req) ?? Infinity;
      const { paywall } = await LIST.run(restContext(req, services), { user: q ?? null });
      const keys = paywall.userKeys as Record<string, unknown>[];
      res.json({
        object: 'list',
        data: keys.slice(0, limit).map(keyJson),
        has_more: keys.length > limit,
      });
    }),
  );

  r.delete(
    '/user/keys/:id',
    route(async (req, res) => {
      const { revokeUserKey } = await REVOKE.run(restContext(req, services), {
        input: { id: String(req.params.id) },
      });
      res.json(keyJson(revokeUserKey));
    }),
  );

  return r;
}
