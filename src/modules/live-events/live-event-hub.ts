import type { Database } from '../../db/database.js';
import type { Config } from '../../config.js';
import type { PaywallService } from '../paywalls/paywall.service.js';
import { DomainError, invalid } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Auth } from '../paywalls/paywall-info.js';
import { eventMatches, validateEventPatterns } from '../events/event-catalog.js';

/** A recorded event as live subscribers receive it. */
export interface LiveEvent {
  id: string;
  paywallId: string;
  ownerUserId: string;
  type: string;
  version: string;
  createdAt: Date;
  trigger: Record<string, unknown>;
  subject: Record<string, unknown>;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

/**
 * Whose events a subscriber sees. An API key sees its paywall's events, and only while the key is valid:
 * `apiKeyLastFour` is what the subscription was authenticated with, so a rotation (or an archive) ends it.
 * An owner sees every paywall of theirs, or one.
 */
export type LiveScope =
  | { kind: 'apiKey'; paywallId: string; apiKeyLastFour: string }
  | { kind: 'owner'; ownerId: string; paywallId: string | null };

/** A subscriber this far behind is dropped with an error rather than buffered without bound. */
export const MAX_QUEUED_EVENTS = 1000;

const EVENTS_CHANNEL = 'paywall_events';
/** Sent by the paywall service when settings, the key or the archive state change. */
const PAYWALL_CHANGED_CHANNEL = 'paywall_changed';
/** Events fetched per query when notifications arrive in bursts. */
const FETCH_BATCH = 500;
/** Bounded: paywall ids seen → their owner; ownership never changes, so entries never go stale. */
const OWNER_CACHE_MAX = 10_000;

interface Subscriber {
  scope: LiveScope;
  /** Who shares MAX_SUBSCRIPTIONS_PER_TENANT: the paywall of an API key, or the owner. */
  tenant: string;
  patterns: readonly string[];
  queue: LiveEvent[];
  waiting: { resolve: (r: IteratorResult<LiveEvent>) => void; reject: (e: unknown) => void } | null;
  error: unknown;
  closed: boolean;
}

type Work = { kind: 'event'; seq: string; paywallId: string } | { kind: 'changed'; paywallId: string };

/**
 * One `paywall_events` notification: the events one statement recorded, by paywall (the `event_fanout`
 * statement trigger): `p` the paywall, `s` the events' seq (`event.seq`) in order, `t` their distinct types.
 */
interface EventNotice {
  p: string;
  s: (number | string)[];
  t: string[];
}

const hubs = new WeakMap<Database, LiveEventHub>();

/**
 * Live events for GraphQL subscriptions: ONE `LISTEN paywall_events` per process (per database), fanned
 * out to in-process subscribers. Every instance listens, and PostgreSQL delivers each NOTIFY to all of
 * them after the recording transaction commits, so an event recorded through instance A reaches a
 * subscriber connected to instance B. On the embedded database NOTIFY is in-process, which is all there is.
 *
 * ONE NOTIFY per recording statement lists its events (seq) by paywall with their types; a row is fetched
 * once per event, and only when some subscriber may want it (scope and type checked first), in batches
 * when events arrive in bursts. Work is processed in notification order (and within one notification in
 * seq order, the order the statement inserted them), so each subscriber sees events in the order they
 * were committed.
 */
export class LiveEventHub {
  private readonly byPaywall = new Map<string, Set<Subscriber>>();
  private readonly byOwner = new Map<string, Set<Subscriber>>();
  private readonly ownerOf = new Map<string, string>();
  private readonly work: Work[] = [];
  private draining = false;
  private listening?: Promise<void>;
  private unReconnect?: () => void;
  private count = 0;
  private readonly byTenant = new Map<string, number>();

  constructor(
    private readonly db: Database,
    private readonly log?: Logger,
    /** Live subscriptions this process serves at most (each graphql-ws connection may open several). */
    readonly maxSubscribers = 10_000,
  ) {}

  /** The hub of a database handle (one per process in production; tests run several apps in one process). */
  static for(db: Database, log?: Logger): LiveEventHub {
    let hub = hubs.get(db);
    if (!hub) {
      hub = new LiveEventHub(db, log);
      hubs.set(db, hub);
    }
    return hub;
  }

  /** Live subscriptions right now. */
  get size(): number {
    return this.count;
  }

  /**
   * Subscribes; resolves once the LISTEN is in place, so no event committed after this returns is missed.
   * The iterator ends when the consumer returns it; it throws when the subscriber falls more than
   * {@link MAX_QUEUED_EVENTS} behind or its API key stops being valid.
   */
  async subscribe(
    scope: LiveScope,
    patterns: readonly string[],
    /** Live subscriptions one tenant (see {@link tenantOfScope}) may hold at once, all connections together. */
    maxPerTenant = Infinity,
  ): Promise<AsyncIterableIterator<LiveEvent>> {
    const tenant = tenantOfScope(scope);
    // Checked and counted in one synchronous step (the slot is taken before the LISTEN is awaited), so
    // concurrent subscribes cannot all pass the check.
    const mine = this.byTenant.get(tenant) ?? 0;
    if (mine >= maxPerTenant) {
      throw new DomainError(
        'rate_limited',
        `too many live subscriptions for ${scope.kind === 'apiKey' ? 'this paywall' : 'this owner account'} (MAX_SUBSCRIPTIONS_PER_TENANT is ${maxPerTenant}, all its connections together); complete some first`,
        null,
        'too_many_subscriptions_per_tenant',
      );
    }
    if (this.count >= this.maxSubscribers) {
      throw new DomainError(
        'rate_limited',
        'too many live subscriptions on this server; retry later',
        null,
        'too_many_subscriptions',
      );
    }
    const sub: Subscriber = { scope, tenant, patterns, queue: [], waiting: null, error: null, closed: false };
    this.add(sub);
    try {
      await this.listen();
    } catch (err) {
      this.remove(sub);
      throw err;
    }
    const close = () => this.close(sub);
    const iterator: AsyncIterableIterator<LiveEvent> = {
      next(): Promise<IteratorResult<LiveEvent>> {
        if (sub.queue.length > 0) return Promise.resolve({ value: sub.queue.shift()!, done: false });
        if (sub.error) {
          const error = sub.error;
          sub.error = null;
          return Promise.reject(error);
        }
        if (sub.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          sub.waiting = { resolve, reject };
        });
      },
      return(): Promise<IteratorResult<LiveEvent>> {
        close();
        return Promise.resolve({ value: undefined, done: true });
      },
      throw(error: unknown): Promise<IteratorResult<LiveEvent>> {
        close();
        return Promise.reject(error);
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  private listen(): Promise<void> {
    // Notifications sent while the LISTEN connection was down are lost: a key rotated (or a paywall
    // archived) meanwhile must still end the subscriptions opened with the old key.
    this.unReconnect ??= this.db.onReconnect(() => this.recheckAllKeys());
    this.listening ??= Promise.all([
      this.db.listen(EVENTS_CHANNEL, (payload) => this.onEvent(payload)),
      this.db.listen(PAYWALL_CHANGED_CHANNEL, (paywallId) => this.onPaywallChanged(paywallId)),
    ]).then(
      () => undefined,
      (err) => {
        this.listening = undefined; // let the next subscriber try again
        throw err;
      },
    );
    return this.listening;
  }

  private recheckAllKeys(): void {
    for (const [paywallId, subs] of this.byPaywall)
      if ([...subs].some((s) => s.scope.kind === 'apiKey')) this.work.push({ kind: 'changed', paywallId });
    void this.drain();
  }

  /** Owner-wide subscribers are indexed by owner; everyone else by the one paywall they watch. */
  private bucketOf({ scope }: Subscriber): [Map<string, Set<Subscriber>>, string] {
    return scope.kind === 'owner' && !scope.paywallId
      ? [this.byOwner, scope.ownerId]
      : [this.byPaywall, scope.paywallId as string];
  }

  private add(sub: Subscriber): void {
    const [map, key] = this.bucketOf(sub);
    let set = map.get(key);
    if (!set) map.set(key, (set = new Set()));
    set.add(sub);
    this.count++;
    this.byTenant.set(sub.tenant, (this.byTenant.get(sub.tenant) ?? 0) + 1);
  }

  private remove(sub: Subscriber): void {
    const [map, key] = this.bucketOf(sub);
    const set = map.get(key);
    if (set?.delete(sub)) {
      this.count--;
      if (set.size === 0) map.delete(key);
      const left = (this.byTenant.get(sub.tenant) ?? 1) - 1;
      if (left > 0) this.byTenant.set(sub.tenant, left);
      else this.byTenant.delete(sub.tenant);
    }
  }

  /** The consumer is done: stop routing to it. */
  private close(sub: Subscriber): void {
    this.end(sub)?.resolve({ value: undefined, done: true });
  }

  /** End a subscriber with an error (delivered after nothing else: its queue is dropped). */
  private fail(sub: Subscriber, error: DomainError): void {
    if (sub.closed) return;
    const waiting = this.end(sub);
    if (waiting) waiting.reject(error);
    else sub.error = error;
  }

  /** Marks a subscriber closed, drops its queue, stops routing to it; returns the read waiting on it, if any. */
  private end(sub: Subscriber): Subscriber['waiting'] {
    if (sub.closed) return null;
    sub.closed = true;
    sub.queue.length = 0;
    this.remove(sub);
    const waiting = sub.waiting;
    sub.waiting = null;
    return waiting;
  }

  private push(sub: Subscriber, event: LiveEvent): void {
    if (sub.closed) return;
    if (sub.waiting) {
      const waiting = sub.waiting;
      sub.waiting = null;
      waiting.resolve({ value: event, done: false });
      return;
    }
    if (sub.queue.length >= MAX_QUEUED_EVENTS) {
      this.fail(
        sub,
        new DomainError(
          'rate_limited',
          `subscription fell more than ${MAX_QUEUED_EVENTS} events behind and was closed; resubscribe`,
        ),
      );
      return;
    }
    sub.queue.push(event);
  }

  /** Subscribers that may want an event of `paywallId` (owner subscribers are confirmed once the row is known). */
  private candidates(paywallId: string, ownerId: string | undefined): Subscriber[] {
    const out = [...(this.byPaywall.get(paywallId) ?? [])];
    if (ownerId !== undefined) out.push(...(this.byOwner.get(ownerId) ?? []));
    else for (const set of this.byOwner.values()) out.push(...set);
    return out;
  }

  private onEvent(payload: string): void {
    let notice: EventNotice[];
    try {
      notice = JSON.parse(payload) as EventNotice[];
    } catch {
      return;
    }
    if (!Array.isArray(notice)) return;
    const wanted: { seq: string; paywallId: string }[] = [];
    for (const g of notice) {
      if (typeof g?.p !== 'string' || !Array.isArray(g.s) || !Array.isArray(g.t)) continue;
      const subs = this.candidates(g.p, this.ownerOf.get(g.p));
      if (!subs.some((s) => g.t.some((type) => eventMatches(s.patterns, type)))) continue;
      for (const seq of g.s) wanted.push({ seq: String(seq), paywallId: g.p });
    }
    if (wanted.length === 0) return;
    // One statement's events in the order it inserted them (groups are per paywall).
    if (notice.length > 1) wanted.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
    for (const w of wanted) this.work.push({ kind: 'event', seq: w.seq, paywallId: w.paywallId });
    void this.drain();
  }

  private onPaywallChanged(paywallId: string): void {
    const subs = this.byPaywall.get(paywallId);
    if (!subs || ![...subs].some((s) => s.scope.kind === 'apiKey')) return;
    this.work.push({ kind: 'changed', paywallId });
    void this.drain();
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.work.length > 0) {
        const batch = this.work.splice(0, FETCH_BATCH);
        try {
          await this.process(batch);
        } catch (err) {
          // Live events are a best-effort feed (webhooks are the durable one): log and go on.
          this.log?.error({ err }, 'live events: could not fetch events');
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private async process(batch: Work[]): Promise<void> {
    const seqs = batch.filter((w) => w.kind === 'event').map((w) => w.seq);
    const rows = seqs.length
      ? await this.db.query(
          `select seq::text as seq, id, paywall_id, owner_user_id, type, version, created_at, trigger, subject,
                  data, metadata
             from event where seq = any($1::bigint[])`,
          [seqs],
        )
      : [];
    const bySeq = new Map(rows.map((r) => [r.seq as string, r]));
    for (const w of batch) {
      if (w.kind === 'changed') {
        await this.checkKeys(w.paywallId);
        continue;
      }
      const r = bySeq.get(w.seq);
      if (!r) continue;
      const event = toLiveEvent(r);
      if (this.ownerOf.size >= OWNER_CACHE_MAX) this.ownerOf.clear();
      this.ownerOf.set(event.paywallId, event.ownerUserId);
      for (const sub of this.candidates(event.paywallId, event.ownerUserId)) {
        if (inScope(sub.scope, event) && eventMatches(sub.patterns, event.type)) this.push(sub, event);
      }
    }
  }

  /** A rotated key or an archived paywall ends the API-key subscriptions that were opened with the old key. */
  private async checkKeys(paywallId: string): Promise<void> {
    const subs = [...(this.byPaywall.get(paywallId) ?? [])].filter((s) => s.scope.kind === 'apiKey');
    if (subs.length === 0) return;
    const [p] = await this.db.query<{ api_key_last_four: string; archived_at: Date | null }>(
      'select api_key_last_four, archived_at from paywall where id = $1',
      [paywallId],
    );
    for (const sub of subs) {
      const scope = sub.scope as Extract<LiveScope, { kind: 'apiKey' }>;
      if (!p || p.archived_at || p.api_key_last_four !== scope.apiKeyLastFour) {
        this.fail(
          sub,
          new DomainError(
            'unauthenticated',
            'the API key of this subscription was rotated or its paywall archived',
          ),
        );
      }
    }
  }
}

/** The tenant of a subscription: the paywall of an API key, or the owner (as graphql-ws connections count them). */
export function tenantOfScope(scope: LiveScope): string {
  return scope.kind === 'apiKey' ? `paywall:${scope.paywallId}` : `owner:${scope.ownerId}`;
}

function inScope(scope: LiveScope, e: LiveEvent): boolean {
  if (scope.kind === 'apiKey') return e.paywallId === scope.paywallId;
  return e.ownerUserId === scope.ownerId && (!scope.paywallId || e.paywallId === scope.paywallId);
}

const json = (v: unknown): Record<string, unknown> =>
  typeof v === 'string' ? (JSON.parse(v) as Record<string, unknown>) : ((v ?? {}) as Record<string, unknown>);

function toLiveEvent(r: Record<string, any>): LiveEvent {
  return {
    id: r.id,
    paywallId: r.paywall_id,
    ownerUserId: r.owner_user_id,
    type: r.type,
    version: r.version,
    createdAt: new Date(r.created_at),
    trigger: json(r.trigger),
    subject: json(r.subject),
    data: json(r.data),
    metadata: json(r.metadata),
  };
}

/** What opening a live-events subscription needs: paywalls to authorize, the database and its cap. */
export interface LiveEventsDeps {
  db: Database;
  log: Logger;
  config: Pick<Config, 'MAX_SUBSCRIPTIONS_PER_TENANT'>;
  paywalls: Pick<PaywallService, 'resolve' | 'get'>;
}

export interface LiveEventsArgs {
  types?: string[] | null;
  paywallId?: string | null;
}

/**
 * Opens a live-events subscription for a caller: an API key gets its paywall's events; an owner gets
 * all of their paywalls' events, or one paywall's with `paywallId`. `types` takes the webhook patterns
 * (exact names, `prefix.*`, `*`); none or an empty list means every event.
 */
export async function subscribeToEvents(
  deps: LiveEventsDeps,
  auth: Auth,
  args: LiveEventsArgs,
): Promise<AsyncIterableIterator<LiveEvent>> {
  const patterns = args.types && args.types.length > 0 ? args.types : ['*'];
  const problem = validateEventPatterns(patterns);
  if (problem) throw invalid(problem.replace(/^events\b/, 'types'), 'types');
  let scope: LiveScope;
  if (auth.kind === 'apiKey') {
    const paywall = await deps.paywalls.resolve(auth, args.paywallId);
    // A graphql-ws connection is authenticated once, when it opens: a key rotated since then must not
    // open new subscriptions on it.
    const [current] = await deps.db.query<{ api_key_last_four: string; archived_at: Date | null }>(
      'select api_key_last_four, archived_at from paywall where id = $1',
      [paywall.id],
    );
    if (!current || current.archived_at || current.api_key_last_four !== paywall.apiKeyLastFour) {
      throw new DomainError('unauthenticated', 'this API key was rotated or its paywall archived; reconnect');
    }
    scope = { kind: 'apiKey', paywallId: paywall.id, apiKeyLastFour: paywall.apiKeyLastFour };
  } else {
    const paywallId = args.paywallId ? (await deps.paywalls.get(auth.ownerId, args.paywallId)).id : null;
    scope = { kind: 'owner', ownerId: auth.ownerId, paywallId };
  }
  return LiveEventHub.for(deps.db, deps.log).subscribe(
    scope,
    patterns,
    deps.config.MAX_SUBSCRIPTIONS_PER_TENANT,
  );
}
