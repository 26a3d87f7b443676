// LockFreeEngine#settle after a decision's commits: a reclaimer's token in the key's guard is
// cancelled by a compareExchange to the key's free value. A token is an owner and a time modulo
// 2^20 ms, so it repeats. Staged with a real worker (A) and the main thread's limiter (the
// reclaimer, both times, and the key's next incarnation):
// 1. R1, the main thread's sweep, writes its token T into k's guard and reads k idle;
// 2. A admits k from loads (its commits land on k's words), loads the guard (T) and ctrl (k's),
//    and stops before its compareExchange from T;
// 3. R1 turns T into DEAD (k is reclaimed); the main thread admits k again, into the same slot;
// 4. R2, a second sweep of the same instance at the same (frozen) millisecond, writes the same
//    token T into the new incarnation's guard and stops before reading its states;
// 5. A's compareExchange from T lands on the new incarnation's guard.
// Found by a review: #settle then found its own free value there and kept the admission, whose
// spends had gone with the reclaimed key (an admission counted nowhere: one more than the limit
// let through). It now loads ctrl again after its compareExchange, gives the word back, and
// decides again on the key's new slot.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock, RateLimiter } from '../../src/index.js';
import { DEAD, S_CTRL, S_LAST_SEC, S_TAT } from '../../src/table/layout.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { blockUntilState, letGo } from '../helpers/park.js';
import { slotBaseOf } from '../helpers/slots.js';
import { until } from '../helpers/until.js';

const fixture = new URL('../fixtures/settle-park-worker.mjs', import.meta.url);

afterEach(() => {
  vi.restoreAllMocks();
});

describe('LockFreeEngine#settle: a reclaimer token that repeats on the key\'s next incarnation', () => {
  it('found: the cancelled token was the next incarnation\'s: the admission is decided again there', async () => {
    const clock = new ManualClock(1_000_000);
    // Two a minute binds; every key hashes alike (forceHash), so the key comes back into its slot.
    const l = new RateLimiter({ limit: [{ permits: 2, periodMs: 60_000, burst: 2 }, { permits: 100, periodMs: 1_000 }], maxKeys: 4, forceHash: 7, clock });
    const table = l.handle.table;
    const w = new Int32Array(table);
    expect(l.allow('k')).toBe(true);
    clock.set(1_000_000 + 120_000); // k idle: the sweep reclaims it
    const base = slotBaseOf(table, 'k');
    const guard = base + S_TAT;
    const oldCtrl = w[base + S_CTRL] as number;

    const flags = new Int32Array(new SharedArrayBuffer(8));
    const worker = new Worker(fixture, { workerData: { handle: l.handle, key: 'k', flags: flags.buffer, guard } });
    const reply = new Promise<{ allowed: boolean; parked: { expected: number; replacement: number; seen: number } | null }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    try {
      await until(() => Atomics.load(flags, 0) === 1); // attached
      // Token times come from performance.now() (lockToken): R1 and R2 at the same millisecond.
      vi.spyOn(performance, 'now').mockReturnValue(123_456.5);
      let token = 0;
      let dead = 0;
      const r1 = withAtomicsHooks({
        cas: (array, index, expected, value) => {
          if (array.buffer !== table || index !== guard || token === 0 || expected !== token || dead !== 0) return;
          // 3. R1's final compareExchange, from its token: first A decides and stops (2).
          dead = value;
          letGo(flags, 1);
          blockUntilState(flags, 2);
        },
        load: (array, index) => {
          // 1. R1's token is in: remember it (a plain read, not hooked).
          if (array.buffer === table && index === base + S_LAST_SEC && token === 0) token = w[guard] as number;
        },
      }, () => l.sweep());
      expect(r1).toBe(1);
      expect(token % 2).toBe(1); // a reclaimer's token
      expect(dead).toBe(DEAD); // R1's final compareExchange wrote the reclaim marker
      expect(l.allow('k')).toBe(true); // 3. the next incarnation, spent once
      expect(slotBaseOf(table, 'k')).toBe(base); // in the same slot
      expect(w[base + S_CTRL]).not.toBe(oldCtrl);
      let repeated = 0;
      withAtomicsHooks({
        load: (array, index) => {
          // 4. R2's token is in (its load of the stamp comes next): let A make its compareExchange (5) and finish.
          if (array.buffer !== table || index !== base + S_LAST_SEC || repeated !== 0) return;
          repeated = w[guard] as number;
          letGo(flags, 2);
          blockUntilState(flags, -1);
        },
      }, () => l.sweep());
      vi.restoreAllMocks();
      const r = await reply;
      expect(repeated).toBe(token); // R2's token repeated R1's
      expect(r.parked?.expected).toBe(token);
      expect(r.parked?.seen).toBe(token); // A's compareExchange landed on the next incarnation's guard
      expect(r.allowed).toBe(true);
      // A's admission and the main thread's, both on k since its reclaim: none left of two.
      expect(l.tryAcquire('k', 0).limits?.[0]?.remaining).toBe(0);
      expect(l.allow('k')).toBe(false);
    } finally {
      await worker.terminate();
    }
  });
});
