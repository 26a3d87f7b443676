// A sliding log's holder whose lock is taken over while it commits, replayed step by step: two
// workers parked at chosen compare-and-swaps on the log's words (fixtures/cas-park-worker.mjs),
// on a ManualClock, then the promise checked by the exact model (helpers/model.ts).
//
// The interleaving, found by test/replay.test.ts on a loaded machine ("201 requests (200 allowed)
// with readings from 5980.789329 ms to 6030.704036 ms: 85293 ns short of 50 ms"):
//
//   1. A locks the key, reads 1000 ms, decides, checks that the lock is still its own, and stops
//      before its first write (an entry of the log).
//   2. The lock's timeout passes; B takes the lock over, reads 1500 ms, writes its entry (stamp
//      1500) and stops before its head word, the commit point.
//   3. A goes on: its entry write fails (B's entry is there), so it decides again on a reloaded
//      snapshot at its own reading, 1000. That snapshot holds B's entry, not yet committed, and A
//      replaced it with its own stamp, 1000, then stopped before its head word.
//   4. B's head lands: B's request, admitted at 1500, is logged at 1000. A's head fails; it
//      decides again and is logged at 1000 too.
//   5. At 2000 both entries have expired, although B's request is 500 ms old: two more are
//      admitted, three in 500 ms for a limit of two per second.
//
// The lock had passed to B between A's steps 1 and 3: deciding again is for a holder only. A
// holder that lost its lock writes nothing more and decides again under the lock (locked-engine.ts).
import { describe, expect, it } from 'vitest';
import { ManualClock, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { GLOBAL_HEADER_WORDS, H_GLOBAL_BASE } from '../../src/table/layout.js';
import { ALL, onlyKeyState, startCasPark, until } from '../helpers/cas-park.js';
import { replaySlidingLog, type Admission } from '../helpers/model.js';
import { pastTimeout } from '../helpers/park.js';

const PERIOD_MS = 1000;

describe('a sliding-log holder taken over while it commits', () => {
  const cases: [string, Partial<RateLimiterOptions>, (w: Int32Array) => number, [string, string, string]][] = [
    // The key's own log: A and B decide on one key, and so do the late requests.
    ['the key\'s log', { limit: { permits: 2, periodMs: PERIOD_MS } }, onlyKeyState, ['k', 'k', 'k']],
    // The global cap's log, under the cap's lock: A, B and the late requests each on a key of
    // their own, with room to spare.
    [
      'a global cap\'s log',
      { limit: { permits: 100, periodMs: PERIOD_MS }, globalLimit: { permits: 2, periodMs: PERIOD_MS } },
      (w) => (w[H_GLOBAL_BASE] as number) + GLOBAL_HEADER_WORDS,
      ['a', 'b', 'c'],
    ],
  ];

  it.each(cases)('%s: no request is logged earlier than its reading', async (_name, options, logOf, [keyA, keyB, keyLate]) => {
    const clock = new ManualClock(1000);
    const limiter = new RateLimiter({ algorithm: 'sliding-log', maxKeys: 8, clock, claimTimeoutMs: 1, ...options } as RateLimiterOptions);
    // The keys exist before anyone parks (a first decision inserts its key).
    for (const k of [keyA, keyB, keyLate]) expect(limiter.tryAcquire(k, 0).allowed).toBe(true);
    const w = new Int32Array(limiter.handle.table);
    const log = keyA === keyB ? onlyKeyState(w) : logOf(w);
    const permits = 2;
    const start = (key: string, parkBefore: number[]) =>
      startCasPark({ handle: limiter.handle, key, logFrom: log, logTo: log + permits, parkBefore, parkAtHead: true });

    const a = start(keyA, [1]); // before its first write, and before its first head write
    let b: ReturnType<typeof start> | null = null;
    try {
      await until('A parks before its first write', () => a.parkedAt() !== 0);
      expect(a.parkedAt()).toBe(1);
      pastTimeout(5); // older than claimTimeoutMs: A's lock may be taken over
      clock.set(1500);
      const bb = start(keyB, []); // before its head write
      b = bb;
      await until('B parks before its head word', () => bb.parkedAt() !== 0);
      expect(bb.parkedAt()).toBe(2); // B took the lock over and wrote its entry
      a.release(1);
      await until('A parks before a head word', () => a.parkedAt() !== 1);
      bb.release(ALL);
      const rb = await bb.reply;
      a.release(ALL);
      const ra = await a.reply;
      expect([ra.allowed, rb.allowed]).toEqual([true, true]);

      // Every admission with the readings its call took, then as many as pass at 2000 ms.
      const admissions: Admission[] = [ra, rb].map((r) => ({ first: r.readings[0] as number, t: r.readings[r.readings.length - 1] as number, cost: 1, key: 0 }));
      clock.set(2000);
      let late = 0;
      for (let i = 0; i < 5; i++) {
        if (limiter.allow(keyLate)) {
          late++;
          admissions.push({ first: 2000, t: 2000, cost: 1, key: 0 });
        }
      }
      const report = replaySlidingLog(admissions, { permits, periodMs: PERIOD_MS });
      expect(report.examples, JSON.stringify({ late, a: ra, b: rb })).toEqual([]);
      expect(late).toBe(0); // B's request (1500) still counts at 2000
      clock.set(2500);
      expect(limiter.allow(keyLate)).toBe(true); // A's and B's have expired by 2500
    } finally {
      a.release(ALL);
      b?.release(ALL);
      await Promise.all([a.worker.terminate(), b?.worker.terminate()]);
    }
  });
});
