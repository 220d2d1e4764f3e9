import { KeyedLoader } from '../src/shared/keyed-loader.js';

describe('KeyedLoader', () => {
  it('shares one read between concurrent misses of a key', async () => {
    let reads = 0;
    const loader = new KeyedLoader<number, string>(
      async () => ++reads,
      (key, n) => `${key}:${n}`,
    );
    const [a, b] = await Promise.all([loader.load('k'), loader.load('k')]);
    expect([a, b]).toEqual(['k:1', 'k:1']);
    expect(reads).toBe(1);
  });

  it('reads again when a change overtook the read, so the old rows are never accepted', async () => {
    let version = 1;
    let release!: () => void;
    const accepted: number[] = [];
    const loader = new KeyedLoader<number, number>(
      async () => {
        const seen = version;
        if (seen === 1) await new Promise<void>((r) => (release = r));
        return seen;
      },
      (_key, v) => {
        accepted.push(v);
        return v;
      },
    );
    const pending = loader.load('k');
    await new Promise((r) => setImmediate(r));
    version = 2; // a change is committed while the first read is in flight…
    loader.invalidate('k'); // …and its NOTIFY arrives
    release();
    expect(await pending).toBe(2);
    expect(accepted).toEqual([2]);
  });
});
