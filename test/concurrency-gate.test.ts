import { ConcurrencyGate } from '../src/shared/concurrency-gate.js';
import { DomainError } from '../src/shared/errors.js';

/** A task that runs until released, recording when it started. */
function task(log: string[], name: string) {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return { run: async () => (log.push(name), await done, name), release };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('ConcurrencyGate (expensive reads: a few at once, per tenant and in total)', () => {
  it('runs at most `perTenant` of a tenant and `total` overall; waiters start oldest first, skipping a tenant at its limit', async () => {
    const gate = new ConcurrencyGate(3, 2);
    const log: string[] = [];
    const a = [1, 2, 3, 4].map((i) => task(log, `a${i}`));
    const b = [1, 2].map((i) => task(log, `b${i}`));
    const results = [...a.map((t) => gate.run('A', t.run)), ...b.map((t) => gate.run('B', t.run))];
    await tick();
    // A takes its 2, B gets the third place although A's others queued first.
    expect(log).toEqual(['a1', 'a2', 'b1']);
    expect(gate.active).toBe(3);
    b[0].release(); // frees a total place and B's: b2 is next in line that may start (A is at its limit)
    await tick();
    expect(log).toEqual(['a1', 'a2', 'b1', 'b2']);
    a[0].release();
    await tick();
    expect(log).toEqual(['a1', 'a2', 'b1', 'b2', 'a3']);
    for (const t of [...a, ...b]) t.release();
    await expect(Promise.all(results)).resolves.toEqual(['a1', 'a2', 'a3', 'a4', 'b1', 'b2']);
    expect(gate.active).toBe(0);
  });

  it('refuses a tenant with too many waiting (rate_limited), and a failed task frees its place', async () => {
    const gate = new ConcurrencyGate(1, 1, 2);
    const log: string[] = [];
    const first = task(log, 'x1');
    const running = gate.run('X', first.run);
    const queued = [gate.run('X', async () => 'x2'), gate.run('X', async () => 'x3')];
    await expect(gate.run('X', async () => 'x4')).rejects.toMatchObject({
      code: 'rate_limited',
      publicCode: 'too_many_heavy_reads',
    });
    await expect(gate.run('X', async () => 'x4')).rejects.toBeInstanceOf(DomainError);
    first.release();
    await expect(Promise.all([running, ...queued])).resolves.toEqual(['x1', 'x2', 'x3']);
    await expect(gate.run('X', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(gate.run('X', async () => 'after')).resolves.toBe('after');
    expect(gate.active).toBe(0);
  });
});
