import type { Database } from '../../db/database.js';
import { invalid } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Flight } from './flight.js';
import { UNKNOWN_INPUT_BOUND } from './token-counter.js';
import { inputTokens, outputTokens, type UsageBuckets } from '../../shared/usage-buckets.js';
import { MAX_TOKEN_COUNT } from './wire-format.js';

/**
 * Responses API: a continued response makes the provider bill the earlier context as input again. The
 * context size of each answer this paywall relayed is remembered, so the next hold covers it.
 */
export class RelayedResponses {
  constructor(
    private readonly db: Database,
    private readonly log: Logger,
  ) {}

  /**
   * Tokens of the context a Responses request continues (`previous_response_id`, or a stored
   * `conversation`), which the provider bills as input again: `known` for a response this paywall relayed
   * (its input + output tokens, counted in the estimate), `unknown` (UNKNOWN_INPUT_BOUND, held only)
   * for one it did not relay or a conversation, whose size it cannot see.
   */
  async earlierContext(
    paywallId: string,
    body: Record<string, unknown>,
  ): Promise<{ known: number; unknown: number }> {
    const previous = body.previous_response_id;
    const conversation = body.conversation;
    if (conversation !== undefined && conversation !== null)
      return { known: 0, unknown: UNKNOWN_INPUT_BOUND };
    if (previous === undefined || previous === null) return { known: 0, unknown: 0 };
    if (typeof previous !== 'string' || previous === '' || previous.length > 255)
      throw invalid("'previous_response_id' must be a response id", 'previous_response_id', 'invalid_value');
    const rows = await this.db.query(
      `select tokens::text as tokens from relayed_response where paywall_id = $1 and id = $2`,
      [paywallId, previous],
      'proxy_relayed_response',
    );
    if (rows.length === 0) return { known: 0, unknown: UNKNOWN_INPUT_BOUND };
    const tokens = Number(rows[0].tokens);
    return { known: Math.min(tokens, MAX_TOKEN_COUNT), unknown: 0 };
  }

  /** Remembers a relayed Responses answer's context size (input + output tokens), best effort. */
  async remember(f: Flight, id: unknown, usage: UsageBuckets): Promise<void> {
    // A response the provider does not store (`store: false`) cannot be continued.
    if (f.fmt.name !== 'responses' || f.req.body.store === false) return;
    if (typeof id !== 'string' || id === '' || id.length > 255) return;
    try {
      await this.db.query(
        `insert into relayed_response (paywall_id, id, tokens) values ($1, $2, $3::bigint)
           on conflict (paywall_id, id) do update set tokens = excluded.tokens`,
        [f.paywall.id, id, String(inputTokens(usage) + outputTokens(usage))],
        'proxy_remember_response',
      );
    } catch (err) {
      this.log.warn({ err, chargeId: f.chargeId }, 'recording a relayed response failed');
    }
  }
}
