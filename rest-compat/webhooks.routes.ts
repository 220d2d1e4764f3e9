import { Router } from 'express';
import type { Services } from '../src/services.js';
import { DomainError } from '../src/shared/errors.js';
import { Operation } from './graphql-bridge.js';
import { jsonObject, limitParam, queryParam, restContext, route } from './http.js';

/** The spec's "Webhook subscription" fields, in its order; `secret` only in the creation answer. */
const SUB = `id paywallId url events isActive description customHeaders createdAt updatedAt
  secretSuffix createdBy consecutiveFailures lastDeliveredAt`;
const SUB_WITH_SECRET = SUB.replace('updatedAt', 'updatedAt secret');
/** docs/reference.md §4 "Log entries", and `lastError` (why an attempt got no answer: timeout, refused address…). */
const ENTRY = `id subscriptionId eventId eventType status attempts nextAttemptAt responseStatus responseLatencyMs
  responseBody lastError createdAt updatedAt event`;

const CREATE = new Operation(
  `mutation($input: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $input) { ${SUB_WITH_SECRET} } }`,
);
const LIST = new Operation(`query($status: String) { webhookSubscriptions(status: $status) { ${SUB} } }`);
const GET = new Operation(`query($id: ID!) { webhookSubscription(id: $id) { ${SUB} } }`);
const DEACTIVATE = new Operation(`mutation($id: ID!) { deactivateWebhookSubscription(id: $id) { ${SUB} } }`);
const LOGS = new Operation(
  `query($subscriptionId: ID, $status: String, $eventType: String, $first: Int, $after: String) {
     webhookDeliveries(subscriptionId: $subscriptionId, status: $status, eventType: $eventType, first: $first, after: $after) {
       nodes { ${ENTRY} } pageInfo { hasNextPage endCursor } } }`,
);

const CREATE_FIELDS = new Set(['url', 'events', 'description', 'customHeaders', 'secret']);

/**
 * `POST/GET /v1/webhooks/subscriptions`, `GET/DELETE /v1/webhooks/subscriptions/{id}`, `GET /v1/webhooks/logs`,
 * each running the GraphQL operation of the same name. Re-enabling, secret rotation and resends are GraphQL only.
 */
export function webhooksRoutes(services: Services): Router {
  const r = Router();
  r.post(
    '/webhooks/subscriptions',
    route(async (req, res) => {
      const body = jsonObject(req);
      const unknown = Object.keys(body).find((k) => !CREATE_FIELDS.has(k));
      if (unknown) throw new DomainError('invalid_request', `Unknown parameter: ${unknown}`, unknown);
      // GraphQL would quietly wrap a lone string into a list, and name no field for a bad element.
      const { events } = body;
      if (events !== undefined && (!Array.isArray(events) || events.some((e) => typeof e !== 'string')))
        throw new DomainError('invalid_request', 'events must be an array of event names', 'events');
      const data = await CREATE.run(restContext(req, services), { input: body });
      res.status(201).json({ subscription: data.createWebhookSubscription });
    }),
  );
  r.get(
    '/webhooks/subscriptions',
    route(async (req, res) => {
      // All of them by default (at most 100 active); `limit` takes the newest ones.
      const limit = limitParam(req) ?? Infinity;
      const data = await LIST.run(restContext(req, services), { status: queryParam(req, 'status') });
      const all = data.webhookSubscriptions as unknown[];
      res.json({ object: 'list', data: all.slice(0, limit), has_more: all.length > limit });
    }),
  );
  r.get(
    '/webhooks/subscriptions/:id',
    route(async (req, res) => {
      const data = await GET.run(restContext(req, services), { id: req.params.id });
      res.json({ subscription: data.webhookSubscription });
    }),
  );
  r.delete(
    '/webhooks/subscriptions/:id',
    route(async (req, res) => {
      const data = await DEACTIVATE.run(restContext(req, services), { id: req.params.id });
      res.json({ subscription: data.deactivateWebhookSubscription });
    }),
  );
  r.get(
    '/webhooks/logs',
    route(async (req, res) => {
      const data = await LOGS.run(restContext(req, services), {
        subscriptionId: queryParam(req, 'subscriptionId'),
        status: queryParam(req, 'status'),
        eventType: queryParam(req, 'eventType'),
        first: limitParam(req),
        after: queryParam(req, 'after'),
      });
      const { nodes, pageInfo } = data.webhookDeliveries;
      // Older entries: the same query with `after` = `next_cursor` (GraphQL's endCursor).
      res.json({
        object: 'list',
        data: nodes,
        has_more: pageInfo.hasNextPage,
        next_cursor: pageInfo.hasNextPage ? pageInfo.endCursor : null,
      });
    }),
  );
  return r;
}
