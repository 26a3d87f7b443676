import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, monotonicClock, perSecond, RateLimiter } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import { gcraSlotState } from '../../src/rate/gcra-slot.js';
import { SlotTable } from '../../src/table/table.js';
import { compactedSlots, duplicateKeys, liveCopies, openClaims } from '../helpers/table-scan.js';

// A short churn soak with real workers: the table under a stream of never-repeating keys, swept
// and compacted from several threads at once, round after round.
//
// Three workers (fixtures/churn-soak-worker.mjs) share a working set of maxKeys/4 keys and each
// round insert maxKeys/4 new keys among them, each checked twice. Between rounds the main thread
// moves the shared ManualClock past every key's idle point, so that in the next round the whole
// previous round (working set included) is reclaimed by sweeps (the workers', and the main
// thread's between its awaits) while the workers insert the new round's keys and re-insert the
// working set. Within a round the clock stands still. After each round, with the workers
// waiting:
// - no working-set key admitted more than its burst in the round (frozen clock: the exact bound);
// - no key has two live copies, and the live keys are exactly the round's (working set and new
//   keys): every earlier key was reclaimed, none of this round's was lost or duplicated;
// - the table's gauges (its counters) agree with a count of its slots: live keys, tombstones,
//   mean probe of a hit;
// - the mean length of a missed lookup (SlotTable.probeLengths().missMean), measured here each
//   round, stays within 1.2x of the first round's: tombstones do not pile up.
// The workers must also be seen to interleave: two workers inside a check of the same
// working-set key at once (at the start of a round those are mostly inserts of keys the sweeps
// just reclaimed), and new-key inserts overlapping in time. The soak runs ROUNDS rounds and goes
// on, up to MAX_ROUNDS, until it has seen both. Compare-and-swaps lost (casRetries summed over
// the workers) are reported: on two busy cores they come only now and then.

const workerUrl = new URL('../fixtures/churn-soak-worker.mjs', import.meta.url);

const WORKERS = 3;
const ROUNDS = 30;
const MAX_ROUNDS = 80;
/** Every key admits 8 at one instant (each worker checks each working-set key 3 times a round), and is idle 1 s after it last spent. */
const BURST = 8;
const LIMIT = perSecond(BURST);
/** Past every key's idle point. */
const ROUND_MS = 2_000;

function probes(limiter: RateLimiter) {
  return new SlotTable(limiter.handle.table, gcraSlotState(gcraParams(limiter.limit), monotonicClock), limiter.handle.keys).probeLengths();
}

const sleep = () => new Promise((r) => setTimeout(r, 1));

describe('churn soak: workers insert never-repeating keys and sweep while the main thread sweeps and moves the clock', () => {
  it.each([
    { slotsPerKey: 2, maxKeys: 1_024, suffix: '', keys: 'short keys' },
    // 2,000 slots wanted: two stripes of 1,024.
    { slotsPerKey: 1.25, maxKeys: 1_600, suffix: '', keys: 'short keys' },
    // Keys of about 210 bytes: 24 in the slot, the rest in the slot's key heap record, which
    // the slot's next keys reuse.
    { slotsPerKey: 1.25, maxKeys: 1_600, suffix: `:${'t'.repeat(200)}`, keys: 'keys of about 210 bytes' },
  ])('slotsPerKey $slotsPerKey, $keys: no over-admission, no second copy, misses stay short', async ({ slotsPerKey, maxKeys, suffix }) => {
    const clock = new ManualClock(1_000_000);
    // The default claimTimeoutMs (1 s): a claim is cancelled only after its inserter stalled that
    // long. A cancelled claim stays BUSY for 30 timeouts, and while any claim is in a stripe, no
    // compaction clears that stripe's tombstones (compactStripe gives up: the claim's chain is not
    // known): with claimTimeoutMs 1 on a busy machine that left tombstones behind for rounds at a
    // time (missMean 1.79 to 2.23 in one round at slotsPerKey 1.25), which measured the machine.
    const limiter = new RateLimiter({ limit: LIMIT, maxKeys, slotsPerKey, clock, ...(suffix === '' ? { maxKeyBytes: 24 } : {}) });
    const heap = limiter.handle.keys;
    const working = maxKeys / 4;
    const newPerRound = maxKeys / 4;
    const ctl = new Int32Array(new SharedArrayBuffer(4 * (6 + WORKERS)));
    const counts = new Int32Array(new SharedArrayBuffer(4 * working));
    const inside = new SharedArrayBuffer(4 * working);
    const errors: unknown[] = [];
    const pool = Array.from({ length: WORKERS }, (_, id) => new Worker(workerUrl, {
      workerData: {
        handle: limiter.handle, id, workers: WORKERS, ctl: ctl.buffer, counts: counts.buffer, inside, working, newPerRound: Math.ceil(newPerRound / WORKERS),
        sweepEvery: 16, seed: 0x50a4 + 977 * id, suffix,
      },
    }));
    for (const w of pool) w.on('error', (e) => errors.push(e));
    try {
      const curve: number[] = [];
      let mainSweeps = 0;
      let reclaimed = 0;
      let round = 0;
      let casRetries = 0;
      let overlaps = 0;
      let sameKey = 0;
      /** Per round, for the failure message: tombstones and claims where missMean was measured. */
      const where: string[] = [];
      let cancelledClaims = 0;
      const started = performance.now();
      while (round < ROUNDS || ((sameKey === 0 || overlaps === 0) && round < MAX_ROUNDS)) {
        round++;
        if (round > 1) clock.advance(ROUND_MS);
        counts.fill(0);
        Atomics.store(ctl, 1, 0);
        Atomics.store(ctl, 0, round);
        Atomics.notify(ctl, 0);
        while (Atomics.load(ctl, 1) < WORKERS) {
          expect(errors).toEqual([]);
          reclaimed += limiter.sweep();
          mainSweeps++;
          await sleep();
        }
        // The workers wait for the next round: the table holds still.
        const admitted = Array.from(counts);
        const over = admitted.map((n, k) => [`live:${k}${suffix}`, n] as const).filter(([, n]) => n > BURST);
        expect(over, `round ${round}: working-set keys over their burst`).toEqual([]);
        expect(admitted.reduce((a, b) => a + b, 0), `round ${round}: nothing admitted`).toBeGreaterThan(0);
        expect(duplicateKeys(limiter.handle.table, heap), `round ${round}: keys with two live copies`).toEqual([]);
        const live = liveCopies(limiter.handle.table, heap);
        const stale = [...live.keys()].filter((k) => !k.startsWith('live:') && !isThisRound(k, round, newPerRound));
        expect(stale.slice(0, 5), `round ${round}: keys of earlier rounds still live`).toEqual([]);
        expect(live.size, `round ${round}: live keys`).toBe(working + WORKERS * Math.ceil(newPerRound / WORKERS));
        expect(limiter.stats().liveKeys).toBe(live.size);
        // Every insert returned: no claim is left open (a cancelled one, of an inserter that
        // stalled past claimTimeoutMs, stays until a sweep 30 timeouts later).
        expect(openClaims(limiter.handle.table), `round ${round}: open claims`).toBe(0);
        cancelledClaims = Math.max(cancelledClaims, limiter.stats().claimed);
        const lengths = probes(limiter);
        curve.push(lengths.missMean);
        const { tombstones, claimed } = limiter.stats();
        // The gauges the table keeps as it goes agree with a count of the slots themselves.
        const gauges = limiter.gauges();
        expect({ live: gauges.liveKeys, tombstones: gauges.tombstones }, `round ${round}: gauges against the slots`).toEqual({ live: live.size, tombstones });
        expect(gauges.probeMean, `round ${round}: probe mean from the counters`).toBeCloseTo(lengths.mean, 9);
        where.push(`${(curve.at(-1) as number).toFixed(3)} (${tombstones} tombstones, ${claimed} claimed)`);
        casRetries = Array.from(ctl.subarray(6)).reduce((a, b) => a + b, 0);
        overlaps = Atomics.load(ctl, 2);
        sameKey = Atomics.load(ctl, 5);
      }
      const ms = Math.round(performance.now() - started);
      const first = curve[0] as number;
      const worst = Math.max(...curve);
      console.log(`churn soak, slotsPerKey ${slotsPerKey}${suffix === '' ? '' : `, keys of ${suffix.length} more bytes (key heap ${limiter.stats().keyHeapBytes} bytes)`}: ${round} rounds in ${ms} ms, missMean first ${first.toFixed(3)} worst ${worst.toFixed(3)} last ${(curve.at(-1) as number).toFixed(3)}, main-thread sweeps ${mainSweeps} reclaimed ${reclaimed}, casRetries ${casRetries}, overlapping checks of one working-set key ${sameKey}, overlapping new-key checks ${overlaps}, most cancelled claims after a round ${cancelledClaims}, compacted slots now ${compactedSlots(limiter.handle.table)}`);
      expect(curve.filter((m) => m > first * 1.2), `missMean per round: ${where.join(', ')}`).toEqual([]);
      expect(sameKey, 'no two workers were ever inside a check of one working-set key at once').toBeGreaterThan(0);
      expect(overlaps, 'new-key checks never overlapped').toBeGreaterThan(0);
      // Compaction did its part: EMPTY slots that once held keys.
      expect(compactedSlots(limiter.handle.table)).toBeGreaterThan(0);
      if (suffix !== '') {
        // Slots kept their records: the heap holds at most two records a slot of the longest
        // tail (and its first 64 KiB), far less than a record per key inserted would take.
        const tailWords = Math.ceil((`new:${WORKERS}:${round * newPerRound}${suffix}`.length - 24) / 4);
        const bound = 65_536 + limiter.stats().capacity * 2 * (tailWords + 1) * 4;
        const inserted = round * (working + newPerRound);
        expect(inserted * (tailWords + 1) * 4).toBeGreaterThan(2 * bound);
        expect(limiter.stats().keyHeapBytes).toBeLessThanOrEqual(bound);
      }
    } finally {
      await Promise.all(pool.map((w) => w.terminate()));
    }
  });
});

/** Whether new key `new:<id>:<seq>` belongs to round `round` (each worker makes `perRound / WORKERS` a round). */
function isThisRound(key: string, round: number, perRound: number): boolean {
  const seq = Number(key.split(':')[2]);
  const share = Math.ceil(perRound / WORKERS);
  return Math.floor(seq / share) === round - 1;
}
