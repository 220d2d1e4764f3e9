import { sha256Hex } from '../src/shared/ids.js';
import { UserKeyService } from '../src/modules/keys/user-key.service.js';

/**
 * The end-user key cache (docs/reference.md §19 "Lookup cost"): a revocation announced by another instance
 * while this one is reading the key must not leave the pre-revocation row cached (the key would keep
 * working until the entry expires).
 */
it('a NOTIFY that arrives while the key is being read makes the read start over: the revoked key is refused', async () => {
  const key = `uk_${'a'.repeat(40)}`;
  const hash = sha256Hex(key);
  let revoked = false;
  let release: (() => void) | null = null;
  const listeners = new Map<string, (payload: string) => void>();
  const db = {
    listen: async (channel: string, fn: (payload: string) => void) => {
      listeners.set(channel, fn);
      return () => undefined;
    },
    onReconnect: () => () => undefined,
    query: async (text: string) => {
      if (text.startsWith('update user_key')) return [];
      const row = revoked
        ? []
        : [
            {
              id: 'key-1',
              paywall_id: 'pw-1',
              key_hash: hash,
              expires_at: null,
              last_used_at: new Date(),
              external_id: 'alice',
            },
          ];
      // The first read is slow: the revocation lands while it is under way.
      if (!release && !revoked) await new Promise<void>((r) => (release = r));
      return row;
    },
    withEm: async () => ({
      id: 'pw-1',
      owner: 'o',
      name: 'n',
      mode: 'DEFAULT',
      markupPpm: 1_000_000n,
      trialCreditsRaw: 0n,
      apiKeyLastFour: 'abcd',
      archivedAt: null,
      createdAt: new Date(),
      updatedAt: new Date(),
    }),
  };
  const keys = new UserKeyService({
    db: db as any,
    clock: { now: () => new Date() } as any,
    ensureUser: async () => ({}) as any,
  });
  await keys.start();
  const pending = keys.authenticate(key);
  await new Promise((r) => setImmediate(r));
  // Another instance revokes the key and announces it.
  revoked = true;
  listeners.get('user_key_changed')!('key-1');
  release!();
  expect(await pending).toBeNull();
  expect(await keys.authenticate(key)).toBeNull();
});
