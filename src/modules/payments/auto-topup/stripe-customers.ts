import { createHash, randomUUID } from 'node:crypto';
import type { Database } from '../../../db/database.js';
import type { StripeGateway } from '../stripe/stripe-gateway.js';
import { rowOf, type AutoTopupScope } from './auto-topup-rows.js';

/** The one Stripe customer per user whose saved card auto top-up charges. */
export class AutoTopupCustomers {
  constructor(private readonly d: { db: Database; gateway: StripeGateway }) {}

  /**
   * The ONE Stripe customer of `scope` on the account of `secretKey` (created the first time, with an
   * idempotency key derived from the scope, so two concurrent first checkouts make one customer).
   */
  async customerFor(scope: AutoTopupScope, secretKey: string, description: string): Promise<string> {
    const known = await rowOf(this.d.db, scope);
    if (known) return known.stripe_customer_id;
    const key =
      scope.kind === 'wallet' ? `wallet:${scope.walletUserId}` : `${scope.paywallId}:${scope.externalId}`;
    const customer = await this.d.gateway.createCustomer(
      secretKey,
      {
        ...(scope.kind === 'wallet' && scope.email ? { email: scope.email } : {}),
        description,
        metadata:
          scope.kind === 'wallet'
            ? { kind: 'wallet', walletUserId: scope.walletUserId }
            : { paywallId: scope.paywallId, user: scope.externalId.slice(0, 500) },
      },
      `auto-topup-customer-${createHash('sha256').update(key).digest('hex').slice(0, 40)}`,
    );
    await this.d.db.query(
      scope.kind === 'wallet'
        ? `insert into auto_topup (id, wallet_user_id, stripe_customer_id) values ($1, $2, $3) on conflict do nothing`
        : `insert into auto_topup (id, paywall_id, external_id, stripe_customer_id) values ($1, $2, $4, $3)
           on conflict do nothing`,
      scope.kind === 'wallet'
        ? [randomUUID(), scope.walletUserId, customer]
        : [randomUUID(), scope.paywallId, customer, scope.externalId],
    );
    return (await rowOf(this.d.db, scope))!.stripe_customer_id;
  }
}
