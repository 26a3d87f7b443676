// A decision's undo (LockFreeEngine: a key limit committed, the cap then refused) takes its spend
// back only while the key's give-back epoch is the one it read before committing. Found by an
// attack on a version whose reset moved the epoch by 65,536: 65,536 resets between the read and
// the undo brought the 32-bit word back, and the undo took its spend, which the first reset had
// wiped, from the fresh state's admission. A reset moves the epoch by 1, as every give-back does:
// the word comes back only after 2^32 of them. Staged on one thread: the limiter's clock and
// performance.now (which the guard's hold reads) run the other thread's steps at chosen points.
import { afterEach, describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/index.js';

const realNow = performance.now.bind(performance);
afterEach(() => {
  (performance as { now: () => number }).now = realNow;
});

describe("a decision's undo after resets of its key", () => {
  it.each([1, 65_536])('%i resets between the epoch read and the undo: at most the limit after the first', (resets) => {
    let other = 1050;
    let onClock: (() => void) | null = null;
    let onHold: (() => void) | null = null;
    (performance as { now: () => number }).now = () => {
      const f = onHold;
      onHold = null;
      f?.();
      return realNow();
    };
    const a = new RateLimiter({
      limit: { permits: 1, periodMs: 60_000 }, globalLimit: { permits: 2, periodMs: 1000 }, algorithm: 'fixed-window', maxKeys: 16,
      clock: { now: () => { const f = onClock; onClock = null; f?.(); return 50; } },
    });
    const b = RateLimiter.attach(a.handle, { clock: { now: () => other } });
    other = 50;
    expect(b.allow('other')).toBe(true); // the cap: 1 of 2 in its window
    a.penalty('k', 0); // k in the table
    other = 1050;
    const admitted: boolean[] = [];
    onClock = () => {
      // a has loaded its snapshots; another thread takes the cap's last place.
      other = 50;
      expect(b.allow('x')).toBe(true);
      other = 1050;
      // a commits k, loses the cap, and its undo takes the guard (reading performance.now):
      onHold = () => {
        for (let i = 0; i < resets; i++) b.reset('k'); // the first wipes a's spend
        admitted.push(b.allow('k')); // the fresh state's one permit
      };
    };
    admitted.push(a.allow('k'));
    admitted.push(b.allow('k'));
    // k's admissions after the first reset, all in its minute: at most its 1 permit.
    expect(admitted.filter((x) => x).length).toBeLessThanOrEqual(1);
    expect(admitted[0]).toBe(true); // the staged order ran: b's admission after the resets
  });
});
