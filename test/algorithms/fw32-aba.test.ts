// A fixed window's int32 word (window * (permits + 1) + count, modulo 2^32) holds the same bits
// again D windows later, at a count shifted by D * (permits + 1) modulo 2^32: for 1,000,000 per
// second D = 4294 windows (about 72 minutes), 4294 * 1,000,001 = 2^32 - 963,002, so (window
// w + 4294, count c + 963,002) is the word of (window w, count c). A decision that stops
// that long between its snapshot and its compareExchange (or between a commit and its undo) must
// not land on such a word as if nothing had happened.
//
// One thread plays both sides: limiter `a` runs on a clock whose reading parks it while limiter
// `b` (same table, the shared ManualClock) works 4294 windows later.
import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';

// The commit case on a limit whose word would repeat after 42 windows (42 s): such limits take
// the 64-bit word. (1,000,000 per second repeats after 4294 windows, 72 minutes: over the hour
// that fixed-window-32.ts requires, and a stall that long is the bound design.md states.)
const PERMITS = 100_000_000;
const D = 42;
const SHIFT = 94_967_254; // D * (PERMITS + 1) = 2^32 - SHIFT
const LATER = 1000 * (1 + D); // a reading in window 1 + D
// The undo case on 1,000,000 per second: a decision that finds its reading late keeps its spends.
const UNDO_PERMITS = 1_000_000;
const UNDO_SHIFT = 963_002; // 4294 * 1,000,001 = 2^32 - UNDO_SHIFT
const UNDO_LATER = 1000 * (1 + 4294);

/** Cost-1 admissions `b` still gets at its reading, in big steps first. */
function drain(b: RateLimiter, key: string): number {
  let n = 0;
  for (const step of [100_000, 10_000, 1_000, 100, 10, 1]) while (b.tryAcquire(key, step).allowed) n += step;
  return n;
}

describe('fixed window, one int32 word: a decision that stalls for its word alias', () => {
  it('a commit after a stall does not land on a later window with the same bits', () => {
    expect((D * (PERMITS + 1)) % 2 ** 32).toBe(2 ** 32 - SHIFT);
    const clock = new ManualClock(1000);
    const b = new RateLimiter({ limit: perSecond(PERMITS), algorithm: 'fixed-window', maxKeys: 16, clock });
    const k = 1 + SHIFT; // b's count in window 1 + D whose word is (window 1, count 1)
    const cost = PERMITS + 1 - k; // a's request: fits window 1 (count 1)
    let calls = 0;
    let bAdmitted = 0;
    let attached = false; // attach reads a given clock once, to check it: not a decision's reading
    const a = RateLimiter.attach(b.handle, {
      clock: {
        now() {
          if (!attached || calls++ > 0) return clock.now();
          // a has its snapshot (window 1, count 1) and reads 1000; it stops here until b has
          // worked in window 1 + D.
          clock.set(LATER);
          if (b.tryAcquire('k', k).allowed) bAdmitted += k;
          return 1000;
        },
      },
    });
    attached = true;
    expect(b.tryAcquire('k', 1).allowed).toBe(true); // window 1: count 1
    a.tryAcquire('k', cost);
    bAdmitted += drain(b, 'k');
    // Every one of b's admissions reads LATER (window 1 + D): b alone, one thread, one reading.
    expect(bAdmitted).toBeLessThanOrEqual(PERMITS);
  });

  it('an undo after a stall does not take a spend back from a later window with the same bits', () => {
    const clock = new ManualClock(1000);
    // The second limit never binds; a's commit of it fails once (b spent meanwhile).
    const b = new RateLimiter({ limit: [perSecond(UNDO_PERMITS), { permits: 2 ** 30, periodMs: 86_400_000 }], algorithm: 'fixed-window', maxKeys: 16, clock });
    const cost = 1000;
    let calls = 0;
    let bAdmitted = 0;
    let attached = false; // attach reads a given clock once, to check it: not a decision's reading
    const a = RateLimiter.attach(b.handle, {
      clock: {
        now() {
          if (!attached) return clock.now();
          const n = calls++;
          if (n === 0) {
            // a's reading, after its snapshot: b spends 1 meanwhile, so both of a's commits lose a race.
            b.tryAcquire('k', 1);
            return 1000;
          }
          if (n === 1) return 1000; // limit 0 decided again at a's reading: it commits
          if (n === 2) {
            // limit 1 lost its race; a stops here while b works in window 1 + D, then finds its
            // reading late and takes limit 0 back.
            clock.set(UNDO_LATER);
            const k = cost + UNDO_SHIFT; // (window 1 + D, k) has the bits of (window 1, cost)
            if (b.tryAcquire('k', k).allowed) bAdmitted += k;
          }
          return clock.now();
        },
      },
    });
    attached = true;
    expect(b.tryAcquire('k', 1).allowed).toBe(true); // window 1: count 1
    const aAllowed = a.tryAcquire('k', cost).allowed;
    expect(calls).toBeGreaterThan(3); // a decided again after the late re-check, at LATER
    bAdmitted += drain(b, 'k');
    // Every admission below reads LATER (window 1 + D): b's, and a's decision taken again.
    expect(bAdmitted + (aAllowed ? cost : 0)).toBeLessThanOrEqual(UNDO_PERMITS);
  });
});
