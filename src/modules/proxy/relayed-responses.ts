import type { Database } from '../../db/database.js';
import { invalid } from '../../shared/errors.js';
import type { Flight } from './flight.js';
import type { RelayedRecord } from '../ledger/holds.js';
import { UNKNOWN_INPUT_BOUND } from './token-counter.js';
import { inputTokens, outputTokens, type UsageBuckets } from '../../shared/usage-buckets.js';
import { MAX_TOKEN_COUNT } from './wire-format.js';

/**
 * Responses API: a continued response makes the provider bill the earlier context as input again. The
 * context size of each answer this paywall relayed is remembered, so the next hold covers it.
 */
export class RelayedResponses {
  constructor(private readonly db: Database) {}

  /**
   * Tokens of the context a Responses request continues (`previous_response_id`, or a stored
   * `conversation`), which the provider bills as input again: `known` for a response this paywall relayed
   * (its input + output tokens, counted in the estimate), `unknown` (UNKNOWN_INPUT_BOUND, held only)
   * for one it did not relay or a conversation, whose size it cannot see.
   *
   * A response relayed for another end user of the paywall is refused as OpenAI refuses an id it does not
   * know (400 `previous_response_not_found`): every end user shares the app's provider key, so the provider
   * would hand one user another's conversation. Its owner is the charge that settled it (`responseId` in
   * the charge's metadata); a response relayed before owners were recorded has none and is continued.
   *
   * `sharedKey`: the request may reach the platform's built-in provider, whose one key serves every SHARED
   * paywall. There, an id this paywall did not relay is another app's (or the operator's) stored response,
   * refused as unknown, and a stored `conversation` (which no app can create through the service) is
   * refused too: otherwise one app's end user could read what another app's end user asked.
   */
  async earlierContext(
    paywallId: string,
    externalUserId: string,
    body: Record<string, unknown>,
    sharedKey = false,
  ): Promise<{ known: number; unknown: number }> {
    const previous = body.previous_response_id;
    const conversation = body.conversation;
    if (conversation !== undefined && conversation !== null) {
      if (sharedKey)
        throw invalid(
          "'conversation' cannot be continued through the platform's built-in provider: its stored conversations are not this app's",
          'conversation',
          'unsupported_parameter',
        );
      return { known: 0, unknown: UNKNOWN_INPUT_BOUND };
    }
    if (previous === undefined || previous === null) return { known: 0, unknown: 0 };
    if (typeof previous !== 'string' || previous === '' || previous.length > 255)
      throw invalid("'previous_response_id' must be a response id", 'previous_response_id', 'invalid_value');
    const rows = await this.db.query(
      `select r.tokens::text as tokens,
              (select e.external_id from charge c join end_user e on e.id = c.user_id
                where c.paywall_id = r.paywall_id and c.metadata ? 'responseId' and c.metadata->>'responseId' = r.id
                limit 1) as owner
         from relayed_response r where r.paywall_id = $1 and r.id = $2`,
      [paywallId, previous],
      'proxy_relayed_response',
    );
    const notFound = () =>
      invalid(
        `Previous response with id '${previous}' not found.`,
        'previous_response_id',
        'previous_response_not_found',
      );
    if (rows.length === 0) {
      if (sharedKey) throw notFound();
      return { known: 0, unknown: UNKNOWN_INPUT_BOUND };
    }
    if (rows[0].owner !== null && rows[0].owner !== externalUserId) throw notFound();
    const tokens = Number(rows[0].tokens);
    return { known: Math.min(tokens, MAX_TOKEN_COUNT), unknown: 0 };
  }

  /**
   * What to remember of a relayed Responses answer (its id and context size: input + output tokens), or
   * null. The settlement writes it in its own statement (`ledger_tick`, `relayed_response`): no commit of its
   * own on the request path.
   */
  record(f: Flight, id: unknown, usage: UsageBuckets): RelayedRecord | null {
    // A response the provider does not store (`store: false`) cannot be continued.
    if (f.fmt.name !== 'responses' || f.req.body.store === false) return null;
    if (typeof id !== 'string' || id === '' || id.length > 255) return null;
    return { id, tokens: BigInt(inputTokens(usage) + outputTokens(usage)) };
  }
}
