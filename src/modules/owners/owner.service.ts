import type { Database } from '../../db/database.js';
import { newId, newSecret, sha256Hex } from '../../shared/ids.js';

const OWNER_TOKEN_PREFIX = 'ot_';

/** Developer accounts. Tokens are random, prefixed, stored only as a SHA-256 hash. */
export class OwnerService {
  private readonly byHash = new Map<string, string>();

  private readonly db: Database;

  constructor(deps: { db: Database }) {
    this.db = deps.db;
  }

  /**
   * docs/reference.md §1 "First owner": with a bootstrap token, make sure that owner exists; without one, create
   * an owner when there is none and return its token (printed once by the caller).
   */
  async bootstrap(token: string | undefined): Promise<{ createdToken?: string; ownerId: string }> {
    if (token) {
      const hash = sha256Hex(token);
      const rows = await this.db.query<{ id: string }>(
        `insert into owner (id, name, token_hash) values ($1, 'bootstrap', $2)
         on conflict (token_hash) do update set token_hash = excluded.token_hash returning id`,
        [newId(), hash],
      );
      return { ownerId: rows[0].id };
    }
    const existing = await this.db.query<{ id: string }>('select id from owner order by created_at limit 1');
    if (existing.length > 0) return { ownerId: existing[0].id };
    return this.create('owner');
  }

  async create(name: string): Promise<{ createdToken: string; ownerId: string }> {
    const token = newSecret(OWNER_TOKEN_PREFIX);
    const id = newId();
    await this.db.query('insert into owner (id, name, token_hash) values ($1, $2, $3)', [
      id,
      name,
      sha256Hex(token),
    ]);
    return { createdToken: token, ownerId: id };
  }

  /** Owner id for a bearer token, or null. Owner tokens never change, so the cache needs no invalidation. */
  async authenticate(token: string): Promise<string | null> {
    if (!token.startsWith(OWNER_TOKEN_PREFIX) && token.length < 16) return null;
    const hash = sha256Hex(token);
    const cached = this.byHash.get(hash);
    if (cached) return cached;
    const rows = await this.db.query<{ id: string }>(
      'select id from owner where token_hash = $1',
      [hash],
      'owner_by_token',
    );
    if (rows.length === 0) return null;
    this.byHash.set(hash, rows[0].id);
    return rows[0].id;
  }
}
