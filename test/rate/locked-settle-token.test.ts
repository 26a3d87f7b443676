// slot-lock.ts `settle`, after a locked decision's commits: a lock that took ours over is released
// by a compareExchange from the token seen. A token is an owner and a time modulo 2^20 ms, so it
// repeats. Staged with a real worker (D, a sliding log's decision) and the main thread's limiter
// (the reclaimer, both times, and the key's next incarnation):
// 1. D takes k's lock, reads, checks the lock is still its own and stops (its reclaim guard runs
//    out: 30x claimTimeoutMs);
// 2. R1, the main thread's sweep, takes the lock over and judges k idle; before it turns its
//    token T into DEAD, D commits, finds T in the lock word with ctrl still k's and stops before
//    its compareExchange from T;
// 3. R1 reclaims k; the main thread admits k again, into the same slot;
// 4. R2, a second sweep of the same instance at the same (frozen) millisecond, locks the next
//    incarnation with the same token T, judges it (not idle) and stops before letting go;
// 5. D's compareExchange from T releases R2's lock.
// Found by a review (as LockFreeEngine#settle, test/rate/settle-reused-token.test.ts): `settle`
// then took its writes for standing, while they had gone with the reclaimed key: an admission
// counted nowhere, one more than the limit. It now loads ctrl again after its compareExchange,
// gives the word back, and the decision is made again on the key's new slot.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { perHour, RateLimiter } from '../../src/index.js';
import { DEAD, S_CTRL } from '../../src/table/layout.js';
import { withAtomicsHooks } from '../helpers/atomics-spy.js';
import { blockUntilState, FROZEN_MS, letGo, pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { lockIndexOf, slotBaseOf } from '../helpers/slots.js';

const fixture = new URL('../fixtures/settle-lock-park-worker.mjs', import.meta.url);

afterEach(() => {
  vi.restoreAllMocks();
});

describe('slot-lock.ts settle: a reclaimer token that repeats on the key\'s next incarnation', () => {
  it('found: the released lock was the next incarnation\'s: the decision is made again there', async () => {
    const limiter = new RateLimiter({ limit: perHour(2), algorithm: 'sliding-log', maxKeys: 8, ...stagedReuse(20), clock: { now: () => FROZEN_MS }, forceHash: 11 });
    const table = limiter.handle.table;
    const w = new Int32Array(table);
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true); // k's slot, nothing spent
    const base = slotBaseOf(table, 'k');
    const lockIndex = lockIndexOf(table, 'k');
    const oldCtrl = w[base + S_CTRL] as number;

    const flags = new Int32Array(new SharedArrayBuffer(8));
    const worker = new Worker(fixture, { workerData: { handle: limiter.handle, key: 'k', lockIndex, flags: flags.buffer, frozenMs: FROZEN_MS } });
    const reply = new Promise<{ allowed: boolean; parked: { expected: number; replacement: number; seen: number } | null }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    try {
      const end = Date.now() + 20_000;
      while (Atomics.load(flags, 0) !== 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
      expect(Atomics.load(flags, 0)).toBe(1); // 1. D checked its lock and stopped
      pastReclaimGuard(20);
      // Token times come from performance.now() (lockToken): R1 and R2 at the same millisecond.
      vi.spyOn(performance, 'now').mockReturnValue(performance.now());
      let token = 0;
      const r1 = withAtomicsHooks({
        cas: (array, index, expected, value) => {
          if (array.buffer !== table || index !== lockIndex || value !== DEAD || token !== 0) return;
          // 3. R1's reclaim, from its token: first D commits and stops in settle (2).
          token = expected;
          letGo(flags, 1);
          blockUntilState(flags, 2);
        },
      }, () => limiter.sweep());
      expect(r1).toBe(1);
      expect(token & 1).toBe(1); // a held token
      expect(limiter.tryAcquire('k').allowed).toBe(true); // 3. the next incarnation, spent once
      expect(slotBaseOf(table, 'k')).toBe(base); // in the same slot
      expect(w[base + S_CTRL]).not.toBe(oldCtrl);
      let repeated = 0;
      withAtomicsHooks({
        cas: (array, index, expected) => {
          // 4. R2 took the lock, judged the key (not idle: it was spent) and lets go of its token
          // next: first D makes its compareExchange (5) and finishes.
          if (array.buffer !== table || index !== lockIndex || repeated !== 0 || (expected & 1) !== 1) return;
          repeated = expected;
          letGo(flags, 2);
          blockUntilState(flags, -1);
        },
      }, () => expect(limiter.sweep()).toBe(0));
      vi.restoreAllMocks();
      const r = await reply;
      expect(repeated).toBe(token); // R2's token repeated R1's
      expect(r.parked?.expected).toBe(token);
      expect(r.parked?.seen).toBe(token); // D's compareExchange released the next incarnation's lock
      expect(r.allowed).toBe(true);
      // D's admission and the main thread's, both on k since its reclaim: none left of two.
      expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
      expect(limiter.tryAcquire('k').allowed).toBe(false);
    } finally {
      await worker.terminate();
    }
  });
});
